"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for TOPIC, BROKER, GROUP and CLIENT_METRICS resources.

BROKER resources are the dynamic broker configs (broker/config/dynamic.py): "" is the cluster-wide
default, our node id the per-broker layer. GROUP resources are the group configs
(broker/config/group_configs.py). Sources and synonyms are reported as Kafka's ConfigHelper does.
On a cluster, changes are validated here and then go to the active controller (TOPIC, BROKER and
GROUP alike), whose records every node's state follows; a single node applies them itself.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Iterable


import kafka.errors as ke
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from minikafka.storage.log_config import LogConfig
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.config.group_configs import GROUP_KEY_NAMES
from minikafka.broker.config.client_metrics_configs import DOCS as CLIENT_METRICS_DOCS
from minikafka.broker.config.dynamic import SOURCE_DEFAULT, ConfigRequestError, is_read_only, is_sensitive
from minikafka.broker.errors import error_code, error_message
from minikafka.broker.config import reference
from minikafka.broker.config.kafka_keys import TYPE_IDS, config_type_id
from minikafka.broker.network.registry import handles
from minikafka.broker.topic_catalog import InvalidTopicNameError, validate_topic_name
from minikafka.broker.state import BrokerState

TOPIC_CONFIG = 2
BROKER_CONFIG = 4
GROUP_CONFIG = 32
BROKER_LOGGER_CONFIG = 8
CLIENT_METRICS_CONFIG = 16
_DOCUMENTED = {TOPIC_CONFIG: "topic", BROKER_CONFIG: "broker", GROUP_CONFIG: "group",
               CLIENT_METRICS_CONFIG: "client-metrics"}
# config resource types Kafka knows that minikafka does not serve (after authorization on the cluster)
_UNSUPPORTED_TYPES = {BROKER_LOGGER_CONFIG: "BROKER_LOGGER resources (runtime log levels) are not supported"}
SOURCE_TOPIC = 1
# ConfigType
TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST, TYPE_BOOLEAN, TYPE_DOUBLE = 2, 3, 5, 7, 1, 6
_TYPES = {"segment.bytes": TYPE_INT, "max.message.bytes": TYPE_INT, "index.interval.bytes": TYPE_INT,
          "segment.ms": TYPE_LONG, "retention.ms": TYPE_LONG, "retention.bytes": TYPE_LONG,
          "flush.messages": TYPE_LONG, "flush.ms": TYPE_LONG, "segment.jitter.ms": TYPE_LONG,
          "file.delete.delay.ms": TYPE_LONG, "cleanup.policy": TYPE_LIST,
          "message.timestamp.type": TYPE_STRING, "compression.type": TYPE_STRING,
          "delete.retention.ms": TYPE_LONG, "min.compaction.lag.ms": TYPE_LONG, "max.compaction.lag.ms": TYPE_LONG,
          "min.cleanable.dirty.ratio": TYPE_DOUBLE, "min.insync.replicas": TYPE_INT,
          "segment.index.bytes": TYPE_INT, "preallocate": TYPE_BOOLEAN, "unclean.leader.election.enable": TYPE_BOOLEAN,
          "compression.gzip.level": TYPE_INT, "compression.lz4.level": TYPE_INT, "compression.zstd.level": TYPE_INT,
          "message.timestamp.before.max.ms": TYPE_LONG,
          "message.timestamp.after.max.ms": TYPE_LONG, "leader.replication.throttled.replicas": TYPE_LIST,
          "follower.replication.throttled.replicas": TYPE_LIST}
