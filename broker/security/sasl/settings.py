"""Per-listener SASL settings from Kafka's config keys, resolved as Kafka resolves them:

- `sasl.enabled.mechanisms` (Kafka's default GSSAPI), overridden per listener by
  `listener.name.<listener>.sasl.enabled.mechanisms`; minikafka serves PLAIN, SCRAM-SHA-256 and
  SCRAM-SHA-512 and refuses start-up with any other mechanism enabled on a SASL listener.
- the JAAS config of a mechanism on a listener: `listener.name.<listener>.<mechanism>.sasl.jaas.config`
  (mechanism lower-cased), required for every enabled mechanism, as Kafka refuses to start without
  one. As on a Kafka broker, an unprefixed `sasl.jaas.config` is ignored with a warning (Kafka then
  falls back to a static JAAS file, which minikafka does not read). PLAIN's users are the
  `user_<name>="<password>"` options of its PlainLoginModule entry; SCRAM's entry
  (ScramLoginModule) has no options the broker uses.
- `connections.max.reauth.ms` (KIP-368; 0 = no re-authentication, sessions never expire), overridden
  by `listener.name.<listener>.<mechanism>.connections.max.reauth.ms`.
- `connection.failed.authentication.delay.ms` (answer to a failed authentication, then close, after this
  delay) and `sasl.server.max.receive.size` (largest frame accepted before authentication).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Mapping

from minikafka.broker.security.sasl.jaas import JaasConfigError, PLAIN_LOGIN_MODULE, parse_jaas_config, plain_users

log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class SaslConfigError(ValueError):
    """The SASL configuration of a listener cannot be used."""


@dataclass(frozen=True)
class ListenerSasl:
    """What the authenticator of one SASL listener's connections needs."""
    listener: str
    mechanisms: tuple[str, ...]  # in configured order
    plain_users: Mapping[str, str] = field(default_factory=dict)
    reauth_ms: Mapping[str, int] = field(default_factory=dict)  # mechanism -> connections.max.reauth.ms
    failed_auth_delay_ms: int = 100
    max_receive_size: int = 524288

    @property
    def handshake_mechanisms(self) -> list[str]:
        """The list SaslHandshake answers: Kafka builds it from a java.util.HashMap keyed by
        mechanism, so it comes in HashMap iteration order (e.g. PLAIN, SCRAM-SHA-512, SCRAM-SHA-256
        for `PLAIN,SCRAM-SHA-256,SCRAM-SHA-512`), which clients may show."""
        return java_hashmap_order(self.mechanisms)


def java_hashmap_order(keys: tuple[str, ...] | list[str]) -> list[str]:
    """Iteration order of a java.util.HashMap<String, ?> filled with `keys` in order (default
    capacity 16, doubling past 3/4 full): by bucket (spread hashCode & (capacity - 1)), then by
    insertion within a bucket (no treeified bins at these sizes)."""
    from minikafka.coordinator.partitioning import java_string_hash
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(dict.fromkeys(keys)))]


def _split(value: str) -> tuple[str, ...]:
    return tuple(m.strip() for m in value.split(",") if m.strip())


def listener_sasl(listener: str, get: Callable[[str], str], props: Mapping[str, str]) -> ListenerSasl:
    """The SASL settings of `listener` (a SASL_PLAINTEXT or SASL_SSL listener); SaslConfigError if unusable."""
    prefix = f"listener.name.{listener.lower()}."
    mechanisms = _split(props.get(prefix + "sasl.enabled.mechanisms") or get("sasl.enabled.mechanisms"))
    if not mechanisms:
        raise SaslConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise SaslConfigError(f"listener {listener}: SASL mechanism {', '.join(unsupported)} is not supported "
                              f"(supported: {', '.join(SUPPORTED_MECHANISMS)}); set sasl.enabled.mechanisms "
                              f"(Kafka's default is GSSAPI)")
    users: dict[str, str] = {}
    reauth: dict[str, int] = {}
    for mech in mechanisms:
        jaas_key = f"{prefix}{mech.lower()}.sasl.jaas.config"
        jaas = props.get(jaas_key, "")
        if jaas.strip():
            try:
                entries = parse_jaas_config(jaas)
            except JaasConfigError as exc:
                raise SaslConfigError(f"{jaas_key}: {exc}") from None
            if mech == "PLAIN":
                users = plain_users(entries)
                if not any(e.login_module == PLAIN_LOGIN_MODULE for e in entries):
                    raise SaslConfigError(f"{jaas_key}: no {PLAIN_LOGIN_MODULE} entry")
        else:  # Kafka's start-up error, and the key that would fix it
            raise SaslConfigError(f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry in the "
                                  f"JAAS configuration: set {jaas_key}")
        value = props.get(f"{prefix}{mech.lower()}.connections.max.reauth.ms") or get("connections.max.reauth.ms")
        try:
            reauth[mech] = int(value or "0")
        except ValueError:
            raise SaslConfigError(f"connections.max.reauth.ms must be an integer, got {value!r}") from None
    try:
        delay = int(get("connection.failed.authentication.delay.ms"))
        max_receive = int(get("sasl.server.max.receive.size"))
    except ValueError as exc:
        raise SaslConfigError(str(exc)) from None
    if delay < 0:
        raise SaslConfigError("connection.failed.authentication.delay.ms must be >= 0")
    return ListenerSasl(listener, mechanisms, users, reauth, delay, max_receive)


def sasl_settings(security_protocols: Mapping[str, str], get: Callable[[str], str],
                  props: Mapping[str, str]) -> dict[str, ListenerSasl]:
    """listener name -> settings, for every SASL listener."""
    if get("sasl.jaas.config").strip() and any(p in SASL_PROTOCOLS for p in security_protocols.values()):
        log.warning("Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config "
                    "(use listener.name.<listener>.<mechanism>.sasl.jaas.config)")
    return {name: listener_sasl(name, get, props)
            for name, proto in security_protocols.items() if proto in SASL_PROTOCOLS}


def is_sasl_key(key: str) -> bool:
    """Per-listener SASL keys (listener.name.<l>.[<mechanism>.]...) known to this module."""
    if not key.startswith("listener.name."):
        return False
    rest = key[len("listener.name."):].partition(".")[2]
    if rest == "sasl.enabled.mechanisms":
        return True
    mech, _, tail = rest.partition(".")
    return mech.upper() in SUPPORTED_MECHANISMS and tail in ("sasl.jaas.config", "connections.max.reauth.ms")
