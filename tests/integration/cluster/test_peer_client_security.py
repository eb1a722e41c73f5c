"""PeerClient (protocol/peer_client.py) on secured listeners of a real broker, with the client side
resolved from the broker's own config (broker/security/peer_security.py): SCRAM-SHA-512 and PLAIN over
SASL_SSL, a wrong password (PeerError, one log line however often it is retried), hostname
verification (ssl.endpoint.identification.algorithm), an untrusted CA, mutual TLS with and without a
client certificate, and a session lifetime (connections.max.reauth.ms) that makes the client log in
again on a fresh connection."""
from __future__ import annotations

import asyncio
import logging
import ssl

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minikafka.broker.config.core import BrokerConfig
from minikafka.broker.security.peer_security import listener_security
from minikafka.protocol.peer_client import PeerClient, PeerError, PeerSecurity
from minikafka.testing import MiniKafka
from tests.conftest import free_port
from tests.support.tls_certs import Pki

pytestmark = pytest.mark.minikafka_only

SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{u}" password="{p}";'
PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="{u}" password="{p}" '
         'user_plainbroker="plain-secret";')
INTER = "sasl.mechanism.inter.broker.protocol"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from minikafka.broker.security.sasl.bootstrap import add_scram_credentials
    root = tmp_path_factory.mktemp("peer-sec")
    pki = Pki(root / "pki")
    pki.write("client.pem", pki.client.key_pem() + pki.client.cert_pem())
    port, secure, mtls = free_port(), free_port(), free_port()
    config = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://0.0.0.0:{secure},MTLS://127.0.0.1:{mtls}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{secure},MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,MTLS:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "connections.max.reauth.ms": "1000",
        "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM.format(u="broker", p="scram-secret"),
        "listener.name.secure.plain.sasl.jaas.config": PLAIN.format(u="plainbroker", p="plain-secret"),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
    }
    kafka = MiniKafka(config=config, data_dir=root / "data", port=port, start=False)
    (root / "data").mkdir()
    add_scram_credentials(root / "data", ['SCRAM-SHA-512=[name="broker",password="scram-secret"]'])
    kafka.start()
    kafka.pki, kafka.ports = pki, {"SECURE": secure, "MTLS": mtls}
    kafka.props = {"log.dirs": str(root / "client"), **config}
    yield kafka
    kafka.close()


def security(broker, listener: str = "SECURE", mechanism: str | None = "SCRAM-SHA-512", **overrides) -> PeerSecurity:
    props = {**broker.props, **({INTER: mechanism} if mechanism else {}), **overrides}
    return listener_security(BrokerConfig(props, warn_unknown=False), listener, INTER, "inter-broker")


def api_versions(client: PeerClient, times: int = 1) -> list[int]:
    async def run() -> list[int]:
        out = []
        try:
            for _ in range(times):
                try:
                    resp = await client.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
                    out.append(resp.error_code)
                except PeerError:
                    out.append(-1)
        finally:
            client.close()
        return out
    return asyncio.run(run())


def client(broker, sec: PeerSecurity, host: str = "127.0.0.1") -> PeerClient:
    return PeerClient(1, host, broker.ports[sec.listener], "peer-security-test", 5.0, retry_backoff_s=0.01,
                      max_backoff_s=0.05, security=sec)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_sasl_ssl_login(broker, mechanism):
    assert api_versions(client(broker, security(broker, mechanism=mechanism)), times=2) == [0, 0]


def test_wrong_password_is_a_peer_error_logged_once(broker, caplog):
    sec = security(broker, **{"listener.name.secure.scram-sha-512.sasl.jaas.config":
                              SCRAM.format(u="broker", p="not-it")})
    with caplog.at_level(logging.WARNING, logger="minikafka.protocol.peer_client"):
        assert api_versions(client(broker, sec), times=4) == [-1] * 4
    lines = [r.getMessage() for r in caplog.records if "authentication as" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "listener SECURE" in lines[0] and "SASL SCRAM-SHA-512 authentication as 'broker' failed" in lines[0]
    assert "invalid credentials" in lines[0], lines[0]


def test_hostname_verification(broker, caplog):
    # the broker's certificate names localhost and 127.0.0.1, not 127.0.0.2 (the same loopback socket)
    with caplog.at_level(logging.WARNING, logger="minikafka.protocol.peer_client"):
        assert api_versions(client(broker, security(broker), host="127.0.0.2")) == [-1]
    assert any("TLS handshake failed" in r.getMessage() for r in caplog.records), caplog.text
    off = security(broker, **{"listener.name.secure.ssl.endpoint.identification.algorithm": ""})
    assert api_versions(client(broker, off, host="127.0.0.2")) == [0]
    assert api_versions(client(broker, security(broker), host="localhost")) == [0]


def test_untrusted_server_certificate(broker, caplog):
    sec = security(broker, **{"listener.name.secure.ssl.truststore.location": broker.pki.path("other-ca.pem")})
    with caplog.at_level(logging.WARNING, logger="minikafka.protocol.peer_client"):
        assert api_versions(client(broker, sec)) == [-1]
    assert "certificate verify failed" in caplog.text.lower() or "CERTIFICATE_VERIFY_FAILED" in caplog.text


def test_mutual_tls(broker, caplog):
    keystore = {"listener.name.mtls.ssl.keystore.location": broker.pki.path("client.pem")}
    sec = security(broker, "MTLS", mechanism=None, **keystore)
    assert sec.ssl_context is not None and sec.sasl_mechanism is None
    assert api_versions(client(broker, sec), times=2) == [0, 0]
    # no client certificate: the server refuses the connection (TLS 1.3 tells after the handshake)
    bare = PeerSecurity("MTLS", "SSL", ssl.create_default_context(cafile=broker.pki.path("ca.pem")))
    with caplog.at_level(logging.WARNING, logger="minikafka.protocol.peer_client"):
        assert api_versions(client(broker, bare), times=3) == [-1] * 3
    lines = [r.getMessage() for r in caplog.records if "client certificate" in r.getMessage()]
    assert len(lines) == 1 and "listener MTLS" in lines[0], caplog.text


def test_session_lifetime_means_a_fresh_login(broker):
    """connections.max.reauth.ms=1000: the session lasts 1 s; the client logs in anew at 85% of it."""
    async def run() -> tuple[int, int, bool]:
        c = client(broker, security(broker))
        try:
            first = await c.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
            writer = c._writer
            await asyncio.sleep(0.95)
            second = await c.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
            return first.error_code, second.error_code, c._writer is not writer
        finally:
            c.close()
    assert asyncio.run(run()) == (0, 0, True)
