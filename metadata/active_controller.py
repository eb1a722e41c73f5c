"""The active controller of this node: alive while this node leads the metadata quorum (KRaft: the
quorum leader is the active controller, its epoch the controller epoch).

On becoming leader it builds a Controller (metadata/controller.py) over a copy of the
committed image plus the rest of its own log (entries of earlier epochs it will commit under its own);
decisions append records to the quorum log at once (`QuorumDriver.propose`), and the RPC answers wait
until the quorum's high watermark passes them (`committed`). Losing the leadership (a newer epoch,
resignation, check-quorum after a partition) drops the controller and fails every waiting answer
with NOT_CONTROLLER: a stale controller's decisions are never confirmed, and are truncated away when
it follows the new leader. A tick task fences brokers whose session expired.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import TYPE_CHECKING, Any, Callable

from minikafka.metadata.controller import Controller, ControllerConfig
from minikafka.raft.core import LEADER


if TYPE_CHECKING:
    from minikafka.metadata.image import MetadataImage
    from minikafka.raft.driver import QuorumDriver

log = logging.getLogger(__name__)

TICK_S = 0.1


class NotControllerError(Exception):
    """This node is not (or no longer) the active controller."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ActiveController:
    def __init__(self, driver: "QuorumDriver", committed_image: Callable[[], "MetadataImage"],
                 config: ControllerConfig, on_activate: Callable[[Controller], None] | None = None) -> None:
        self.driver = driver
        self._on_activate = on_activate  # first decisions of a new controller (the bootstrap records)
        self._activation_pending = False
        self._committed_image = committed_image
        self.config = config
        self.controller: Controller | None = None
        self.epoch = -1
        self._waiters: list[tuple[int, int, asyncio.Future]] = []  # (offset, epoch, future)
        self._task: asyncio.Task | None = None
        driver.step_listeners.append(self._on_step)

    # -- leadership -----------------------------------------------------------------------------------
    def _on_step(self) -> None:
        node = self.driver.node
        if node.role == LEADER and self.epoch != node.epoch:
            self._activate(node.epoch)
        elif node.role != LEADER and self.controller is not None:
            self._deactivate()
        self._release_waiters()

    def _activate(self, epoch: int) -> None:
        image = self._committed_image().copy()
        log_ = self.driver.node.log  # the committed image covers at least up to the log start (snapshot)
        for offset in range(max(image.offset + 1, log_.start_offset), log_.end_offset):
            image.apply(log_.entry_at(offset).payload, offset)
        self.epoch = epoch
        self.controller = Controller(image, self._propose_one, self.config, _now_ms(), random.Random())
        log.info("controller: active in epoch %d (%d broker(s), %d topic(s))", epoch, len(image.brokers),
                 len(image.topics))
        self._activation_pending = self._on_activate is not None  # run from the tick task, not this step listener
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._tick_loop(), name="controller-tick")

    def _deactivate(self) -> None:
        log.info("controller: no longer active (epoch %d)", self.epoch)
        self.controller = None
        self.epoch = -1
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def _propose_one(self, record: dict) -> int:
        offsets = self.driver.propose([record])
        if offsets is None:
            raise NotControllerError()
        return offsets[0]

    def _release_waiters(self) -> None:
        if not self._waiters:
            return
        node = self.driver.node
        keep = []
        for offset, epoch, fut in self._waiters:
            if fut.done():
                continue
            if node.role != LEADER or node.epoch != epoch:
                fut.set_exception(NotControllerError())
            elif node.high_watermark > offset:
                fut.set_result(None)
            else:
                keep.append((offset, epoch, fut))
        self._waiters = keep

    # -- for the RPC handlers -------------------------------------------------------------------------
    def active(self) -> Controller:
        if self.controller is None or self.driver.node.role != LEADER:
            raise NotControllerError()
        return self.controller

    @property
    def next_offset(self) -> int:
        return self.driver.node.log.end_offset

    @property
    def committed_offset(self) -> int:
        return self.driver.node.high_watermark

    async def committed(self, offset: int | None = None, timeout_s: float = 30.0) -> None:
        """Wait until everything up to `offset` (default: the log end) is committed in this epoch;
        NotControllerError if the leadership is lost first, TimeoutError after `timeout_s`."""
        node = self.driver.node
        if offset is None:
            offset = node.log.end_offset - 1
        if node.role != LEADER or node.epoch != self.epoch:
            raise NotControllerError()
        if node.high_watermark > offset:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, self.epoch, fut))
        await asyncio.wait_for(fut, timeout_s)

    async def run(self, fn: Callable[[Controller], Any], timeout_s: float = 30.0) -> Any:
        """`fn(controller)` now, then wait until everything in the log when it returned is committed
        — the records it appended, and (as Kafka's QuorumController) the uncommitted records its
        answer may depend on, even when it appended none or refused — its result or its exception."""
        controller = self.active()
        try:
            result = fn(controller)
        except Exception:
            await self.committed(self.next_offset - 1, timeout_s)
            raise
        await self.committed(self.next_offset - 1, timeout_s)
        return result

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            controller = self.controller
            if controller is None:
                return
            if self._activation_pending:
                self._activation_pending = False
                try:
                    self._on_activate(controller)  # type: ignore[misc]
                except NotControllerError:
                    pass
                except Exception:
                    log.exception("controller: activation step failed")
            try:
                fenced = controller.tick(_now_ms())
                if fenced:
                    log.info("controller: fenced broker(s) %s (no heartbeat within broker.session.timeout.ms)",
                             fenced)
            except NotControllerError:
                pass
            except Exception:
                log.exception("controller: tick failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for _o, _e, fut in self._waiters:
            if not fut.done():
                fut.set_exception(NotControllerError())
        self._waiters = []
