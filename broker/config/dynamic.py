"""Dynamic broker configs (Kafka's DynamicBrokerConfig): two layers over the static config.

Precedence, highest first (Kafka's order and DescribeConfigs source ids):
  DYNAMIC_BROKER_CONFIG (2)          per broker, resource name = our node id
  DYNAMIC_DEFAULT_BROKER_CONFIG (3)  cluster-wide default, resource name ""
  STATIC_BROKER_CONFIG (4)           server.properties / MINIKAFKA_* env / --override
  DEFAULT_CONFIG (5)                 built-in defaults (broker/config/core.py DEFAULTS)

Both layers live in one JSON file in the first log dir, replaced atomically (temp file, fsync,
rename, directory fsync), so a change survives restart and kill -9; it is written before it is
applied. A change is validated completely first (names, types, values through a full BrokerConfig)
and then applied in one place, `BrokerConfig.reconfigure`, followed by the listeners registered with
`on_change` (the topic catalog's default LogConfig, connection limits). Which keys take effect at
runtime is listed in APPLIED (listener-prefixed SASL keys too: new connections read them). The other
dynamic keys Kafka knows are tuning with nothing a client can observe here (thread counts, cleaner
buffers, tiered storage, Kerberos/OAuth login refresh): accepted, stored, reported, logged as not acted
on. Values minikafka cannot honour (broker/config/core.py UNSUPPORTED_VALUES: Java plug-in classes,
connection creation rate quotas) are refused with INVALID_CONFIG. Keys Kafka does not
know are custom configs: accepted and stored, as Kafka does. Keys Kafka (or minikafka, for its own
`minikafka.*` keys, the listeners, which it cannot rebind, and the TLS settings of a listener, whose
context is built at start) treats as read-only are refused with Kafka's INVALID_REQUEST message.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Callable, Iterable, Mapping

import kafka.errors as ke

from minikafka.storage.partition_metadata import atomic_write
from minikafka.broker.config.core import DEFAULTS, UNSUPPORTED_VALUES, BrokerConfig, ConfigError
from minikafka.broker.config.kafka_keys import KAFKA_BROKER_KEYS, KAFKA_DYNAMIC_KEYS, TYPE_LIST, config_type

log = logging.getLogger(__name__)

CONFIG_FILE = "__minikafka_broker_configs.json"

SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT = 3
SOURCE_STATIC = 4
SOURCE_DEFAULT = 5

INVALID_REQUEST = ke.InvalidRequestError.errno
INVALID_CONFIG = ke.InvalidConfigurationError.errno

# Keys that take effect at once in minikafka when changed dynamically. The log.* defaults apply to
# every topic without its own override (the topic catalog re-derives their LogConfig).
# (Kafka 4.3 makes only the first name of a synonym group dynamic: log.retention.ms, not .hours.)
APPLIED: frozenset[str] = frozenset({
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "cordoned.log.dirs",
    "log.index.size.max.bytes", "min.insync.replicas", "unclean.leader.election.enable",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate", "max.connections.per.ip.overrides",
    "transaction.partition.verification.enable", "sasl.enabled.mechanisms", "group.consumer.assignment.interval.ms",
    "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.retention.ms", "log.retention.bytes", "log.index.interval.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms", "log.cleanup.policy", "log.message.timestamp.type",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms", "message.max.bytes",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms",
    "producer.id.expiration.ms", "max.connections", "max.connections.per.ip", "max.connection.creation.rate",
    "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms", "log.cleaner.backoff.ms",
})

# Dynamic in Kafka, but minikafka cannot change them while running: the listeners (it would have to rebind),
# and what its inter-broker client and TLS contexts read once at start (listener-prefixed ssl.* keys too).
_STATIC_IN_MINIKAFKA = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map",
                                  "sasl.mechanism.inter.broker.protocol"})

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix.
_SECURITY_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
# Cluster-wide listener configs (the other listener/security configs are per broker only).
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
_LISTENER_PREFIX = re.compile(r"^listener\.name\.[^.]*\.(.*)$")
_LISTENER_MECHANISM_KEYS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                            "sasl.server.callback.handler.class", "connections.max.reauth.ms")


class ConfigRequestError(Exception):
    """A refused change: Kafka's error code and message for the resource."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _per_broker_only(name: str) -> bool:
    """Kafka's PerBrokerConfigs: listener and SSL/SASL configs (a listener prefix makes one so)."""
    m = _LISTENER_PREFIX.match(name)
    if m:
        return m.group(1) not in _CLUSTER_LEVEL_LISTENER_KEYS
    if name in _CLUSTER_LEVEL_LISTENER_KEYS or name not in KAFKA_DYNAMIC_KEYS:
        return False
    return (name.startswith(("ssl.", "sasl.")) or name in ("listeners", "advertised.listeners",
                                                           "listener.security.protocol.map",
                                                           "principal.builder.class", "connections.max.reauth.ms"))