# Kafka's ServerTopicConfigSynonyms: the broker config that is a topic config's default
TOPIC_BROKER_SYNONYMS = {
    "segment.bytes": "log.segment.bytes", "segment.ms": "log.roll.ms", "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes", "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms", "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms", "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes", "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms", "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio", "cleanup.policy": "log.cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable", "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type", "preallocate": "log.preallocate",
    "message.timestamp.type": "log.message.timestamp.type",
    "compression.gzip.level": "compression.gzip.level", "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INVALID_REQUEST = ke.InvalidRequestError.errno

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    config_source: int
    synonyms: list[tuple[str, str | None, int]]
    config_type: int = TYPE_STRING
    sensitive: bool = False


def describe_topic_configs(state: BrokerState, overrides: dict[str, str], keys: list[str] | None,
                           synonyms: bool) -> list[ConfigEntry]:
    """Kafka's createTopicConfigEntry: the topic override first, then the broker synonyms by layer."""
    effective = LogConfig.from_props(overrides, state.config.log_config).to_props()
    dynamic = state.dynamic_config
    out = []
    for name in sorted(effective):
        if keys and name not in keys:
            continue
        broker_name = TOPIC_BROKER_SYNONYMS.get(name)
        syn = dynamic.synonyms(broker_name) if broker_name else []
        if name in overrides:
            syn.insert(0, (name, effective[name], SOURCE_TOPIC))
        source = syn[0][2] if syn else SOURCE_DEFAULT
        out.append(ConfigEntry(name, effective[name], False, source, syn if synonyms else [],
                               _TYPES.get(name, TYPE_STRING)))
    return out


def describe_broker_configs(state: BrokerState, per_broker: bool, keys: list[str] | None,
                            synonyms: bool) -> list[ConfigEntry]:
    """Kafka's createBrokerConfigEntry. The default resource lists the cluster-default layer only
    (its synonyms from that layer only); the per-broker resource lists every config with its
    current value (None where unset) and the synonyms of all layers."""
    dynamic = state.dynamic_config
    if per_broker:
        values = {k: (v if v != "" else None) for k, v in state.config.props.items()}
    else:
        values = dict(dynamic.cluster_default)
    out = []
    for name in sorted(values):
        if keys and name not in keys:
            continue
        syn = dynamic.synonyms(name, default_only=not per_broker)
        source = syn[0][2] if syn else SOURCE_DEFAULT
        kind = config_type_id(name)
        sensitive = is_sensitive(name)  # passwords and custom configs: no value shown (as Kafka)
        value = None if sensitive else values[name]
        if sensitive:
            syn = [(n, None, s) for n, _v, s in syn]
        out.append(ConfigEntry(name, value, is_read_only(name), source, syn if synonyms else [], kind, sensitive))
    return out


def describe_group_configs(state: BrokerState, group_id: str, keys: list[str] | None,
                           synonyms: bool) -> list[ConfigEntry]:
    """Kafka's createGroupConfigEntry: GROUP_CONFIG if the group overrides it, else DEFAULT_CONFIG."""
    return [ConfigEntry(name, value, False, source, syn if synonyms else [], TYPE_IDS.get(kind, 0))
            for name, value, source, kind, syn in state.group_configs.describe(group_id) if not keys or name in keys]


def _entries(entries: list[ConfigEntry], documented: str | None) -> list[Entry]:
    """`documented`: the resource kind ("broker", "topic", "group") whose texts go in `documentation`
    (broker/config/reference.py), or None when the request did not ask for them."""
    return [Entry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.config_source,
                  is_sensitive=e.sensitive, synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in e.synonyms],
                  config_type=e.config_type,
                  documentation=None if documented is None else _documentation(documented, e.name))
            for e in entries]


def _documentation(documented: str, name: str) -> str | None:
    if documented == "client-metrics":
        return CLIENT_METRICS_DOCS.get(name)
    return reference.documentation(documented, name)


def _topic_name_error(name: str) -> str | None:
    try:
        validate_topic_name(name)
    except InvalidTopicNameError as exc:
        return str(exc)
    return None


def _error_result(r, code: int, message: str | None) -> Result:
    return Result(error_code=code, error_message=message, resource_type=r.resource_type,
                  resource_name=r.resource_name, configs=[])


