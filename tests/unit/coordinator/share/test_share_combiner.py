"""The state-batch combiner (Kafka's PersisterStateBatchCombiner): pruning at the start offset, merging of equal
delivery information, and the higher (delivery count, state) winning on overlaps."""
from __future__ import annotations

import pytest

from minikafka.coordinator.share.combiner import combine
from minikafka.coordinator.share.persister import StateBatch as B

CASES = [
    # (so far, new, start offset, expected)
    ("prune stored batch at start offset", [B(100, 130, 0, 1)], [], 120, [B(120, 130, 0, 1)]),
    ("prune new batch at start offset", [], [B(100, 130, 0, 1)], 120, [B(120, 130, 0, 1)]),
    ("batch before start offset dropped", [B(10, 20, 0, 1)], [B(30, 40, 2, 1)], 25, [B(30, 40, 2, 1)]),
    ("empty", [], [], 5, []),
    ("identical batches count once", [B(100, 110, 0, 1)], [B(100, 110, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ("same state, new inside", [B(100, 110, 0, 1)], [B(105, 108, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ("same state, new extends", [B(100, 110, 0, 1)], [B(105, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),
    ("same state, contiguous joins", [B(100, 110, 0, 1)], [B(111, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),
    ("different state, contiguous stays apart", [B(100, 110, 0, 1)], [B(111, 115, 2, 1)], -1,
     [B(100, 110, 0, 1), B(111, 115, 2, 1)]),
    ("gap is not filled", [B(0, 5, 2, 1)], [B(0, 5, 2, 1), B(11, 15, 0, 1)], -1, [B(0, 5, 2, 1), B(11, 15, 0, 1)]),
    ("higher count replaces same range", [B(100, 110, 0, 1)], [B(100, 110, 0, 2)], -1, [B(100, 110, 0, 2)]),
    ("lower count loses same range", [B(100, 110, 0, 3)], [B(100, 110, 0, 1)], -1, [B(100, 110, 0, 3)]),
    ("higher count on a prefix splits", [B(100, 110, 0, 1)], [B(100, 105, 0, 2)], -1,
     [B(100, 105, 0, 2), B(106, 110, 0, 1)]),
    ("lower count on a prefix loses", [B(100, 110, 0, 3)], [B(100, 105, 0, 1)], -1, [B(100, 110, 0, 3)]),
    ("lower count beyond the end keeps its tail", [B(100, 110, 0, 3)], [B(100, 115, 0, 1)], -1,
     [B(100, 110, 0, 3), B(111, 115, 0, 1)]),
    ("higher state in the middle splits in three", [B(100, 115, 0, 1)], [B(105, 110, 1, 1)], -1,
     [B(100, 104, 0, 1), B(105, 110, 1, 1), B(111, 115, 0, 1)]),
    ("lower state in the middle loses", [B(100, 115, 1, 1)], [B(105, 110, 0, 1)], -1, [B(100, 115, 1, 1)]),
    ("higher count at the end", [B(100, 110, 0, 1)], [B(105, 110, 0, 2)], -1, [B(100, 104, 0, 1), B(105, 110, 0, 2)]),
    ("higher count reaching beyond", [B(100, 110, 0, 1)], [B(105, 115, 0, 2)], -1,
     [B(100, 104, 0, 1), B(105, 115, 0, 2)]),
    ("lower count reaching beyond", [B(100, 110, 0, 2)], [B(105, 115, 0, 1)], -1,
     [B(100, 110, 0, 2), B(111, 115, 0, 1)]),
    ("overlapping new batches, same state", [B(100, 110, 0, 1), B(121, 130, 0, 1)],
     [B(111, 119, 2, 2), B(116, 123, 2, 2)], -1, [B(100, 110, 0, 1), B(111, 123, 2, 2), B(124, 130, 0, 1)]),
    ("overlapping new batches, with pruning", [B(100, 110, 0, 1), B(121, 130, 0, 1)],
     [B(111, 119, 2, 2), B(116, 123, 2, 2)], 120, [B(120, 123, 2, 2), B(124, 130, 0, 1)]),
    ("several new batches over one stored", [B(111, 120, 0, 1)],
     [B(111, 113, 0, 2), B(114, 114, 2, 1), B(115, 119, 0, 2)], -1,
     [B(111, 113, 0, 2), B(114, 114, 2, 1), B(115, 119, 0, 2), B(120, 120, 0, 1)]),
    ("highest of nested new batches wins", [B(100, 110, 0, 1)],
     [B(101, 105, 1, 2), B(101, 115, 2, 2), B(101, 120, 3, 2)], -1, [B(100, 100, 0, 1), B(101, 120, 3, 2)]),
]


@pytest.mark.parametrize("so_far,new,start,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_combine(so_far, new, start, expected):
    assert combine(so_far, new, start) == expected


def test_result_is_sorted_and_disjoint():
    import random
    rnd = random.Random(7)
    for _ in range(300):
        def batches(n):
            out = []
            for _ in range(n):
                first = rnd.randrange(0, 60)
                out.append(B(first, first + rnd.randrange(0, 15), rnd.choice((0, 2, 4)), rnd.randrange(0, 4)))
            return out
        result = combine(batches(rnd.randrange(0, 6)), batches(rnd.randrange(0, 6)), rnd.choice((-1, 0, 10, 30)))
        for a, b in zip(result, result[1:]):
            assert a.last_offset < b.first_offset, result
