"""TLS listeners under bad input and bad configuration (minikafka: its log and exit code).

Bad input never crashes the broker: a plaintext Kafka client on an SSL port, a TLS client on a
plaintext port, garbage, a handshake that never finishes, an untrusted client certificate, a
certificate no principal mapping rule accepts: the connection is closed with one log line and the
broker keeps serving. A keystore that cannot be used stops start-up with exit code 2 and a clear line.
"""
from __future__ import annotations

import os
import socket
import ssl
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from tests.conftest import BrokerProcess, free_port
from tests.support.helpers import RawClient
from tests.support.tls_certs import PASSWORD, Pki

pytestmark = pytest.mark.minikafka_only


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def start(tmp_path, pki: Pki, extra: dict[str, str] | None = None, ssl_listeners=("SSL",)):
    """PLAINTEXT plus the given TLS listeners; returns (broker, {listener: port})."""
    ports = {"PLAINTEXT": free_port(), **{n: free_port() for n in ssl_listeners}}
    overrides = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "listener.security.protocol.map": ",".join(f"{n}:{'PLAINTEXT' if n == 'PLAINTEXT' else 'SSL'}"
                                                   for n in ports),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.path("server.pem"),
        **(extra or {}),
    }
    d = tmp_path / f"data-{len(list(tmp_path.iterdir()))}"
    d.mkdir()
    return BrokerProcess(d, overrides, port=ports["PLAINTEXT"]), ports


def tls_client(pki: Pki, port: int, cert: str | None = None) -> RawClient:
    ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    if cert is not None:
        ctx.load_cert_chain(pki.path(f"{cert}.crt"), pki.path(f"{cert}.key"))
    c = RawClient(f"127.0.0.1:{port}")
    c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
    return c


def api_versions_ok(c: RawClient) -> bool:
    resp = c.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
    return resp.error_code == 0 and bool(resp.api_keys)


