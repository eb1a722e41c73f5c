"""Security and config changes a cluster node forwards to the active controller (Kafka's
ForwardingManager for CreateAcls, DeleteAcls, AlterUserScramCredentials and BROKER and GROUP config
changes).

The receiving broker has already authorized the request (and, for its own per-broker configs,
validated them); it goes to the controller inside an Envelope carrying the client's principal and address
(`forwarded_for`), so the controller authorizes it again as that client, as Kafka's does; the controller
validates against its image, appends the records and answers once they are committed. The answer goes back to the client unchanged, after this node's own image-fed
state shows the change or a short bound passes (so a Describe here right after sees it; other nodes
follow within their metadata lag). No controller within the timeout: REQUEST_TIMED_OUT per item.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Callable

import kafka.errors as ke
from kafka.protocol.admin import (CreateAclsResponse, DeleteAclsResponse, IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse)
from kafka.protocol.admin.users import AlterUserScramCredentialsResponse

from minikafka.broker.cluster.runtime import ControllerUnavailableError, ForwardedFor
from minikafka.protocol.errors import NOT_CONTROLLER

if TYPE_CHECKING:
    from minikafka.broker.state import BrokerState

TIMED_OUT = ke.RequestTimedOutError.errno
TIMED_OUT_MESSAGE = "No active controller answered in time."
VISIBLE_WAIT_S = 5.0
BROKER_CONFIG = 4
GROUP_CONFIG = 32


def _all_not_controller(items: list) -> bool:
    return bool(items) and all(x.error_code == NOT_CONTROLLER for x in items)


async def _until(done: Callable[[], bool], timeout_s: float = VISIBLE_WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done() and loop.time() < deadline:
        await asyncio.sleep(0.02)


def forwarded_for(ctx: Any) -> ForwardedFor:
    """Whom a request handled here is forwarded for: its client's principal, address and client id."""
    host = ctx.peer.rpartition(":")[0].strip("[]") or ctx.peer  # the peer is "ip:port"
    return ForwardedFor(ctx.principal, host, ctx.client_id)


async def _forward(state: "BrokerState", req: Any, version: int, resp_cls: type, items: Callable[[Any], list],
                   who: ForwardedFor | None) -> Any:
    """The controller's answer, or the error (code, message) when none answered in time or the forwarding
    envelope was refused."""
    try:
        return await state.cluster.controller_request(req, version, resp_cls,
                                                      not_controller=lambda r: _all_not_controller(items(r)),
                                                      on_behalf=who)
    except ControllerUnavailableError as exc:
        return exc.code, (TIMED_OUT_MESSAGE if exc.code == TIMED_OUT else str(exc))


async def forward_create_acls(state: "BrokerState", req: Any, version: int, bindings: list,
                              who: ForwardedFor | None = None) -> CreateAclsResponse:
    resp = await _forward(state, req, version, CreateAclsResponse, lambda r: r.results, who)
    if isinstance(resp, tuple):
        R = CreateAclsResponse.AclCreationResult
        return CreateAclsResponse(throttle_time_ms=0, results=[R(error_code=resp[0], error_message=resp[1])
                                                               for _ in bindings])
    store = state.authorizer.store
    made = [b for b, r in zip(bindings, resp.results) if r.error_code == 0]
    await _until(lambda: all(b in store.current.acls for b in made))
    return resp


async def forward_delete_acls(state: "BrokerState", req: Any, version: int, n: int,
                              who: ForwardedFor | None = None) -> DeleteAclsResponse:
    resp = await _forward(state, req, version, DeleteAclsResponse, lambda r: r.filter_results, who)
    if isinstance(resp, tuple):
        R = DeleteAclsResponse.DeleteAclsFilterResult
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            R(error_code=resp[0], error_message=resp[1], matching_acls=[]) for _ in range(n)])
    from minikafka.broker.security.acl import AclBinding
    gone = [AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                       m.permission_type) for f in resp.filter_results for m in f.matching_acls]
    store = state.authorizer.store
    await _until(lambda: not any(b in store.current.acls for b in gone))
    return resp


