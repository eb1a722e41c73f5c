"""The Java client (kafka-clients from Maven Central), unmodified: a transactional producer commits and
aborts; a Java read_committed consumer and a confluent-kafka read_committed consumer agree on what is
visible. Runs tests/java/JavaTxnCheck.java (single-file program) like test_java_client.py."""
from __future__ import annotations

import subprocess
import uuid

import pytest

from minikafka.coordinator.partitioning import java_string_hash
from tests.conftest import ROOT
from tests.integration.clients.test_java_client import classpath, lab
from tests.support.txn_helpers import consume_to_end, create_topics

PROGRAM = ROOT / "tests" / "java" / "JavaTxnCheck.java"
N = 300


def java_digest(values: list[str]) -> str:
    """Integer.toHexString(String.join(",", sorted values).hashCode())."""
    return format(java_string_hash(",".join(sorted(values))) & 0xFFFFFFFF, "x")


@pytest.mark.parametrize("version", ["4.x", "3.9"])
def test_java_transactional_producer_and_read_committed_consumers_agree(shared_broker, version):
    topic = f"java-txn-{version}-{uuid.uuid4().hex[:6]}"
    create_topics(shared_broker.bootstrap, {topic: 3})
    lab.fetch()
    proc = subprocess.run([lab.java_bin(), "-Xmx256m", "-cp", classpath(version), str(PROGRAM),
                           shared_broker.bootstrap, topic, f"java-txn-{uuid.uuid4().hex[:6]}", str(N)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    expected = [f"{p}-{i:06d}" for p in ("c", "d") for i in range(N)]
    assert summary == (f"committed={2 * N} consumed={2 * N} aborted_seen=0 in_order=true "
                       f"digest={java_digest(expected)}"), summary
    got = consume_to_end(shared_broker.bootstrap, topic, [0, 1, 2])  # confluent-kafka sees the same
    assert sorted(v.decode() for part in got.values() for _o, v in part) == sorted(expected)
    uncommitted = consume_to_end(shared_broker.bootstrap, topic, [0, 1, 2], isolation="read_uncommitted")
    assert sum(len(v) for v in uncommitted.values()) == 3 * N
