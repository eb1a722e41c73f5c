"""Group configs (KIP-848 and after): per-group overrides of the broker's group.* settings.

Kafka keeps them as GROUP config resources (ConfigResource type 32) in its metadata log. So does a
minikafka cluster: changes go to the active controller (ConfigRecords) and every node's store
follows the metadata image (`follow`, broker/cluster/security_sync.py); its file is neither read nor
written. A single node keeps them in one JSON file in the first log dir, replaced atomically (temp
file, fsync, rename, directory fsync) before a change is acknowledged, so they survive restart and
kill -9.

The lookup for the group coordinators is `GroupConfigStore.group_config(group_id, name)`: the
group's override if it has one, else the broker's current value of the matching `group.*` key
(dynamic broker configs included), else Kafka's default; typed (int, bool or str).

Changes are validated as Kafka's GroupConfig.validate does: only the names Kafka knows, values of
their type, and the bounded ones within the broker's `group.*.min.*` / `group.*.max.*` settings.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import kafka.errors as ke

from minikafka.broker.config.core import BrokerConfig
from minikafka.broker.config.dynamic import ConfigRequestError
from minikafka.broker.config.resource_configs import ResourceConfigStore

log = logging.getLogger(__name__)

CONFIG_FILE = "__minikafka_group_configs.json"
INVALID_CONFIG = ke.InvalidConfigurationError.errno
INVALID_REQUEST = ke.InvalidRequestError.errno
SOURCE_GROUP = 8  # DescribeConfigs GROUP_CONFIG
SOURCE_DEFAULT = 5


@dataclass(frozen=True)
class GroupKey:
    name: str
    type: str  # Kafka ConfigDef type: INT, BOOLEAN, STRING
    broker_key: str | None  # the broker config whose value is the default
    default: str  # Kafka's default of broker_key
    at_least: int | None = None  # ConfigDef range lower bound
    min_key: str | None = None  # broker bounds: (key, Kafka's default)
    min_default: str | None = None
    max_key: str | None = None
    max_default: str | None = None
    choices: tuple[str, ...] = ()


def _int(name: str, default: str, broker: str | None = None, lo: tuple[str, str] | None = None,
         hi: tuple[str, str] | None = None, at_least: int = 1) -> GroupKey:
    return GroupKey(name, "INT", broker, default, at_least, lo[0] if lo else None, lo[1] if lo else None,
                    hi[0] if hi else None, hi[1] if hi else None)


def _range(prefix: str, what: str, lo: str, hi: str) -> tuple[tuple[str, str], tuple[str, str]]:
    return (f"group.{prefix}.min.{what}", lo), (f"group.{prefix}.max.{what}", hi)


# Kafka 4.3's GroupConfig: name, type, the broker config that is its default (None: no broker
# synonym), Kafka's default, and the broker configs bounding it.
GROUP_KEYS: tuple[GroupKey, ...] = (
    _int("consumer.session.timeout.ms", "45000", "group.consumer.session.timeout.ms",
         *_range("consumer", "session.timeout.ms", "45000", "60000")),
    _int("consumer.heartbeat.interval.ms", "5000", "group.consumer.heartbeat.interval.ms",
         *_range("consumer", "heartbeat.interval.ms", "5000", "15000")),
    _int("consumer.assignment.interval.ms", "1000", "group.consumer.assignment.interval.ms",
         *_range("consumer", "assignment.interval.ms", "0", "15000"), at_least=0),
    _int("share.session.timeout.ms", "45000", "group.share.session.timeout.ms",
         *_range("share", "session.timeout.ms", "45000", "60000")),
    _int("share.heartbeat.interval.ms", "5000", "group.share.heartbeat.interval.ms",
         *_range("share", "heartbeat.interval.ms", "5000", "15000")),
    _int("share.record.lock.duration.ms", "30000", "group.share.record.lock.duration.ms",
         *_range("share", "record.lock.duration.ms", "15000", "60000"), at_least=1000),
    _int("share.delivery.count.limit", "5", "group.share.delivery.count.limit",
         *_range("share", "delivery.count.limit", "2", "10")),
    _int("share.partition.max.record.locks", "2000", "group.share.partition.max.record.locks",
         *_range("share", "partition.max.record.locks", "100", "4000")),
    GroupKey("share.auto.offset.reset", "STRING", None, "latest"),
    _int("share.assignment.interval.ms", "1000", "group.share.assignment.interval.ms",
         *_range("share", "assignment.interval.ms", "0", "15000"), at_least=0),
    GroupKey("share.isolation.level", "STRING", None, "read_uncommitted",
             choices=("read_committed", "read_uncommitted")),
    GroupKey("share.renew.acknowledge.enable", "BOOLEAN", None, "true"),
    _int("streams.session.timeout.ms", "45000", "group.streams.session.timeout.ms",
         *_range("streams", "session.timeout.ms", "45000", "60000")),
    _int("streams.heartbeat.interval.ms", "5000", "group.streams.heartbeat.interval.ms",
         *_range("streams", "heartbeat.interval.ms", "5000", "15000")),
    _int("streams.num.standby.replicas", "0", "group.streams.num.standby.replicas", None,
         ("group.streams.max.standby.replicas", "2"), at_least=0),
    _int("streams.initial.rebalance.delay.ms", "3000", "group.streams.initial.rebalance.delay.ms", at_least=0),
    _int("streams.assignment.interval.ms", "1000", "group.streams.assignment.interval.ms",
         *_range("streams", "assignment.interval.ms", "0", "15000"), at_least=0),
)
_BY_NAME = {k.name: k for k in GROUP_KEYS}
GROUP_KEY_NAMES: tuple[str, ...] = tuple(_BY_NAME)
# pairs whose session timeout must exceed the heartbeat interval
_SESSION_OVER_HEARTBEAT = tuple((f"{p}.session.timeout.ms", f"{p}.heartbeat.interval.ms")
                                for p in ("consumer", "share", "streams"))
_OFFSET_RESET = re.compile(r"^(earliest|latest|by_duration:P.*)$")


def _parse(key: GroupKey, raw: str) -> int | bool | str:
    """ConfigDef parse + validator of one value; ConfigRequestError with Kafka's message."""
    v = raw.strip()
    if key.type == "INT":
        try:
            value = int(v)
        except ValueError:
            raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {raw} for configuration {key.name}: "
                                                     "Not a number of type INT") from None
        if not -2**31 <= value < 2**31:
            raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {raw} for configuration {key.name}: "
                                                     "Not a number of type INT")
        if key.at_least is not None and value < key.at_least:
            raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {value} for configuration {key.name}: "
                                                     f"Value must be at least {key.at_least}")
        return value
    if key.type == "BOOLEAN":
        if v.lower() not in ("true", "false"):
            raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {raw} for configuration {key.name}: "
                                                     "Expected value to be either true or false")
        return v.lower() == "true"
    if key.name == "share.auto.offset.reset" and not _OFFSET_RESET.match(v):
        raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {raw} for configuration {key.name}: Invalid value "
                                                 f"`{raw}` for configuration {key.name}. The value must be either "
                                                 "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    if key.choices and v not in key.choices:
        raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {raw} for configuration {key.name}: "
                                                 f"String must be one of: {', '.join(key.choices)}")
    return v


