"""A write that reaches a node which does not lead `_schemas` partition 0 goes to the leader's registry listener
over HTTP, as Confluent's followers forward to their leader: the same method, path, query and body, through
aiohttp's ClientSession. One hop: the forwarded request carries FORWARDED_HEADER, and a node that gets one and
does not lead answers 50004 instead of forwarding again; the forwarding node then asks again (the leader may have
moved) until FORWARD_TIMEOUT_S. The leader's answer is passed back unchanged; its OFFSET_HEADER (the `_schemas`
offset the leader's state reached with the write) is where this node catches up to before answering, so a
client reads its own write on the node it wrote through.

Errors as Confluent's: 50004 "Leader not known." when no leader was found in time, 50003 "Error while forwarding
<op> request to the leader" when the leader could not be reached (the write may or may not have happened).
"""
from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from typing import Callable, NamedTuple

import aiohttp

from minikafka.schema_registry import errors

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Minikafka-Forwarded"
OFFSET_HEADER = "X-Minikafka-Schemas-Offset"
FORWARD_TIMEOUT_S = 15.0  # longer than a leader's own write timeout (store.WRITE_TIMEOUT_S)
RETRY_S = 0.2
PASSED_HEADERS = ("Content-Type", "Accept", "Authorization")  # the client's credentials too, as Confluent forwards


class Answer(NamedTuple):
    status: int
    body: bytes
    content_type: str
    offset: int | None  # the leader's OFFSET_HEADER


def _not_leader(status: int, body: bytes) -> bool:
    """The answer of a node that does not lead (any more): ask again."""
    if status != 500:
        return False
    try:
        return json.loads(body).get("error_code") == 50004
    except (ValueError, AttributeError):
        return False


class Forwarder:
    """`leader_url()`: the registry URL of the node leading `_schemas` partition 0 now, None if unknown."""

    def __init__(self, leader_url: Callable[[], str | None], ssl_context: ssl.SSLContext | None = None,
                 timeout_s: float = FORWARD_TIMEOUT_S) -> None:
        self.leader_url = leader_url
        self.ssl_context = ssl_context
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.ssl_context or True,
                                                                                 limit=64))
        return self._session

    async def forward(self, method: str, path_qs: str, body: bytes, headers: dict[str, str], op: str) -> Answer:
        """The leader's answer to the request; RegistryError 50004 / 50003 when there is none in time."""
        deadline = time.monotonic() + self.timeout_s
        sent = {k: headers[k] for k in PASSED_HEADERS if k in headers}
        sent[FORWARDED_HEADER] = "1"
        unreachable, failure = False, "no leader known"
        while True:
            url = self.leader_url()
            left = deadline - time.monotonic()
            if url is not None and left > 0:
                unreachable = False
                try:
                    async with self._client().request(method, url.rstrip("/") + path_qs, data=body, headers=sent,
                                                      timeout=aiohttp.ClientTimeout(total=left)) as resp:
                        data = await resp.read()
                        if not _not_leader(resp.status, data):
                            offset = resp.headers.get(OFFSET_HEADER)
                            return Answer(resp.status, data, resp.headers.get("Content-Type", "application/json"),
                                          int(offset) if offset and offset.isdigit() else None)
                        failure = f"{url} does not lead"
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                    unreachable, failure = True, f"{url}: {exc!r}"
            if time.monotonic() + RETRY_S >= deadline:
                break
            await asyncio.sleep(RETRY_S)
        log.warning("schema registry: forwarding %s %s to the leader failed: %s", method, path_qs, failure)
        if not unreachable:  # no leader, or none that took the write as leader
            raise errors.unknown_leader()
        raise errors.forwarding_failed(f"Error while forwarding {op} request to the leader")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
