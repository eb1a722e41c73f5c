"""broker/network/memory_pool.py: the request memory budget (queued.max.request.bytes)."""
from __future__ import annotations

import pytest

from minikafka.broker.network.memory_pool import DEFAULT_CAPACITY, MemoryPool, pool_capacity

KiB, MiB = 1024, 1024 * 1024


def test_allocate_and_release_returns_to_zero():
    pool = MemoryPool(16 * MiB)
    assert pool.reserve == 4 * MiB and pool.general_capacity == 12 * MiB
    grants = [pool.try_allocate(MiB) for _ in range(12)]
    assert all(grants) and pool.in_use == 12 * MiB
    assert pool.try_allocate(MiB) is None  # general area full; 1 MiB is no small frame
    for g in grants:
        pool.release(g)
    assert pool.in_use == 0 and pool.peak_in_use == 12 * MiB


def test_small_frames_use_the_reserve_when_big_frames_hold_the_pool():
    pool = MemoryPool(16 * MiB)
    big = pool.try_allocate(12 * MiB)
    assert big is not None
    granted = []
    pool.wait(5 * MiB, granted.append)  # a big frame queued behind
    small = [pool.try_allocate(64 * KiB) for _ in range(64)]  # 4 MiB of small frames: the reserve
    assert all(small) and pool.reserve_in_use == 4 * MiB
    assert pool.try_allocate(64 * KiB) is None  # reserve exhausted too
    assert pool.try_allocate(64 * KiB + 1) is None  # not small
    pool.release(big)
    assert granted == [(0, 5 * MiB)]
    for g in small:
        pool.release(g)
    pool.release(granted[0])
    assert pool.in_use == 0 and pool.waiting_bytes == 0


def test_waiters_are_served_in_order_and_a_big_one_is_not_starved():
    pool = MemoryPool(10 * MiB, reserve=0)
    first = pool.try_allocate(6 * MiB)
    order = []
    pool.wait(8 * MiB, lambda g: order.append(("big", g)))
    # a smaller frame that would fit now must queue behind the big one (FIFO)
    assert pool.try_allocate(2 * MiB) is None
    pool.wait(2 * MiB, lambda g: order.append(("later", g)))
    pool.release(first)
    assert order == [("big", (0, 8 * MiB)), ("later", (0, 2 * MiB))]


def test_frame_bigger_than_the_pool_is_admitted_alone():
    pool = MemoryPool(4 * MiB)  # general area 3 MiB
    small = pool.try_allocate(MiB)
    assert pool.try_allocate(10 * MiB) is None
    got = []
    pool.wait(10 * MiB, got.append)
    assert not got
    pool.release(small)
    assert got == [(0, 10 * MiB)] and pool.in_use == 10 * MiB
    pool.release(got[0])
    assert pool.try_allocate(10 * MiB) == (0, 10 * MiB)  # idle pool: at once


def test_cancelled_waiter_does_not_block_the_queue():
    pool = MemoryPool(8 * MiB, reserve=0)
    held = pool.try_allocate(8 * MiB)
    gone = pool.wait(8 * MiB, lambda g: pytest.fail("cancelled waiter granted"))
    got = []
    pool.wait(4 * MiB, got.append)
    pool.cancel(gone)
    pool.release(held)
    assert got == [(0, 4 * MiB)] and pool.waiters == 0 and pool.waiting_bytes == 0


def test_capacity_from_config():
    assert pool_capacity(-1) == DEFAULT_CAPACITY  # Kafka's "unbounded" is bounded here
    assert pool_capacity(0) == DEFAULT_CAPACITY
    assert pool_capacity(5 * MiB) == 5 * MiB
    with pytest.raises(ValueError):
        MemoryPool(0)