def _describe_one(state: BrokerState, r, synonyms: bool, docs: bool = False) -> Result:
    keys = list(r.configuration_keys) if r.configuration_keys is not None else None
    try:
        if r.resource_type == TOPIC_CONFIG:
            invalid = _topic_name_error(r.resource_name)
            if invalid is not None:
                return _error_result(r, ke.InvalidTopicError.errno, invalid)
            info = state.catalog.get(r.resource_name)
            if info is None:
                return _error_result(r, ke.UnknownTopicOrPartitionError.errno, "")
            entries = describe_topic_configs(state, info.configs, keys, synonyms)
        elif r.resource_type == BROKER_CONFIG:
            per_broker = r.resource_name not in ("", None) and _broker_id(state, r.resource_name)
            entries = describe_broker_configs(state, per_broker, keys, synonyms)
        elif r.resource_type == GROUP_CONFIG:
            if not r.resource_name:
                return _error_result(r, INVALID_REQUEST, "Group name must not be empty")
            entries = describe_group_configs(state, r.resource_name, keys, synonyms)
        elif r.resource_type == CLIENT_METRICS_CONFIG:
            entries = [ConfigEntry(name, value, False, source, syn if synonyms else [], kind)
                       for name, value, source, kind, syn in state.client_metrics_configs.describe(r.resource_name)
                       if not keys or name in keys]
        elif r.resource_type in _UNSUPPORTED_TYPES:
            return _error_result(r, INVALID_REQUEST, _UNSUPPORTED_TYPES[r.resource_type])
        else:
            return _error_result(r, INVALID_REQUEST, f"Unsupported resource type: {r.resource_type}")
    except ConfigRequestError as exc:
        return _error_result(r, exc.code, str(exc))
    # Kafka leaves the message at the schema default, "", unless it has one
    return Result(error_code=0, error_message="", resource_type=r.resource_type, resource_name=r.resource_name,
                  configs=_entries(entries, _DOCUMENTED.get(r.resource_type) if docs else None))


