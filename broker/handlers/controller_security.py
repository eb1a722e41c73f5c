"""The active controller's side of the security and broker-config changes brokers forward on the
CONTROLLER listener (Kafka's ControllerApis -> AclControlManager / ScramControlManager /
ConfigurationControlManager): CreateAcls, DeleteAcls, AlterUserScramCredentials, and
IncrementalAlterConfigs of BROKER and GROUP resources.

Each request is authorized first, as Kafka's ControllerApis authorizes it, with the caller's principal: the
client's own when a broker forwarded it in an Envelope (broker/handlers/envelope.py), else the principal
of whoever is logged in on this listener. ACLs and SCRAM credentials need ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED; without an authorizer the ACL APIs answer SECURITY_DISABLED), a config
resource ALTER_CONFIGS on it (the cluster for BROKER resources). Then each request is validated against
the controller's image inside the decision (so two requests cannot both pass a check the first one's
records would fail), its records appended by metadata/controller.py, and answered once
committed. Not the active controller: NOT_CONTROLLER per item (the broker retries).
"""
from __future__ import annotations

import base64

from kafka.protocol.admin import (CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
                                  IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse)
from kafka.protocol.admin.users import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse

from minikafka.broker.security import acl as A
from minikafka.broker.security.acl import AclBinding, AclFilter, InvalidAclError, validate_new_acl
from minikafka.broker.security.authorizer import authorize, authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.config.dynamic import ConfigRequestError
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.controller import INVALID_REQUEST, NOT_CONTROLLER, _active, _run
from minikafka.metadata.controller import ControllerError
from minikafka.protocol.errors import (CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, SECURITY_DISABLED,
                                       TOPIC_AUTHORIZATION_FAILED)

BROKER_CONFIG = 4
TOPIC_CONFIG, GROUP_CONFIG, CLIENT_METRICS_CONFIG = 2, 32, 16
SET, DELETE = 0, 1
NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _is_active(ctx: RequestContext) -> bool:
    active = _active(ctx)
    return active is not None and active.controller is not None


@handles(CreateAclsRequest, CreateAclsResponse, 1, 3, controller=True)
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    Result = CreateAclsResponse.AclCreationResult
    n = len(req.creations)
    if not authorize_cluster(ctx, A.ALTER):
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.")] * n)
    if ctx.broker.authorizer is None:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER)] * n)
    if not _is_active(ctx):
        return CreateAclsResponse(throttle_time_ms=0, results=[Result(error_code=NOT_CONTROLLER, error_message=None)] * n)
    bindings = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type) for c in req.creations]
    errors: list[InvalidAclError | None] = []
    for b in bindings:
        try:
            validate_new_acl(b)
            errors.append(None)
        except InvalidAclError as exc:
            errors.append(exc)
    valid = [tuple(b) for b, err in zip(bindings, errors) if err is None]
    _r, code = await _run(ctx, lambda c: c.create_acls(valid))
    if code:
        return CreateAclsResponse(throttle_time_ms=0, results=[Result(error_code=code, error_message=None)] * n)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=0, error_message="") if err is None else Result(error_code=err.code, error_message=err.message)
        for err in errors])


@handles(DeleteAclsRequest, DeleteAclsResponse, 1, 3, controller=True)
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
    Matching = FilterResult.DeleteAclsMatchingAcl
    if not authorize_cluster(ctx, A.ALTER):
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.", matching_acls=[])
            for _ in req.filters])
    if ctx.broker.authorizer is None:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])
            for _ in req.filters])
    if not _is_active(ctx):
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=NOT_CONTROLLER, error_message=None, matching_acls=[]) for _ in req.filters])
    filters = [AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                         f.host_filter, f.operation, f.permission_type) for f in req.filters]
    invalid: dict[int, str] = {}
    for i, flt in enumerate(filters):  # as AclStore.delete (Kafka's AclControlManager.validateFilter)
        if flt.pattern_type == 0 or flt.resource_type == 0:
            invalid[i] = "Unknown patternFilter."
        elif flt.operation == 0 or flt.permission == 0:
            invalid[i] = "Unknown entryFilter."
    valid = [flt for i, flt in enumerate(filters) if i not in invalid]
    matched, code = await _run(ctx, lambda c: c.delete_acls(
        [lambda row, flt=flt: flt.matches(AclBinding(*row)) for flt in valid]))
    if code:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=code, error_message=None, matching_acls=[]) for _ in filters])
    hits = iter(matched)
    out = []
    for i in range(len(filters)):
        if i in invalid:
            out.append(FilterResult(error_code=INVALID_REQUEST, error_message=invalid[i], matching_acls=[]))
            continue
        out.append(FilterResult(error_code=0, error_message=None, matching_acls=[
            Matching(error_code=0, error_message=None, resource_type=b.resource_type, resource_name=b.name,
                     pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                     permission_type=b.permission) for b in map(lambda row: AclBinding(*row), next(hits))]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=out)


@handles(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, 0, 0, controller=True)
async def handle_alter_user_scram_credentials(ctx: RequestContext, req: AlterUserScramCredentialsRequest
                                              ) -> AlterUserScramCredentialsResponse:
    from minikafka.broker.cluster.security_sync import credentials_of
    from minikafka.broker.handlers.scram_credentials import AlterResult, alter_response, plan_alterations
    if not authorize_cluster(ctx, A.ALTER):  # Kafka: one result per distinct user, by name
        names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            AlterResult(user=n, error_code=CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.")
            for n in names])
    if not _is_active(ctx):
        names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            AlterResult(user=n, error_code=NOT_CONTROLLER, error_message=None) for n in names])

    def alter(c):
        creds = credentials_of(c.image)
        plan = plan_alterations(req, lambda user, mech: creds.get(user, {}).get(mech))
        _errors, deletions, upserts = plan
        b64 = lambda data: base64.b64encode(data).decode("ascii")  # noqa: E731
        c.alter_scram([(user, mech, b64(cred.salt), b64(cred.stored_key), b64(cred.server_key), cred.iterations)
                       for user, mech, cred in upserts.values()], list(deletions.values()))
        return plan
    plan, code = await _run(ctx, alter)
    if code:
        names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            AlterResult(user=n, error_code=code, error_message=None) for n in names])
    return alter_response(plan)


