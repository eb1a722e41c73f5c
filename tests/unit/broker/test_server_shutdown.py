"""broker/server.py shutdown, in process: a full disk while closing the logs is one error line and
exit code 1 (no traceback); a request that is still being handled does not hold the shutdown up."""
from __future__ import annotations

import asyncio
import dataclasses
import errno
import logging
import socket
import time

from kafka.protocol.metadata import ApiVersionsRequest

from minikafka.broker import server

from minikafka.broker.cli import main as cli
from minikafka.broker.network.registry import HANDLERS
from minikafka.storage import log_manager


def _serve_then_stop(monkeypatch, after=None, delay: float = 0.2) -> None:
    """Make `minikafka serve` request its own stop `delay` s after start (`after(broker)` first)."""
    orig_start = server.Broker.start

    async def start_then_stop(self):
        await orig_start(self)
        if after is not None:
            await after(self)
        asyncio.get_running_loop().call_later(delay, self.request_stop)

    monkeypatch.setattr(server.Broker, "start", start_then_stop)


def _serve(tmp_path) -> int:
    return cli.main(["serve", "--override", f"log.dirs={tmp_path / 'data'}",
                     "--override", "listeners=PLAINTEXT://127.0.0.1:0"])


def test_enospc_while_closing_logs_is_one_error_line_and_exit_code_1(tmp_path, monkeypatch, caplog, capsys):
    def disk_full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(log_manager, "atomic_write", disk_full)
    _serve_then_stop(monkeypatch)
    with caplog.at_level(logging.INFO):
        assert _serve(tmp_path) == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "No space left on device" in errors[0].getMessage() and not errors[0].exc_info
    assert not any("shut down cleanly" in r.getMessage() for r in caplog.records)
    assert "Traceback" not in capsys.readouterr().err


def test_shutdown_does_not_wait_for_a_parked_request(tmp_path, monkeypatch, caplog):
    parked = asyncio.Event

    async def never(ctx, request):  # a request parked forever (cancellation ends it)
        await parked().wait()

    monkeypatch.setitem(HANDLERS, 18, dataclasses.replace(HANDLERS[18], handler=never))
    clients = []

    async def send_parked_request(broker):
        port = broker.bound_ports[0]
        req = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        req.with_header(correlation_id=1, client_id="t")
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(bytes(req.encode(version=3, header=True, framed=True)))
        clients.append(sock)
        # and a half-sent frame on another connection
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"\x00\x01\x00\x00" + b"\x00" * 10)
        clients.append(slow)

    _serve_then_stop(monkeypatch, send_parked_request, delay=0.5)
    t0 = time.monotonic()
    with caplog.at_level(logging.INFO):
        assert _serve(tmp_path) == 0
    assert time.monotonic() - t0 < 5
    assert any("shut down cleanly" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    for sock in clients:
        sock.close()
