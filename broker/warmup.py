"""What the broker does right after its listeners open, while clients are already served.

Start-up imports only what listening and the first requests (ApiVersions, Metadata) need; the rest
comes here:
1. if `__consumer_offsets` / `__transaction_state` exist: their coordinators' modules, then their
   logs (opened in worker threads), then the coordinators are built on the event loop, which starts
   their loading (broker/state.py);
2. every other handler module (and what it imports; on a quorum node the controller listeners' too,
   and the codecs of the election RPCs, raft/wire.py's `warm_codecs`);
3. the remaining partition logs, opened a few at a time in a worker thread (broker/log_opening.py),
   unless `minikafka.log.open.background` is false.
A request for an API or a partition not reached yet loads it itself (`registry.spec_for`, the log
manager's lazy `get`), so the order here only decides what is ready early. The module lists are
broker/installation.py's, which start-up checks are all present; a warm-up that fails all the same ends
the process (broker/server.py): a broker never half-starts.

Imports run in one worker thread, leaf modules first, starting START_DELAY_S after the port opened and
pausing before each module while requests are in flight: on the event loop a big module (the
kafka.protocol admin package, the partition log) would hold every connection up for tens of
milliseconds, while the thread only shares the GIL with the loop (a request waits for it about a switch
interval, 5 ms, at a time; measured: Metadata p99 ~9 ms instead of ~3 ms during the first second).
This is safe because minikafka's modules import each other without cycles (tests/unit/broker/test_warmup.py):
when the loop thread needs a module the worker is importing, it waits on that module's import lock,
and no two imports can wait on each other.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import sys
import threading
import time
from typing import Callable, Iterable

from minikafka.broker.installation import GROUP_MODULES, STORAGE_MODULES, TXN_MODULES, handler_modules
from minikafka.broker.log_opening import open_logs, open_remaining
from minikafka.broker.state import OFFSETS_TOPIC, TXN_TOPIC, BrokerState

log = logging.getLogger(__name__)

START_DELAY_S = 0.05  # clients that waited for the port send their first requests at once
YIELD_MAX_S = 0.02
YIELD_POLL_S = 0.001


async def warm_up(state: BrokerState) -> None:
    t0 = time.monotonic()
    pool = state.memory_pool

    def busy() -> bool:  # a request is being read or handled (read from the thread: a benign race)
        return pool.in_use > 0

    await asyncio.sleep(START_DELAY_S)
    for topic, modules, build in ((OFFSETS_TOPIC, GROUP_MODULES, lambda: state.groups),
                                  (TXN_TOPIC, TXN_MODULES, lambda: state.txns)):
        info = state.catalog.get(topic)
        if info is None:
            continue
        await import_in_thread(modules, busy)
        await open_logs(state.logs, [(topic, p) for p in range(info.partitions)])
        build()
    await import_in_thread(STORAGE_MODULES + tuple(handler_modules(quorum=state.quorum is not None)), busy)
    if state.quorum is not None:  # an election's first Vote round would otherwise generate its codecs
        from minikafka.raft.wire import warm_codecs
        await asyncio.to_thread(warm_codecs)
    state.group_configs  # noqa: B018  (read now: an unreadable file of group overrides fails the start-up)
    log.info("handlers and coordinators loaded %.0f ms after start", (time.monotonic() - t0) * 1000)
    if state.config.get_bool("minikafka.log.open.background"):
        await open_remaining(state.logs,
                             progress_interval_s=int(state.config.get("minikafka.log.recovery.progress.interval.ms")) / 1000,
                             delay_s=int(state.config.get("minikafka.test.log.open.delay.ms")) / 1000)


async def import_in_thread(names: Iterable[str], busy: Callable[[], bool] = lambda: False) -> None:
    """Import `names` in order in a worker thread (see the module docstring). Before each module the
    thread waits up to YIELD_MAX_S while `busy()` (requests in flight: the GIL is theirs); a cancelled
    warm-up stops the thread after the module it is importing."""
    stop = threading.Event()
    try:
        await asyncio.to_thread(_import_each, tuple(names), stop, busy)
    finally:
        stop.set()


def _import_each(names: tuple[str, ...], stop: threading.Event, busy: Callable[[], bool]) -> None:
    for name in names:
        if name in sys.modules:
            continue
        deadline = time.monotonic() + YIELD_MAX_S
        while busy() and time.monotonic() < deadline and not stop.is_set():
            time.sleep(YIELD_POLL_S)
        if stop.is_set():
            return
        importlib.import_module(name)
