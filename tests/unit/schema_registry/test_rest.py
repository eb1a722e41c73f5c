"""The REST routes (schema_registry/rest.py) over a real aiohttp server on a loopback port, with the registry
in memory: paths and parameters, JSON bodies, Confluent's error bodies and statuses, keep-alive."""
from __future__ import annotations

import asyncio
import json

import pytest

aiohttp = pytest.importorskip("aiohttp")

from minikafka.schema_registry.registry import SchemaRegistry  # noqa: E402
from minikafka.schema_registry.rest import CONTENT_TYPE, MAX_BODY_BYTES, RestServer  # noqa: E402
from minikafka.schema_registry.store import MemoryStore  # noqa: E402

V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
V2 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},
                                                          {"name": "b", "type": "int", "default": 0}]})
BAD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},
                                                           {"name": "c", "type": "int"}]})


def test_routes() -> None:
    async def scenario() -> None:
        server = RestServer(SchemaRegistry(MemoryStore()), "127.0.0.1", 0)
        port = await server.start()
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as http:  # one pooled keep-alive connection for all of them
                async def call(method: str, path: str, body: object = None) -> tuple[int, object]:
                    async with http.request(method, base + path, json=body) as resp:
                        assert resp.headers["Content-Type"].startswith(CONTENT_TYPE)
                        return resp.status, await resp.json(content_type=None)

                assert await call("GET", "/") == (200, {})
                assert await call("POST", "/subjects/t-value/versions", {"schema": V1}) == (200, {"id": 1})
                assert await call("POST", "/subjects/t-value/versions", {"schema": V2}) == (200, {"id": 2})
                status, body = await call("POST", "/subjects/t-value/versions", {"schema": BAD})
                assert status == 409 and body["error_code"] == 409
                assert await call("GET", "/subjects") == (200, ["t-value"])
                assert await call("GET", "/subjects/t-value/versions") == (200, [1, 2])
                status, body = await call("GET", "/subjects/t-value/versions/latest")
                assert body == {"subject": "t-value", "version": 2, "id": 2, "schema": V2.replace(" ", "")}
                assert (await call("GET", "/subjects/t-value/versions/1/schema"))[1] == V1.replace(" ", "")
                assert (await call("GET", "/schemas/ids/1"))[1] == {"schema": V1.replace(" ", "")}
                assert (await call("GET", "/schemas/ids/2/versions"))[1] == [{"subject": "t-value", "version": 2}]
                assert (await call("GET", "/schemas/ids/2/subjects"))[1] == ["t-value"]
                assert (await call("GET", "/schemas/ids/x"))[1]["error_code"] == 40403
                assert [b["version"] for b in (await call("GET", "/schemas?latestOnly=true"))[1]] == [2]
                assert (await call("POST", "/subjects/t-value", {"schema": V1}))[1]["version"] == 1
                assert (await call("POST", "/compatibility/subjects/t-value/versions/latest", {"schema": BAD})
                        )[1] == {"is_compatible": False}
                status, body = await call("POST", "/compatibility/subjects/t-value/versions?verbose=true",
                                          {"schema": V2})
                assert body == {"is_compatible": True, "messages": []}
                assert await call("PUT", "/config/t-value", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
                assert await call("GET", "/config/t-value") == (200, {"compatibilityLevel": "NONE"})
                assert await call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
                assert (await call("GET", "/config/other"))[1]["error_code"] == 40408
                assert (await call("GET", "/config/other?defaultToGlobal=true"))[1] == {"compatibilityLevel": "BACKWARD"}
                assert await call("GET", "/mode") == (200, {"mode": "READWRITE"})
                assert await call("PUT", "/mode", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
                assert (await call("POST", "/subjects/u/versions", {"schema": V1}))[1]["error_code"] == 42205
                assert await call("DELETE", "/mode") == (200, {"mode": "READONLY"})
                assert await call("DELETE", "/subjects/t-value/versions/1") == (200, 1)
                assert await call("DELETE", "/subjects/t-value/versions/1?permanent=true") == (200, 1)
                assert await call("DELETE", "/subjects/t-value") == (200, [2])
                assert (await call("GET", "/subjects?deleted=true"))[1] == ["t-value"]
                assert await call("DELETE", "/subjects/t-value?permanent=true") == (200, [2])
                assert (await call("GET", "/subjects/t-value/versions"))[1]["error_code"] == 40401
                status, body = await call("GET", "/nowhere")
                assert status == 404 and body["error_code"] == 404
                assert (await call("PATCH", "/subjects"))[0] == 405
                async with http.post(base + "/subjects/s/versions", data=b"{not json") as resp:
                    assert resp.status == 400
                async with http.post(base + "/subjects/s/versions", data=b" " * (MAX_BODY_BYTES + 1)) as resp:
                    assert resp.status == 413
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_a_taken_port_is_an_os_error() -> None:
    async def scenario() -> None:
        first = RestServer(SchemaRegistry(MemoryStore()), "127.0.0.1", 0)
        port = await first.start()
        try:
            with pytest.raises(OSError):
                await RestServer(SchemaRegistry(MemoryStore()), "127.0.0.1", port).start()
        finally:
            await first.stop()

    asyncio.run(scenario())


def test_connections_past_the_limit_are_closed_unanswered(monkeypatch) -> None:
    from minikafka.schema_registry import rest
    monkeypatch.setattr(rest, "MAX_CONNECTIONS", 2)

    async def scenario() -> None:
        server = RestServer(SchemaRegistry(MemoryStore()), "127.0.0.1", 0)
        port = await server.start()
        request = b"GET /subjects HTTP/1.1\r\nHost: x\r\n\r\n"
        open_ = []
        try:
            for _ in range(2):  # two keep-alive connections, each answered and kept open
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(request)
                assert (await reader.readline()).startswith(b"HTTP/1.1 200")
                open_.append(writer)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing said
            writer.close()
            open_.pop().close()
            await asyncio.sleep(0.1)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)  # room again
            writer.write(request)
            assert (await reader.readline()).startswith(b"HTTP/1.1 200")
            open_.append(writer)
        finally:
            for w in open_:
                w.close()
            await server.stop()

    asyncio.run(scenario())


def test_a_request_body_nested_past_the_json_decoder_is_400_not_500() -> None:
    async def scenario() -> None:
        server = RestServer(SchemaRegistry(MemoryStore()), "127.0.0.1", 0)
        port = await server.start()
        try:
            async with aiohttp.ClientSession() as http:
                body = b"[" * 100_000 + b"]" * 100_000
                async with http.post(f"http://127.0.0.1:{port}/subjects/s/versions", data=body) as resp:
                    assert resp.status == 400 and (await resp.json(content_type=None))["error_code"] == 400
                deep = {"schema": "[" * 100_000 + "]" * 100_000}
                async with http.post(f"http://127.0.0.1:{port}/subjects/s/versions", json=deep) as resp:
                    assert resp.status == 422 and (await resp.json(content_type=None))["error_code"] == 42201
        finally:
            await server.stop()

    asyncio.run(scenario())