def _broker_id(state: BrokerState, name: str) -> bool:
    """DescribeConfigs of BROKER <name>: must be our node id (Kafka's messages)."""
    try:
        node = int(name)
    except ValueError:
        raise ConfigRequestError(INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
    if node != state.node_id:
        raise ConfigRequestError(INVALID_REQUEST,
                                 f"Unexpected broker id, expected {state.node_id} or empty string, but received {name}")
    return True


_DENIED = {TOPIC_CONFIG: (ke.TopicAuthorizationFailedError.errno, "Topic authorization failed."),
           GROUP_CONFIG: (ke.GroupAuthorizationFailedError.errno, "Group authorization failed.")}
_CLUSTER_DENIED = (ke.ClusterAuthorizationFailedError.errno, "Cluster authorization failed.")


def _refused(ctx: RequestContext, r, operation: int) -> tuple[int, str] | None:
    """As Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic or group, or on the cluster for broker
    resources; the error names the resource type (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED)."""
    if ctx.broker.authorizer is None:
        return None
    if r.resource_type == TOPIC_CONFIG:
        allowed = authorize(ctx, operation, acl.TOPIC, r.resource_name)
    elif r.resource_type == GROUP_CONFIG:
        allowed = authorize(ctx, operation, acl.GROUP, r.resource_name)
    elif r.resource_type in (BROKER_CONFIG, BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG):
        allowed = authorize_cluster(ctx, operation)  # before the resource's name or type is looked at
    else:
        return None  # answered as unsupported by the handler
    return None if allowed else _DENIED.get(r.resource_type, _CLUSTER_DENIED)


def _describe_checked(ctx: RequestContext, r, synonyms: bool, docs: bool) -> Result:
    refused = _refused(ctx, r, acl.DESCRIBE_CONFIGS)
    return _describe_one(ctx.broker, r, synonyms, docs) if refused is None else _error_result(r, *refused)


@handles(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4)
async def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(throttle_time_ms=0,
                                   results=[_describe_checked(ctx, r, req.include_synonyms, bool(getattr(req, "include_documentation", False)))
                                            for r in req.resources])


# -- alter --------------------------------------------------------------------------------------
def _apply_incremental(current: dict[str, str], effective: dict[str, str], changes) -> dict[str, str]:
    """New topic overrides after SET/DELETE/APPEND/SUBTRACT; list ops start from the effective value (as Kafka)."""
    updated = dict(current)
    for c in changes:
        if c.config_operation == SET:
            updated[c.name] = c.value
        elif c.config_operation == DELETE:
            updated.pop(c.name, None)
        elif c.config_operation in (APPEND, SUBTRACT):
            if _TYPES.get(c.name) != TYPE_LIST:
                raise ValueError(f"Config value append/subtract is not allowed for config key {c.name}")
            base = updated[c.name] if c.name in updated else effective.get(c.name, "")
            items = [x for x in base.split(",") if x]
            values = [x for x in (c.value or "").split(",") if x]
            if c.config_operation == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [x for x in items if x not in values]
            updated[c.name] = ",".join(items)
        else:
            raise ConfigRequestError(INVALID_REQUEST, f"Unknown operations type {c.config_operation}")
    return updated


def _alter_topic(state: BrokerState, name: str, new_configs: dict[str, str], validate_only: bool,
                 topic_changes: dict[str, dict[str, str]] | None = None) -> tuple[int, str | None]:
    if state.catalog.get(name) is None:
        return ke.UnknownTopicOrPartitionError.errno, f"Topic {name} does not exist"
    try:
        LogConfig.from_props(new_configs, state.config.log_config)
        if topic_changes is not None:  # a cluster: the active controller records it (`_commit_topic_changes`)
            if not validate_only:
                topic_changes[name] = dict(new_configs)
        elif not validate_only:
            state.catalog.set_configs(name, new_configs)
    except Exception as exc:
        return error_code(exc), error_message(exc)
    return 0, None


def _preprocess(resources, null_allowed_op: int | None,
                known: frozenset[int] = frozenset({TOPIC_CONFIG, BROKER_CONFIG, GROUP_CONFIG})) -> dict[int, tuple[int, str]]:
    """Kafka's ConfigAdminManager.preprocess: errors by resource index for a resource given twice,
    duplicate config names, null values (except for `null_allowed_op`, DELETE), a type not `known` (the
    known ones it cannot alter are refused after authorization, as Kafka's handler refuses them)."""
    errors: dict[int, tuple[int, str]] = {}
    seen: dict[tuple[int, str], int] = {}
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)
        if key in seen:
            for j in (seen[key], i):
                errors[j] = (INVALID_REQUEST, "Each resource must appear at most once.")
        seen[key] = i
    for i, r in enumerate(resources):
        if i in errors:
            continue
        names = [c.name for c in r.configs]
        if len(set(names)) != len(names):
            errors[i] = (INVALID_REQUEST, "Error due to duplicate config keys")
            continue
        nulls = [c.name for c in r.configs if c.value is None
                 and (null_allowed_op is None or c.config_operation != null_allowed_op)]
        if nulls:
            errors[i] = (INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
        elif r.resource_type not in known:
            errors[i] = (INVALID_REQUEST, f"Unknown resource type {r.resource_type}")
    return errors


def _ops(configs) -> Iterable[tuple[str, int, str | None]]:
    return [(c.name, c.config_operation, c.value) for c in configs]


def _broker_layer(state: BrokerState, name: str, per_broker: bool, props: dict[str, str], validate_only: bool,
                  broker_changes: dict | None, keys: Iterable[str] | None = None) -> tuple[int, str | None]:
    """Validate (and on a single node apply) a BROKER layer; a cluster collects it for the controller:
    the new value (or deletion) of each of `keys` (the keys an incremental request names), or of every
    key that differs from the current layer (AlterConfigs: the whole layer)."""
    dynamic = state.dynamic_config
    dynamic.replace(per_broker, props, True)  # the layer's own errors come first, as Kafka's
    _check_elr_min_isr(state, per_broker, dynamic.layer(per_broker), props, keys)
    dynamic.replace(per_broker, props, validate_only or broker_changes is not None)
    if broker_changes is not None and not validate_only:
        current = dynamic.layer(per_broker)
        names = list(keys) if keys is not None else sorted(set(current) | set(props))
        broker_changes[name] = {k: props.get(k) for k in names if keys is not None or current.get(k) != props.get(k)}
    return 0, None


def _check_elr_min_isr(state: BrokerState, per_broker: bool, current: dict[str, str], props: dict[str, str],
                       keys: Iterable[str] | None) -> None:
    """With eligible leader replicas (KIP-966) min.insync.replicas is cluster-wide: Kafka 4.3's controller
    refuses it on one broker and refuses removing the cluster default (INVALID_CONFIG)."""
    from minikafka.broker.config.features import ELR_VERSION
    if state.features.level(ELR_VERSION) < 1:
        return
    key = "min.insync.replicas"
    if (keys is not None and key not in keys) or current.get(key) == props.get(key):
        return
    if per_broker:
        raise ConfigRequestError(ke.InvalidConfigurationError.errno,
                                 "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
    if key not in props and key in current:
        raise ConfigRequestError(ke.InvalidConfigurationError.errno,
                                 "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")


def _incremental_one(state: BrokerState, r, validate_only: bool, group_changes: dict[str, dict[str, str]],
                     topic_changes: dict[str, dict[str, str]] | None = None,
                     broker_changes: dict[str, dict[str, str | None]] | None = None,
                     metrics_changes: dict[str, dict[str, str]] | None = None) -> tuple[int, str | None]:
    if r.resource_type == BROKER_LOGGER_CONFIG:
        return INVALID_REQUEST, _UNSUPPORTED_TYPES[r.resource_type]
    try:
        if r.resource_type == CLIENT_METRICS_CONFIG:
            store = state.client_metrics_configs
            props = store.check(r.resource_name, store.incremental(r.resource_name, _ops(r.configs)))
            if not validate_only:
                metrics_changes[r.resource_name] = props
            return 0, None
        if r.resource_type == BROKER_CONFIG:
            dynamic = state.dynamic_config
            per_broker = dynamic.check_resource_name(r.resource_name)
            return _broker_layer(state, r.resource_name, per_broker, dynamic.incremental(per_broker, _ops(r.configs)),
                                 validate_only, broker_changes, [c.name for c in r.configs])
        if r.resource_type == GROUP_CONFIG:
            groups = state.group_configs
            props = groups.check(r.resource_name, groups.incremental(r.resource_name, _ops(r.configs)))
            if not validate_only:  # a cluster: the keys named, each set or deleted, for the controller
                group_changes[r.resource_name] = props if state.cluster is None else \
                    {c.name: props.get(c.name) for c in r.configs}
            return 0, None
        info = state.catalog.get(r.resource_name)
        overrides = info.configs if info else {}
        effective = LogConfig.from_props(overrides, state.config.log_config).to_props()
        updated = _apply_incremental(overrides, effective, r.configs)
        return _alter_topic(state, r.resource_name, updated, validate_only, topic_changes)
    except ConfigRequestError as exc:
        return exc.code, str(exc)
    except ValueError as exc:
        return ke.InvalidConfigurationError.errno, str(exc)


@handles(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1)
async def handle_incremental_alter_configs(ctx: RequestContext,
                                           req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    errors = _preprocess(req.resources, DELETE, known=frozenset({TOPIC_CONFIG, BROKER_CONFIG, GROUP_CONFIG,
                                                                 BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG}))
    out = []
    group_changes: dict[str, dict[str, str]] = {}  # each resource appears once (preprocess)
    topic_changes = {} if ctx.broker.cluster is not None else None
    broker_changes = {} if ctx.broker.cluster is not None else None
    metrics_changes: dict[str, dict[str, str]] = {}
    async with ctx.broker.group_configs.lock, ctx.broker.client_metrics_configs.lock:
        for i, r in enumerate(req.resources):
            code, msg = errors[i] if i in errors else _refused(ctx, r, acl.ALTER_CONFIGS) or \
                _incremental_one(ctx.broker, r, req.validate_only, group_changes, topic_changes, broker_changes,
                           metrics_changes)
            out.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=code, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name))
        if ctx.broker.cluster is None:
            await ctx.broker.group_configs.commit(group_changes)
            await ctx.broker.client_metrics_configs.commit(metrics_changes)
    if topic_changes:
        await _commit_topic_changes(ctx, topic_changes, out)
    if broker_changes:
        await _commit_broker_changes(ctx, broker_changes, out)
    if group_changes and ctx.broker.cluster is not None:
        await _commit_group_changes(ctx, group_changes, out)
    if metrics_changes and ctx.broker.cluster is not None:
        await _commit_client_metrics_changes(ctx, metrics_changes, out)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


def _alter_one(state: BrokerState, r, validate_only: bool, group_changes: dict[str, dict[str, str]],
               topic_changes: dict[str, dict[str, str]] | None = None,
               broker_changes: dict[str, dict[str, str | None]] | None = None,
               metrics_changes: dict[str, dict[str, str]] | None = None) -> tuple[int, str | None]:
    props = {c.name: c.value for c in r.configs}
    try:
        if r.resource_type == CLIENT_METRICS_CONFIG:  # the whole set of the subscription's configs
            props = state.client_metrics_configs.check(r.resource_name, props)
            if not validate_only:
                metrics_changes[r.resource_name] = props
            return 0, None
        if r.resource_type == BROKER_CONFIG:
            dynamic = state.dynamic_config
            return _broker_layer(state, r.resource_name, dynamic.check_resource_name(r.resource_name), props,
                                 validate_only, broker_changes)
        if r.resource_type == GROUP_CONFIG:
            props = state.group_configs.check(r.resource_name, props)
            if not validate_only:  # a cluster: every group config set or deleted (a whole replacement)
                group_changes[r.resource_name] = props if state.cluster is None else \
                    {k: props.get(k) for k in sorted(set(GROUP_KEY_NAMES) | set(props))}
            return 0, None
    except ConfigRequestError as exc:
        return exc.code, str(exc)
    return _alter_topic(state, r.resource_name, props, validate_only, topic_changes)


async def _commit_topic_changes(ctx: RequestContext, changes: dict[str, dict[str, str]], out: list) -> None:
    """A cluster: the topics' new overrides go to the active controller as one AlterConfigs (full
    replacement per topic); its per-topic errors replace ours; this node waits (bounded) until its
    metadata shows them, so a DescribeConfigs here right after sees the change."""
    from minikafka.broker.cluster.forwarding import forwarded_for
    from minikafka.broker.cluster.runtime import ControllerUnavailableError
    state = ctx.broker
    R = AlterConfigsRequest.AlterConfigsResource
    req = AlterConfigsRequest(resources=[R(resource_type=TOPIC_CONFIG, resource_name=name, configs=[
        R.AlterableConfig(name=k, value=v) for k, v in sorted(props.items())]) for name, props in changes.items()],
        validate_only=False)
    try:
        resp = await state.cluster.controller_request(req, 2, AlterConfigsResponse, not_controller=lambda r: bool(
            r.responses) and all(x.error_code == 41 for x in r.responses), on_behalf=forwarded_for(ctx))
        answers = {x.resource_name: (x.error_code, x.error_message) for x in resp.responses}
    except ControllerUnavailableError as exc:
        message = "No active controller answered in time." if exc.code == ke.RequestTimedOutError.errno else str(exc)
        answers = {name: (exc.code, message) for name in changes}
    for o in out:
        if o.resource_type == TOPIC_CONFIG and o.resource_name in changes:
            o.error_code, o.error_message = answers.get(o.resource_name, (-1, "No answer from the controller for this topic"))
    deadline = asyncio.get_running_loop().time() + 5.0
    for name, props in changes.items():
        while answers.get(name, (1,))[0] == 0 and asyncio.get_running_loop().time() < deadline:
            info = state.catalog.get(name)
            if info is None or info.configs == props:
                break
            await asyncio.sleep(0.02)


async def _commit_broker_changes(ctx: RequestContext, changes: dict[str, dict[str, str | None]], out: list) -> None:
    """A cluster: BROKER config changes go to the active controller (ConfigRecords); its answers replace ours."""
    from minikafka.broker.cluster.forwarding import forward_broker_configs, forwarded_for
    answers = await forward_broker_configs(ctx.broker, changes, forwarded_for(ctx))
    for o in out:
        if o.resource_type == BROKER_CONFIG and o.resource_name in changes:
            o.error_code, o.error_message = answers.get(o.resource_name, (-1, "No answer from the controller"))


async def _commit_group_changes(ctx: RequestContext, changes: dict, out: list) -> None:
    """A cluster: GROUP config changes go to the active controller (ConfigRecords, resource type 32);
    its answers replace ours."""
    from minikafka.broker.cluster.forwarding import forward_group_configs, forwarded_for
    answers = await forward_group_configs(ctx.broker, changes, forwarded_for(ctx))
    for o in out:
        if o.resource_type == GROUP_CONFIG and o.resource_name in changes:
            o.error_code, o.error_message = answers.get(o.resource_name, (-1, "No answer from the controller"))


async def _commit_client_metrics_changes(ctx: RequestContext, changes: dict[str, dict[str, str]], out: list) -> None:
    """A cluster: CLIENT_METRICS changes go to the active controller (ConfigRecords, resource type 16)."""
    from minikafka.broker.cluster.forwarding import forward_client_metrics_configs, forwarded_for
    store = ctx.broker.client_metrics_configs
    ops = {name: {k: props.get(k) for k in sorted(set(props) | set(store.subscriptions.get(name, {})))}
           for name, props in changes.items()}
    answers = await forward_client_metrics_configs(ctx.broker, ops, forwarded_for(ctx))
    for o in out:
        if o.resource_type == CLIENT_METRICS_CONFIG and o.resource_name in changes:
            o.error_code, o.error_message = answers.get(o.resource_name, (-1, "No answer from the controller"))


@handles(AlterConfigsRequest, AlterConfigsResponse, 0, 2)
async def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    errors = _preprocess(req.resources, None, known=frozenset({TOPIC_CONFIG, BROKER_CONFIG, GROUP_CONFIG,
                                                               CLIENT_METRICS_CONFIG}))
    out = []
    group_changes: dict[str, dict[str, str]] = {}
    topic_changes = {} if ctx.broker.cluster is not None else None
    broker_changes = {} if ctx.broker.cluster is not None else None
    metrics_changes: dict[str, dict[str, str]] = {}
    async with ctx.broker.group_configs.lock, ctx.broker.client_metrics_configs.lock:
        for i, r in enumerate(req.resources):
            code, msg = errors[i] if i in errors else _refused(ctx, r, acl.ALTER_CONFIGS) or \
                _alter_one(ctx.broker, r, req.validate_only, group_changes, topic_changes, broker_changes,
                           metrics_changes)
            out.append(AlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=code, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name))
        if ctx.broker.cluster is None:
            await ctx.broker.group_configs.commit(group_changes)
            await ctx.broker.client_metrics_configs.commit(metrics_changes)
    if topic_changes:
        await _commit_topic_changes(ctx, topic_changes, out)
    if broker_changes:
        await _commit_broker_changes(ctx, broker_changes, out)
    if group_changes and ctx.broker.cluster is not None:
        await _commit_group_changes(ctx, group_changes, out)
    if metrics_changes and ctx.broker.cluster is not None:
        await _commit_client_metrics_changes(ctx, metrics_changes, out)
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)