def closed_by_broker(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except (ConnectionError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def wait_for_log(b: BrokerProcess, text: str, timeout: float = 5.0) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        log = b.log_text()
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the broker log:\n{b.log_text()}")


def test_bad_peers_get_a_closed_connection(tmp_path, pki):
    b, ports = start(tmp_path, pki, {"minikafka.ssl.handshake.timeout.ms": "700",
                                     "listener.name.mtls.ssl.client.auth": "required",
                                     "listener.name.mtls.ssl.truststore.type": "PEM",
                                     "listener.name.mtls.ssl.truststore.location": pki.path("ca.pem")},
                     ssl_listeners=("SSL", "MTLS"))
    b.start()
    try:
        # a plaintext Kafka client on the SSL port
        with RawClient(f"127.0.0.1:{ports['SSL']}") as c:
            c.send(ApiVersionsRequest(), 0)
            assert closed_by_broker(c.sock)
        wait_for_log(b, "not a TLS client")
        # a TLS client on the plaintext port: its ClientHello is no Kafka frame
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            tls_client(pki, ports["PLAINTEXT"])
        wait_for_log(b, "outside [0, ")
        # garbage on the SSL port
        with socket.create_connection(("127.0.0.1", ports["SSL"])) as s:
            s.sendall(os.urandom(2048))
            assert closed_by_broker(s)
        # a handshake that never finishes is cut after minikafka.ssl.handshake.timeout.ms
        with socket.create_connection(("127.0.0.1", ports["SSL"])) as s:
            t0 = time.time()
            assert closed_by_broker(s, timeout=10)
            assert 0.5 < time.time() - t0 < 5
        wait_for_log(b, "minikafka.ssl.handshake.timeout.ms")
        # required client auth: no certificate, or one from an untrusted CA
        for cert in (None, "stranger"):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                with tls_client(pki, ports["MTLS"], cert) as c:  # TLS 1.3: refused after the client's handshake
                    api_versions_ok(c)
        wait_for_log(b, "the client sent no certificate (ssl.client.auth=required)")
        log = wait_for_log(b, "client certificate not trusted: unable to get local issuer certificate")
        assert "Traceback" not in log
        # still serving, on every listener
        with tls_client(pki, ports["MTLS"], "client") as c:
            assert api_versions_ok(c)
        with tls_client(pki, ports["SSL"]) as c:
            assert api_versions_ok(c)
        with RawClient(f"127.0.0.1:{ports['PLAINTEXT']}") as c:
            assert api_versions_ok(c)
    finally:
        assert b.stop() == 0
    log = b.log_text()
    assert "Traceback" not in log and " ERROR " not in log, log


def test_principal_mapping_rules_apply_to_client_certificates(tmp_path, pki):
    """The subject of alice's certificate is CN=alice,OU=eng,O=acme (RFC 2253, as Kafka prints it):
    a rule that matches it lets her in; on a listener whose rules match nothing she is refused (as
    Kafka fails a connection whose name no rule maps)."""
    tls = {"ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem")}
    b, ports = start(tmp_path, pki, {
        **tls,
        "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng,O=acme$/$1@eng/U",
        "listener.name.strict.ssl.principal.mapping.rules": "RULE:^CN=(bob),.*$/$1/",
    }, ssl_listeners=("SSL", "STRICT"))
    b.start()
    try:
        with tls_client(pki, ports["SSL"], "client") as c:
            assert api_versions_ok(c)
        with pytest.raises((ConnectionError, ssl.SSLError)):
            with tls_client(pki, ports["STRICT"], "client") as c:
                api_versions_ok(c)
        wait_for_log(b, "client certificate refused: No rules apply to CN=alice,OU=eng,O=acme")
    finally:
        assert b.stop() == 0


def test_listener_prefixed_keys_override_broker_wide_ones(tmp_path, pki):
    """listener.name.<name>.ssl.* wins key by key over ssl.*; other listeners keep the broker-wide values."""
    b, ports = start(tmp_path, pki, {
        "ssl.client.auth": "required",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.open.ssl.client.auth": "none",
        "listener.name.open.ssl.enabled.protocols": "TLSv1.2",
    }, ssl_listeners=("SSL", "OPEN"))
    b.start()
    try:
        with tls_client(pki, ports["OPEN"]) as c:  # no client certificate needed, TLS 1.2 only
            assert api_versions_ok(c)
            assert c.sock.version() == "TLSv1.2"
        with pytest.raises((ConnectionError, ssl.SSLError)):
            with tls_client(pki, ports["SSL"]) as c:
                api_versions_ok(c)
        with tls_client(pki, ports["SSL"], "client") as c:
            assert api_versions_ok(c)
            assert c.sock.version() == "TLSv1.3"
    finally:
        assert b.stop() == 0


@pytest.mark.serial  # a latency bound: not beside another xdist worker's load
def test_large_fetch_over_tls_does_not_stall_other_clients(tmp_path, pki):
    """A 32 MiB Fetch response goes out over TLS in chunks while another connection is answered."""
    from tests.support.helpers import RawClient as Raw
    b, ports = start(tmp_path, pki, {"message.max.bytes": str(9 << 20), "socket.request.max.bytes": str(64 << 20)})
    b.start()
    try:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}", "linger.ms": 50,
                      "batch.size": 1 << 20, "message.max.bytes": 8 << 20})
        value = os.urandom(1 << 20)
        for _ in range(32):
            p.produce("big", value=value)
        assert p.flush(60) == 0
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
                      "ssl.ca.location": pki.path("ca.pem"), "group.id": "g", "fetch.max.bytes": 64 << 20,
                      "max.partition.fetch.bytes": 64 << 20, "receive.message.max.bytes": 100 << 20,
                      "enable.auto.commit": False})
        c.assign([TopicPartition("big", 0, 0)])
        got, t0, probes = 0, time.time(), []
        while got < 32 and time.time() - t0 < 60:
            got += sum(1 for m in c.consume(64, 0.2) if m.error() is None)
            with Raw(f"127.0.0.1:{ports['PLAINTEXT']}") as other:
                s = time.perf_counter()
                other.request(MetadataRequest(topics=[], allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False), 4)
                probes.append(time.perf_counter() - s)
        c.close()
        assert got == 32
        assert max(probes) < 1.0, probes
    finally:
        assert b.stop() == 0


# -- start-up refusals ------------------------------------------------------------------------

