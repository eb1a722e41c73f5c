"""Broker configuration: Kafka key names, read from a properties file, env and --override.

Precedence (lowest first): built-in defaults < properties file < MINIKAFKA_* env < --override.
Env names map to keys by lower-casing and turning '_' into '.', e.g. MINIKAFKA_LOG_DIRS -> log.dirs.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
import re

from minikafka.storage.errors import InvalidConfigError
from minikafka.raft.config import QuorumConfig, parse_bootstrap_servers, parse_voters
from minikafka.storage.log_config import LogConfig

log = logging.getLogger(__name__)

# MINIKAFKA_* variables that are not config keys: the config file, the log level, and the `minikafka`
# executable that the testing API (minikafka/testing.py) starts brokers with
NOT_CONFIG_ENV = frozenset({"MINIKAFKA_CONFIG", "MINIKAFKA_LOG_LEVEL", "MINIKAFKA_EXECUTABLE"})

DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    # listener name -> security protocol; empty = Kafka's default map (each protocol names itself)
    "listener.security.protocol.map": "",
    "log.dirs": "./minikafka-data",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "cluster.id": "",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "fetch.max.bytes": "57671680",  # broker cap on a Fetch response's records (min with the request's)
    # connection layer (broker/network/connection.py); Kafka's keys and defaults, except that Kafka's
    # queued.max.request.bytes default (-1, unbounded) is a finite budget here
    "queued.max.request.bytes": "134217728",
    # KIP-714: the largest PushTelemetry payload accepted (TELEMETRY_TOO_LARGE past it); Kafka's default
    "telemetry.max.bytes": "1048576",
    "max.connections": "2147483647",
    "max.connection.creation.rate": "2147483647",
    "max.connections.per.ip": "2147483647",
    "max.connections.per.ip.overrides": "",  # host:count,... (Kafka's per-IP/host exceptions)
    "connections.max.idle.ms": "600000",
    # SASL (broker/security/sasl/settings.py): per-listener overrides listener.name.<l>.sasl.enabled.mechanisms,
    # listener.name.<l>.<mechanism>.sasl.jaas.config, listener.name.<l>.<mechanism>.connections.max.reauth.ms
    "sasl.enabled.mechanisms": "GSSAPI",
    "sasl.jaas.config": "",
    "connections.max.reauth.ms": "0",
    "connection.failed.authentication.delay.ms": "100",
    "sasl.server.max.receive.size": "524288",
    # SASL/OAUTHBEARER's JWKS validator (KIP-768, broker/security/sasl/oauthbearer.py), selected by
    # listener.name.<l>.oauthbearer.sasl.server.callback.handler.class; Kafka's defaults
    "sasl.oauthbearer.jwks.endpoint.url": "",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10000",
    "sasl.oauthbearer.expected.audience": "",
    "sasl.oauthbearer.expected.issuer": "",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
    # minikafka: a request frame must be complete this long after its first byte, else the
    # connection is closed and the frame's memory returned (slowloris bound)
    "minikafka.request.read.timeout.ms": "30000",
    "log.segment.bytes": "1073741824",
    "log.roll.ms": "",
    "log.roll.hours": "168",
    "log.roll.jitter.ms": "",
    "log.roll.jitter.hours": "0",
    "log.retention.ms": "",
    "log.retention.minutes": "",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.index.interval.bytes": "4096",
    "log.flush.interval.messages": str(2**63 - 1),
    "log.flush.interval.ms": "",
    "log.cleanup.policy": "delete",
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": str(2**63 - 1),
    "log.message.timestamp.after.max.ms": "3600000",
    # minikafka's own bound (Kafka has none): a client batch may inflate to at most this many bytes
    "minikafka.max.uncompressed.batch.bytes": str(64 * 1024 * 1024),
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.segment.bytes": "104857600",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "transaction.partition.verification.enable": "true",
    # the share coordinator (KIP-932, coordinator/share/config.py): `__share_group_state`; its replication
    # factor and min.isr are 1 on a single node, Kafka's 3 and 2 on a cluster unless configured
    "share.coordinator.state.topic.num.partitions": "50",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.segment.bytes": "104857600",
    "share.coordinator.snapshot.update.records.per.snapshot": "500",
    "share.coordinator.write.timeout.ms": "5000",
    # Test-only fault injection: the broker os._exit(137)s at this step of EndTxn
    # (after_prepare_commit | after_prepare_abort | after_markers | after_first_marker); never set in production.
    "minikafka.test.crash.point": "",
    # partitions one CreateTopics/CreatePartitions may create (Kafka 4.3's controller: 10000, no key),
    # and partitions this broker may hold (empty: what the open-files limit allows, 4 fds a partition)
    "minikafka.max.partitions.per.request": "10000",
    "minikafka.max.partitions": "",
    # partition logs open on first use; with this, the rest are also opened one by one in the
    # background after start (so that retention and compaction cover them without waiting for a client)
    "minikafka.log.open.background": "true",
    # HTTP admin listener (broker/ops/admin_http.py: /metrics, /health/live, /health/ready), off when empty;
    # e.g. http://127.0.0.1:9644
    "minikafka.metrics.listener": "",
    # the built-in Confluent-compatible Schema Registry (schema_registry/), off when empty; e.g. http://127.0.0.1:8081
    "schema.registry.listener": "",
    # its HTTP authentication, NONE or BASIC (the broker's SASL users); empty: BASIC when a listener uses SASL
    "schema.registry.authentication.method": "",
    # fault injection for client tests (broker/ops/faults.py, rules via /faults on the admin listener); off by default
    "minikafka.faults.enable": "false",
    # log lines: text (default) or json (one object per line; broker/ops/log_format.py)
    "minikafka.log.format": "text",
    # at most one progress line per this interval while partition logs are opened after start
    "minikafka.log.recovery.progress.interval.ms": "5000",
    # Test-only: sleep this long before opening each background batch of partition logs (slow recovery)
    "minikafka.test.log.open.delay.ms": "0",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": str(2**31 - 1),
    # KIP-848 consumer groups (coordinator/group/consumer/config.py)
    "group.coordinator.rebalance.protocols": "classic,consumer,streams",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.UniformAssignor,"
                                "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
    "group.consumer.max.size": str(2**31 - 1),
    "group.consumer.migration.policy": "bidirectional",
    "group.consumer.assignment.interval.ms": "1000",
    "group.consumer.regex.refresh.interval.ms": "10000",
    # KIP-932 share groups (coordinator/group/share/config.py: Kafka 4.3.1's defaults and bounds)
    "group.share.session.timeout.ms": "45000",
    "group.share.min.session.timeout.ms": "45000",
    "group.share.max.session.timeout.ms": "60000",
    "group.share.heartbeat.interval.ms": "5000",
    "group.share.min.heartbeat.interval.ms": "5000",
    "group.share.max.heartbeat.interval.ms": "15000",
    "group.share.record.lock.duration.ms": "30000",
    "group.share.min.record.lock.duration.ms": "15000",
    "group.share.max.record.lock.duration.ms": "60000",
    "group.share.delivery.count.limit": "5",
    "group.share.min.delivery.count.limit": "2",
    "group.share.max.delivery.count.limit": "10",
    "group.share.partition.max.record.locks": "2000",
    "group.share.min.partition.max.record.locks": "100",
    "group.share.max.partition.max.record.locks": "4000",
    "group.share.assignment.interval.ms": "1000",
    "group.share.min.assignment.interval.ms": "0",
    "group.share.max.assignment.interval.ms": "15000",
    "group.share.max.size": "200",
    "group.share.max.share.sessions": "2000",
    # KIP-1071 streams groups (coordinator/group/streams/config.py)
    "group.streams.heartbeat.interval.ms": "5000",
    "group.streams.min.heartbeat.interval.ms": "5000",
    "group.streams.max.heartbeat.interval.ms": "15000",
    "group.streams.session.timeout.ms": "45000",
    "group.streams.min.session.timeout.ms": "45000",
    "group.streams.max.session.timeout.ms": "60000",
    "group.streams.max.size": str(2**31 - 1),
    "group.streams.num.standby.replicas": "0",
    "group.streams.max.standby.replicas": "2",
    "group.streams.initial.rebalance.delay.ms": "3000",
    "group.streams.assignment.interval.ms": "1000",
    "group.streams.min.assignment.interval.ms": "0",
    "group.streams.max.assignment.interval.ms": "15000",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.commit.timeout.ms": "5000",
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.max.compaction.lag.ms": str(2**63 - 1),
    "log.segment.delete.delay.ms": "60000",
    # topic defaults (topic: compression.type and its levels, min.insync.replicas, segment.index.bytes,
    # preallocate, unclean.leader.election.enable); min.insync.replicas and unclean.leader.election.enable
    # act on a cluster only; log.preallocate can only be false
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "min.insync.replicas": "1",
    "log.index.size.max.bytes": "10485760",
    "log.preallocate": "false",
    "unclean.leader.election.enable": "false",
    "log.cleaner.threads": "1",
    "producer.id.expiration.ms": "86400000",
    # replication (multi-node cluster only, broker/replication/)
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.backoff.ms": "1000",
    "replica.socket.timeout.ms": "30000",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    # a TLS handshake (SSL/SASL_SSL listeners) must finish this long after the TCP accept, else closed
    "minikafka.ssl.handshake.timeout.ms": "10000",
    # authorization (broker/security/authorizer.py): empty = no authorizer, everything allowed (Kafka's default);
    # org.apache.kafka.metadata.authorizer.StandardAuthorizer = ACLs (CreateAcls/DescribeAcls/DeleteAcls)
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
    # delegation tokens (KIP-48; broker/security/delegation_tokens.py): enabled when the secret key is set
    "delegation.token.secret.key": "",
    "delegation.token.max.lifetime.ms": "604800000",
    "delegation.token.expiry.time.ms": "86400000",
    "delegation.token.expiry.check.interval.ms": "3600000",
    # KRaft combined mode (issue 16; raft/): a metadata quorum among the voters when
    # controller.quorum.voters names more than this node; otherwise a single node, as without these keys
    "process.roles": "",
    "controller.quorum.voters": "",
    "controller.quorum.bootstrap.servers": "",
    "controller.listener.names": "",
    "controller.quorum.fetch.timeout.ms": "2000",
    "metadata.log.max.record.bytes.between.snapshots": "20971520",
    "metadata.log.max.snapshot.interval.ms": "3600000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "1000",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.retry.backoff.ms": "20",
    # a cluster's brokers (issue 16, broker/cluster/): heartbeats to the active controller, which fences
    # a broker whose last heartbeat is older than the session timeout
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
}

# Kafka's ssl.* broker keys and defaults ("" is Kafka's null); per listener they can be given with the
# listener.name.<lowercase name>. prefix (broker/security/tls.py resolves them and builds the TLS context)
SSL_DEFAULTS: dict[str, str] = {
    "ssl.protocol": "TLSv1.3",
    "ssl.provider": "",
    "ssl.cipher.suites": "",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.keystore.key": "",
    "ssl.keystore.certificate.chain": "",
    "ssl.key.password": "",
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "ssl.truststore.certificates": "",
    "ssl.keymanager.algorithm": "SunX509",
    "ssl.trustmanager.algorithm": "PKIX",
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.secure.random.implementation": "",
    "ssl.engine.factory.class": "",
    "ssl.client.auth": "none",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.allow.dn.changes": "false",
    "ssl.allow.san.changes": "false",
}
DEFAULTS.update(SSL_DEFAULTS)

# Keys Kafka knows that are meaningless for a single embedded node; accepted silently.
IGNORED_KAFKA_KEYS = frozenset({
    "inter.broker.listener.name", "security.inter.broker.protocol",  # used by broker/security/peer_security.py
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "broker.id", "zookeeper.connect", "log.dir",
    "broker.rack", "sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol",
    # accepted at the values UNSUPPORTED_VALUES allows (others are refused)
    "principal.builder.class", "cordoned.log.dirs", "metric.reporters",
    "config.providers",
})


class ConfigError(ValueError):
    """A configuration value cannot be used."""


# Kafka broker keys whose other values ask for something minikafka does not do: refused at start-up and as a
# dynamic change (rather than accepted and ignored). key -> (the values that are fine, why others are not)
UNSUPPORTED_VALUES: dict[str, tuple[frozenset[str], str]] = {
    "principal.builder.class": (frozenset({"org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"}),
                                "principal builders are Java classes; minikafka builds principals as Kafka's default "
                                "builder does (ssl.principal.mapping.rules, sasl.kerberos.principal.to.local.rules)"),
    "metric.reporters": (frozenset({"org.apache.kafka.common.metrics.JmxReporter"}),
                         "metric reporters are Java classes; minikafka exports Prometheus metrics "
                         "(minikafka.metrics.listener)"),
    "config.providers": (frozenset(), "config providers are Java classes"),
}


def parse_connection_creation_rates(props: dict[str, str], broker_wide: str) -> tuple[int, dict[str, int]]:
    """KIP-612's `max.connection.creation.rate` (broker-wide) and its `listener.name.<l>.` overrides
    (listener names upper case). Kafka: an INT, at least 0."""
    def rate(key: str, value: str) -> int:
        try:
            n = int(value.strip())
        except ValueError:
            raise ConfigError(f"{key} must be an integer, got {value!r}") from None
        if not 0 <= n <= 2**31 - 1:
            raise ConfigError(f"{key} must be between 0 and 2147483647, got {n}")
        return n
    per_listener = {m.group(1).upper(): rate(k, v) for k, v in props.items()
                    if (m := re.match(r"^listener\.name\.([^.]+)\.max\.connection\.creation\.rate$", k))}
    return rate("max.connection.creation.rate", broker_wide), per_listener


def parse_cordoned_log_dirs(value: str, log_dirs: str) -> frozenset[Path]:
    """Kafka's cordoned.log.dirs (KIP-1066): the log dirs that get no new partitions, `*` for all of them;
    each entry must be one of log.dirs (Kafka's checks and messages)."""
    dirs = [d.strip() for d in log_dirs.split(",") if d.strip()]
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if "*" in entries:
        if len(entries) > 1:
            raise ConfigError("requirement failed: When cordoned.log.dirs is set to *, it must not contain other values")
        entries = dirs
    missing = [e for e in entries if e not in dirs]
    if missing:
        raise ConfigError("requirement failed: All entries in cordoned.log.dirs must be present in log.dirs or "
                          f"log.dir. Missing entries : {','.join(missing)}")
    return frozenset(Path(e).expanduser() for e in entries)


def parse_ip_overrides(spec: str) -> dict[str, int]:
    """Kafka's max.connections.per.ip.overrides (`host:count,...`; a host name is resolved now, as Kafka's
    InetAddress.getByName): IP (normalized) -> its connection limit."""
    import ipaddress
    out: dict[str, int] = {}
    for item in (x.strip() for x in spec.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            limit = int(count)
            if not sep or not host or limit < 0:
                raise ValueError
        except ValueError:
            raise ConfigError(f"Invalid value {spec} for configuration max.connections.per.ip.overrides: "
                              f"entries must be host:count with a count of at least 0") from None
        host = host.strip().strip("[]")
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            import socket
            try:
                ip = ipaddress.ip_address(socket.gethostbyname(host))
            except OSError as exc:
                raise ConfigError(f"max.connections.per.ip.overrides: cannot resolve {host}: {exc}") from None
        out[ip.compressed] = limit
    return out


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
TLS_SECURITY_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})  # listeners that get a TLS context (broker/security/tls.py)
_LISTENER_KEY = re.compile(r"^listener\.name\.[^.]+\.(.+)$")


