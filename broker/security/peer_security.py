"""The client side of this node's connections to its peers (issue 16), resolved from the broker
config as Kafka resolves it, and the one factory that builds every inter-node PeerClient.

Which listener:
- broker-to-broker (replica fetchers, WriteTxnMarkers, KIP-890 verification): the inter-broker
  listener, `inter.broker.listener.name` or else the listener named after
  `security.inter.broker.protocol` (only one of the two may be set; it must be an advertised,
  non-controller listener: Kafka's KafkaConfig checks and messages). With neither set Kafka uses
  PLAINTEXT; minikafka then takes the first broker listener when there is no PLAINTEXT one.
- broker-to-controller (registration, heartbeats, forwarded admin requests) and the quorum's own
  traffic: the first of `controller.listener.names`.

How (the listener's security protocol from `listener.security.protocol.map`):
- SSL / SASL_SSL: TLS with the listener's ssl.* values, `listener.name.<l>.ssl.*` first, then the
  unprefixed ones, then Kafka's defaults (broker/security/tls.py `listener_ssl_props`): truststore, keystore
  (presented as the client certificate), `ssl.endpoint.identification.algorithm` (https: the peer's
  certificate must name the host this node dials).
- SASL_PLAINTEXT / SASL_SSL: the mechanism is `sasl.mechanism.inter.broker.protocol` resp.
  `sasl.mechanism.controller.protocol` (Kafka's default for both: GSSAPI, which minikafka does not
  speak: left at the default on a SASL listener it fails start-up); it must be enabled on that
  listener. This node's credentials are the `username` / `password` options of the listener's JAAS
  config for that mechanism, `listener.name.<l>.<mechanism>.sasl.jaas.config` (PlainLoginModule /
  ScramLoginModule), as Kafka's broker logs in with its server JAAS context.

Invariant: anything that cannot be built raises ConfigError (broker/server.py turns it into one
StartupError line) before any listener opens, never a silently failing connection later.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from minikafka.protocol.peer_client import PLAINTEXT, PeerClient, PeerSecurity
from minikafka.broker.config.core import SECURITY_PROTOCOLS, TLS_SECURITY_PROTOCOLS, ConfigError

if TYPE_CHECKING:
    from minikafka.broker.config.core import BrokerConfig

INTER_BROKER_MECHANISM = "sasl.mechanism.inter.broker.protocol"
CONTROLLER_MECHANISM = "sasl.mechanism.controller.protocol"
DEFAULT_MECHANISM = "GSSAPI"  # Kafka's default for both keys

log = logging.getLogger(__name__)


class PeerFactory:
    """Builds the PeerClient for (listener, node, address) with that listener's client security."""

    def __init__(self, inter_broker: PeerSecurity = PLAINTEXT, controller: PeerSecurity = PLAINTEXT) -> None:
        self.inter_broker = inter_broker
        self.controller = controller

    @property
    def inter_broker_listener(self) -> str:
        return self.inter_broker.listener

    def security(self, listener: str) -> PeerSecurity:
        for sec in (self.controller, self.inter_broker):
            if sec.listener == listener:
                return sec
        return PeerSecurity(listener, "PLAINTEXT")

    def client(self, listener: str, node_id: int, address: tuple[str, int], client_id: str,
               request_timeout_s: float, retry_backoff_s: float = 0.02, max_backoff_s: float = 1.0) -> PeerClient:
        return PeerClient(node_id, address[0], address[1], client_id, request_timeout_s, retry_backoff_s,
                          max_backoff_s, security=self.security(listener))

    def controller_client(self, node_id: int, address: tuple[str, int], client_id: str, request_timeout_s: float,
                          retry_backoff_s: float = 0.02, max_backoff_s: float = 1.0) -> PeerClient:
        return self.client(self.controller.listener, node_id, address, client_id, request_timeout_s,
                           retry_backoff_s, max_backoff_s)

    def inter_broker_client(self, node_id: int, address: tuple[str, int], client_id: str, request_timeout_s: float,
                            retry_backoff_s: float = 0.02, max_backoff_s: float = 1.0) -> PeerClient:
        return self.client(self.inter_broker.listener, node_id, address, client_id, request_timeout_s,
                           retry_backoff_s, max_backoff_s)