def _bad_configs(pki: Pki, tmp) -> dict[str, tuple[dict[str, str], str]]:
    mismatched = tmp / "mismatched.pem"
    mismatched.write_bytes(pki.client.key_pem() + pki.server.cert_pem())
    jks = tmp / "store.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    return {
        "no keystore": ({"ssl.keystore.location": ""}, "needs a keystore"),
        "missing file": ({"ssl.keystore.location": str(tmp / "nope.pem")}, "cannot read SSL keystore"),
        "pkcs12 wrong password": ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
                                   "ssl.keystore.password": "wrong"}, "wrong password"),
        "pkcs12 without password": ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12")},
                                    "key store password is not specified"),
        "encrypted key without password": ({"ssl.keystore.location": pki.path("server-enc.pem")}, "ssl.key.password"),
        "wrong key password": ({"ssl.keystore.location": pki.path("server-enc.pem"), "ssl.key.password": "nope"},
                               "wrong ssl.key.password"),
        "pem with store password": ({"ssl.keystore.password": PASSWORD}, "cannot be specified with PEM"),
        "jks file": ({"ssl.keystore.type": "JKS", "ssl.keystore.location": str(jks), "ssl.keystore.password": "x"},
                     "keytool -importkeystore"),
        "key and certificate do not match": ({"ssl.keystore.location": str(mismatched)}, "do not fit together"),
        "bad client auth": ({"ssl.client.auth": "always"}, "ssl.client.auth"),
        "bad mapping rule": ({"ssl.principal.mapping.rules": "RULE:x"}, "ssl.principal.mapping.rules"),
        "bad protocol": ({"ssl.enabled.protocols": "TLSv1.4"}, "ssl.enabled.protocols"),
        "bad truststore": ({"ssl.client.auth": "required", "ssl.truststore.type": "PEM",
                            "ssl.truststore.location": pki.path("client.key")}, "At least one certificate"),
    }


@pytest.mark.parametrize("case", ["no keystore", "missing file", "pkcs12 wrong password", "pkcs12 without password",
                                  "encrypted key without password", "wrong key password", "pem with store password",
                                  "jks file", "key and certificate do not match", "bad client auth", "bad mapping rule", "bad protocol", "bad truststore"])
def test_unusable_ssl_config_stops_start_up(tmp_path, pki, case):
    extra, message = _bad_configs(pki, tmp_path)[case]
    b, _ = start(tmp_path, pki, extra)
    with pytest.raises(RuntimeError) as info:
        b.start(timeout=15)
    assert "exited with code 2" in str(info.value), str(info.value)
    assert "invalid SSL configuration: listener SSL:" in str(info.value)
    assert message in str(info.value), str(info.value)
    assert "Traceback" not in str(info.value)


def test_encrypted_pem_and_inline_pem_keystores_work(tmp_path, pki):
    chain = (pki.root / "server.pem").read_text().split("-----END PRIVATE KEY-----")[1].strip()
    b, ports = start(tmp_path, pki, {
        "ssl.keystore.location": "",  # no broker-wide keystore: each listener has its own
        "listener.name.ssl.ssl.keystore.location": pki.path("server-enc.pem"),
        "listener.name.ssl.ssl.key.password": PASSWORD,
        "listener.name.inline.ssl.keystore.key": pki.server.key_pem().decode(),
        "listener.name.inline.ssl.keystore.certificate.chain": chain,
    }, ssl_listeners=("SSL", "INLINE"))
    b.start()
    try:
        for name in ("SSL", "INLINE"):
            with tls_client(pki, ports[name]) as c:
                assert api_versions_ok(c)
    finally:
        assert b.stop() == 0


def test_tls_clients_reconnect_after_kill_and_restart(tmp_path, pki):
    """kill -9 mid-stream: the broker comes back on the same TLS listener and one producer (which
    reconnects over TLS by itself) loses nothing acknowledged; a new consumer reads it all over TLS."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    b, ports = start(tmp_path, pki, {"ssl.client.auth": "required", "ssl.truststore.type": "PEM",
                                     "ssl.truststore.location": pki.path("ca.pem")})
    b.start()
    conf = {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
            "ssl.ca.location": pki.path("ca.pem"), "ssl.certificate.location": pki.path("client.crt"),
            "ssl.key.location": pki.path("client.key")}
    try:
        acked: list[int] = []
        p = Producer({**conf, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000})
        for i in range(100):
            p.produce("restart", value=str(i).encode(),
                      on_delivery=lambda e, m: acked.append(int(m.value())) if e is None else None)
        assert p.flush(30) == 0
        b.kill()
        b.start()
        for i in range(100, 200):
            p.produce("restart", value=str(i).encode(),
                      on_delivery=lambda e, m: acked.append(int(m.value())) if e is None else None)
        assert p.flush(60) == 0
        assert sorted(acked) == list(range(200))
        c = Consumer({**conf, "group.id": "r", "enable.auto.commit": False})
        c.assign([TopicPartition("restart", 0, 0)])
        got: list[int] = []
        deadline = time.time() + 30
        while len(got) < 200 and time.time() < deadline:
            got += [int(m.value()) for m in c.consume(500, 0.5) if m.error() is None]
        c.close()
        assert got == list(range(200))
    finally:
        assert b.stop() == 0
