"""Which partition of a coordinator state topic owns a key (group id or transactional id).

Kafka: `Utils.abs(key.hashCode()) % partitionCount`, where `String.hashCode` runs over UTF-16 code
units with 32-bit signed overflow and `Utils.abs(Integer.MIN_VALUE)` is 0 (not a bit mask).
"""
from __future__ import annotations

import functools

_INT_MIN = -(2**31)


@functools.lru_cache(maxsize=1 << 14)  # every transactional request asks again for the same few ids
def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: |n|, except Integer.MIN_VALUE maps to 0."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(key: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % partitions
