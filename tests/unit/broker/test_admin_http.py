"""broker/ops/admin_http.py in-process: the route table is extensible (as fault injection will use it), and
the listener URL is validated."""
from __future__ import annotations

import asyncio

import pytest

from minikafka.broker.ops import admin_http
from minikafka.broker.ops.admin_http import AdminContext, AdminHttpServer, HttpRequest, HttpResponse


async def _fetch(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    out = await reader.read()
    writer.close()
    return out


def test_a_module_adds_a_route_without_touching_the_server(monkeypatch):
    monkeypatch.setattr(admin_http, "ROUTES", dict(admin_http.ROUTES))
    seen: list[HttpRequest] = []

    async def faults(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
        seen.append(req)
        return HttpResponse.json(200, {"ok": True, "body": req.body.decode()})

    admin_http.add_route("post", "/example", faults)

    async def main() -> None:
        server = AdminHttpServer(AdminContext(None, lambda: False), "127.0.0.1", 0)  # type: ignore[arg-type]
        port = await server.start()
        try:
            out = await _fetch(port, b"POST /example?x=1 HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd")
            assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b'{"ok": true, "body": "abcd"}\n')
            assert seen[0].query == {"x": ["1"]}
            assert (await _fetch(port, b"GET /example HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405 ")
            assert (await _fetch(port, b"GET /health/ready HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 503 ")
            assert (await _fetch(port, b"GET /health/live HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        finally:
            await server.stop()

    asyncio.run(main())


def test_a_failing_handler_is_a_500_not_a_broken_listener(monkeypatch):
    monkeypatch.setattr(admin_http, "ROUTES", dict(admin_http.ROUTES))

    async def broken(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
        raise RuntimeError("bug")

    admin_http.add_route("GET", "/broken", broken)

    async def main() -> None:
        server = AdminHttpServer(AdminContext(None, lambda: True), "127.0.0.1", 0)  # type: ignore[arg-type]
        port = await server.start()
        try:
            assert (await _fetch(port, b"GET /broken HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 500 ")
            assert (await _fetch(port, b"GET /health/ready HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
        finally:
            await server.stop()

    asyncio.run(main())


@pytest.mark.parametrize("url", ["127.0.0.1:9644", "https://h:1", "http://h", "http://h:x", "http://h:1/path", ""])
def test_bad_listener_urls(url):
    with pytest.raises(admin_http.ListenerError):
        admin_http.parse_listener(url)


def test_good_listener_url():
    assert admin_http.parse_listener("http://0.0.0.0:9644") == ("0.0.0.0", 9644)
    assert admin_http.parse_listener("http://[::1]:0/") == ("::1", 0)
