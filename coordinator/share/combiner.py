"""Merging state batches (Kafka's PersisterStateBatchCombiner): the batches stored so far plus the batches of a
write become one sorted list of non-overlapping batches.

Rules, as Kafka 4.3's:
- with a start offset (not -1), batches ending before it go and a batch straddling it starts at it;
- batches are taken in order (first offset, last offset, delivery count, delivery state); two that overlap,
  or touch with the same delivery count and state, are resolved as a pair and put back until no pair is left;
- same (count, state): one batch spanning both;
- different: on the overlap the batch with the larger (delivery count, then delivery state) wins, the rest of
  each keeps its own state (a new batch covering the same range as an old one replaces it).
Invariant of the result: sorted by first offset, no two batches share an offset.
"""
from __future__ import annotations

import heapq

from minikafka.coordinator.share.persister import StateBatch


def _order(b: StateBatch) -> tuple[int, int, int, int]:
    return b.first_offset, b.last_offset, b.delivery_count, b.delivery_state


def _info(b: StateBatch) -> tuple[int, int]:
    """(delivery count, delivery state): how Kafka ranks two batches' delivery information."""
    return b.delivery_count, b.delivery_state


def _cmp(a: StateBatch, b: StateBatch) -> int:
    x, y = _info(a), _info(b)
    return (x > y) - (x < y)


def prune(batches: list[StateBatch], start_offset: int) -> list[StateBatch]:
    """Batches at or after `start_offset` (-1: all), a straddling one cut to start there."""
    if start_offset == -1:
        return list(batches)
    out = []
    for b in batches:
        if b.last_offset < start_offset:
            continue
        if b.first_offset >= start_offset:
            out.append(b)
        else:
            out.append(StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count))
    return out


def _resolve(prev: StateBatch, cand: StateBatch) -> list[StateBatch]:
    """What replaces an overlapping (or touching, equal-state) pair; `prev` sorts before `cand`."""
    c = _cmp(cand, prev)
    if c == 0:
        return [StateBatch(prev.first_offset, max(cand.last_offset, prev.last_offset), prev.delivery_state,
                           prev.delivery_count)]
    if cand.first_offset == prev.first_offset:  # then prev.last_offset <= cand.last_offset (sort order)
        if cand.last_offset == prev.last_offset or c > 0:
            return [cand]
        return [prev, StateBatch(prev.last_offset + 1, cand.last_offset, cand.delivery_state, cand.delivery_count)]
    head = StateBatch(prev.first_offset, cand.first_offset - 1, prev.delivery_state, prev.delivery_count)
    if cand.last_offset < prev.last_offset:  # prev swallows cand
        if c < 0:
            return [prev]
        tail = StateBatch(cand.last_offset + 1, prev.last_offset, prev.delivery_state, prev.delivery_count)
        return [head, cand, tail]
    if cand.last_offset == prev.last_offset:
        return [prev] if c < 0 else [head, cand]
    if c < 0:  # cand reaches beyond prev
        return [prev, StateBatch(prev.last_offset + 1, cand.last_offset, cand.delivery_state, cand.delivery_count)]
    return [head, cand]


def combine(so_far: list[StateBatch], new: list[StateBatch], start_offset: int) -> list[StateBatch]:
    """The stored batches `so_far` merged with a write's `new` batches (see the module rules).

    Kafka keeps the batches in a TreeSet and repeatedly resolves the first overlapping pair, moving the
    batches before it to the result; here a heap does the same in O(n log n): the smallest batch either
    pairs with the next one or can never pair again (every other batch starts no earlier)."""
    combined = prune([*so_far, *new], start_offset)
    if len(combined) < 2:
        return combined
    present = set(combined)  # Kafka's TreeSet: equal batches count once
    heap = [(_order(b), b) for b in present]
    heapq.heapify(heap)
    done: list[StateBatch] = []
    while heap:
        _, prev = heapq.heappop(heap)
        present.discard(prev)
        if not heap:
            done.append(prev)
            break
        cand = heap[0][1]
        if not (cand.first_offset <= prev.last_offset or (
                prev.last_offset + 1 == cand.first_offset and _cmp(prev, cand) == 0)):
            done.append(prev)
            continue
        heapq.heappop(heap)
        present.discard(cand)
        for b in _resolve(prev, cand):
            if b not in present:
                present.add(b)
                heapq.heappush(heap, (_order(b), b))
    return done
