"""OffsetIndex / TimeIndex file format, lookups, truncation, sanity checks."""
from __future__ import annotations

import struct

from minikafka.storage.index import OffsetIndex, TimeIndex


def test_offset_index_format_lookup_truncate(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100)
    assert index.lookup(150) == 0 and index.last_offset == 100
    for rel, pos in [(3, 0), (10, 500), (20, 1200)]:
        index.append(100 + rel, pos)
    assert path.read_bytes() == b"" and index.unwritten == 3  # held back; lookups use memory
    index.write_unwritten()
    assert path.read_bytes() == b"".join(struct.pack(">ii", r, p) for r, p in [(3, 0), (10, 500), (20, 1200)])
    assert index.unwritten == 0
    assert [index.lookup(o) for o in (100, 103, 109, 110, 119, 120, 10**9)] == [0, 0, 0, 500, 500, 1200, 1200]
    assert index.lookup(125, limit=1200) == 500
    assert index.sanity_check(1201) is None and index.sanity_check(1200) is not None
    index.truncate_to(110)
    assert index.entries() == [(103, 0)] and path.stat().st_size == 8
    index.close()
    reopened = OffsetIndex(path, 100)
    assert reopened.entries() == [(103, 0)]
    reopened.close()
    path.write_bytes(struct.pack(">iiii", 5, 100, 4, 200))
    assert OffsetIndex(path, 100).sanity_check(10**6) is not None


def test_time_index_format_lookup_truncate(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0)
    assert index.last_entry == (-1, 0)
    assert index.maybe_append(1000, 4)
    assert not index.maybe_append(1000, 6)  # not larger: skipped
    assert index.maybe_append(2000, 9)
    assert index.maybe_append(3000, 9)
    assert path.stat().st_size == 0 and index.unwritten == 3
    index.flush()  # writes what was held back, then fsyncs
    assert path.stat().st_size == 36
    assert struct.unpack(">qi", path.read_bytes()[12:24]) == (2000, 9)
    assert index.lookup(1500) == (2000, 9) and index.lookup(3001) is None
    assert index.offset_before(1000) is None and index.offset_before(1001) == 4
    assert index.sanity_check() is None
    index.truncate_to(9)
    assert index.entries() == [(1000, 4)] and path.stat().st_size == 12
    index.close()
    path.write_bytes(struct.pack(">qiqi", 5, 1, 4, 2))
    assert TimeIndex(path, 0).sanity_check() is not None


def test_truncation_keeps_held_back_entries_below_the_cut_and_close_writes_the_rest(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0)
    index.append(5, 100)
    index.write_unwritten()
    for off, pos in [(9, 200), (14, 300), (20, 400)]:
        index.append(off, pos)
    index.truncate_to(15)  # one entry on disk, two held back below the cut
    assert index.entries() == [(5, 100), (9, 200), (14, 300)] and path.stat().st_size == 24
    index.append(30, 500)
    index.close()
    assert OffsetIndex(path, 0).entries() == [(5, 100), (9, 200), (14, 300), (30, 500)]
    index = OffsetIndex(path, 0)
    index.append(40, 600)
    index.reset()  # held-back entries go with the rest
    index.close()
    assert path.stat().st_size == 0
