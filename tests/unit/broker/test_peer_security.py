"""broker/security/peer_security.py: the client side of the inter-broker and controller listeners resolved from
Kafka's keys (which listener, listener-prefixed ssl.* over the plain ones, SASL mechanism and JAAS
credentials) and the start-up errors when it cannot be built."""
from __future__ import annotations

import ssl

import pytest

from minikafka.broker.config.core import BrokerConfig, ConfigError
from minikafka.broker.security.peer_security import inter_broker_listener, peer_factory
from tests.support.tls_certs import PASSWORD, Pki

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{u}" password="{p}";'
PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="{u}" password="{p}" '
         'user_{u}="{p}";')


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def node(tmp_path, **overrides: str) -> BrokerConfig:
    props = {"node.id": "1", "process.roles": "broker,controller", "log.dirs": str(tmp_path),
             "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293",
             "controller.listener.names": "CONTROLLER",
             "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"}
    props.update({k.replace("__", "."): v for k, v in overrides.items()})
    return BrokerConfig(props)


def secured(tmp_path, pki: Pki, **overrides: str) -> BrokerConfig:
    """INTERNAL SASL_SSL (SCRAM-SHA-512), CONTROLLER SSL; a broker-wide PEM keystore and PEM
    truststore, the INTERNAL listener with its own PKCS12 truststore."""
    base = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM.format(u="broker", p="s3cret"),
        "listener.name.internal.plain.sasl.jaas.config": PLAIN.format(u="plainbroker", p="pw"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.internal.ssl.truststore.type": "PKCS12",
        "listener.name.internal.ssl.truststore.location": pki.path("truststore.p12"),
        "listener.name.internal.ssl.truststore.password": PASSWORD,
    }
    base.update(overrides)
    return BrokerConfig({**node(tmp_path).static_props, **base})


def test_plaintext_defaults(tmp_path):
    factory = peer_factory(node(tmp_path))
    assert (factory.inter_broker.listener, factory.inter_broker.protocol) == ("PLAINTEXT", "PLAINTEXT")
    assert (factory.controller.listener, factory.controller.protocol) == ("CONTROLLER", "PLAINTEXT")
    assert factory.inter_broker.ssl_context is None and factory.controller.sasl_mechanism is None
    client = factory.controller_client(2, ("127.0.0.1", 9193), "raft", 1.0)
    assert client.security is factory.controller and (client.host, client.port) == ("127.0.0.1", 9193)


def test_which_inter_broker_listener(tmp_path):
    assert inter_broker_listener(node(tmp_path, inter__broker__listener__name="internal")) == "INTERNAL"
    assert inter_broker_listener(node(tmp_path, listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
                                      security__inter__broker__protocol="PLAINTEXT")) == "PLAINTEXT"
    # neither key: Kafka's default PLAINTEXT; without such a listener minikafka takes the first broker listener
    assert inter_broker_listener(node(tmp_path, listeners="INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
                                      listener__security__protocol__map="INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT")
                                 ) == "INTERNAL"
    with pytest.raises(ConfigError, match="Only one of inter.broker.listener.name and security.inter.broker.protocol"):
        inter_broker_listener(node(tmp_path, inter__broker__listener__name="INTERNAL",
                                   security__inter__broker__protocol="PLAINTEXT"))
    with pytest.raises(ConfigError, match="must be a listener name defined in advertised.listeners. The valid "
                                          "options based on currently configured listeners are PLAINTEXT,INTERNAL"):
        inter_broker_listener(node(tmp_path, inter__broker__listener__name="CONTROLLER"))
    with pytest.raises(ConfigError, match="must be a listener name defined in advertised.listeners"):
        inter_broker_listener(node(tmp_path, security__inter__broker__protocol="SSL"))
    with pytest.raises(ConfigError, match="Invalid value TLS for configuration security.inter.broker.protocol"):
        inter_broker_listener(node(tmp_path, security__inter__broker__protocol="TLS"))


def test_secured_sides_resolve_listener_prefixed_keys_first(tmp_path, pki):
    factory = peer_factory(secured(tmp_path, pki))
    inter, ctrl = factory.inter_broker, factory.controller
    assert (inter.listener, inter.protocol, inter.sasl_mechanism) == ("INTERNAL", "SASL_SSL", "SCRAM-SHA-512")
    assert (inter.sasl_username, inter.sasl_password) == ("broker", "s3cret")
    assert "s3cret" not in repr(inter)
    assert (ctrl.listener, ctrl.protocol, ctrl.sasl_mechanism) == ("CONTROLLER", "SSL", None)
    for sec in (inter, ctrl):
        assert sec.ssl_context.verify_mode == ssl.CERT_REQUIRED and sec.ssl_context.check_hostname
    # INTERNAL has its own PKCS12 truststore, CONTROLLER the broker-wide PEM one: both hold the test CA
    assert [c["subject"] for c in inter.ssl_context.get_ca_certs()] == \
        [c["subject"] for c in ctrl.ssl_context.get_ca_certs()]
    # PLAIN credentials come from that mechanism's JAAS config
    plain = peer_factory(secured(tmp_path, pki, **{"sasl.mechanism.inter.broker.protocol": "PLAIN"})).inter_broker
    assert (plain.sasl_mechanism, plain.sasl_username, plain.sasl_password) == ("PLAIN", "plainbroker", "pw")


