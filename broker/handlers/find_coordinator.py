"""FindCoordinator: this broker coordinates every group and transactional id.

Advertised from the core on because clients key features on it (librdkafka enables LZ4 only when
the broker lists FindCoordinator). A GROUP lookup creates `__consumer_offsets` and a TRANSACTION
lookup `__transaction_state` on first use, as Kafka does (Kafka answers COORDINATOR_NOT_AVAILABLE
meanwhile; here the request waits for the creation, made off the event loop).
"""
from __future__ import annotations

import logging

import kafka.errors as ke
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

log = logging.getLogger(__name__)
GROUP, TRANSACTION, SHARE = 0, 1, 2
SHARE_STATE_TOPIC = "__share_group_state"
Coordinator = FindCoordinatorResponse.Coordinator


DENIED = {GROUP: (acl.GROUP, ke.GroupAuthorizationFailedError.errno, "Group authorization failed."),
          TRANSACTION: (acl.TRANSACTIONAL_ID, ke.TransactionalIdAuthorizationFailedError.errno,
                        "Transactional Id authorization failed.")}


@handles(FindCoordinatorRequest, FindCoordinatorResponse, 0, 6)
async def handle_find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """DESCRIBE on the group / transactional id of each key, else that key's authorization error."""
    key_type = req.key_type if ctx.api_version >= 1 else GROUP
    if key_type == SHARE:
        return await _find_share(ctx, req)
    if ctx.broker.authorizer is None or key_type not in DENIED:
        return await _find(ctx, req)
    rtype, code, message = DENIED[key_type]
    if ctx.api_version < 4:
        if authorize(ctx, acl.DESCRIBE, rtype, req.key):
            return await _find(ctx, req)
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message, node_id=-1,
                                       host="", port=-1)
    denied = {k for k in req.coordinator_keys if not authorize(ctx, acl.DESCRIBE, rtype, k)}
    if len(denied) < len(set(req.coordinator_keys)):
        resp = await _find(ctx, req)
    else:
        resp = FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=k, node_id=-1, host="", port=-1, error_code=0, error_message=None)
            for k in req.coordinator_keys])
    for c in resp.coordinators:
        if c.key in denied:
            c.node_id, c.host, c.port, c.error_code, c.error_message = -1, "", -1, code, message
    return resp


async def _find(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    state = ctx.broker
    if getattr(state, "cluster", None) is not None:
        return await _find_in_cluster(ctx, req)
    adv = state.advertised_for(ctx.listener)
    key_type = req.key_type if ctx.api_version >= 1 else GROUP
    code, message = 0, None
    if key_type not in (GROUP, TRANSACTION):
        code, message = ke.InvalidRequestError.errno, f"unsupported coordinator key type {key_type}"
    elif key_type == GROUP:
        try:
            await state.ensure_internal_topic("__consumer_offsets")
        except Exception:
            log.exception("creating __consumer_offsets failed")
            code, message = ke.CoordinatorNotAvailableError.errno, None
    else:  # TRANSACTION: creates __transaction_state on first use
        try:
            await state.ensure_internal_topic("__transaction_state")
        except Exception:
            log.exception("creating __transaction_state failed")
            code = ke.CoordinatorNotAvailableError.errno
        else:
            code = state.txns.find_coordinator(req.key if ctx.api_version < 4 else "")
    if ctx.api_version >= 4:
        coordinators = [Coordinator(key=key, node_id=state.node_id if not code else -1,
                                    host=adv.host if not code else "", port=adv.port if not code else -1,
                                    error_code=code, error_message=message)
                        for key in req.coordinator_keys]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                   node_id=state.node_id if not code else -1, host=adv.host if not code else "",
                                   port=adv.port if not code else -1)


async def _find_in_cluster(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """Cluster: each key's coordinator is the leader of its state partition (from the metadata image);
    the state topic is created through the controller on first use."""
    from minikafka.broker.coordinator_lookup import CoordinatorAddress, find
    state = ctx.broker
    key_type = req.key_type if ctx.api_version >= 1 else GROUP
    keys = list(req.coordinator_keys) if ctx.api_version >= 4 else [req.key]
    message = None
    if key_type not in (GROUP, TRANSACTION):
        found = {k: CoordinatorAddress(ke.InvalidRequestError.errno) for k in keys}
        message = f"unsupported coordinator key type {key_type}"
    else:
        try:
            await state.ensure_internal_topic("__consumer_offsets" if key_type == GROUP else "__transaction_state")
        except Exception as exc:
            log.info("creating the coordinator state topic failed: %s", exc)
            found = {k: CoordinatorAddress(ke.CoordinatorNotAvailableError.errno) for k in keys}
        else:
            found = {k: find(state, key_type, k, ctx.listener) for k in keys}
    if ctx.api_version >= 4:  # Kafka 4.3: an empty message per key
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=k, node_id=found[k].node_id, host=found[k].host, port=found[k].port,
                        error_code=found[k].error_code, error_message=(message or "") if found[k].error_code else "")
            for k in keys])
    a = found[req.key]
    # Kafka 4.3 before v4: the error's message, "NONE" on success
    text = message or _MESSAGES.get(a.error_code, "")
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=a.error_code, error_message=text,
                                   node_id=a.node_id, host=a.host, port=a.port)


_MESSAGES = {0: "NONE", ke.CoordinatorNotAvailableError.errno: "The coordinator is not available."}


async def _find_share(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """Key type SHARE (KIP-932, v6+; asked by share-partition leaders): CLUSTER_ACTION on the cluster (else the
    whole request fails), each key "groupId:topicId:partition" (INVALID_REQUEST when malformed) answered with
    the leader of its `__share_group_state` partition; the topic is created on first use."""
    from minikafka.broker.coordinator_lookup import CoordinatorAddress, endpoint, partition_leader
    from minikafka.broker.security.authorizer import authorize_cluster
    from minikafka.coordinator.share.coordinator import parse_share_key
    state = ctx.broker
    keys = list(req.coordinator_keys) if ctx.api_version >= 4 else [req.key]
    found: dict[str, CoordinatorAddress] = {}
    message = None
    if ctx.api_version < 6:
        found = {k: CoordinatorAddress(ke.InvalidRequestError.errno) for k in keys}
    elif not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        found = {k: CoordinatorAddress(ke.ClusterAuthorizationFailedError.errno) for k in keys}
        message = "Cluster authorization failed."
    else:
        valid = []
        for k in keys:
            try:
                parse_share_key(k)
                valid.append(k)
            except ValueError:
                found[k] = CoordinatorAddress(ke.InvalidRequestError.errno)
        if valid:
            try:
                await state.ensure_share_state_topic()
            except Exception as exc:
                log.info("creating %s failed: %s", SHARE_STATE_TOPIC, exc)
                found.update({k: CoordinatorAddress(ke.CoordinatorNotAvailableError.errno) for k in valid})
            else:
                sc = state.share_coordinator
                for k in valid:
                    leader = partition_leader(state, SHARE_STATE_TOPIC, sc.partition_for_key(k))
                    address = endpoint(state, leader, ctx.listener) if leader >= 0 else None
                    found[k] = (CoordinatorAddress(0, leader, *address) if address is not None
                                else CoordinatorAddress(ke.CoordinatorNotAvailableError.errno))
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=k, node_id=found[k].node_id, host=found[k].host, port=found[k].port,
                        error_code=found[k].error_code, error_message=(message or "") if found[k].error_code else "")
            for k in keys])
    a = found[req.key]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=a.error_code, error_message=message,
                                   node_id=a.node_id, host=a.host, port=a.port)
