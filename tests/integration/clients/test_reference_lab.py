"""The reference lab: a real Apache Kafka 4.x (scripts/apache_kafka.py) as an oracle, and Kafka's own
CLI tools (TopicCommand, ConsoleProducer/Consumer, DumpLogSegments) pointed at minikafka.

The first run fetches the jars from Maven Central into ~/.cache/minikafka (or $MINIKAFKA_KAFKA_CACHE);
that may take ~10-60 s once. After that the module runs in ~20-30 s. Needs java >= 17 and mvn.
"""
from __future__ import annotations

import importlib.util
import re
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TOOL_TIMEOUT = 60


def _load_lab():
    name = "minikafka_reference_lab"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "apache_kafka.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


lab = _load_lab()


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    return lab.fetch()


@pytest.fixture(scope="module")
def apache_kafka(kafka_libs):
    kb = lab.KafkaBroker()
    kb.start(timeout=90)
    yield kb
    rc = kb.stop()
    log = kb.log_text(20000)
    kb.cleanup()
    assert rc in (0, 143), f"Apache Kafka exit code {rc}:\n{log}"


def tool(name: str, *args: str, input: str | None = None, ok: bool = True):
    """Run a Kafka CLI tool; with ok=True assert exit 0 and no Java exception on stderr."""
    res = lab.run_tool(name, [str(a) for a in args], input=input, timeout=TOOL_TIMEOUT)
    out = f"$ {name} {' '.join(map(str, args))}\n--- exit {res.returncode}\n--- stdout\n{res.stdout[-6000:]}\n" \
          f"--- stderr\n{res.stderr[-6000:]}"
    if ok:
        assert res.returncode == 0, out
        assert "Exception" not in res.stderr and "ERROR" not in res.stderr, out
    return res, out


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------- Apache Kafka as oracle --

def test_apache_kafka_starts_and_answers(apache_kafka):
    assert apache_kafka.alive()
    assert lab.probe("127.0.0.1", apache_kafka.port)
    assert apache_kafka.ready_seconds is not None and apache_kafka.ready_seconds < 60
    assert "Kafka Server started" in apache_kafka.log_text(10**7)


def test_apache_kafka_confluent_roundtrip_and_topic_tools(apache_kafka):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = apache_kafka.bootstrap
    topic, group = uniq("lab-rt"), uniq("lab-group")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(timeout=30)

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    sent = {(f"k{i}".encode(), f"v{i}".encode()) for i in range(60)}
    for key, value in sorted(sent):
        producer.produce(topic, value=value, key=key)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": True, "auto.commit.interval.ms": 200})
    consumer.subscribe([topic])
    got, deadline = set(), time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < deadline:
        for msg in consumer.consume(100, timeout=0.5):
            assert not msg.error(), msg.error()
            got.add((msg.key(), msg.value()))
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == sent

    res, _ = tool("kafka-topics", "--bootstrap-server", bootstrap, "--list")
    assert topic in res.stdout.split()
    res, _ = tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    assert "PartitionCount: 3" in res.stdout
    assert len(re.findall(rf"Topic: {topic}\tPartition: \d\tLeader: 1\t", res.stdout)) == 3, res.stdout

    res, _ = tool("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    lines = [ln.split() for ln in res.stdout.splitlines() if topic in ln]
    assert len(lines) == 3, res.stdout
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert sum(int(cols[3]) for cols in lines) == len(sent), res.stdout
    assert all(cols[5] == "0" for cols in lines), res.stdout


def test_apache_kafka_transactions_tool_and_dump_log(apache_kafka):
    from confluent_kafka import Producer

    bootstrap = apache_kafka.bootstrap
    topic, txn_id = uniq("lab-txn"), uniq("lab-tx")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"txn-{i}".encode(), partition=0)
    producer.commit_transaction(30)

    res, _ = tool("kafka-transactions", "--bootstrap-server", bootstrap, "list")
    assert txn_id in res.stdout, res.stdout
    res, _ = tool("kafka-transactions", "--bootstrap-server", bootstrap, "describe", "--transactional-id", txn_id)
    assert "CompleteCommit" in res.stdout or "Empty" in res.stdout, res.stdout

    seg = apache_kafka.data_dir / f"{topic}-0" / "00000000000000000000.log"
    res, out = tool("kafka-dump-log", "--files", seg, "--print-data-log", "--deep-iteration")
    assert out.count("payload: txn-") == 5, out
    assert "isTransactional: true" in res.stdout and "endTxnMarker: COMMIT" in res.stdout, out