def test_endpoint_identification_can_be_turned_off_per_listener(tmp_path, pki):
    factory = peer_factory(secured(tmp_path, pki, **{"listener.name.controller.ssl.endpoint.identification.algorithm": ""}))
    assert not factory.controller.ssl_context.check_hostname and factory.inter_broker.ssl_context.check_hostname
    off = peer_factory(secured(tmp_path, pki, **{"ssl.endpoint.identification.algorithm": ""}))
    assert not off.controller.ssl_context.check_hostname and not off.inter_broker.ssl_context.check_hostname
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm 'ldaps' is not supported"):
        peer_factory(secured(tmp_path, pki, **{"ssl.endpoint.identification.algorithm": "ldaps"}))


@pytest.mark.parametrize("overrides, message", [
    ({"sasl.mechanism.inter.broker.protocol": ""},  # left at Kafka's default
     "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for "
     "inter-broker communication: the inter-broker listener INTERNAL is SASL_SSL and enables SCRAM-SHA-512, "
     "PLAIN, sasl.mechanism.inter.broker.protocol is GSSAPI (Kafka's default)"),
    ({"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}, "sasl.mechanism.inter.broker.protocol is OAUTHBEARER"),
    ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for "
     "inter-broker communication"),
    ({"listener.name.internal.scram-sha-512.sasl.jaas.config":
      "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
     "listener.name.internal.scram-sha-512.sasl.jaas.config: the username and password options are missing"),
    ({"listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM.format(u="a", p="b") + SCRAM.format(u="c", p="d")},
     "contains 2 login modules, should be 1 module"),
    ({"listener.name.controller.ssl.truststore.location": "/nonexistent/ca.pem"},
     "listener CONTROLLER: cannot read SSL truststore /nonexistent/ca.pem"),
    ({"listener.name.controller.ssl.keystore.location": "/nonexistent/keystore.pem"},
     "listener CONTROLLER: cannot read SSL keystore /nonexistent/keystore.pem"),
])
def test_a_side_that_cannot_be_built_is_a_config_error(tmp_path, pki, overrides, message):
    with pytest.raises(ConfigError) as err:
        peer_factory(secured(tmp_path, pki, **overrides))
    assert message in str(err.value)


def test_controller_mechanism_defaults_to_gssapi(tmp_path, pki):
    config = secured(tmp_path, pki, **{
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT",
        "listener.name.controller.scram-sha-512.sasl.jaas.config": SCRAM.format(u="ctl", p="x"),
        "listener.name.controller.plain.sasl.jaas.config": PLAIN.format(u="ctl", p="x")})
    with pytest.raises(ConfigError, match="the controller listener CONTROLLER is SASL_PLAINTEXT and enables "
                                          "SCRAM-SHA-512, PLAIN, sasl.mechanism.controller.protocol is GSSAPI"):
        peer_factory(config)
    ok = BrokerConfig({**config.static_props, "sasl.mechanism.controller.protocol": "SCRAM-SHA-512"})
    ctrl = peer_factory(ok).controller
    assert (ctrl.protocol, ctrl.ssl_context, ctrl.sasl_mechanism, ctrl.sasl_username) == \
        ("SASL_PLAINTEXT", None, "SCRAM-SHA-512", "ctl")


def test_a_single_node_builds_nothing(tmp_path, pki):
    config = BrokerConfig({"log.dirs": str(tmp_path), "listeners": "SASL_SSL://127.0.0.1:9092",
                           "sasl.enabled.mechanisms": "PLAIN",
                           "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN.format(u="a", p="b")})
    assert peer_factory(config).controller.protocol == "PLAINTEXT"  # no quorum: no inter-node clients


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_secured_cluster_example_configs_resolve(tmp_path, pki, n):
    """config/cluster/secured/node-N.properties (docs/cluster.md's example), with this test's key and CA files."""
    from pathlib import Path

    from minikafka.broker.config.core import parse_properties
    root = Path(__file__).resolve().parents[3]
    props = parse_properties((root / f"config/cluster/secured/node-{n}.properties").read_text())
    props.update({"log.dirs": str(tmp_path), "ssl.keystore.location": pki.path("server.p12"),
                  "ssl.keystore.password": PASSWORD, "ssl.truststore.location": pki.path("ca.pem")})
    factory = peer_factory(BrokerConfig(props))
    assert [(s.listener, s.protocol, s.sasl_mechanism, s.sasl_username) for s in
            (factory.inter_broker, factory.controller)] == [("INTERNAL", "SASL_SSL", "SCRAM-SHA-512", "broker"),
                                                            ("CONTROLLER", "SASL_SSL", "PLAIN", "broker")]


def test_scram_on_the_controller_listener_is_warned_about(tmp_path, pki, caplog):
    """It cannot work in KRaft (the credentials are in the metadata log): one warning naming PLAIN."""
    import logging
    with caplog.at_level(logging.WARNING, logger="minikafka.broker.security.peer_security"):
        peer_factory(secured(tmp_path, pki))
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="minikafka.broker.security.peer_security"):
        peer_factory(secured(tmp_path, pki, **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
            "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
            "listener.name.controller.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.controller.scram-sha-512.sasl.jaas.config": SCRAM.format(u="broker", p="s3cret")}))
    assert any("use PLAIN on the controller listener" in r.getMessage() for r in caplog.records)
