"""broker/network/connection.py in process, independent of the handlers: streamed EncodedBody responses
(sendfile / bounded pread chunks), descriptor hygiene, one request in flight, read deadline and
memory return, quiet resets, handler failures logged once."""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import struct

import pytest
import uvloop
from kafka.protocol.metadata import ApiVersionsRequest

from minikafka.broker.network import connection as connection_mod
from minikafka.broker.network.connection import FILE_CHUNK, WRITE_HIGH_WATER, Connection
from minikafka.broker.network.connection_registry import ConnectionRegistry
from minikafka.broker.handlers import load_all
from minikafka.broker.network.memory_pool import MemoryPool
from minikafka.broker.network.registry import HANDLERS
from minikafka.broker.network.response import EncodedBody, FileSlice
from minikafka.protocol.headers import encode_response_prefix

load_all()  # fills the dispatch table

MiB = 1024 * 1024
LOOPS = ["uvloop", "asyncio"]


def run(kind: str, coro):
    return uvloop.run(coro) if kind.startswith("uvloop") else asyncio.run(coro)


def registry(**kw) -> ConnectionRegistry:
    args = dict(max_request=100 * MiB, max_connections=100, max_connections_per_ip=100, idle_ms=-1,
                read_timeout_ms=0)
    pool = kw.pop("pool", None) or MemoryPool(64 * MiB)
    args.update(kw)
    return ConnectionRegistry(pool, **args)


async def serve(reg: ConnectionRegistry, cls: type[Connection]):
    server = await asyncio.get_running_loop().create_server(reg.factory(None, "PLAINTEXT", cls), "127.0.0.1", 0)
    reg.start()
    return server, server.sockets[0].getsockname()[1]


async def connect(port: int, rcvbuf: int | None = None):
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def read_response(reader: asyncio.StreamReader, slow: bool = False) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    out = bytearray()
    while len(out) < size:
        chunk = await reader.read(min(32 * 1024, size - len(out)))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
        if slow:
            await asyncio.sleep(0.0005)
    return bytes(out)


