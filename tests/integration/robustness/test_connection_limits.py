"""The connection layer under abuse, against a real broker process (minikafka configs):
request read deadline and memory return, backpressure from queued.max.request.bytes, one request in
flight per connection (a pipelining client does not delay a canary), max.connections (total, per
IP), idle close, quiet resets, and SIGTERM with slow frames and long polls in flight."""
from __future__ import annotations

import os
import signal
import socket
import struct
import threading
import time

import psutil
import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.support.helpers import (
    RawClient,
    assert_broker_healthy,
    build_batch,
    list_offset,
    metadata_raw,
    produce_raw,
    produce_request,
    wait_until,
)

pytestmark = pytest.mark.minikafka_only

KiB, MiB = 1024, 1024 * 1024


def _addr(broker) -> tuple[str, int]:
    return "127.0.0.1", broker.port


def _half_sent(broker, declared: int, sent: int = 100, source: str | None = None) -> socket.socket:
    """A connection that announces a `declared`-byte frame and sends only `sent` bytes of it."""
    sock = socket.create_connection(_addr(broker), timeout=10, source_address=(source, 0) if source else None)
    sock.sendall(struct.pack(">i", declared) + b"\x00" * sent)
    return sock


def _closed(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def _api_versions(client: RawClient) -> float:
    t0 = time.monotonic()
    resp = client.request(ApiVersionsRequest(client_software_name="canary", client_software_version="1"), 3,
                          ApiVersionsResponse)
    assert resp.error_code == 0
    return time.monotonic() - t0


def _full_log(broker) -> str:
    return broker.log_path.read_text(errors="replace")


def _assert_quiet_log(broker) -> None:
    text = _full_log(broker)
    for bad in ("Traceback", "Unhandled exception", "handler is closed", "Exception in callback",
                "request memory leaked"):
        assert bad not in text, text[max(text.find(bad) - 500, 0):][:3000]


def _long_poll_fetch(topic: str, offset: int, max_wait_ms: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=50 * MiB,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic=topic, partitions=[
                                FetchRequest.FetchTopic.FetchPartition(
                                    partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                    log_start_offset=-1, partition_max_bytes=50 * MiB)])],
                        forgotten_topics_data=[], rack_id="")


def test_half_sent_frames_are_closed_after_the_deadline_and_their_memory_returns(broker_factory):
    broker = broker_factory({"queued.max.request.bytes": str(8 * MiB),  # 6 MiB general + 2 MiB reserve
                             "message.max.bytes": str(8 * MiB),
                             "minikafka.request.read.timeout.ms": "1500"})
    topic = "half-sent"
    with RawClient(broker.bootstrap) as c:
        metadata_raw(c, [topic], auto_create=True)
    slow = [_half_sent(broker, 2 * MiB) for _ in range(3)]  # the whole general area, held
    time.sleep(0.2)
    big = produce_request(topic, build_batch([os.urandom(5 * MiB)]))
    answers: list = []
    with RawClient(broker.bootstrap, timeout=20) as producer, RawClient(broker.bootstrap) as canary:
        t_send = time.monotonic()
        sender = threading.Thread(target=lambda: answers.append(producer.request(big, 7)))
        sender.start()
        time.sleep(0.5)
        assert not answers, "the 5 MiB produce was read although the pool was full"
        # small frames still get through: the reserve
        assert max(_api_versions(canary) for _ in range(20)) < 0.5
        metadata_raw(canary, [topic])
        for s in slow:
            assert _closed(s, timeout=5), "half-sent frame kept open past the deadline"
            s.close()
        sender.join(10)
        assert answers and answers[0].responses[0].partition_responses[0].error_code == 0, answers
        waited = time.monotonic() - t_send
        assert 1.0 < waited < 6, waited  # answered once the slow frames' memory came back
    assert broker.stop() == 0
    text = _full_log(broker)
    assert text.count("minikafka.request.read.timeout.ms") == 3, text
    assert "bytes of request memory are held" not in text, text
    _assert_quiet_log(broker)


