"""The Java client 4.x (kafka-clients from the reference lab) with group.protocol=consumer (KIP-848):
a subscribe()-ing consumer reads every record and commits; the committed offsets end at the log end
and Kafka's own kafka-consumer-groups tool describes the group. Runs against minikafka and Kafka."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT
from tests.support.group_helpers import committed_offsets, create_topic, group_broker, produce, unique  # noqa: F401

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

PROGRAM = ROOT / "tests" / "java" / "JavaConsumerGroupCheck.java"
PARTITIONS = 3


def test_java_consumer_protocol(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-java"), PARTITIONS)
    group = unique("cg-java")
    produce(bs, topic, PARTITIONS, 300)
    lab.fetch()
    proc = subprocess.run([lab.java_bin(), "-Xmx256m", "-cp", str(lab.libs_dir() / "*"), str(PROGRAM), bs, topic,
                           group, "300", "range"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == f"consumed=300 distinct=300 partitions={PARTITIONS}"
    assert committed_offsets(bs, group, topic, PARTITIONS) == {p: 100 for p in range(PARTITIONS)}
    out = lab.run_tool("kafka-consumer-groups", ["--bootstrap-server", bs, "--describe", "--group", group,
                                                 "--state"])
    assert out.returncode == 0, out.stdout + out.stderr
    assert group in out.stdout and "Empty" in out.stdout, out.stdout
