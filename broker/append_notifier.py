"""Wakes long-polling Fetch requests when a watched partition gets an append."""
from __future__ import annotations

import asyncio
from typing import Iterable

TopicPartition = tuple[str, int]


class AppendNotifier:
    """Futures keyed by partition; `notify` resolves every future watching that partition."""

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[asyncio.Future]] = {}

    def watch(self, partitions: Iterable[TopicPartition]) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for tp in keys:
            self._watchers.setdefault(tp, set()).add(fut)

        def _cleanup(_f: asyncio.Future) -> None:
            for tp in keys:
                s = self._watchers.get(tp)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._watchers[tp]
        fut.add_done_callback(_cleanup)
        return fut

    def notify(self, tp: TopicPartition) -> None:
        for fut in list(self._watchers.get(tp, ())):
            if not fut.done():
                fut.set_result(None)