# ------------------------------------------------------------------- Kafka's tools vs. minikafka --

def test_topic_command_against_minikafka(broker):
    b = broker.bootstrap
    res, out = tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "x", "--partitions", "3")
    assert "Created topic x." in res.stdout, out
    res, out = tool("kafka-topics", "--bootstrap-server", b, "--list")
    assert "x" in res.stdout.split(), out
    res, out = tool("kafka-topics", "--bootstrap-server", b, "--describe", "--topic", "x")
    assert re.search(r"Topic: x\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1", res.stdout), out
    for p in range(3):
        assert re.search(rf"Topic: x\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1", res.stdout), out
    # creating it again is TOPIC_ALREADY_EXISTS, reported by the tool as an error (exit 1)
    res, out = tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "x", "--partitions", "3",
                    ok=False)
    assert res.returncode != 0 and "already exists" in (res.stdout + res.stderr), out


def test_console_producer_and_consumer_against_minikafka(broker):
    b = broker.bootstrap
    tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "lines", "--partitions", "1")
    lines = [f"key{i}:line number {i} ünïcode" for i in range(7)]
    tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "lines",
         "--property", "parse.key=true", "--property", "key.separator=:", input="\n".join(lines) + "\n")
    # --partition/--offset uses assign(): no consumer group (FindCoordinator) needed
    res, out = tool("kafka-console-consumer", "--bootstrap-server", b, "--topic", "lines", "--partition", "0",
                    "--offset", "earliest", "--max-messages", str(len(lines)), "--timeout-ms", "20000",
                    "--property", "print.key=true", "--property", "key.separator=:",
                    "--property", "print.offset=true")
    got = [ln for ln in res.stdout.splitlines() if ln.startswith("Offset:")]  # skip deprecation notices
    assert got == [f"Offset:{i}:{ln}" for i, ln in enumerate(lines)], out
    assert f"Processed a total of {len(lines)} messages" in res.stderr, out


@pytest.mark.minikafka_only  # reads minikafka's segment files
def test_dump_log_segments_decodes_minikafka_files(broker):
    b = broker.bootstrap
    tool("kafka-topics", "--bootstrap-server", b, "--create", "--topic", "dump", "--partitions", "1")
    plain = [f"pk{i:04d}\tplain-{i:04d} " + "x" * 100 for i in range(200)]
    tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "dump", "--property", "parse.key=true",
         "--producer-property", "batch.size=2000", "--producer-property", "linger.ms=0",
         input="\n".join(plain) + "\n")
    gz = [f"gzipped-{i:04d} " + "y" * 50 for i in range(100)]
    tool("kafka-console-producer", "--bootstrap-server", b, "--topic", "dump", "--compression-codec", "gzip",
         "--producer-property", "linger.ms=50", input="\n".join(gz) + "\n")
    broker.stop()  # clean shutdown: the files are final

    part = broker.data_dir / "dump-0"
    base = part / "00000000000000000000"
    files = [base.with_suffix(s) for s in (".log", ".index", ".timeindex")]
    for f in files:
        assert f.exists(), sorted(p.name for p in part.iterdir())
    res, out = tool("kafka-dump-log", "--files", ",".join(map(str, files)), "--print-data-log",
                    "--deep-iteration")
    text = res.stdout
    for bad in ("Mismatches", "mismatch", "corrupt", "isvalid: false", "invalid bytes", "out of order",
                "Exception", "not found"):
        assert bad not in text, f"{bad!r} in DumpLogSegments output\n{out}"
    offsets = [int(m) for m in re.findall(r"^\| offset: (\d+)", text, re.M)]
    assert offsets == list(range(300)), out
    assert "compresscodec: gzip" in text and "compresscodec: none" in text, out
    assert "key: pk0000 payload: plain-0000" in text and "payload: gzipped-0099" in text, out
    # the index files were written (200 * ~150 bytes of small batches > index.interval.bytes 4096)
    index_entries = re.findall(r"^offset: (\d+) position: (\d+)", text, re.M)
    assert index_entries, f"no offset-index entries in {files[1]}\n{out}"
    time_entries = re.findall(r"^timestamp: (\d+) offset: (\d+)", text, re.M)
    assert time_entries, f"no time-index entries in {files[2]}\n{out}"