def inter_broker_listener(config: "BrokerConfig") -> str:
    """The inter-broker listener's name (Kafka's KafkaConfig.interBrokerListenerName + its checks)."""
    candidates = [l.name for l in config.advertised_listeners if l.name not in config.controller_listener_names]
    by_name = (config.props.get("inter.broker.listener.name") or "").strip()
    by_protocol = (config.props.get("security.inter.broker.protocol") or "").strip()
    if by_name and by_protocol:
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    if by_protocol and by_protocol.upper() not in SECURITY_PROTOCOLS:
        raise ConfigError(f"Invalid value {by_protocol} for configuration security.inter.broker.protocol: "
                          f"String must be one of: {', '.join(SECURITY_PROTOCOLS)}")
    name = (by_name or by_protocol).upper()
    if not candidates:  # a controller-only node: it never talks to brokers (Kafka does not check it there)
        return name or "PLAINTEXT"
    if not name:
        return "PLAINTEXT" if "PLAINTEXT" in candidates else (candidates or [""])[0]
    if name not in candidates:
        raise ConfigError("inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                          "The valid options based on currently configured listeners are "
                          f"{','.join(candidates)}")
    return name


def listener_security(config: "BrokerConfig", listener: str, mechanism_key: str, role: str) -> PeerSecurity:
    """The client side of `listener` (ConfigError when it cannot be built)."""
    protocol = config.security_protocols.get(listener, "PLAINTEXT")
    context = None
    if protocol in TLS_SECURITY_PROTOCOLS:
        from minikafka.broker.security.tls import build_client_context, listener_ssl_props
        # "SSL": the ssl.client.auth rule for SASL_SSL concerns the server side only (warned there)
        props = listener_ssl_props(config.get, listener, "SSL")
        # an empty value is meaningful here (it turns hostname verification off), also per listener
        key = "ssl.endpoint.identification.algorithm"
        prefixed = f"listener.name.{listener.lower()}.{key}"
        props[key] = config.props[prefixed] if prefixed in config.props else config.props.get(key, props[key])
        context = build_client_context(props, listener)
    if not protocol.startswith("SASL_"):
        return PeerSecurity(listener, protocol, context)
    from minikafka.broker.security.sasl.settings import SUPPORTED_MECHANISMS
    mechanism = (config.props.get(mechanism_key) or DEFAULT_MECHANISM).strip()
    default = " (Kafka's default)" if mechanism == DEFAULT_MECHANISM else ""
    enabled = config.sasl[listener].mechanisms if listener in config.sasl else ()
    if mechanism not in enabled:  # Kafka's check and message (for the controller side minikafka checks too)
        raise ConfigError(f"{mechanism_key} must be included in sasl.enabled.mechanisms when SASL is used for "
                          f"{role} communication: the {role} listener {listener} is {protocol} and enables "
                          f"{', '.join(enabled) or 'none'}, {mechanism_key} is {mechanism}{default}")
    peer_mechanisms = [m for m in SUPPORTED_MECHANISMS if m != "OAUTHBEARER"]  # a node logs in with a password
    if mechanism not in peer_mechanisms:
        raise ConfigError(f"the {role} listener {listener} is {protocol}, but {mechanism_key} is {mechanism}{default}, "
                          f"which minikafka does not support for its own connections: set it to one of "
                          f"{', '.join(peer_mechanisms)}")
    username, password = jaas_credentials(config, listener, mechanism)
    return PeerSecurity(listener, protocol, context, mechanism, username, password)


def jaas_credentials(config: "BrokerConfig", listener: str, mechanism: str) -> tuple[str, str]:
    """(username, password) options of the listener's JAAS config for `mechanism`."""
    from minikafka.broker.security.sasl.jaas import JaasConfigError, parse_jaas_config
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.props.get(key, "")
    try:
        entries = parse_jaas_config(text) if text.strip() else []
    except JaasConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    if not entries:
        raise ConfigError(f"no JAAS config for this node's {mechanism} login on listener {listener}: set {key}")
    if len(entries) != 1:
        raise ConfigError(f"{key}: JAAS config property contains {len(entries)} login modules, should be 1 module")
    options = entries[0].options
    if not options.get("username") or "password" not in options:
        raise ConfigError(f"{key}: the username and password options are missing (this node logs in to its "
                          f"peers' {listener} listener with them)")
    return options["username"], options["password"]


def peer_factory(config: "BrokerConfig") -> PeerFactory:
    """The factory of a cluster node (config.quorum set); ConfigError when a side cannot be built."""
    inter = inter_broker_listener(config)
    if config.quorum is None:
        return PeerFactory(PeerSecurity(inter or "PLAINTEXT"), PLAINTEXT)
    controller = config.quorum.controller_listener_names[0]
    factory = PeerFactory(listener_security(config, inter, INTER_BROKER_MECHANISM, "inter-broker"),
                          listener_security(config, controller, CONTROLLER_MECHANISM, "controller"))
    if (factory.controller.sasl_mechanism or "").startswith("SCRAM-"):
        log.warning("%s=%s: SCRAM credentials live in the metadata log, which the controllers can only read "
                    "after logging in to each other; use PLAIN on the controller listener (as with Kafka)",
                    CONTROLLER_MECHANISM, factory.controller.sasl_mechanism)
    return factory
