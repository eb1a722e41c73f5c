"""The HTTP admin listener (broker/ops/admin_http.py): /metrics after a known workload, readiness during a
slow recovery, JSON logs, hostile HTTP clients, and the listener being off by default."""
from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from minikafka.testing import minikafka_command, subprocess_env
from tests.conftest import free_port
from tests.support.helpers import RawClient, build_batch, fetch_once, produce_raw

pytestmark = pytest.mark.minikafka_only


def http_get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    status, body = http_get(port, "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def metrics_broker(broker_factory, **overrides: str):
    port = free_port()
    b = broker_factory({"minikafka.metrics.listener": f"http://127.0.0.1:{port}", **overrides})
    return b, port


def wait_ready(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while http_get(port, "/health/ready")[0] != 200:
        assert time.monotonic() < deadline, "broker never became ready"
        time.sleep(0.05)


def test_metrics_after_a_known_workload(broker_factory):
    b, port = metrics_broker(broker_factory)
    wait_ready(port)
    assert http_get(port, "/health/live") == (200, b"live\n")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(10):
        p.produce("orders", b"v%d" % i, partition=0)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "billing", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("orders", 0, 4)], asynchronous=False)
    c.assign([TopicPartition("orders", 0, 0)])
    got = 0
    deadline = time.monotonic() + 15
    while got < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == 10
    txp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "tx-open", "linger.ms": 5})
    txp.init_transactions(15)
    txp.begin_transaction()
    for i in range(3):
        txp.produce("orders", b"t%d" % i, partition=1)
    assert txp.flush(15) == 0  # appended, transaction left open

    s = scrape(port)
    assert value(s, "minikafka_records_in_total", topic="orders") == 13
    assert value(s, "minikafka_bytes_in_total", topic="orders") > 0
    assert value(s, "minikafka_records_out_total", topic="orders") == 10
    assert value(s, "minikafka_bytes_out_total", topic="orders") > 0
    for part, end, hw, lso in (("0", 10, 10, 10), ("1", 3, 3, 0)):
        assert value(s, "minikafka_log_end_offset", topic="orders", partition=part) == end
        assert value(s, "minikafka_high_watermark", topic="orders", partition=part) == hw
        assert value(s, "minikafka_last_stable_offset", topic="orders", partition=part) == lso
        assert value(s, "minikafka_log_start_offset", topic="orders", partition=part) == 0
        assert value(s, "minikafka_log_size_bytes", topic="orders", partition=part) > 0
        assert value(s, "minikafka_active_producer_ids", topic="orders", partition=part) == 1
    assert value(s, "minikafka_group_committed_offset", group="billing", topic="orders", partition="0") == 4
    assert value(s, "minikafka_consumer_lag", group="billing", topic="orders", partition="0") == 6
    assert value(s, "minikafka_transactions", state="Ongoing") == 1
    assert value(s, "minikafka_transaction_oldest_age_seconds") > 0
    assert value(s, "minikafka_partitions") >= 2 + 50  # orders + __consumer_offsets (+ __transaction_state)
    assert value(s, "minikafka_connections") >= 3
    assert value(s, "minikafka_ready") == 1
    assert value(s, "minikafka_request_memory_capacity_bytes") > 0
    assert value(s, "minikafka_request_memory_in_use_bytes") >= 0
    produce = value(s, "minikafka_requests_total", api="Produce")
    assert produce >= 2
    assert value(s, "minikafka_request_latency_seconds_count", api="Produce") == produce
    assert value(s, "minikafka_request_latency_seconds_bucket", api="Produce", le="+Inf") == produce
    assert value(s, "minikafka_request_latency_seconds_sum", api="Produce") > 0
    assert value(s, "minikafka_requests_total", api="InitProducerId") >= 2

    txp.abort_transaction(15)
    s = scrape(port)
    assert value(s, "minikafka_transactions", state="Ongoing") is None
    assert value(s, "minikafka_last_stable_offset", topic="orders", partition="1") == 4  # after the marker
    c.close()
    for f in admin.delete_topics(["orders"]).values():
        f.result(15)
    s = scrape(port)  # a deleted topic's series go
    assert value(s, "minikafka_records_in_total", topic="orders") is None
    assert value(s, "minikafka_high_watermark", topic="orders", partition="0") is None


