"""The inter-node client (protocol/peer_client.py) against a real broker process: a pooled
connection whose peer was killed -9 and restarted is replaced without failing the next request, while
a peer that is down still fails fast with PeerError."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minikafka.protocol.peer_client import PeerClient, PeerError
from minikafka.testing import MiniKafka

pytestmark = pytest.mark.minikafka_only


async def _api_versions(client: PeerClient) -> int:
    resp = await client.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
    return resp.error_code


def test_a_restarted_peer_does_not_fail_the_next_request_on_the_pooled_connection() -> None:
    with MiniKafka() as kafka:
        async def scenario() -> None:
            client = PeerClient(1, kafka.host, kafka.port, "peer-test", request_timeout_s=5.0)
            assert await _api_versions(client) == 0
            kafka.kill()
            kafka.start()  # same port, a new process: the pooled socket is dead
            assert await _api_versions(client) == 0
            assert await _api_versions(client) == 0  # and the fresh connection is pooled again
            kafka.kill()
            with pytest.raises(PeerError):
                await _api_versions(client)
            client.close()

        asyncio.run(scenario())


def test_a_peer_that_closes_before_answering_gets_one_retry_on_a_fresh_connection() -> None:
    """A server that drops each connection's first request (as a peer restarting between our write
    and its read would) on a pooled connection: the request is sent once more and answered; on a fresh
    connection the same drop is a PeerError (no retry loop)."""
    async def scenario() -> None:
        seen: list[int] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(1)
            n = 0
            while True:
                try:
                    size = int.from_bytes(await reader.readexactly(4), "big")
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    break
                n += 1
                if n == 2 or len(seen) == 3:  # drop: the second request of the first connection; the third connection
                    break
                correlation = frame[4:8]
                body = ApiVersionsResponse(error_code=0, api_keys=[]).encode(version=0)
                writer.write((len(body) + 4).to_bytes(4, "big") + correlation + bytes(body))
                await writer.drain()
            writer.transport.abort()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = PeerClient(1, "127.0.0.1", port, "peer-test", request_timeout_s=5.0)
        try:
            assert await _api_versions(client) == 0       # connection 1, request 1
            assert await _api_versions(client) == 0       # connection 1 drops it: retried on connection 2
            assert len(seen) == 2
            client.close()
            with pytest.raises(PeerError):                 # connection 3, fresh, drops it: no retry
                await _api_versions(client)
            assert len(seen) == 3
        finally:
            client.close()
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


def test_a_peer_back_after_many_failures_answers_the_next_request() -> None:
    """Requests to a peer that is down fail until the reconnect backoff is at its maximum, which equals
    the request timeout; once the peer is back, a request sent right after the last failure is answered
    (the backoff takes at most half the request timeout; when it took all of it, every such request
    timed out)."""
    async def scenario() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    size = int.from_bytes(await reader.readexactly(4), "big")
                    frame = await reader.readexactly(size)
                    body = bytes(ApiVersionsResponse(error_code=0, api_keys=[]).encode(version=0))
                    writer.write((len(body) + 4).to_bytes(4, "big") + frame[4:8] + body)
                    await writer.drain()
            except asyncio.IncompleteReadError:
                writer.close()

        probe = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = probe.sockets[0].getsockname()[1]
        probe.close()
        await probe.wait_closed()  # the port is free: the peer is down
        client = PeerClient(1, "127.0.0.1", port, "peer-test", request_timeout_s=0.3, retry_backoff_s=0.02,
                            max_backoff_s=0.3)
        for _ in range(6):
            with pytest.raises(PeerError):
                await _api_versions(client)
        assert client._backoff_left() > 0.25  # the backoff is at its maximum
        server = await asyncio.start_server(serve, "127.0.0.1", port)
        try:
            assert await _api_versions(client) == 0
            assert await _api_versions(client) == 0
        finally:
            client.close()
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())