def is_dynamic(name: str) -> bool:
    """Whether `name` may be set dynamically (Kafka: AllDynamicConfigs; listener-prefixed ones too, but
    not a listener's TLS keystore/truststore settings: minikafka builds TLS contexts at start only)."""
    m = _LISTENER_PREFIX.match(name)
    if m:
        return not m.group(1).startswith("ssl.")
    return name in KAFKA_DYNAMIC_KEYS and name not in _STATIC_IN_MINIKAFKA


def is_sensitive(name: str) -> bool:
    """Kafka's maybeSensitive: passwords, and names whose type it does not know (custom configs;
    minikafka's own keys are shown)."""
    kind = config_type(name)
    return kind == "PASSWORD" or (kind is None and name not in DEFAULTS)


def is_read_only(name: str) -> bool:
    """DescribeConfigs' read_only: everything that is not dynamic (custom keys included, as Kafka)."""
    return not is_dynamic(name)


def broker_synonyms(name: str) -> list[str]:
    """Kafka's brokerConfigSynonyms: the keys that set the same thing, highest precedence first."""
    if name in ("log.roll.ms", "log.roll.hours"):
        return ["log.roll.ms", "log.roll.hours"]
    if name in ("log.roll.jitter.ms", "log.roll.jitter.hours"):
        return ["log.roll.jitter.ms", "log.roll.jitter.hours"]
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    if name in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
        return ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    m = _LISTENER_PREFIX.match(name)
    if m:
        base = m.group(1)
        return [name, next((k for k in _LISTENER_MECHANISM_KEYS if base.endswith(k)), base)]
    return [name]


def _kafka_list(names: Iterable[str]) -> str:
    """A Java collection's toString, as Kafka puts it into these messages."""
    return "[" + ", ".join(names) + "]"


# Kafka's ConfigDef lower bounds of the dynamic keys minikafka applies (checked before they reach
# BrokerConfig, with Kafka's message)
_AT_LEAST: dict[str, int | float] = {
    "message.max.bytes": 0, "max.connections": 0, "max.connections.per.ip": 0, "log.segment.bytes": 1048576,
    "log.roll.ms": 1, "log.roll.jitter.ms": 0, "log.index.interval.bytes": 0, "log.flush.interval.messages": 1,
    "log.cleaner.delete.retention.ms": 0, "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.min.cleanable.ratio": 0, "producer.id.expiration.ms": 1, "log.cleaner.backoff.ms": 0,
    "log.message.timestamp.before.max.ms": 0, "log.message.timestamp.after.max.ms": 0,
    "leader.replication.throttled.rate": 0, "follower.replication.throttled.rate": 0,
    "replica.alter.log.dirs.io.max.bytes.per.second": 0,
}


def _check_type(name: str, value: str) -> None:
    """ConfigDef's parse of a known key's type (Kafka's message on failure)."""
    kind = config_type(name)
    v = value.strip()
    try:
        number: int | float | None = None
        if kind in ("INT", "SHORT", "LONG"):
            number = int(v)
        elif kind == "DOUBLE":
            number = float(v)
        elif kind == "BOOLEAN" and v.lower() not in ("true", "false"):
            raise ConfigRequestError(INVALID_REQUEST, f"Invalid value {value} for configuration {name}: "
                                                      "Expected value to be either true or false")
    except ValueError:
        raise ConfigRequestError(INVALID_REQUEST, f"Invalid value {value} for configuration {name}: "
                                                  f"Not a number of type {kind}") from None
    low = _AT_LEAST.get(name)
    if number is not None and low is not None and number < low:
        raise ConfigRequestError(INVALID_REQUEST, f"Invalid value {value} for configuration {name}: "
                                                  f"Value must be at least {low}")