def test_backpressure_many_connections_big_produces_all_answered(broker_factory):
    broker = broker_factory({"queued.max.request.bytes": str(4 * MiB),  # 3 MiB general, 1 MiB reserve
                             "message.max.bytes": str(4 * MiB)})
    topic = "backpressure"
    with RawClient(broker.bootstrap) as c:
        metadata_raw(c, [topic], auto_create=True)
    value = os.urandom(900 * KiB)
    n_conn, per_conn = 12, 3
    errors: list = []
    codes: list[int] = []

    def client(i: int) -> None:
        try:
            with RawClient(broker.bootstrap, timeout=60) as c:
                for _ in range(per_conn):
                    resp = produce_raw(c, topic, build_batch([value]))
                    codes.append(resp.error_code)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_conn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert codes == [0] * (n_conn * per_conn)
    assert list_offset(broker.bootstrap, topic, 0, -1)[1] == n_conn * per_conn
    # the whole general area is free again: a frame larger than it (admitted only when the general
    # area is completely unused) is served at once
    with RawClient(broker.bootstrap, timeout=10) as c:
        t0 = time.monotonic()
        resp = produce_raw(c, topic, build_batch([os.urandom(3 * MiB + 512 * KiB)]))
        assert resp.error_code == 0
        assert time.monotonic() - t0 < 3
    assert broker.stop() == 0
    assert "bytes of request memory are held" not in _full_log(broker)
    _assert_quiet_log(broker)