def test_error_codes_are_counted(broker_factory):
    b, port = metrics_broker(broker_factory)
    wait_ready(port)
    # InitProducerId with an unknown transaction timeout far too large: INVALID_TRANSACTION_TIMEOUT
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "tx-bad",
                  "transaction.timeout.ms": 2_000_000})
    with pytest.raises(Exception):
        p.init_transactions(10)
    s = scrape(port)
    assert value(s, "minikafka_request_errors_total", api="InitProducerId",
                 error="INVALID_TRANSACTION_TIMEOUT") >= 1
    # per-partition errors inside Produce and Fetch (their top-level error is none)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("one", 1, 1)]).values():
        f.result(15)
    with RawClient(b.bootstrap) as raw:
        for _ in range(2):
            assert produce_raw(raw, "one", build_batch([b"x"]), partition=7).error_code == 3
        assert fetch_once(raw, "one", 0, 1000).error_code == 1  # OFFSET_OUT_OF_RANGE
    s = scrape(port)
    assert value(s, "minikafka_partition_errors_total", api="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 2
    assert value(s, "minikafka_partition_errors_total", api="Fetch", error="OFFSET_OUT_OF_RANGE") == 1


def test_ready_only_after_a_slow_recovery_and_json_progress_logs(broker_factory, tmp_path):
    b, port = metrics_broker(broker_factory)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.create_topics([NewTopic("many", 40, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(40):
        p.produce("many", b"x", partition=i)
    assert p.flush(15) == 0
    b.kill()
    b.log_path.write_bytes(b"")
    b.overrides.update({"minikafka.test.log.open.delay.ms": "700", "minikafka.log.format": "json",
                        "minikafka.log.recovery.progress.interval.ms": "1"})
    b.start()
    seen_not_ready = False
    while True:  # 40 partitions + 50 offsets partitions: >= 6 batches of 16, 0.7 s each
        status, _ = http_get(port, "/health/ready")
        assert http_get(port, "/health/live")[0] == 200
        if status == 200:
            break
        assert status == 503
        seen_not_ready = True
        time.sleep(0.1)
    assert seen_not_ready
    s = scrape(port)
    assert value(s, "minikafka_partitions_unopened") == 0
    assert sum(v for (n, l), v in s.items() if n == "minikafka_high_watermark" and dict(l)["topic"] == "many") == 40
    b.stop()
    lines = [json.loads(line) for line in b.log_path.read_text().splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in lines)
    progress = [r for r in lines if r["message"].startswith("opening partition logs:")]
    assert progress and all(r["partitions_total"] >= 40 and r["partitions_done"] < r["partitions_total"]
                            for r in progress)
    assert any(r["message"].startswith("opened") and r["partitions_done"] == r["partitions_total"] for r in lines)
    # lines about one partition carry it as fields (recovery after kill -9 replays the producer state)
    assert any(r.get("topic") == "many" and isinstance(r.get("partition"), int) for r in lines)


def test_listener_off_by_default_and_bind_failure_is_clear(broker_factory):
    b = broker_factory()
    assert "metrics and health listener" not in b.log_text()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError) as err:
            broker_factory({"minikafka.metrics.listener": f"http://127.0.0.1:{port}"})
    assert "cannot bind the metrics listener" in str(err.value)
    assert "Traceback" not in str(err.value)
    with pytest.raises(RuntimeError) as err:
        broker_factory({"minikafka.metrics.listener": "ftp://x"})
    assert "minikafka.metrics.listener must be http://HOST:PORT" in str(err.value)


def test_a_taken_broker_port_is_one_clear_line_as_kafka_says_it(broker_factory):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError) as err:
            broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    assert f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use." in str(err.value)
    assert "Traceback" not in str(err.value)


def raw(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return b"".join(chunks)  # the server closed the connection
            chunks.append(chunk)


def test_hostile_http_clients(broker_factory):
    b, port = metrics_broker(broker_factory)
    wait_ready(port)
    assert raw(port, b"\x00\x01garbage\xff\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET /metrics SPDY/9\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(port, b"GET /x HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n").startswith(b"HTTP/1.1 413 ")
    assert raw(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n").startswith(b"HTTP/1.1 413 ")
    assert raw(port, b"POST /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert http_get(port, "/nope")[0] == 404
    assert http_get(port, "/metrics", method="DELETE")[0] == 405
    # clients that connect and send nothing (or half a request) hold no one else up
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(80)]
    idle[0].sendall(b"GET /metr")
    try:
        for s in idle[70:]:  # beyond MAX_CONNECTIONS: closed at once
            s.settimeout(5)
            assert s.recv(10) == b""
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 10
    while True:  # the slots come back as the server sees the closes
        try:
            if http_get(port, "/health/live")[0] == 200:
                break
        except (ConnectionError, http.client.HTTPException):
            pass
        assert time.monotonic() < deadline
        time.sleep(0.05)
    # the Kafka listener kept serving
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce("after-hostile", b"x")
    assert p.flush(15) == 0


def test_cli_flags_turn_on_the_listener_and_json_logs(tmp_path):
    import subprocess
    from tests.conftest import ROOT
    port, mport = free_port(), free_port()
    proc = subprocess.Popen([*minikafka_command(), "serve",
                             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                             "--override", f"log.dirs={tmp_path / 'data'}",
                             "--metrics-listener", f"http://127.0.0.1:{mport}", "--log-format", "json"],
                            cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_ready_deadline = time.monotonic() + 20
        while True:
            try:
                if http_get(mport, "/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < wait_ready_deadline
            time.sleep(0.05)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0].decode()
    assert proc.returncode == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert any(r["message"].startswith("metrics and health listener on") for r in records)
    assert records[-1]["message"] == "shut down cleanly"
