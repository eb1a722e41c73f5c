"""The Java client (kafka-clients from Maven Central), unmodified: a default producer (idempotent,
acks=all) and an assign()-ed read_committed consumer. Runs the single-file program
tests/java/JavaClientCheck.java against kafka-clients 4.x (the reference lab's jars) and 3.9."""
from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

PROGRAM = ROOT / "tests" / "java" / "JavaClientCheck.java"
CLIENTS_39 = "org.apache.kafka:kafka-clients:3.9.1"


def clients_39_jar() -> Path:
    """kafka-clients 3.9.1 from Maven Central into the lab cache (its compression/slf4j deps are
    shared with the 4.x lab jars)."""
    out = lab.cache_base() / "kafka-clients-3.9.1"
    jar = out / "kafka-clients-3.9.1.jar"
    if not jar.exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mvn", "-q", "-B", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy",
                        f"-Dartifact={CLIENTS_39}", f"-DoutputDirectory={out}"], check=True, timeout=600)
    return jar


def classpath(version: str) -> str:
    libs = lab.libs_dir()
    if version == "4.x":
        return str(libs / "*")
    # 3.9: its own clients jar first, then only the lab's non-kafka jars (compression codecs, slf4j)
    deps = [str(p) for p in sorted(libs.glob("*.jar")) if not p.name.startswith("kafka")]
    return ":".join([str(clients_39_jar()), *deps])


def run_java(version: str, bootstrap: str, topic: str, n: int, compression: str) -> str:
    lab.fetch()
    proc = subprocess.run([lab.java_bin(), "-Xmx256m", "-cp", classpath(version), str(PROGRAM),
                           bootstrap, topic, str(n), compression],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("version,compression,topic_codec", [
    ("4.x", "none", None), ("4.x", "zstd", None), ("3.9", "lz4", None),
    # the topic's compression.type re-codes the producer's batches: the Java consumer reads what the broker wrote
    ("4.x", "none", "lz4"), ("4.x", "zstd", "snappy"), ("3.9", "none", "gzip"), ("4.x", "gzip", "zstd")])
def test_java_default_producer_and_consumer(shared_broker, version, compression, topic_codec):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"java-{version}-{compression}-{topic_codec}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    config = {"compression.type": topic_codec} if topic_codec else {}
    admin.create_topics([NewTopic(topic, 3, 1, config=config)])[topic].result(timeout=30)
    n = 5000
    summary = run_java(version, shared_broker.bootstrap, topic, n, compression)
    assert summary == f"produced={n} consumed={n} distinct={n} in_order=true", summary
