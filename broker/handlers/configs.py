"""DescribeConfigs, IncrementalAlterConfigs, AlterConfigs for topics (broker configs are read-only)."""
from __future__ import annotations

from dataclasses import dataclass

import kafka.errors as ke
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from ...storage.log_config import LogConfig
from ..context import RequestContext
from ..errors import error_code, error_message
from ..registry import handles
from ..state import BrokerState

TOPIC_CONFIG = 2
BROKER_CONFIG = 4
# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
# ConfigType
TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST, TYPE_BOOLEAN = 2, 3, 5, 7, 1
_TYPES = {"segment.bytes": TYPE_INT, "max.message.bytes": TYPE_INT, "index.interval.bytes": TYPE_INT,
          "segment.ms": TYPE_LONG, "retention.ms": TYPE_LONG, "retention.bytes": TYPE_LONG,
          "flush.messages": TYPE_LONG, "flush.ms": TYPE_LONG, "segment.jitter.ms": TYPE_LONG,
          "file.delete.delay.ms": TYPE_LONG, "cleanup.policy": TYPE_LIST,
          "message.timestamp.type": TYPE_STRING}
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


def describe_topic_configs(state: BrokerState, overrides: dict[str, str], keys: list[str] | None,
                           synonyms: bool) -> list[ConfigEntry]:
    effective = LogConfig.from_props(overrides, state.config.log_config).to_props()
    defaults = state.config.log_config.to_props()
    out = []
    for name in sorted(effective):
        if keys is not None and name not in keys:
            continue
        source = SOURCE_TOPIC if name in overrides else SOURCE_DEFAULT
        syn: list[tuple[str, str | None, int]] = []
        if synonyms:
            if name in overrides:
                syn.append((name, overrides[name], SOURCE_TOPIC))
            syn.append((name, defaults.get(name), SOURCE_DEFAULT))
        out.append(ConfigEntry(name, effective[name], False, source, syn))
    return out


def _entries(entries: list[ConfigEntry]) -> list[Entry]:
    return [Entry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.config_source,
                  is_sensitive=False, synonyms=[Synonym(name=n, value=v, source=s) for n, v, s in e.synonyms],
                  config_type=_TYPES.get(e.name, TYPE_STRING), documentation=None) for e in entries]


def _describe_one(state: BrokerState, r, synonyms: bool) -> Result:
    keys = list(r.configuration_keys) if r.configuration_keys is not None else None
    if r.resource_type == TOPIC_CONFIG:
        info = state.catalog.get(r.resource_name)
        if info is None:
            return Result(error_code=ke.UnknownTopicOrPartitionError.errno,
                          error_message=f"Topic {r.resource_name} does not exist", resource_type=r.resource_type,
                          resource_name=r.resource_name, configs=[])
        entries = describe_topic_configs(state, info.configs, keys, synonyms)
    elif r.resource_type == BROKER_CONFIG:
        if r.resource_name not in ("", str(state.node_id)):
            return Result(error_code=INVALID_REQUEST, error_message=f"Unexpected broker id {r.resource_name}",
                          resource_type=r.resource_type, resource_name=r.resource_name, configs=[])
        from ..config import DEFAULTS
        entries = [ConfigEntry(k, v, True, SOURCE_DEFAULT if DEFAULTS.get(k) == v else SOURCE_STATIC_BROKER,
                               [(k, v, SOURCE_STATIC_BROKER)] if synonyms else [])
                   for k, v in sorted(state.config.props.items()) if keys is None or k in keys]
    else:
        return Result(error_code=INVALID_REQUEST, error_message=f"Unsupported resource type {r.resource_type}",
                      resource_type=r.resource_type, resource_name=r.resource_name, configs=[])
    return Result(error_code=0, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name,
                  configs=_entries(entries))


@handles(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4)
async def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(throttle_time_ms=0,
                                   results=[_describe_one(ctx.broker, r, req.include_synonyms) for r in req.resources])


def _apply_incremental(current: dict[str, str], effective: dict[str, str], changes) -> dict[str, str]:
    """New overrides after SET/DELETE/APPEND/SUBTRACT; list ops start from the effective value (as Kafka)."""
    updated = dict(current)
    for c in changes:
        if c.config_operation == SET:
            if c.value is None:
                raise ValueError(f"Null value not supported for {c.name}")
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
            raise ValueError(f"Unknown config operation {c.config_operation}")
    return updated


def _alter_topic(state: BrokerState, name: str, new_configs: dict[str, str], validate_only: bool) -> tuple[int, str | None]:
    if state.catalog.get(name) is None:
        return ke.UnknownTopicOrPartitionError.errno, f"Topic {name} does not exist"
    try:
        LogConfig.from_props(new_configs, state.config.log_config)
        if not validate_only:
            state.catalog.set_configs(name, new_configs)
    except Exception as exc:
        return error_code(exc), error_message(exc)
    return 0, None


def _not_topic(r) -> tuple[int, str]:
    if r.resource_type == BROKER_CONFIG:
        return INVALID_REQUEST, "minikafka broker configs are static; set them in server.properties"
    return INVALID_REQUEST, f"Unsupported resource type {r.resource_type}"


@handles(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1)
async def handle_incremental_alter_configs(ctx: RequestContext,
                                           req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    state = ctx.broker
    out = []
    for r in req.resources:
        if r.resource_type != TOPIC_CONFIG:
            code, msg = _not_topic(r)
        else:
            info = state.catalog.get(r.resource_name)
            try:
                overrides = info.configs if info else {}
                effective = LogConfig.from_props(overrides, state.config.log_config).to_props()
                updated = _apply_incremental(overrides, effective, r.configs)
                code, msg = _alter_topic(state, r.resource_name, updated, req.validate_only)
            except ValueError as exc:
                code, msg = ke.InvalidConfigurationError.errno, str(exc)
        out.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)


@handles(AlterConfigsRequest, AlterConfigsResponse, 0, 2)
async def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    out = []
    for r in req.resources:
        if r.resource_type != TOPIC_CONFIG:
            code, msg = _not_topic(r)
        elif any(c.value is None for c in r.configs):
            code, msg = ke.InvalidConfigurationError.errno, "Null value not supported for topic configs"
        else:
            code, msg = _alter_topic(ctx.broker, r.resource_name, {c.name: c.value for c in r.configs},
                                     req.validate_only)
        out.append(AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name))
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)