@pytest.mark.serial  # a latency bound: not beside another xdist worker's load
def test_pipelining_10000_requests_does_not_delay_a_canary(broker_factory):
    broker = broker_factory()
    n = 10_000
    pipe = RawClient(broker.bootstrap, timeout=60, client_id="pipeliner")
    frames = []
    for _ in range(n):
        frames.append(pipe.encode(ApiVersionsRequest(client_software_name="p", client_software_version="1"), 3))
    got: list[int] = []

    def reader() -> None:
        for _ in range(n):
            frame = pipe.recv_frame()
            got.append(struct.unpack_from(">i", frame, 0)[0])

    rt = threading.Thread(target=reader)
    rt.start()
    sender = threading.Thread(target=lambda: pipe.send_bytes(b"".join(frames)))
    sender.start()
    latencies = []
    with RawClient(broker.bootstrap) as canary:
        while rt.is_alive() and len(latencies) < 2000:
            latencies.append(_api_versions(canary))
    sender.join(60)
    rt.join(60)
    pipe.close()
    assert got == list(range(1, n + 1))  # every response, in request order
    assert len(latencies) >= 5, "the pipelined requests were served before the canary could measure"
    latencies.sort()
    print(f"pipelined {n} requests; canary: {len(latencies)} requests, median "
          f"{latencies[len(latencies) // 2] * 1000:.2f} ms, max {latencies[-1] * 1000:.2f} ms")
    assert latencies[-1] < 1.0, (latencies[len(latencies) // 2], latencies[-1])
    assert broker.stop() == 0
    _assert_quiet_log(broker)


def test_max_connections_total_and_per_ip(broker_factory):
    broker = broker_factory({"max.connections": "5", "max.connections.per.ip": "3"})
    held = [RawClient(broker.bootstrap) for _ in range(3)]
    for c in held:
        _api_versions(c)
    for _ in range(10):  # over the per-ip limit: closed at once, every time
        with RawClient(broker.bootstrap) as extra:
            assert extra.closed_by_peer(timeout=3)
    others = []
    for ip in ("127.0.0.2", "127.0.0.3"):
        s = socket.create_connection(_addr(broker), timeout=5, source_address=(ip, 0))
        others.append(s)
    time.sleep(0.2)
    over = socket.create_connection(_addr(broker), timeout=5, source_address=("127.0.0.4", 0))
    assert _closed(over, 3), "6th connection accepted over max.connections=5"
    over.close()
    for c in held:  # the admitted connections are still served
        _api_versions(c)
    held.pop().close()
    time.sleep(0.3)
    with RawClient(broker.bootstrap) as again:  # room again
        _api_versions(again)
    for c in held:
        c.close()
    for s in others:
        s.close()
    assert broker.stop() == 0
    text = _full_log(broker)
    assert text.count("refused") == 1, text  # one line per rate-limited period, not one per connection
    _assert_quiet_log(broker)


def test_idle_connections_are_closed_but_not_while_a_long_poll_is_in_flight(broker_factory):
    broker = broker_factory({"connections.max.idle.ms": "1000"})
    topic = "idle-poll"
    with RawClient(broker.bootstrap) as c:
        metadata_raw(c, [topic], auto_create=True)
    idle = RawClient(broker.bootstrap)
    _api_versions(idle)
    poller = RawClient(broker.bootstrap)
    t0 = time.monotonic()
    poller.send(_long_poll_fetch(topic, 0, 2500), 11)
    assert idle.closed_by_peer(timeout=4)
    assert 0.9 < time.monotonic() - t0 < 3.5
    resp = poller.recv(FetchResponse, 11)  # the long poll was not cut by the idle timeout
    assert resp.error_code == 0 and time.monotonic() - t0 >= 2.4
    assert poller.closed_by_peer(timeout=4)  # ... and the connection is idle afterwards
    idle.close()
    poller.close()
    assert broker.stop() == 0
    _assert_quiet_log(broker)


def _rst(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_client_reset_at_any_point_leaves_no_traceback(broker_factory):
    broker = broker_factory({"message.max.bytes": str(2 * MiB)})
    topic = "reset-mid-response"
    with RawClient(broker.bootstrap) as c:
        metadata_raw(c, [topic], auto_create=True)
        for _ in range(4):
            assert produce_raw(c, topic, build_batch([os.urandom(1500 * KiB)])).error_code == 0
    fetch = _long_poll_fetch(topic, 0, 0)
    proc = psutil.Process(broker.proc.pid)
    fds_before = proc.num_fds()
    for read_first in (0, 10, 100 * KiB, 1 * MiB):
        for _ in range(3):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(_addr(broker))
            c = RawClient.__new__(RawClient)
            c.sock, c.client_id, c.correlation_id = sock, "reset", 0
            c.send(fetch, 11)
            got = 0
            while got < read_first:
                got += len(sock.recv(min(65536, read_first - got)))
            _rst(sock)
    for _ in range(5):  # reset while the request is being handled (parked long poll)
        c = RawClient(broker.bootstrap)
        c.send(_long_poll_fetch(topic, 4, 5000), 11)  # at the end: parked
        time.sleep(0.05)
        _rst(c.sock)
    for _ in range(5):  # reset mid-frame
        _rst(_half_sent(broker, 1000, 10))
    time.sleep(0.5)
    assert broker.alive()
    # every descriptor of the dropped responses (Fetch's FileSlices) and connections is closed
    wait_until(lambda: proc.num_fds() <= fds_before, timeout=10, what="broker fds back to their count")
    assert_broker_healthy(broker.bootstrap)
    assert broker.stop() == 0
    # the parked long polls of the reset clients were cancelled, not left holding request memory
    assert "bytes of request memory are held" not in _full_log(broker)
    _assert_quiet_log(broker)


def test_sigterm_ends_quickly_with_slow_frames_and_long_polls_in_flight(broker_factory):
    broker = broker_factory()
    topic = "sigterm-poll"
    with RawClient(broker.bootstrap) as c:
        metadata_raw(c, [topic], auto_create=True)
    slow = [_half_sent(broker, 10 * MiB, 1000) for _ in range(5)]
    pollers = []
    for _ in range(5):
        p = RawClient(broker.bootstrap)
        p.send(_long_poll_fetch(topic, 0, 60_000), 11)
        pollers.append(p)
    time.sleep(0.3)
    t0 = time.monotonic()
    broker.proc.send_signal(signal.SIGTERM)
    rc = broker.proc.wait(10)
    elapsed = time.monotonic() - t0
    assert rc == 0 and elapsed < 5, (rc, elapsed, broker.log_text())
    for s in slow:
        s.close()
    for p in pollers:
        p.close()
    broker.stop()
    assert "shut down cleanly" in _full_log(broker)
    _assert_quiet_log(broker)