def _is_sasl_key(key: str) -> bool:
    if not key.startswith("listener.name.") or ".sasl." not in key and not key.endswith(".connections.max.reauth.ms"):
        return False
    from minikafka.broker.security.sasl.settings import is_sasl_key
    return is_sasl_key(key)


def is_known_key(key: str) -> bool:
    """A key of DEFAULTS, or one of them with Kafka's per-listener prefix `listener.name.<name>.`."""
    if key in DEFAULTS:
        return True
    m = _LISTENER_KEY.match(key)
    return m is not None and m.group(1) in DEFAULTS


def parse_security_protocol_map(spec: str) -> dict[str, str]:
    """Kafka's `listener.security.protocol.map` (NAME:PROTOCOL,...); empty means each security
    protocol is also a listener name of that protocol (Kafka's default)."""
    if not spec.strip():
        return {p: p for p in SECURITY_PROTOCOLS}
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name:
            raise ConfigError(f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL")
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: unknown security protocol {proto!r} "
                              f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        out[name] = proto
    return out


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, '#'/'!' comments, trailing-backslash continuation."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1:].strip()
                break
        else:
            props[line] = ""
    return props


_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


def parse_listeners(spec: str) -> list[Listener]:
    """Kafka's NAME://host:port list; NAME may contain '_' (PLAINTEXT_HOST), host may be empty or [v6]."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        m = _LISTENER.match(item)
        if m is None or int(m.group(3)) > 65535:
            raise ConfigError(f"listener {item!r} is not NAME://host:port")
        out.append(Listener(m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))))
    if not out:
        raise ConfigError("no listeners configured")
    return out


def _quorum_config(cfg: "BrokerConfig") -> QuorumConfig | None:
    """None (a single node, as before issue 16) unless controller.quorum.voters names other nodes;
    then a KRaft node — combined (broker,controller: a voter), broker only (an observer of the quorum,
    not in the voters) or controller only (a voter with no broker listener) — with Kafka's KafkaConfig
    checks where they apply."""
    roles = {r.strip() for r in cfg.get("process.roles").split(",") if r.strip()}
    if roles - {"broker", "controller"}:
        raise ConfigError(f"process.roles: unknown role(s) {sorted(roles - {'broker', 'controller'})}")
    voters = parse_voters(cfg.get("controller.quorum.voters"))
    names = tuple(n.strip().upper() for n in cfg.get("controller.listener.names").split(",") if n.strip())
    # KIP-853: bootstrap servers without voters — a dynamic quorum whose voter set is in the log
    bootstrap = () if voters else parse_bootstrap_servers(cfg.get("controller.quorum.bootstrap.servers"))
    if set(voters) <= {cfg.node_id} and not bootstrap and roles != {"controller"}:
        return None  # (a lone controller-only voter is a quorum of one: its brokers are other nodes)
    if roles == {"broker"}:  # Kafka's checks for a broker-only node
        if cfg.node_id in voters:
            raise ConfigError(f"If process.roles contains just the 'broker' role, the node id {cfg.node_id} must "
                              f"not be included in the set of voters controller.quorum.voters={set(voters)}")
        if not names:
            raise ConfigError("controller.listener.names must contain at least one value when running in KRaft "
                              "mode")
        if any(l.name in names for l in cfg.listeners):
            raise ConfigError("controller.listener.names must not contain a value appearing in the 'listeners' "
                              "configuration when running KRaft with just the broker role")
    elif roles == {"controller"}:  # a controller-only node: a voter serving only the quorum's listener(s)
        if cfg.node_id not in voters and not bootstrap:
            raise ConfigError(f"If process.roles contains the 'controller' role, the node id {cfg.node_id} must "
                              f"be included in the set of voters controller.quorum.voters={set(voters)}")
        if not names:
            raise ConfigError("controller.listener.names must be set when process.roles contains controller")
        if names[0] not in {l.name for l in cfg.listeners}:
            raise ConfigError(f"controller.listener.names: {names[0]} is not a listener in listeners")
        if any(l.name not in names for l in cfg.listeners):
            raise ConfigError("The listeners config must only contain KRaft controller listeners from "
                              "controller.listener.names when process.roles=controller")
    else:
        if cfg.node_id not in voters and not bootstrap:
            raise ConfigError(f"If process.roles contains the 'controller' role, the node id {cfg.node_id} must "
                              f"be included in the set of voters controller.quorum.voters={set(voters)}")
        if not names:
            raise ConfigError("controller.listener.names must be set when process.roles contains controller")
        if names[0] not in {l.name for l in cfg.listeners}:
            raise ConfigError(f"controller.listener.names: {names[0]} is not a listener in listeners")
    if "broker" in roles and all(l.name in names for l in cfg.listeners):
        raise ConfigError("listeners must contain at least one listener that is not in controller.listener.names")
    timeouts = [int(cfg.get(f"controller.quorum.{k}")) for k in ("fetch.timeout.ms", "election.timeout.ms",
                                                                   "election.backoff.max.ms", "request.timeout.ms",
                                                                   "retry.backoff.ms")]
    if min(timeouts[:2] + timeouts[3:4]) <= 0 or min(timeouts) < 0:
        raise ConfigError("controller.quorum timeouts must be positive")
    return QuorumConfig(voters, names, *timeouts,
                        snapshot_max_bytes=int(cfg.get("metadata.log.max.record.bytes.between.snapshots")),
                        snapshot_interval_ms=int(cfg.get("metadata.log.max.snapshot.interval.ms")),
                        roles=frozenset(roles), bootstrap_servers=bootstrap)


class BrokerConfig:
    """Resolved broker configuration; `props` holds the effective string values by Kafka key.

    `static_props` are the values given at start (file, env, --override): Kafka's
    STATIC_BROKER_CONFIG layer. Dynamic broker configs (broker/config/dynamic.py) are laid over them
    by `reconfigure`, which replaces `props` and every attribute derived from it in place, so that
    code reading `config.<attr>` or `config.get(key)` when it acts sees the current value.
    """

    def __init__(self, props: Mapping[str, str], *, warn_unknown: bool = True):
        self.static_props: dict[str, str] = dict(props)
        self.props: dict[str, str] = dict(DEFAULTS)
        for key, value in props.items():
            if warn_unknown and not is_known_key(key) and key not in IGNORED_KAFKA_KEYS and not _is_sasl_key(key):
                log.warning("unknown config key %r ignored", key)
            self.props[key] = value
        try:
            self.node_id = int(self.get("node.id"))
            self.listeners = parse_listeners(self.get("listeners"))
            self.advertised_listeners = parse_listeners(self.get("advertised.listeners") or self.get("listeners"))
            self.log_dirs = [Path(p).expanduser() for p in self.get("log.dirs").split(",") if p.strip()]
            self.num_partitions = int(self.get("num.partitions"))
            self.default_replication_factor = int(self.get("default.replication.factor"))
            self.auto_create_topics = self.get_bool("auto.create.topics.enable")
            self.delete_topic_enable = self.get_bool("delete.topic.enable")
            self.socket_request_max_bytes = int(self.get("socket.request.max.bytes"))
            self.fetch_max_bytes = int(self.get("fetch.max.bytes"))
            if self.fetch_max_bytes < 1024:  # Kafka: atLeast(1024)
                raise ConfigError(f"fetch.max.bytes must be at least 1024, got {self.fetch_max_bytes}")
            self.queued_max_request_bytes = int(self.get("queued.max.request.bytes"))
            self.telemetry_max_bytes = int(self.get("telemetry.max.bytes"))
            if self.telemetry_max_bytes < 1:  # Kafka: atLeast(1)
                raise ConfigError(f"telemetry.max.bytes must be at least 1, got {self.telemetry_max_bytes}")
            self.max_connections = int(self.get("max.connections"))
            self.max_connection_creation_rate, self.listener_connection_creation_rates = \
                parse_connection_creation_rates(self.props, self.get("max.connection.creation.rate"))
            self.max_connections_per_ip = int(self.get("max.connections.per.ip"))
            self.max_connections_per_ip_overrides = parse_ip_overrides(self.get("max.connections.per.ip.overrides"))
            for key, (allowed, reason) in UNSUPPORTED_VALUES.items():
                value = self.get(key).strip() if key in self.props else ""
                if value and value not in allowed:
                    raise ConfigError(f"{key}={value} is not supported: {reason}")
            self.connections_max_idle_ms = int(self.get("connections.max.idle.ms"))
            self.request_read_timeout_ms = int(self.get("minikafka.request.read.timeout.ms"))
            self.ssl_handshake_timeout_ms = int(self.get("minikafka.ssl.handshake.timeout.ms"))
            if self.ssl_handshake_timeout_ms <= 0:
                raise ConfigError("minikafka.ssl.handshake.timeout.ms must be positive")
            self.retention_check_interval_ms = int(self.get("log.retention.check.interval.ms"))
            self.offsets_topic_partitions = int(self.get("offsets.topic.num.partitions"))
            self.txn_state_partitions = int(self.get("transaction.state.log.num.partitions"))
            if any(v != DEFAULTS.get(k) for k, v in self.props.items() if k.startswith("share.coordinator.")):
                from minikafka.coordinator.share.config import ShareCoordinatorConfig  # Kafka's ranges
                ShareCoordinatorConfig.from_props(self.get)
            if any(v != DEFAULTS.get(k) for k, v in self.props.items() if k.startswith("group.share.")):
                from minikafka.coordinator.group.share import config as share_config  # Kafka's bounds
                share_config.check(self.get)
            if any(v != DEFAULTS.get(k) for k, v in self.props.items() if k.startswith("group.streams.")):
                from minikafka.coordinator.group.streams.config import StreamsGroupSettings  # Kafka's bounds
                StreamsGroupSettings.from_props(self.get)
            if any(v != DEFAULTS.get(k) for k, v in self.props.items() if k.startswith("group.consumer.")):
                # refuse bad consumer-group settings at start-up (the defaults are valid: no import for them)
                from minikafka.coordinator.group.consumer.config import ConsumerGroupSettings
                ConsumerGroupSettings.from_props(self.get)
            self.log_config = self._log_config()
            self.quorum = _quorum_config(self)
            self.controller_listener_names = self.quorum.controller_listener_names if self.quorum else ()
            self.cordoned_log_dirs = parse_cordoned_log_dirs(self.get("cordoned.log.dirs"), self.get("log.dirs"))
            if self.quorum is not None and not self.get("advertised.listeners"):
                # Kafka: the controller listener is not advertised to clients
                self.advertised_listeners = [l for l in self.advertised_listeners
                                             if l.name not in self.controller_listener_names]
        except (ValueError, InvalidConfigError) as exc:
            raise ConfigError(str(exc)) from exc
        names = {l.name for l in self.listeners}
        protocol_map = parse_security_protocol_map(self.get("listener.security.protocol.map"))
        self.security_protocols: dict[str, str] = {}
        for listener in self.listeners:
            if listener.name not in protocol_map:
                raise ConfigError(f"listener {listener.name} has no security protocol: add it to "
                                  "listener.security.protocol.map")
            self.security_protocols[listener.name] = protocol_map[listener.name]
            if protocol_map[listener.name] not in SUPPORTED_SECURITY_PROTOCOLS:
                raise ConfigError(f"listener {listener.name}: security protocol {protocol_map[listener.name]} "
                                  "is not supported yet")
        self.sasl: dict = {}  # listener name -> broker/sasl/settings.ListenerSasl, SASL listeners only
        if any(p.startswith("SASL_") for p in self.security_protocols.values()) or self.get("sasl.jaas.config"):
            from minikafka.broker.security.sasl.settings import SaslConfigError, sasl_settings
            try:
                self.sasl = sasl_settings(self.security_protocols, self.get, self.props)
            except SaslConfigError as exc:
                raise ConfigError(str(exc)) from None
        for adv in self.advertised_listeners:
            if adv.name not in names:
                raise ConfigError(f"advertised listener {adv.name} has no matching entry in listeners")
            if adv.host in ("0.0.0.0", "::"):
                raise ConfigError(f"advertised.listeners cannot use the nonroutable meta-address {adv.host}; "
                                  "set advertised.listeners")
        if not self.log_dirs:
            raise ConfigError("log.dirs is empty")
        if self.get("minikafka.metrics.listener").strip():
            from minikafka.broker.ops.admin_http import ListenerError, parse_listener
            try:
                parse_listener(self.get("minikafka.metrics.listener"))
            except ListenerError as exc:
                raise ConfigError(str(exc)) from None
        if self.get("schema.registry.listener").strip():
            from minikafka.schema_registry.listener import ListenerError as RegistryListenerError
            from minikafka.schema_registry.listener import parse_listener as parse_registry_listener
            try:
                parse_registry_listener(self.get("schema.registry.listener"))
            except RegistryListenerError as exc:
                raise ConfigError(str(exc)) from None
            from minikafka.schema_registry.auth import KEY as REGISTRY_AUTH_KEY, resolve_method
            try:
                resolve_method(self.get(REGISTRY_AUTH_KEY), bool(self.sasl))
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        if self.get("minikafka.faults.enable").strip().lower() not in ("true", "false"):
            raise ConfigError(f"minikafka.faults.enable must be true or false, got {self.get('minikafka.faults.enable')!r}")
        from minikafka.broker.security.authorizer import SUPPORTED_AUTHORIZERS
        if self.get("authorizer.class.name").strip() not in SUPPORTED_AUTHORIZERS:
            raise ConfigError(f"authorizer.class.name {self.get('authorizer.class.name')!r} is not supported "
                              "(org.apache.kafka.metadata.authorizer.StandardAuthorizer or empty)")
        self.get_bool("allow.everyone.if.no.acl.found")
        if self.get("minikafka.log.format") not in ("text", "json"):
            raise ConfigError(f"minikafka.log.format must be text or json, got {self.get('minikafka.log.format')!r}")

    def get(self, key: str) -> str:
        return self.props.get(key, "")

    @property
    def all_log_dirs_cordoned(self) -> bool:
        """Every log dir is cordoned (KIP-1066): this broker takes no new partition."""
        return bool(self.log_dirs) and set(self.log_dirs) <= self.cordoned_log_dirs

    def reconfigure(self, effective: Mapping[str, str]) -> None:
        """Take `effective` (static props with the dynamic layers applied) as the current config.
        Validated completely before anything changes: raises ConfigError and leaves `self` as it
        was. Only dynamic keys differ from the static props (broker/config/dynamic.py refuses the
        others), so listeners, node id and log dirs never change here."""
        candidate = BrokerConfig(effective, warn_unknown=False)
        static = self.static_props
        self.__dict__.update(candidate.__dict__)
        self.static_props = static

    def get_bool(self, key: str) -> bool:
        value = self.get(key).lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value == "true"

    def _first(self, *candidates: tuple[str, int]) -> str:
        """Kafka's ms > minutes > hours precedence for time keys."""
        for key, scale in candidates:
            value = self.get(key)
            if value:
                return str(int(value) * scale)
        raise ConfigError(f"none of {[k for k, _ in candidates]} set")

    def _log_config(self) -> LogConfig:
        topic_props = {
            "segment.bytes": self.get("log.segment.bytes"),
            "segment.ms": self._first(("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
            "segment.jitter.ms": self._first(("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
            "retention.ms": self._retention_ms(),
            "retention.bytes": self.get("log.retention.bytes"),
            "max.message.bytes": self.get("message.max.bytes"),
            "index.interval.bytes": self.get("log.index.interval.bytes"),
            "flush.messages": self.get("log.flush.interval.messages"),
            "cleanup.policy": self.get("log.cleanup.policy"),
            "delete.retention.ms": self.get("log.cleaner.delete.retention.ms"),
            "min.cleanable.dirty.ratio": self.get("log.cleaner.min.cleanable.ratio"),
            "min.compaction.lag.ms": self.get("log.cleaner.min.compaction.lag.ms"),
            "max.compaction.lag.ms": self.get("log.cleaner.max.compaction.lag.ms"),
            "file.delete.delay.ms": self.get("log.segment.delete.delay.ms"),
            "compression.type": self.get("compression.type"),
            "compression.gzip.level": self.get("compression.gzip.level"),
            "compression.lz4.level": self.get("compression.lz4.level"),
            "compression.zstd.level": self.get("compression.zstd.level"),
            "min.insync.replicas": self.get("min.insync.replicas"),
            "segment.index.bytes": self.get("log.index.size.max.bytes"),
            "preallocate": self.get("log.preallocate"),
            "unclean.leader.election.enable": self.get("unclean.leader.election.enable"),
            "message.timestamp.type": self.get("log.message.timestamp.type"),
            "message.timestamp.before.max.ms": self.get("log.message.timestamp.before.max.ms"),
            "message.timestamp.after.max.ms": self.get("log.message.timestamp.after.max.ms"),
        }
        if self.get("log.flush.interval.ms"):
            topic_props["flush.ms"] = self.get("log.flush.interval.ms")
        base = LogConfig(producer_id_expiration_ms=int(self.get("producer.id.expiration.ms")),
                         max_uncompressed_batch_bytes=int(self.get("minikafka.max.uncompressed.batch.bytes")))
        return LogConfig.from_props(topic_props, base)

    def _retention_ms(self) -> str:
        value = self._first(("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                            ("log.retention.hours", 3_600_000))
        return "-1" if int(value) < 0 else value

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, overrides: Mapping[str, str] | None = None,
             environ: Mapping[str, str] | None = None) -> "BrokerConfig":
        props: dict[str, str] = {}
        if path is not None:
            props.update(parse_properties(Path(path).read_text()))
        env = os.environ if environ is None else environ
        for name, value in env.items():
            if name.startswith("MINIKAFKA_") and name not in NOT_CONFIG_ENV:
                props[name[len("MINIKAFKA_"):].lower().replace("_", ".")] = value
        props.update(overrides or {})
        return cls(props)
