"""Client quotas enforced (broker/quota/): a confluent-kafka producer under a 1 MB/s producer_byte_rate
is held near 1 MB/s while another client id on the same broker is not, the throttle shows on
/metrics, quotas survive a restart, and controller_mutation_rate refuses CreateTopics past its
token bucket (tests/integration/admin/test_client_quotas.py, on both brokers).

The broker runs with quota.window.num=3 (x 1 s windows) so that the first burst Kafka's sampled rate
allows (the window counts as at least num-1 windows: ~10 MB at 1 MB/s with the default 11) stays
small and the steady rate is measured within seconds."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.admin.test_client_quotas import EXACT, alter, describe, key
from tests.integration.robustness.test_metrics_http import scrape, value
from tests.conftest import free_port
from tests.support.helpers import RawClient

pytestmark = pytest.mark.minikafka_only

MB = 1024 * 1024
QUOTA_CONFIG = {"quota.window.num": "3", "quota.window.size.seconds": "1"}


def _rate(bootstrap: str, topic: str, client_id: str, seconds: float = 6.0, skip: float = 1.0) -> float:
    """Bytes/s delivered to `topic` from `skip` seconds after the start to `seconds`."""
    delivered: list[tuple[float, int]] = []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                  "batch.size": 256 * 1024, "queue.buffering.max.kbytes": 8192})
    payload = b"x" * 10_000
    start = time.monotonic()

    def done(err, msg):
        if err is None:
            delivered.append((time.monotonic(), len(msg.value())))
    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, payload, on_delivery=done)
        except BufferError:
            p.poll(0.02)
            continue
        p.poll(0)
    p.poll(0)
    p.purge()
    p.flush(2)
    total = sum(n for t, n in delivered if start + skip <= t <= start + seconds)
    return total / (seconds - skip)


def _consume_rate(bootstrap: str, topic: str, client_id: str, seconds: float = 6.0, skip: float = 1.0) -> float:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[tuple[float, int]] = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            for m in c.consume(1000, 0.2):
                if m.error() is None:
                    got.append((time.monotonic(), len(m.value())))
    finally:
        c.close()
    first = next((t for t, _n in got), start)  # from the first record (after the group join)
    return sum(n for t, n in got if first + skip <= t) / max(start + seconds - first - skip, 0.1)


def test_producer_held_near_its_byte_rate_while_another_client_is_not(broker_factory):
    port = free_port()
    b = broker_factory({"minikafka.metrics.listener": f"http://127.0.0.1:{port}", **QUOTA_CONFIG})
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    with RawClient(b.bootstrap) as cl:
        assert alter(cl, [({"client-id": "slow"}, {"producer_byte_rate": MB})]) == {key({"client-id": "slow"}):
                                                                                     (0, None)}
    fast = _rate(b.bootstrap, topic, "fast")
    slow = _rate(b.bootstrap, topic, "slow")
    print(f"slow {slow / MB:.2f} MB/s, fast {fast / MB:.2f} MB/s")
    assert slow < 2 * MB, (slow, fast)
    assert slow > 0.3 * MB, (slow, fast)  # held near the quota, not starved
    assert fast > 3 * slow, (slow, fast)
    samples = scrape(port)
    labels = {"type": "produce", "user": "", "client_id": "slow"}
    assert (value(samples, "minikafka_client_quota_throttle_time_ms_total", **labels) or 0) > 0
    assert (value(samples, "minikafka_client_quota_throttled_requests_total", **labels) or 0) > 0
    assert (value(samples, "minikafka_client_quota_recorded_total", **labels) or 0) > 2 * MB
    assert value(samples, "minikafka_client_quota_throttle_time_ms_total", type="produce", user="",
                 client_id="fast") is None
    # consumers: 1 MB/s of fetch for one client id, none for another
    with RawClient(b.bootstrap) as cl:
        assert alter(cl, [({"client-id": "slowc"}, {"consumer_byte_rate": MB})]) == {key({"client-id": "slowc"}):
                                                                                      (0, None)}
    fast_c = _consume_rate(b.bootstrap, topic, "fastc")
    slow_c = _consume_rate(b.bootstrap, topic, "slowc")
    print(f"consumers: slow {slow_c / MB:.2f} MB/s, fast {fast_c / MB:.2f} MB/s")
    assert 0.3 * MB < slow_c < 2 * MB and fast_c > 3 * slow_c, (slow_c, fast_c)
    samples = scrape(port)
    assert (value(samples, "minikafka_client_quota_throttle_time_ms_total", type="fetch", user="",
                  client_id="slowc") or 0) > 0


def test_quotas_survive_restart(broker_factory):
    b = broker_factory()
    entities = [({"user": "alice"}, {"producer_byte_rate": 2048, "request_percentage": 50.5}),
                ({"user": None, "client-id": None}, {"consumer_byte_rate": 4096})]
    with RawClient(b.bootstrap) as cl:
        assert all(code == 0 for code, _m in alter(cl, entities).values())
        before = describe(cl, [])
    assert before == {key(e): {k: float(v) for k, v in ops.items()} for e, ops in entities}
    b.stop()
    b.start()
    with RawClient(b.bootstrap) as cl:
        assert describe(cl, []) == before
        assert describe(cl, [("user", EXACT, "alice")], strict=True) == {key({"user": "alice"}): before[
            key({"user": "alice"})]}
    b.kill()  # kill -9 keeps them too (written before they are applied)
    b.start()
    with RawClient(b.bootstrap) as cl:
        assert describe(cl, []) == before


def test_the_documented_example_runs(broker_factory):
    """docs/quotas.md's example (examples/client_quotas.py) against a broker: throttled, then unthrottled."""
    import subprocess
    import sys as _sys

    from tests.conftest import ROOT
    b = broker_factory(QUOTA_CONFIG)
    proc = subprocess.run([_sys.executable, str(ROOT / "examples" / "client_quotas.py"), b.bootstrap],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "quotas of 'slow': {'producer_byte_rate': 1048576.0}" in out, out
    assert "after removal: {}" in out, out
    slow = float(out.split("client id 'slow': ")[1].split(" MB/s")[0])
    throttled = int(out.split("client id 'slow': ")[1].split(", ")[1].split(" throttled")[0])
    assert slow < 2.1 and throttled > 0, out


def test_ip_connection_creation_rate(broker_factory):
    """KIP-612: connections from an ip past its connection_creation_rate are not served and are closed
    after the throttle time (Kafka's delayed close); removing the quota lets them in again."""
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    b = broker_factory({"quota.window.num": "2", "quota.window.size.seconds": "1"})
    ip = {"ip": "127.0.0.1"}

    def attempt() -> tuple[bool, float]:
        started = time.monotonic()
        with RawClient(b.bootstrap) as c:
            try:
                resp = c.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
                return resp.error_code == 0, time.monotonic() - started
            except ConnectionError:
                return False, time.monotonic() - started

    with RawClient(b.bootstrap) as admin:  # open before the quota: not counted against it
        assert alter(admin, [(ip, {"connection_creation_rate": 2})]) == {key(ip): (0, None)}
        results = [attempt() for _ in range(6)]
        served = [ok for ok, _t in results]
        assert served[:2] == [True, True] and not all(served), results
        refused_after = [t for ok, t in results if not ok]
        assert max(refused_after) > 0.05, results  # closed after a delay, not at once
        assert alter(admin, [(ip, {"connection_creation_rate": None})]) == {key(ip): (0, None)}
        assert attempt()[0]
