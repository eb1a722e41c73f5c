"""TLS listeners (SSL, mTLS) with stock clients: confluent-kafka and kcat, side by side with PLAINTEXT.

One broker per module with five listeners, configured as a user would configure Apache Kafka:
  PLAINTEXT
  SSL   broker-wide ssl.keystore.type=PEM + ssl.keystore.location (key + chain in one file)
  P12   listener.name.p12.ssl.keystore.* PKCS12 (per-listener override of the broker-wide keystore)
  MTLS  listener.name.mtls.ssl.client.auth=required, PEM truststore with the test CA
  REQ   listener.name.req.ssl.client.auth=requested, PKCS12 truststore
  STRICT required client auth, ssl.principal.mapping.rules that map only CN=bob
The same tests run against Apache Kafka with `--broker=kafka` (scripts/apache_kafka.py lab).
Certificates are made by the test (tests/support/tls_certs.py), never committed.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from tests.conftest import ROOT, BrokerProcess, broker_kind, free_port
from tests.support.tls_certs import PASSWORD, Pki

LISTENERS = {"SSL": "SSL", "P12": "SSL", "MTLS": "SSL", "REQ": "SSL", "STRICT": "SSL"}


def tls_overrides(pki: Pki) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.path("server.pem"),
        "listener.name.p12.ssl.keystore.type": "PKCS12",
        "listener.name.p12.ssl.keystore.location": pki.path("server.p12"),
        "listener.name.p12.ssl.keystore.password": PASSWORD,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.req.ssl.client.auth": "requested",
        "listener.name.req.ssl.truststore.type": "PKCS12",
        "listener.name.req.ssl.truststore.location": pki.path("truststore.p12"),
        "listener.name.req.ssl.truststore.password": PASSWORD,
        "listener.name.strict.ssl.client.auth": "required",
        "listener.name.strict.ssl.truststore.type": "PEM",
        "listener.name.strict.ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.strict.ssl.principal.mapping.rules": "RULE:^CN=(bob),.*$/$1/",
    }


class TlsBroker:
    """A broker with the listeners above: minikafka, or the Apache Kafka lab."""

    def __init__(self, kind: str, work: Path, pki: Pki, extra: dict[str, str] | None = None) -> None:
        self.kind = kind
        self.pki = pki
        overrides = {**tls_overrides(pki), **(extra or {})}
        if kind == "kafka":
            sys.path.insert(0, str(ROOT))
            from scripts.apache_kafka import KafkaBroker
            self.impl = KafkaBroker(work_dir=work / "kafka").start(overrides=overrides, extra_listeners=LISTENERS,
                                                                   timeout=120)
            self.ports = {n: self.impl.listener_port(n) for n in LISTENERS}
            self.ports["PLAINTEXT"] = self.impl.port
        else:
            self.ports = {"PLAINTEXT": free_port(), **{n: free_port() for n in LISTENERS}}
            overrides["listeners"] = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
            overrides["listener.security.protocol.map"] = ",".join(
                f"{n}:{LISTENERS.get(n, n)}" for n in self.ports)
            overrides.setdefault("group.initial.rebalance.delay.ms", "0")  # as the Kafka lab's
            (work / "data").mkdir(parents=True, exist_ok=True)
            self.impl = BrokerProcess(work / "data", overrides, port=self.ports["PLAINTEXT"]).start()

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def stop(self) -> None:
        code = self.impl.stop()
        if self.kind == "kafka":
            self.impl.cleanup()
        else:
            assert code == 0, self.log_text()  # SIGTERM with TLS connections open: a clean exit

    def log_text(self) -> str:
        return self.impl.log_text()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(request, pki, tmp_path_factory):
    kind = broker_kind(request.config)
    if kind not in ("minikafka", "kafka"):
        pytest.skip("TLS listeners need a broker this run configures")
    b = TlsBroker(kind, tmp_path_factory.mktemp("tlsbroker"), pki)
    yield b
    b.stop()
    if kind == "minikafka":
        assert "Traceback" not in b.log_text(), b.log_text()


def client_conf(b: TlsBroker, listener: str, cert: str | None = None, **extra) -> dict:
    conf = {"bootstrap.servers": b.bootstrap(listener), "security.protocol": "SSL",
            "ssl.ca.location": b.pki.path("ca.pem"), "socket.timeout.ms": 10000}
    if cert is not None:
        conf["ssl.certificate.location"] = b.pki.path(f"{cert}.crt")
        conf["ssl.key.location"] = b.pki.path(f"{cert}.key")
    conf.update(extra)
    return conf


def produce_consume(conf: dict, n: int = 20) -> list[bytes]:
    topic = f"tls-{uuid.uuid4().hex[:10]}"
    errors: list = []
    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, key=b"k", on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(30) == 0
    assert errors == []
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.time() + 30
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    return got


def expect_connect_failure(conf: dict) -> str:
    """The client cannot get metadata; returns the errors the client reported."""
    seen: list[str] = []
    admin = AdminClient({**conf, "error_cb": lambda e: seen.append(str(e))})
    with pytest.raises(KafkaException) as info:
        admin.list_topics(timeout=3)
    return " | ".join(seen + [str(info.value)])


# -- TLS with stock clients ---------------------------------------------------------------------

@pytest.mark.parametrize("listener", ["SSL", "P12"])
def test_produce_consume_over_ssl(tls_broker, listener):
    """PEM keystore (broker-wide) and PKCS12 keystore (listener-prefixed override)."""
    got = produce_consume(client_conf(tls_broker, listener))
    assert got == [b"v%d" % i for i in range(20)]


def test_each_listener_advertises_itself(tls_broker):
    for listener in ("PLAINTEXT", "SSL", "P12"):
        conf = {"bootstrap.servers": tls_broker.bootstrap(listener)}
        if listener != "PLAINTEXT":
            conf = client_conf(tls_broker, listener)
        md = AdminClient(conf).list_topics(timeout=10)
        assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", tls_broker.ports[listener])]


def test_mtls_required_client_certificate(tls_broker):
    assert produce_consume(client_conf(tls_broker, "MTLS", cert="client"), n=5) == [b"v%d" % i for i in range(5)]
    # TLS 1.3: the client's handshake ends before the broker has checked its certificate, so the
    # client sees the refusal as the broker closing the TLS connection
    # client sees the refusal as the broker closing the TLS connection: a transport failure
    for cert in (None, "stranger"):  # no certificate; one from another CA
        errors = expect_connect_failure(client_conf(tls_broker, "MTLS", cert=cert))
        assert "_TRANSPORT" in errors or "_ALL_BROKERS_DOWN" in errors, errors


def test_mtls_requested_client_certificate(tls_broker):
    """requested: a client without a certificate is let in (as User:ANONYMOUS); one with a trusted
    certificate too. A certificate from an untrusted CA: Kafka (JSSE) ignores it and lets the client
    in as User:ANONYMOUS; OpenSSL, which Python's ssl offers no verify callback for, fails the
    handshake, so minikafka refuses it (documented difference; never more access than Kafka)."""
    assert produce_consume(client_conf(tls_broker, "REQ"), n=3) == [b"v0", b"v1", b"v2"]
    assert produce_consume(client_conf(tls_broker, "REQ", cert="client"), n=3) == [b"v0", b"v1", b"v2"]
    if tls_broker.kind == "kafka":
        assert produce_consume(client_conf(tls_broker, "REQ", cert="stranger"), n=3) == [b"v0", b"v1", b"v2"]
    else:
        expect_connect_failure(client_conf(tls_broker, "REQ", cert="stranger"))


def test_client_that_does_not_trust_the_broker(tls_broker):
    conf = client_conf(tls_broker, "SSL")
    conf["ssl.ca.location"] = tls_broker.pki.path("other-ca.pem")
    errors = expect_connect_failure(conf)
    assert "_TRANSPORT" in errors or "_ALL_BROKERS_DOWN" in errors, errors


def test_certificate_that_no_mapping_rule_names_is_refused(tls_broker):
    """alice's certificate is trusted, but the STRICT listener's rules map only bob: Kafka closes the
    connection (SslPrincipalMapper.NoMatchingRule), and so does minikafka."""
    import ssl
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    from tests.support.helpers import RawClient
    ctx = ssl.create_default_context(cafile=tls_broker.pki.path("ca.pem"))
    ctx.load_cert_chain(tls_broker.pki.path("client.crt"), tls_broker.pki.path("client.key"))
    for listener, accepted in (("MTLS", True), ("STRICT", False)):
        c = RawClient(tls_broker.bootstrap(listener))
        c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
        try:
            if accepted:
                assert c.request(ApiVersionsRequest(), 0, ApiVersionsResponse).error_code == 0
            else:
                with pytest.raises((ConnectionError, ssl.SSLError)):
                    c.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
        finally:
            c.close()


@pytest.mark.parametrize("listener, stores", [("MTLS", "PKCS12")])
def test_java_client_over_tls(tls_broker, tmp_path, listener, stores):
    """kafka-clients 4.x (JSSE): mTLS with PKCS12 keystore and truststore (or, as stores="PEM",
    plain TLS with a PEM truststore); the default (idempotent) producer and a read_committed consumer."""
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    pki = tls_broker.pki
    if stores == "PKCS12":
        security = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("client.p12"),
                    "ssl.keystore.password": PASSWORD, "ssl.truststore.type": "PKCS12",
                    "ssl.truststore.location": pki.path("truststore.p12"), "ssl.truststore.password": PASSWORD}
    else:
        security = {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem")}
    props = tmp_path / "client.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in {"security.protocol": "SSL", **security}.items()))
    topic = f"java-tls-{uuid.uuid4().hex[:8]}"
    lab.fetch()
    proc = subprocess.run([lab.java_bin(), "-Xmx256m", "-cp", lab.classpath(),
                           str(ROOT / "tests" / "java" / "JavaTlsCheck.java"),
                           tls_broker.bootstrap(listener), topic, "200", str(props)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "produced=200 consumed=200"


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_over_ssl(tls_broker):
    topic = f"kcat-tls-{uuid.uuid4().hex[:8]}"
    common = ["kcat", "-b", tls_broker.bootstrap("MTLS"), "-X", "security.protocol=SSL",
              "-X", f"ssl.ca.location={tls_broker.pki.path('ca.pem')}",
              "-X", f"ssl.certificate.location={tls_broker.pki.path('client.crt')}",
              "-X", f"ssl.key.location={tls_broker.pki.path('client.key')}"]
    lines = "\n".join(f"line-{i}" for i in range(50)) + "\n"
    subprocess.run(common + ["-P", "-t", topic], input=lines.encode(), check=True, timeout=60)
    out = subprocess.run(common + ["-C", "-t", topic, "-o", "beginning", "-e", "-q"],
                         capture_output=True, check=True, timeout=60)
    assert out.stdout.decode().split() == [f"line-{i}" for i in range(50)]


def test_large_read_committed_consume_over_ssl(tls_broker):
    """Several MB of transactional records read back with read_committed over TLS (the Fetch path
    sends log file slices in chunks through the TLS transport)."""
    conf = client_conf(tls_broker, "SSL")
    topic = f"tls-big-{uuid.uuid4().hex[:8]}"
    value = bytes(range(256)) * 64  # 16 KiB, incompressible enough
    n = 512  # 8 MiB
    p = Producer({**conf, "transactional.id": f"tx-{topic}", "linger.ms": 20, "compression.type": "none"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, value=value, key=str(i).encode())
        if i % 64 == 0:
            p.poll(0)
    p.commit_transaction(60)
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "fetch.max.bytes": 52428800,
                  "max.partition.fetch.bytes": 10485760})
    c.subscribe([topic])
    keys: list[bytes] = []
    t0 = time.time()
    while len(keys) < n and time.time() - t0 < 60:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                assert m.value() == value
                keys.append(m.key())
    c.close()
    assert keys == [str(i).encode() for i in range(n)]