async def forward_scram(state: "BrokerState", req: Any, who: ForwardedFor | None = None
                        ) -> AlterUserScramCredentialsResponse:
    from minikafka.broker.security.sasl.scram import MECHANISM_BY_TYPE
    resp = await _forward(state, req, 0, AlterUserScramCredentialsResponse, lambda r: r.results, who)
    if isinstance(resp, tuple):
        R = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
        names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            R(user=name, error_code=resp[0], error_message=resp[1]) for name in names])
    ok = {r.user for r in resp.results if r.error_code == 0}
    store = state.scram_credentials
    gone = [(d.name, MECHANISM_BY_TYPE[d.mechanism]) for d in req.deletions if d.name in ok]
    made = [(u.name, MECHANISM_BY_TYPE[u.mechanism], bytes(u.salt), u.iterations) for u in req.upsertions
            if u.name in ok]

    def visible() -> bool:
        if any(store.get(user, mech) is not None for user, mech in gone):
            return False
        for user, mech, salt, iterations in made:
            c = store.get(user, mech)
            if c is None or c.salt != salt or c.iterations != iterations:
                return False
        return True
    await _until(visible)
    return resp


async def _forward_configs(state: "BrokerState", resource_type: int, changes: dict[str, dict[str, str | None]],
                           current: Callable[[str], dict[str, str]], who: ForwardedFor | None
                           ) -> dict[str, tuple[int, str | None]]:
    """Resource name -> key -> new value (None: deleted) to the controller as IncrementalAlterConfigs
    SET/DELETE; waits (bounded) until `current(name)` here shows the accepted ones."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    req = IncrementalAlterConfigsRequest(resources=[R(resource_type=resource_type, resource_name=name, configs=[
        C(name=k, config_operation=0 if v is not None else 1, value=v) for k, v in sorted(ops.items())])
        for name, ops in changes.items()], validate_only=False)
    resp = await _forward(state, req, 1, IncrementalAlterConfigsResponse, lambda r: r.responses, who)
    if isinstance(resp, tuple):
        return {name: resp for name in changes}
    answers = {x.resource_name: (x.error_code, x.error_message) for x in resp.responses}
    ok = {name: ops for name, ops in changes.items() if answers.get(name, (1,))[0] == 0}
    await _until(lambda: all(current(name).get(k) == v for name, ops in ok.items() for k, v in ops.items()))
    return answers


async def forward_broker_configs(state: "BrokerState", changes: dict[str, dict[str, str | None]],
                                 who: ForwardedFor | None = None) -> dict[str, tuple[int, str | None]]:
    """BROKER resource ("" or this broker's id) -> key -> new value (None: deleted), validated here, to
    the controller as IncrementalAlterConfigs SET/DELETE; (error code, message) per resource name."""
    dynamic = state.dynamic_config
    return await _forward_configs(state, BROKER_CONFIG, changes,
                                  lambda name: dynamic.layer(per_broker=name != ""), who)


async def forward_client_metrics_configs(state: "BrokerState", changes: dict[str, dict[str, str | None]],
                                         who: ForwardedFor | None = None) -> dict[str, tuple[int, str | None]]:
    """CLIENT_METRICS resource (subscription name) -> key -> new value (None: deleted), validated here, to
    the controller as IncrementalAlterConfigs SET/DELETE; (error code, message) per subscription."""
    store = state.client_metrics_configs
    return await _forward_configs(state, 16, changes, lambda name: store.subscriptions.get(name, {}), who)


async def forward_group_configs(state: "BrokerState", changes: dict[str, dict[str, str | None]],
                                who: ForwardedFor | None = None) -> dict[str, tuple[int, str | None]]:
    """GROUP resource (group id) -> key -> new value (None: deleted), validated here, to the controller
    as IncrementalAlterConfigs SET/DELETE (it validates again against its image and appends the
    ConfigRecords); (error code, message) per group id."""
    groups = state.group_configs
    return await _forward_configs(state, GROUP_CONFIG, changes, lambda name: groups.overrides.get(name, {}), who)


async def forward_client_quotas(state: "BrokerState", req: Any, version: int, who: ForwardedFor | None = None) -> Any:
    """AlterClientQuotas to the active controller (it validates against its image and appends the
    ClientQuota records); waits (bounded) until this node's quotas show the accepted changes."""
    from kafka.protocol.admin.client_quotas import AlterClientQuotasResponse
    from minikafka.broker.handlers.client_quotas import alter_error_response, plan
    resp = await _forward(state, req, version, AlterClientQuotasResponse, lambda r: r.entries, who)
    if isinstance(resp, tuple):
        return alter_error_response(req, resp[0], resp[1])
    if req.validate_only:
        return resp
    store = state.client_quotas
    ok = {tuple(sorted((e.entity_type, e.entity_name) for e in x.entity)) for x in resp.entries if x.error_code == 0}
    await _until(lambda: not [c for c in plan(req, store.quotas)[1] if c[0] in ok])
    return resp
