"""Group/transactional id -> coordinator partition, against values computed by Java (jshell):
`Utils.abs(id.hashCode()) % 50` with Utils.abs(Integer.MIN_VALUE) == 0."""
from __future__ import annotations

import pytest

from minikafka.coordinator.partitioning import java_string_hash, kafka_abs, partition_for

# (id, String.hashCode(), partition of 50) from OpenJDK 17
JAVA_VALUES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("group", 98629247, 47),
    ("my-group", -1906497762, 12),
    ("test-consumer-group", -1793216381, 31),
    ("console-consumer-12345", 158455506, 6),
    # hashCode == Integer.MIN_VALUE: Utils.abs gives 0 (Math.abs would stay negative)
    ("polygenelubricants", -2147483648, 0),
    ("GydZG_", -2147483648, 0),
    ("DESIGNING WORKHOUSES", -2147483648, 0),
    ("\u00fc\u00f1\u00ed\u00e7\u00f8d\u00e9-gr\u00fcppe", 2051543091, 41),
    ("\U0001F600emoji", -1233692477, 27),  # a surrogate pair: two UTF-16 code units
    ("z" * 30, -291400512, 12),
]


@pytest.mark.parametrize("key,java_hash,partition", JAVA_VALUES)
def test_matches_java(key, java_hash, partition):
    assert java_string_hash(key) == java_hash
    assert partition_for(key, 50) == partition


def test_kafka_abs():
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7


def test_other_partition_counts():
    assert partition_for("my-group", 1) == 0
    assert partition_for("my-group", 7) == 1906497762 % 7
