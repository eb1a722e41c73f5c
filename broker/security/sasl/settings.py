"""Per-listener SASL settings from Kafka's config keys, resolved as Kafka resolves them:

- `sasl.enabled.mechanisms` (Kafka's default GSSAPI), overridden per listener by
  `listener.name.<listener>.sasl.enabled.mechanisms`; minikafka serves PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 and OAUTHBEARER and refuses start-up with any other mechanism enabled on a SASL listener.
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
from typing import Any, Callable, Mapping

from minikafka.broker.security.sasl.jaas import JaasConfigError, PLAIN_LOGIN_MODULE, parse_jaas_config, plain_users

log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
OAUTH_KEYS = ("sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
              "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
              "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
              "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.sub.claim.name",
              "sasl.oauthbearer.scope.claim.name")
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
    oauth: Any = field(default=None, compare=False)  # oauthbearer.UnsecuredValidator | JwksValidator

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
    oauth = None
    for mech in mechanisms:
        jaas_key = f"{prefix}{mech.lower()}.sasl.jaas.config"
        jaas = props.get(jaas_key, "")
        if jaas.strip():
            try:
                entries = parse_jaas_config(jaas)
            except JaasConfigError as exc:
                raise SaslConfigError(f"{jaas_key}: {exc}") from None
            if mech == "OAUTHBEARER":
                oauth = _oauth_validator(listener, entries, jaas_key, get, props)
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
    return ListenerSasl(listener, mechanisms, users, reauth, delay, max_receive, oauth)


def _oauth_validator(listener: str, entries: list, jaas_key: str, get: Callable[[str], str],
                     props: Mapping[str, str]):
    """OAUTHBEARER's validator on `listener`: Kafka's unsecured one, or (KIP-768) the JWKS one."""
    from minikafka.broker.security.sasl import oauthbearer as ob
    entry = next((e for e in entries if e.login_module == ob.LOGIN_MODULE), None)
    if entry is None:
        raise SaslConfigError(f"{jaas_key}: no {ob.LOGIN_MODULE} entry")
    prefix = f"listener.name.{listener.lower()}."

    def value(key: str) -> str:  # listener+mechanism prefix, listener prefix, broker-wide, JAAS option
        for candidate in (f"{prefix}oauthbearer.{key}", f"{prefix}{key}"):
            if props.get(candidate, "").strip():
                return props[candidate].strip()
        return (get(key) or "").strip() or str(entry.options.get(key, "")).strip()

    def integer(key: str, minimum: int) -> int:
        text = value(key)
        try:
            number = int(text)
        except ValueError:
            raise SaslConfigError(f"{key} must be an integer, got {text!r}") from None
        if number < minimum:
            raise SaslConfigError(f"The OAuth configuration option {key} value must be at least {minimum}")
        return number
    handler = props.get(f"{prefix}oauthbearer.sasl.server.callback.handler.class", "").strip()
    if handler in ("", ob.UNSECURED_VALIDATOR_HANDLER):
        try:
            return ob.UnsecuredValidator.from_options(entry.options)
        except ValueError as exc:
            raise SaslConfigError(f"{jaas_key}: {exc}") from None
    if handler != ob.VALIDATOR_HANDLER:
        raise SaslConfigError(f"{prefix}oauthbearer.sasl.server.callback.handler.class: {handler} is not supported "
                              f"(minikafka serves {ob.VALIDATOR_HANDLER} and, by default, Kafka's unsecured validator)")
    url_key = "sasl.oauthbearer.jwks.endpoint.url"
    url = value(url_key)
    if not url:
        raise SaslConfigError(f'The OAuth validator for the broker requires "{url_key}" to be configured so that JWT '
                              f'signatures can be verified, but it was not set. Set "{url_key}" to the OAuth/OIDC '
                              f"provider's JWKS endpoint URL for this listener")
    import urllib.parse
    import urllib.request
    parsed = urllib.parse.urlparse(url)
    if not parsed.scheme:
        raise SaslConfigError(f"The OAuth configuration option {url_key} contains a URL ({url}) that is missing the "
                              f"protocol")
    if parsed.scheme not in ("http", "https", "file"):
        raise SaslConfigError(f"The OAuth configuration option {url_key} contains a URL ({url}) that contains an "
                              f'invalid protocol ({parsed.scheme}); only "http", "https", and "file" protocol are '
                              f"supported")
    if parsed.scheme == "file":
        import os
        path = urllib.request.url2pathname(parsed.path)
        if not os.path.exists(path):
            raise SaslConfigError(f"The OAuth configuration option {url_key} contains a file ({path}) that doesn't exist")
        if os.path.isdir(path):
            raise SaslConfigError(f"The OAuth configuration option {url_key} references a directory ({path}), not a file")
        if not os.access(path, os.R_OK):
            raise SaslConfigError(f"The OAuth configuration option {url_key} contains a file ({path}) that doesn't "
                                  f"have read permission")
    audience = tuple(a.strip() for a in value("sasl.oauthbearer.expected.audience").split(",") if a.strip())
    issuer = value("sasl.oauthbearer.expected.issuer")
    if not audience:
        log.warning('The OAuth broker validator is configured with a JWKS endpoint but without '
                    '"sasl.oauthbearer.expected.audience", so it will accept a JWT that does not carry an "aud" '
                    '(audience) claim. This is strongly discouraged.')
    if not issuer:
        log.warning('The OAuth broker validator is configured with a JWKS endpoint but without '
                    '"sasl.oauthbearer.expected.issuer", so it will accept a JWT bearing any (or no) "iss" '
                    '(issuer) claim. This is strongly discouraged.')
    source = ob.JwksSource(url, integer("sasl.oauthbearer.jwks.endpoint.refresh.ms", 0),
                           integer("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 0))
    return ob.JwksValidator(source, audience, issuer, integer("sasl.oauthbearer.clock.skew.seconds", 0),
                            value("sasl.oauthbearer.sub.claim.name") or "sub",
                            value("sasl.oauthbearer.scope.claim.name") or "scope")


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
    if mech.upper() == "OAUTHBEARER" and (tail == "sasl.server.callback.handler.class" or tail in OAUTH_KEYS):
        return True
    return mech.upper() in SUPPORTED_MECHANISMS and tail in ("sasl.jaas.config", "connections.max.reauth.ms")