@handles(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1, controller=True)
async def handle_incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest
                                           ) -> IncrementalAlterConfigsResponse:
    """BROKER resources ("" or a broker id) and GROUP resources (a group id), SET/DELETE operations as
    brokers forward them; GROUP changes validated as Kafka's GroupConfig.validate (this node's bounds)."""
    R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    dynamic = ctx.broker.dynamic_config
    out = []
    for r in req.resources:
        def answer(code: int, message: str | None = None, r=r) -> None:
            out.append(R(error_code=code, error_message=message, resource_type=r.resource_type,
                         resource_name=r.resource_name))
        denied = _alter_configs_denied(ctx, r.resource_type, r.resource_name)
        if denied:
            answer(*denied)
            continue
        if not _is_active(ctx):
            answer(NOT_CONTROLLER)
            continue
        if r.resource_type not in (BROKER_CONFIG, GROUP_CONFIG, CLIENT_METRICS_CONFIG):
            answer(INVALID_REQUEST, "Only broker, group and client metrics configs are altered incrementally "
                                    "through the controller here")
            continue
        if r.resource_type == BROKER_CONFIG and r.resource_name != "":
            try:
                int(r.resource_name)
            except ValueError:
                answer(INVALID_REQUEST, f"Node id must be an integer, but it is: {r.resource_name}")
                continue
        if any(c.config_operation not in (SET, DELETE) for c in r.configs):
            answer(INVALID_REQUEST, "Only SET and DELETE operations are forwarded")
            continue

        def alter(c, r=r):
            if r.resource_type == CLIENT_METRICS_CONFIG:  # KIP-714 subscriptions (Kafka's ClientMetricsConfigs)
                store = ctx.broker.client_metrics_configs
                layer = store.check(r.resource_name, store_ops(dict(c.image.client_metrics_configs.get(
                    r.resource_name, {})), r.configs))
                if not req.validate_only:
                    c.set_client_metrics_configs(r.resource_name, layer)
                return
            group = r.resource_type == GROUP_CONFIG
            layer = dict((c.image.group_configs if group else c.image.broker_configs).get(r.resource_name, {}))
            for op in r.configs:
                if op.config_operation == SET:
                    layer[op.name] = op.value or ""
                else:
                    layer.pop(op.name, None)
            if group:
                layer = ctx.broker.group_configs.check(r.resource_name, layer)
                if not req.validate_only:
                    c.set_group_configs(r.resource_name, layer)
                return
            dynamic.check(layer, per_broker=r.resource_name != "")
            if not req.validate_only:
                c.set_broker_configs(r.resource_name, layer)
        try:
            _r, code = await _run(ctx, alter)
        except ConfigRequestError as exc:
            answer(exc.code, str(exc))
            continue
        except ControllerError as exc:
            answer(exc.code, exc.message)
            continue
        answer(code)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


def store_ops(layer: dict[str, str], configs) -> dict[str, str]:
    """`layer` after the forwarded SET / DELETE operations."""
    for op in configs:
        if op.config_operation == SET:
            layer[op.name] = op.value or ""
        else:
            layer.pop(op.name, None)
    return layer


def _alter_configs_denied(ctx: RequestContext, resource_type: int, name: str) -> tuple[int, str] | None:
    """Kafka's ControllerApis.authorizeAlterResource: ALTER_CONFIGS on the cluster for BROKER and
    CLIENT_METRICS resources, on the topic or group for theirs; an unknown type is INVALID_REQUEST."""
    if resource_type in (BROKER_CONFIG, CLIENT_METRICS_CONFIG):
        return None if authorize_cluster(ctx, A.ALTER_CONFIGS) else (CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if resource_type == TOPIC_CONFIG:
        return None if authorize(ctx, A.ALTER_CONFIGS, A.TOPIC, name) else (TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    if resource_type == GROUP_CONFIG:
        return None if authorize(ctx, A.ALTER_CONFIGS, A.GROUP, name) else (GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    return INVALID_REQUEST, f"Unexpected resource type {resource_type}"
