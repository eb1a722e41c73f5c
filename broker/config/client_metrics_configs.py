"""Client metrics subscriptions (KIP-714): CLIENT_METRICS config resources (ConfigResource type 16).

A subscription is a named config resource with three keys, as Kafka's ClientMetricsConfigs defines
them: `metrics` (a list of metric name prefixes, `*` for all), `interval.ms` (the push interval,
100..3600000, default 300000) and `match` (a list of `name=regex` client selectors over
client_instance_id, client_id, client_software_name, client_software_version, client_source_address,
client_source_port). A resource whose keys are all deleted is no subscription at all.

Kept as Kafka keeps them: in a cluster, changes go to the active controller (ConfigRecords of
resource type 16) and every node's store follows the metadata image (`follow`,
broker/cluster/security_sync.py); a single node keeps them in one JSON file in the first log dir,
replaced atomically before a change is acknowledged, so they survive restart.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Callable, Iterable, Mapping

import kafka.errors as ke

from minikafka.broker.config.dynamic import ConfigRequestError
from minikafka.broker.config.resource_configs import ResourceConfigStore

log = logging.getLogger(__name__)

CONFIG_FILE = "__minikafka_client_metrics.json"
INVALID_CONFIG = ke.InvalidConfigurationError.errno
INVALID_REQUEST = ke.InvalidRequestError.errno
SOURCE_CLIENT_METRICS = 7  # DescribeConfigs CLIENT_METRICS_CONFIG
SOURCE_DEFAULT = 5

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
KEYS = (METRICS, INTERVAL_MS, MATCH)
KEYS_SORTED = tuple(sorted(KEYS))
TYPE_INT, TYPE_LIST = 3, 7  # DescribeConfigs config types
TYPES = {METRICS: TYPE_LIST, INTERVAL_MS: TYPE_INT, MATCH: TYPE_LIST}
DOCS = {METRICS: "Telemetry metric name prefix list", INTERVAL_MS: "Metrics push interval in milliseconds",
        MATCH: "Client match criteria"}  # Kafka 4.3's ConfigDef documentation
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
DEFAULTS = {METRICS: "", INTERVAL_MS: str(DEFAULT_INTERVAL_MS), MATCH: ""}
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_PARAMS = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                          "client_source_address", "client_source_port"})


def parse_list(raw: str | None) -> list[str]:
    """ConfigDef LIST: comma-separated, items trimmed, an empty value is the empty list."""
    if raw is None or not raw.strip():
        return []
    return [item.strip() for item in raw.split(",")]


def parse_match(patterns: Iterable[str]) -> dict[str, re.Pattern]:
    """Kafka's ClientMetricsConfigs.parseMatchingPatterns: `name=regex` per item (split at '=' into
    exactly two parts), a known client attribute, a compilable regex; else INVALID_CONFIG."""
    out: dict[str, re.Pattern] = {}
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_PARAMS:
            raise ConfigRequestError(INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ConfigRequestError(INVALID_CONFIG, f"Illegal client matching pattern: {pattern}") from None
    return out


def validate(name: str, props: Mapping[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate: a name, only the three keys, interval.ms an INT within
    [100, 3600000], match patterns that parse."""
    if not name:
        raise ConfigRequestError(INVALID_REQUEST, "Subscription name can't be empty")
    for key in props:
        if key not in KEYS:
            raise ConfigRequestError(INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS in props:
        raw = props[INTERVAL_MS]
        try:
            interval = int(raw.strip())
            if not -2**31 <= interval < 2**31:
                raise ValueError
        except ValueError:
            raise ConfigRequestError(INVALID_CONFIG, f"Invalid value {raw} for configuration {INTERVAL_MS}: "
                                                     "Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ConfigRequestError(INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL_MS}, interval must "
                                                      "be between 100 and 3600000 (1 hour)")
    if MATCH in props:
        parse_match(parse_list(props[MATCH]))


class Subscription:
    """One subscription as the telemetry manager uses it (Kafka's SubscriptionInfo)."""
    __slots__ = ("name", "metrics", "interval_ms", "match")

    def __init__(self, name: str, props: Mapping[str, str]) -> None:
        self.name = name
        self.metrics = frozenset(parse_list(props.get(METRICS)))
        self.interval_ms = int(props[INTERVAL_MS]) if INTERVAL_MS in props else DEFAULT_INTERVAL_MS
        self.match = parse_match(parse_list(props.get(MATCH)))

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Every pattern matches its attribute in full (no pattern: every client)."""
        return all(attributes.get(k) is not None and p.fullmatch(attributes[k] or "") is not None
                   for k, p in self.match.items())


class ClientMetricsConfigStore(ResourceConfigStore):
    """Subscription name -> its configs (only the keys set), persisted; listeners hear of changes."""
    FILE, SECTION, WHAT = CONFIG_FILE, "subscriptions", "client metrics subscriptions"

    def __init__(self, config, data_dir: Path) -> None:
        super().__init__(config, data_dir)
        self._listeners: list[Callable[[], None]] = []

    @property
    def subscriptions(self) -> dict[str, dict[str, str]]:
        return self.resources

    def known(self, key: str) -> bool:
        return key in KEYS

    def _notify(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        for listener in self._listeners:
            listener()

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def active(self) -> list[Subscription]:
        """The subscriptions as the telemetry manager matches them (one unparseable stored entry is skipped)."""
        out = []
        for name, props in sorted(self.subscriptions.items()):
            try:
                out.append(Subscription(name, props))
            except (ConfigRequestError, ValueError) as exc:
                log.warning("client metrics subscription %s ignored: %s", name, exc)
        return out

    # -- describe -----------------------------------------------------------------------------
    def describe(self, name: str) -> list[tuple[str, str, int, int, list[tuple[str, str, int]]]]:
        """(name, value, source, config type, synonyms) of each key, as Kafka 4.3 shows them (an unknown
        subscription too): the value set (CLIENT_METRICS_CONFIG, itself its one synonym), else Kafka's
        default (DEFAULT_CONFIG, no synonym)."""
        if not name:
            raise ConfigRequestError(INVALID_REQUEST, "Client metrics subscription name must not be empty")
        own = self.subscriptions.get(name, {})
        out = []
        for key in KEYS_SORTED:
            if key in own:
                out.append((key, own[key], SOURCE_CLIENT_METRICS, TYPES[key], [(key, own[key], SOURCE_CLIENT_METRICS)]))
            else:
                out.append((key, DEFAULTS[key], SOURCE_DEFAULT, TYPES[key], []))
        return out

    # -- changes (SET / DELETE; APPEND / SUBTRACT are refused for every key, as Kafka 4.3's controller refuses
    # them: its config schema has no types for client metrics keys) ------------------------------
    def check(self, name: str, props: Mapping[str, str]) -> dict[str, str]:
        props = dict(props)
        validate(name, props)
        return props