async def wait_for(predicate, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


@pytest.fixture
def data_file(tmp_path):
    content = os.urandom(6 * MiB)
    path = tmp_path / "segment.log"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    yield fd, content
    os.close(fd)


@pytest.mark.parametrize("mode", ["uvloop", "asyncio", "uvloop-nosendfile"])
def test_encoded_body_streams_file_slices_in_order_with_bounded_buffering(mode, data_file, monkeypatch):
    fd, content = data_file
    slices: list[FileSlice] = []
    calls = {"sendfile": 0, "pread": 0}
    real_sendfile, real_pread = os.sendfile, os.pread

    def sendfile(*a):
        calls["sendfile"] += 1
        return real_sendfile(*a)

    def pread(*a):
        calls["pread"] += 1
        return real_pread(*a)

    monkeypatch.setattr(connection_mod.os, "sendfile", sendfile)
    monkeypatch.setattr(connection_mod.os, "pread", pread)
    peak_buffer = [0]

    class Streaming(Connection):
        def connection_made(self, transport):
            super().connection_made(transport)
            if mode.endswith("nosendfile"):
                self._sock_fd = -1

        def _write(self, data):
            super()._write(data)
            peak_buffer[0] = max(peak_buffer[0], self.transport.get_write_buffer_size())

        async def dispatch(self, frame):
            body = EncodedBody()
            body.add(b"A" * 100)
            slices.append(FileSlice.dup_of(fd, 1000, 3 * MiB))
            body.add(slices[-1])
            body.add(bytearray(b"B" * 50))
            slices.append(FileSlice.dup_of(fd, 3 * MiB + 5000, 2 * MiB))
            body.add(slices[-1])
            body.add(memoryview(b"C" * 10))
            return (encode_response_prefix(42, body.size, False), body)

    expected = (struct.pack(">i", 42) + b"A" * 100 + content[1000:1000 + 3 * MiB] + b"B" * 50
                + content[3 * MiB + 5000:5 * MiB + 5000] + b"C" * 10)

    async def main():
        reg = registry()
        server, port = await serve(reg, Streaming)
        reader, writer = await connect(port, rcvbuf=32 * 1024)
        for _ in range(2):  # two responses on one connection, in order
            writer.write(frame(b"request!"))
            got = await read_response(reader, slow=True)
            assert got == expected
        writer.close()
        await wait_for(lambda: reg.count == 0)
        assert reg.pool.in_use == 0
        server.close()

    run(mode, main())
    assert all(s.fd == -1 for s in slices)  # every dup'ed descriptor closed once written
    if mode.endswith("nosendfile"):
        assert calls["sendfile"] == 0
    else:
        assert calls["sendfile"] > 0
    assert calls["pread"] > 0  # the socket filled up: the rest went in bounded chunks
    assert peak_buffer[0] <= WRITE_HIGH_WATER + FILE_CHUNK + 1024


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_client_reset_mid_response_closes_quietly_and_frees_everything(loop_kind, data_file, caplog):
    fd, _ = data_file
    slices: list[FileSlice] = []

    class Streaming(Connection):
        async def dispatch(self, frame):
            body = EncodedBody()
            for i in range(3):
                slices.append(FileSlice.dup_of(fd, i * MiB, 2 * MiB))
                body.add(slices[-1])
            return (encode_response_prefix(1, body.size, False), body)

    async def main():
        reg = registry()
        server, port = await serve(reg, Streaming)
        reader, writer = await connect(port, rcvbuf=16 * 1024)
        writer.write(frame(b"fetch please"))
        await reader.readexactly(64 * 1024)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        writer.transport.abort()
        await wait_for(lambda: reg.count == 0 and all(s.fd == -1 for s in slices))
        assert reg.pool.in_use == 0
        server.close()

    with caplog.at_level(logging.INFO):
        run(loop_kind, main())
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert not noisy, [r.getMessage() for r in noisy]


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_one_request_in_flight_and_responses_in_order(loop_kind):
    in_flight, peak = [0], [0]

    class Echo(Connection):
        async def dispatch(self, frame):
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            n = frame[0]
            await asyncio.sleep(0.002 * (5 - n % 5))  # later requests finish faster if run concurrently
            in_flight[0] -= 1
            return (struct.pack(">i", 1), bytes([n]))

    async def main():
        reg = registry()
        server, port = await serve(reg, Echo)
        reader, writer = await connect(port)
        writer.write(b"".join(frame(bytes([i]) + b"x" * i) for i in range(50)))
        got = [(await reader.readexactly(5))[4] for _ in range(50)]
        assert got == list(range(50))
        writer.close()
        server.close()

    run(loop_kind, main())
    assert peak[0] == 1


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_half_sent_frame_is_closed_after_the_deadline_and_its_memory_returns(loop_kind, caplog):
    async def main():
        reg = registry(read_timeout_ms=300, pool=MemoryPool(4 * MiB))
        server, port = await serve(reg, Connection)
        reader, writer = await connect(port)
        writer.write(struct.pack(">i", 2 * MiB) + b"\x00" * 1000)  # 1000 of 2 MiB, then silence
        await wait_for(lambda: reg.pool.in_use == 2 * MiB)
        t0 = asyncio.get_running_loop().time()
        assert await asyncio.wait_for(reader.read(), 3) == b""  # closed by the broker
        assert 0.25 < asyncio.get_running_loop().time() - t0 < 2
        await wait_for(lambda: reg.pool.in_use == 0 and reg.count == 0)
        assert reg.closed_read_timeout == 1
        server.close()

    with caplog.at_level(logging.INFO, logger="minikafka"):
        run(loop_kind, main())
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("minikafka")]
    assert len(lines) == 1 and "read.timeout" in lines[0], lines


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_pool_backpressure_pauses_reading_and_resumes(loop_kind):
    release = asyncio.Event

    class Holding(Connection):
        gate: asyncio.Event

        async def dispatch(self, frame):
            await type(self).gate.wait()
            return (struct.pack(">i", 1), b"k")

    async def main():
        Holding.gate = release()
        reg = registry(pool=MemoryPool(2 * MiB, reserve=0))
        server, port = await serve(reg, Holding)
        a = await connect(port)
        b = await connect(port)
        a[1].write(frame(b"a" * (3 * MiB // 2)))
        await wait_for(lambda: reg.pool.in_use == 3 * MiB // 2)
        b[1].write(frame(b"b" * (3 * MiB // 2)))
        await wait_for(lambda: reg.pool.waiters == 1)  # b is muted, not failed
        Holding.gate.set()
        assert await a[0].readexactly(5) == b"\x00\x00\x00\x01k"
        assert await b[0].readexactly(5) == b"\x00\x00\x00\x01k"
        await wait_for(lambda: reg.pool.in_use == 0)
        assert reg.pool.peak_in_use == 3 * MiB // 2
        for _, w in (a, b):
            w.close()
        server.close()

    run(loop_kind, main())


def _api_versions_with_handler(monkeypatch, caplog, handler) -> list[logging.LogRecord]:
    """Send one ApiVersions v3 answered by `handler`; the broker must close the connection. The log
    records at WARNING and above."""
    spec = HANDLERS[18]
    monkeypatch.setitem(HANDLERS, 18, dataclasses.replace(spec, handler=handler))
    req = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    req.with_header(correlation_id=5, client_id="t")
    raw = bytes(req.encode(version=3, header=True, framed=True))

    async def main():
        reg = registry()
        server, port = await serve(reg, Connection)
        reader, writer = await connect(port)
        writer.write(raw)
        assert await asyncio.wait_for(reader.read(), 3) == b""
        await wait_for(lambda: reg.count == 0)
        server.close()

    with caplog.at_level(logging.INFO):
        run("uvloop", main())
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_handler_failure_is_one_error_line_without_traceback(monkeypatch, caplog):
    async def boom(ctx, request):
        raise RuntimeError("boom")

    records = _api_versions_with_handler(monkeypatch, caplog, boom)
    assert len(records) == 1, [r.getMessage() for r in records]
    msg = records[0].getMessage()
    assert records[0].levelno == logging.ERROR and not records[0].exc_info
    assert "API key 18 v3" in msg and "RuntimeError('boom')" in msg


def test_a_response_that_cannot_be_encoded_closes_the_connection(monkeypatch, caplog):
    """Our bug on the way out (a value the schema cannot carry) closes this connection with one error
    line: the client sees the close and retries, instead of waiting forever on a muted connection."""
    from kafka.protocol.metadata import ApiVersionsResponse

    async def unencodable(ctx, request):
        return ApiVersionsResponse(error_code="not a number", api_keys=[], throttle_time_ms=0)

    errors = [r.getMessage() for r in _api_versions_with_handler(monkeypatch, caplog, unencodable)]
    assert len(errors) == 1 and "encoding ApiVersionsResponse v3 failed" in errors[0], errors


def test_connection_limits_refuse_at_once():
    async def main():
        reg = registry(max_connections=3, max_connections_per_ip=2)
        server, port = await serve(reg, Connection)
        held = [await connect(port) for _ in range(2)]
        await wait_for(lambda: reg.count == 2)
        extra = await connect(port)  # over the per-ip limit (all clients are 127.0.0.1)
        assert await asyncio.wait_for(extra[0].read(), 3) == b""
        assert reg.refused == 1 and reg.count == 2
        for _, w in held:
            w.close()
        await wait_for(lambda: reg.count == 0)
        server.close()

    run("uvloop", main())


def test_memory_of_a_request_cancelled_before_it_ran_comes_back():
    async def main():
        pool = MemoryPool(MiB)
        reg = registry(pool=pool)
        box = [pool.try_allocate(100)]

        async def never_started():
            raise AssertionError("ran")

        task = asyncio.get_running_loop().create_task(never_started())
        reg.track(task, box)
        task.cancel()  # before its first step: the coroutine's own finally never runs
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pool.in_use == 0 and not box and not reg.tasks

    run("uvloop", main())
