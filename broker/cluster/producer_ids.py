"""Producer ids on a cluster (KIP-730): blocks of ids come from the active controller
(AllocateProducerIds), which records each block in the metadata log, so no two brokers — and no
restart — ever hand out the same id. Kafka's RPCProducerIdManager: the next block is asked for when
90% of the current one is used; `next_id` never waits (it raises when no id is at hand, and the
handler answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka), `ensure` fetches a block first.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minikafka.broker.cluster.runtime import ClusterRuntime

log = logging.getLogger(__name__)

PREFETCH_AT = 0.9
ENSURE_TIMEOUT_S = 10.0


class ProducerIdsUnavailableError(Exception):
    """No producer id block at hand yet (COORDINATOR_LOAD_IN_PROGRESS)."""


class ClusterProducerIdManager:
    def __init__(self, cluster: "ClusterRuntime") -> None:
        self.cluster = cluster
        self._blocks: list[tuple[int, int]] = []  # [next, end) ranges, the current one first
        self._fetch: asyncio.Task | None = None

    def _available(self) -> int:
        return sum(end - nxt for nxt, end in self._blocks)

    def next_id(self) -> int:
        while self._blocks and self._blocks[0][0] >= self._blocks[0][1]:
            self._blocks.pop(0)
        if not self._blocks:
            self._prefetch()
            raise ProducerIdsUnavailableError("no producer id block yet")
        nxt, end = self._blocks[0]
        self._blocks[0] = (nxt + 1, end)
        if len(self._blocks) == 1 and (end - nxt - 1) < (1 - PREFETCH_AT) * 1000:
            self._prefetch()
        return nxt

    async def ensure(self) -> bool:
        """At least one id at hand (fetching a block if needed); False if the controller did not answer."""
        if self._available() > 0:
            return True
        self._prefetch()
        assert self._fetch is not None
        try:
            await asyncio.wait_for(asyncio.shield(self._fetch), ENSURE_TIMEOUT_S)
        except (asyncio.TimeoutError, Exception):
            return self._available() > 0
        return self._available() > 0

    def _prefetch(self) -> None:
        if self._fetch is None or self._fetch.done():
            self._fetch = asyncio.get_running_loop().create_task(self._allocate(), name="producer-id-block")

    async def _allocate(self) -> None:
        from minikafka.protocol.messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse
        cluster = self.cluster
        while cluster.broker_epoch < 0:
            await asyncio.sleep(0.05)
        req = AllocateProducerIdsRequest(broker_id=cluster.node_id, broker_epoch=cluster.broker_epoch)
        resp = await cluster.controller_request(req, 0, AllocateProducerIdsResponse)
        if resp.error_code:
            log.warning("cluster: AllocateProducerIds refused with error %d", resp.error_code)
            return
        self._blocks.append((resp.producer_id_start, resp.producer_id_start + resp.producer_id_len))
        log.info("cluster: producer ids %d..%d allocated to this broker", resp.producer_id_start,
                 resp.producer_id_start + resp.producer_id_len - 1)