class GroupConfigStore(ResourceConfigStore):
    """Per-group config overrides, persisted; the coordinators read them with `group_config`."""
    FILE, SECTION, WHAT = CONFIG_FILE, "groups", "group configs"

    def __init__(self, config: BrokerConfig, data_dir: Path) -> None:
        super().__init__(config, data_dir)
        self._listeners: list[Callable[[str, dict[str, str]], None]] = []

    @property
    def overrides(self) -> dict[str, dict[str, str]]:
        return self.resources

    def known(self, key: str) -> bool:
        return key in _BY_NAME

    def _notify(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        for group_id, props in changes.items():
            for listener in self._listeners:
                listener(group_id, dict(props))

    # -- the lookup ---------------------------------------------------------------------------
    def broker_default(self, name: str) -> str:
        """The broker-level value a group without an override gets for group config `name`."""
        key = _BY_NAME[name]
        return (self.config.get(key.broker_key) if key.broker_key else "") or key.default

    def group_config(self, group_id: str, name: str) -> int | bool | str:
        """The effective value of group config `name` (e.g. "consumer.session.timeout.ms") for
        `group_id`: the group's override, else the broker's `group.*` value; typed per Kafka.
        KeyError for a name Kafka's GroupConfig does not define."""
        key = _BY_NAME[name]
        raw = self.overrides.get(group_id, {}).get(name)
        if raw is None:
            raw = self.broker_default(name)
        return _parse(key, raw)

    def on_change(self, listener: Callable[[str, dict[str, str]], None]) -> None:
        """Call `listener(group_id, overrides)` after a group's overrides changed."""
        self._listeners.append(listener)

    # -- describe -----------------------------------------------------------------------------
    def describe(self, group_id: str) -> list[tuple[str, str, int, str, list[tuple[str, str, int]]]]:
        """(name, value, source, type, synonyms) of every group config, as Kafka 4.3 shows them:
        the group's override (GROUP_CONFIG) if any, then the broker config it defaults to."""
        own = self.overrides.get(group_id, {})
        out = []
        for k in GROUP_KEYS:
            default = (k.broker_key or k.name, self.broker_default(k.name), SOURCE_DEFAULT)
            if k.name in own:
                out.append((k.name, own[k.name], SOURCE_GROUP, k.type, [(k.name, own[k.name], SOURCE_GROUP), default]))
            else:
                out.append((k.name, default[1], SOURCE_DEFAULT, k.type, [default]))
        return out

    # -- changes ------------------------------------------------------------------------------
    def _bound(self, key_name: str | None, default: str | None) -> int | None:
        if key_name is None:
            return None
        return int(self.config.get(key_name) or default)

    def validate(self, props: Mapping[str, str]) -> None:
        """Kafka's GroupConfig.validate: names, then parse, then the broker bounds."""
        for name in props:
            if name not in _BY_NAME:
                raise ConfigRequestError(INVALID_CONFIG, f"Unknown group config name: {name}")
        values = {k.name: _parse(k, props[k.name] if k.name in props else self.broker_default(k.name))
                  for k in GROUP_KEYS}
        for k in GROUP_KEYS:
            lo, hi = self._bound(k.min_key, k.min_default), self._bound(k.max_key, k.max_default)
            if lo is not None and values[k.name] < lo:
                raise ConfigRequestError(INVALID_CONFIG, f"{k.name} must be greater than or equal to {k.min_key}")
            if hi is not None and values[k.name] > hi:
                raise ConfigRequestError(INVALID_CONFIG, f"{k.name} must be less than or equal to {k.max_key}")
        for session, heartbeat in _SESSION_OVER_HEARTBEAT:
            if values[session] <= values[heartbeat]:
                raise ConfigRequestError(INVALID_CONFIG, f"{session} must be greater than {heartbeat}")

    def _list_op_refused(self, key: str, op: int) -> ConfigRequestError:
        if key not in _BY_NAME:  # (no group config is a list)
            return ConfigRequestError(INVALID_CONFIG, f"Unknown group config name: {key}")
        return super()._list_op_refused(key, op)

    def check(self, group_id: str, props: Mapping[str, str]) -> dict[str, str]:
        """`props` as a group's whole set of overrides, validated (nothing changes)."""
        if not group_id:
            raise ConfigRequestError(INVALID_REQUEST, "Default group resources are not allowed.")
        props = dict(props)
        self.validate(props)
        return props