class DynamicBrokerConfig:
    """The per-broker and cluster-default layers of this broker, persisted and applied."""

    def __init__(self, config: BrokerConfig, data_dir: Path) -> None:
        self.config = config
        self.node_id = config.node_id
        self.path = Path(data_dir) / CONFIG_FILE
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self._listeners: list[Callable[[BrokerConfig], None]] = []

    # -- persistence --------------------------------------------------------------------------
    def load(self) -> None:
        """Read the layers and apply them to the config. Entries that are no longer valid (a key
        made static, a bad value) are dropped with an error logged, as Kafka drops them."""
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            log.error("dynamic broker configs in %s unreadable, ignored: %s", self.path, exc)
            return
        default = {str(k): str(v) for k, v in data.get("default", {}).items()}
        broker = {str(k): str(v) for k, v in data.get("brokers", {}).get(str(self.node_id), {}).items()}
        self.cluster_default = self._usable(default, per_broker=False)
        self.per_broker = self._usable(broker, per_broker=True)
        try:
            self.config.reconfigure(self.effective_props(self.cluster_default, self.per_broker))
        except ConfigError as exc:
            log.error("dynamic broker configs could not be applied, ignored: %s", exc)
            self.cluster_default, self.per_broker = {}, {}
        if self.cluster_default or self.per_broker:
            log.info("dynamic broker configs: default %s, broker %d %s", sorted(self.cluster_default),
                     self.node_id, sorted(self.per_broker))

    def _usable(self, props: dict[str, str], per_broker: bool) -> dict[str, str]:
        out = {}
        for k, v in props.items():
            try:
                self.check({k: v}, per_broker)
                out[k] = v
            except ConfigRequestError as exc:
                log.error("dynamic broker config %s ignored: %s", k, exc)
        return out

    def _save(self, default: Mapping[str, str], broker: Mapping[str, str]) -> None:
        data = {"default": dict(default), "brokers": {str(self.node_id): dict(broker)} if broker else {}}
        atomic_write(self.path, json.dumps(data, indent=1, sort_keys=True).encode())

    # -- queries ------------------------------------------------------------------------------
    def layer(self, per_broker: bool) -> dict[str, str]:
        return dict(self.per_broker if per_broker else self.cluster_default)

    def effective_props(self, default: Mapping[str, str], broker: Mapping[str, str]) -> dict[str, str]:
        """Static props, then the default layer, then the per-broker layer; setting a key removes
        its synonyms from the lower layers (Kafka's overrideProps: log.retention.hours set
        dynamically wins over a static log.retention.ms)."""
        props = dict(self.config.static_props)
        for layer in (default, broker):
            for k, v in layer.items():
                for syn in broker_synonyms(k) if not _LISTENER_PREFIX.match(k) else [k]:
                    props.pop(syn, None)
                props[k] = v
        return props

    def synonyms(self, name: str, default_only: bool = False) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of `name` and its synonyms in precedence order, as Kafka's
        configSynonyms: by layer, then by synonym, dropping those before `name` itself."""
        names = broker_synonyms(name)
        layers: list[tuple[Mapping[str, str], int]] = [(self.cluster_default, SOURCE_DYNAMIC_DEFAULT)]
        if not default_only:
            static_defaults = {k: v for k, v in DEFAULTS.items() if v != ""}
            layers = [(self.per_broker, SOURCE_DYNAMIC_BROKER), *layers,
                      (self.config.static_props, SOURCE_STATIC), (static_defaults, SOURCE_DEFAULT)]
        out = [(n, layer[n], source) for layer, source in layers for n in names if n in layer]
        while out and out[0][0] != name:
            out.pop(0)
        return out

    # -- changes ------------------------------------------------------------------------------
    def on_change(self, listener: Callable[[BrokerConfig], None]) -> None:
        """Call `listener(config)` after every applied change (the config already updated)."""
        self._listeners.append(listener)

    def check_resource_name(self, name: str) -> bool:
        """True for the per-broker resource, False for the default; ConfigRequestError otherwise."""
        if name == "":
            return False
        try:
            node = int(name)
        except ValueError:
            raise ConfigRequestError(INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
        if node != self.node_id:
            raise ConfigRequestError(INVALID_REQUEST,
                                     f"Unexpected broker id, expected {self.node_id}, but received {name}")
        return True

    def check(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Kafka's DynamicBrokerConfig.validateConfigs (names, then types, then level)."""
        static = [k for k in props if not is_dynamic(k) and (k in KAFKA_BROKER_KEYS or k in DEFAULTS
                                                             or _LISTENER_PREFIX.match(k))]
        if static:
            raise ConfigRequestError(INVALID_REQUEST, f"Cannot update these configs dynamically: {_kafka_list(static)}")
        security = [k for k in props if k in _SECURITY_KEYS]
        if security:
            raise ConfigRequestError(INVALID_REQUEST, "These security configs can be dynamically updated only "
                                                      f"per-listener using the listener prefix: {_kafka_list(security)}")
        for k, v in props.items():
            m = _LISTENER_PREFIX.match(k)
            _check_type(m.group(1) if m else k, v)
        for k, v in props.items():  # what minikafka refuses rather than ignores (broker/config/core.py)
            allowed, reason = UNSUPPORTED_VALUES.get(k, (None, ""))
            if allowed is not None and v.strip() and v.strip() not in allowed:
                raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {v} for configuration {k}: {reason}")
        if not per_broker:
            only = [k for k in props if _per_broker_only(k)]
            if only:
                raise ConfigRequestError(INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                          f"broker id must be specified: {_kafka_list(only)}")

    def incremental(self, per_broker: bool, ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
        """The layer after SET(0) / DELETE(1) / APPEND(2) / SUBTRACT(3) (Kafka's
        prepareIncrementalConfigs: list operations start from the layer's value, else the default)."""
        props = self.layer(per_broker)
        for name, op, value in ops:
            if op == 0:
                props[name] = value or ""
            elif op == 1:
                props.pop(name, None)
            elif op in (2, 3):
                if name not in KAFKA_BROKER_KEYS and name not in DEFAULTS:
                    raise ConfigRequestError(INVALID_CONFIG, f"Unknown config name: {name}")
                verb = "append" if op == 2 else "subtract"
                if config_type(name) != TYPE_LIST:
                    raise ConfigRequestError(INVALID_CONFIG,
                                             f"Config value {verb} is not allowed for config key: {name}")
                base = props.get(name, DEFAULTS.get(name, ""))
                old = [x for x in base.split(",") if x] if op == 2 else base.split(",")
                given = (value or "").split(",")
                new = old + [x for x in given if x not in old] if op == 2 else [x for x in old if x not in given]
                props[name] = ",".join(new)
            else:
                raise ConfigRequestError(INVALID_REQUEST, f"Unknown operations type {op}")
        return props

    def follow(self, default: Mapping[str, str], broker: Mapping[str, str]) -> None:
        """A cluster: the layers are now those of the metadata image (no file). Entries this broker
        cannot use are dropped with an error logged (as Kafka's DynamicBrokerConfig does); the
        listeners are told when something changed."""
        default = self._usable(dict(default), per_broker=False)
        broker = self._usable(dict(broker), per_broker=True)
        if default == self.cluster_default and broker == self.per_broker:
            return
        effective = self.effective_props(default, broker)
        try:
            self.config.reconfigure(effective)
        except ConfigError as exc:
            log.error("dynamic broker configs from the cluster metadata could not be applied, ignored: %s", exc)
            return
        self.cluster_default, self.per_broker = default, broker
        log.info("dynamic broker configs from the cluster metadata: default %s, broker %d %s",
                 dict(sorted(default.items())), self.node_id, dict(sorted(broker.items())))
        for listener in self._listeners:
            listener(self.config)

    def replace(self, per_broker: bool, props: Mapping[str, str], validate_only: bool = False) -> None:
        """Make `props` the whole layer: validate, persist, apply, notify."""
        props = dict(props)
        self.check(props, per_broker)
        default = self.cluster_default if per_broker else props
        broker = props if per_broker else self.per_broker
        effective = self.effective_props(default, broker)
        try:
            BrokerConfig(effective, warn_unknown=False)
        except ConfigError as exc:
            raise ConfigRequestError(INVALID_REQUEST, str(exc)) from None
        if validate_only:
            return
        self._save(default, broker)
        self.cluster_default, self.per_broker = dict(default), dict(broker)
        self.config.reconfigure(effective)
        log.info("dynamic broker config %s now %s", f"broker {self.node_id}" if per_broker else "default",
                 dict(sorted(props.items())))
        inert = sorted(k for k in props if k not in APPLIED)
        if inert:
            log.info("dynamic broker configs stored but not acted on by minikafka: %s", ", ".join(inert))
        for listener in self._listeners:
            listener(self.config)
