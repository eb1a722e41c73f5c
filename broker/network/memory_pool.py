"""The request memory budget (Kafka's `queued.max.request.bytes` / SimpleMemoryPool).

Reading a request frame takes its declared size from the pool; the connection gives it back once
the response has been handed to the transport. When the pool has no room, the connection stops
reading its socket (backpressure, never an error) and is granted the memory, in arrival order,
when other requests give theirs back.

Rules (ours; Kafka's pool is simpler and may overshoot by a whole request):
- The pool's `capacity` is split into a general area and a small **reserve** that only frames of at
  most `small_max` bytes (64 KiB) may use. A frame is served from the general area when it fits and
  nobody is queued before it (FIFO, so a big frame cannot be starved by a stream of smaller ones);
  a small frame that does not get general memory takes reserve memory at once if the reserve has
  room. So a canary's small requests still get through while big slow frames hold the general area.
- A frame larger than the general area (possible when `queued.max.request.bytes` is set below
  `socket.request.max.bytes`) is admitted alone: when it reaches the head of the queue and the
  general area is completely free. Memory in use is then bounded by max(capacity, one largest frame
  + reserve).
"""
from __future__ import annotations

from collections import deque
from typing import Callable

SMALL_FRAME_MAX = 64 * 1024
RESERVE_MAX = 4 * 1024 * 1024

# a grant: (area, size); area 0 = general, 1 = reserve
Grant = tuple[int, int]
GENERAL, RESERVE = 0, 1


class _Waiter:
    __slots__ = ("size", "callback", "cancelled")

    def __init__(self, size: int, callback: Callable[[Grant], None]) -> None:
        self.size = size
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class MemoryPool:
    """Byte budget for request frames being read or handled; single-threaded (event loop)."""

    def __init__(self, capacity: int, small_max: int = SMALL_FRAME_MAX, reserve: int | None = None) -> None:
        if capacity <= 0:
            raise ValueError("memory pool capacity must be positive")
        self.capacity = capacity
        self.small_max = small_max
        self.reserve = min(RESERVE_MAX, capacity // 4) if reserve is None else min(reserve, capacity)
        self.general_capacity = capacity - self.reserve
        self.general_in_use = 0
        self.reserve_in_use = 0
        self.waiting_bytes = 0
        self.peak_in_use = 0
        self.grants = 0
        self.waits = 0
        self._queue: deque[_Waiter] = deque()

    # -- counters ---------------------------------------------------------------------------
    @property
    def in_use(self) -> int:
        return self.general_in_use + self.reserve_in_use

    @property
    def available(self) -> int:
        return max(self.capacity - self.in_use, 0)

    @property
    def waiters(self) -> int:
        return sum(1 for w in self._queue if not w.cancelled)

    def stats(self) -> dict[str, int]:
        return {"capacity": self.capacity, "reserve": self.reserve, "in_use": self.in_use,
                "reserve_in_use": self.reserve_in_use, "peak_in_use": self.peak_in_use,
                "waiters": self.waiters, "waiting_bytes": self.waiting_bytes,
                "grants": self.grants, "waits": self.waits}

    # -- allocation -------------------------------------------------------------------------
    def _fits_general(self, size: int) -> bool:
        if self.general_in_use + size <= self.general_capacity:
            return True
        return size > self.general_capacity and self.general_in_use == 0  # oversize: alone

    def _fits_reserve(self, size: int) -> bool:
        return size <= self.small_max and self.reserve_in_use + size <= self.reserve

    def _take(self, area: int, size: int) -> Grant:
        if area == GENERAL:
            self.general_in_use += size
        else:
            self.reserve_in_use += size
        self.grants += 1
        if self.in_use > self.peak_in_use:
            self.peak_in_use = self.in_use
        return (area, size)

    def try_allocate(self, size: int) -> Grant | None:
        """A grant now, or None (the caller then waits with `wait`)."""
        if not self._has_waiters() and self._fits_general(size):
            return self._take(GENERAL, size)
        if self._fits_reserve(size):
            return self._take(RESERVE, size)
        return None

    def wait(self, size: int, callback: Callable[[Grant], None]) -> _Waiter:
        """Queue for `size` bytes; `callback(grant)` runs (synchronously, from `release`) once granted.
        Cancel the returned handle if the requester goes away first."""
        waiter = _Waiter(size, callback)
        self._queue.append(waiter)
        self.waiting_bytes += size
        self.waits += 1
        return waiter

    def release(self, grant: Grant) -> None:
        area, size = grant
        if area == GENERAL:
            self.general_in_use -= size
            assert self.general_in_use >= 0, "memory pool released more than it gave"
        else:
            self.reserve_in_use -= size
            assert self.reserve_in_use >= 0, "memory pool released more than it gave"
        self._wake()

    def cancel(self, waiter: _Waiter) -> None:
        if not waiter.cancelled:
            waiter.cancel()
            self.waiting_bytes -= waiter.size
            self._wake()  # a cancelled head may have been blocking the queue

    def _has_waiters(self) -> bool:
        while self._queue and self._queue[0].cancelled:
            self._queue.popleft()
        return bool(self._queue)

    def _wake(self) -> None:
        # general area: strictly in order
        while self._has_waiters() and self._fits_general(self._queue[0].size):
            waiter = self._queue.popleft()
            self._grant(waiter, GENERAL)
        # reserve: any queued small frame that fits, in order
        if self._queue and self.reserve_in_use < self.reserve:
            for waiter in list(self._queue):
                if not waiter.cancelled and self._fits_reserve(waiter.size):
                    self._queue.remove(waiter)
                    self._grant(waiter, RESERVE)

    def _grant(self, waiter: _Waiter, area: int) -> None:
        waiter.cancelled = True  # no longer queued
        self.waiting_bytes -= waiter.size
        waiter.callback(self._take(area, waiter.size))


DEFAULT_CAPACITY = 128 * 1024 * 1024


def pool_capacity(queued_max_request_bytes: int) -> int:
    """`queued.max.request.bytes`; Kafka's -1 (unbounded) means our finite default here."""
    return queued_max_request_bytes if queued_max_request_bytes > 0 else DEFAULT_CAPACITY
