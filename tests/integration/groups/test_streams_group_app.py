"""A Kafka Streams 4.3.1 application on a streams group (KIP-1071: group.protocol=streams) with
processing.guarantee=exactly_once_v2: two instances (processes) of tests/java/StreamsEosApp.java with two
stream threads each sum amounts per word, through a repartition topic and a state store whose internal
topics the broker creates. One instance is killed -9 while input is flowing and restarted on its state
dir; the output, read with read_committed, must end at exactly the expected sums (nothing lost, nothing
counted twice). kafka-streams-groups --list/--describe see the running group. Black-box; runs against
minikafka and, with --broker=kafka, against Apache Kafka 4.3.1.

(A broker kill -9 variant belongs to minikafka's cluster harness, not here.)
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest

from tests.conftest import ROOT, BrokerProcess, _other_broker, broker_kind
from tests.support.group_helpers import FAST_GROUPS, create_topic, unique
from tests.support.helpers import wait_until

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

APP = ROOT / "tests" / "java" / "StreamsEosApp.java"
INPUT_PARTITIONS = 4
WORDS = 16
RECORDS = 6000
CHUNK = 300


def word(i: int) -> str:
    return f"w{(i * 7) % WORDS}"


def amount(i: int) -> int:
    return i % 9 + 1


EXPECTED = defaultdict(int)
for _i in range(RECORDS):
    EXPECTED[word(_i)] += amount(_i)
EXPECTED = dict(EXPECTED)


@pytest.fixture(scope="module")
def streams_app_broker(request, tmp_path_factory):
    """The broker under test; minikafka with Kafka's streams-group defaults (45 s session timeout)."""
    if broker_kind(request.config) != "minikafka":
        yield _other_broker(request)
        return
    d = tmp_path_factory.mktemp("streams-app") / "data"
    d.mkdir()
    b = BrokerProcess(d, FAST_GROUPS).start()
    yield b
    if b.alive():
        b.stop()
    assert "Traceback" not in b.log_text(), b.log_text()


class Instance:
    """One StreamsEosApp process; its stdout lines are collected by a thread."""

    def __init__(self, bootstrap: str, app_id: str, input_topic: str, output_topic: str, state_dir) -> None:
        self.cmd = [lab.java_bin(), "-Xmx384m", "-XX:+UseSerialGC", "-cp", str(lab.libs_dir() / "*"), str(APP),
                    bootstrap, app_id, input_topic, output_topic, str(state_dir)]
        self.lines: list[str] = []
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def states(self) -> list[str]:
        return [ln.split()[1] for ln in self.lines if ln.startswith("STATE ")]

    def running(self) -> bool:
        s = self.states()
        return bool(s) and s[-1] == "RUNNING"

    def errors(self) -> list[str]:
        return [ln for ln in self.lines if ln.startswith("ERROR ")]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(15)

    def terminate(self, timeout: float = 45) -> str:
        """SIGTERM (the app's shutdown hook closes Streams) and the summary line."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(15)
        time.sleep(0.2)
        closed = [ln for ln in self.lines if ln.startswith("CLOSED ")]
        return closed[-1] if closed else ""

    def tail(self) -> str:
        return "\n".join(self.lines[-25:])


class OutputReader:
    """read_committed view of the output topic: the last sum per word and every value seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("out-reader"),
                           "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                           "enable.auto.commit": False})
        self.c.subscribe([topic])
        self.last: dict[str, int] = {}
        self.seen: dict[str, list[int]] = defaultdict(list)

    def poll(self, seconds: float = 1.0) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in self.c.consume(500, 0.2):
                if m.error():
                    continue
                k, v = m.key().decode(), int.from_bytes(m.value(), "big", signed=True)
                self.last[k] = v
                self.seen[k].append(v)

    def close(self) -> None:
        self.c.close()


@pytest.mark.serial  # four stream threads in two JVMs, a kill -9 and a 45 s session timeout
@pytest.mark.timeout(420)
def test_streams_eos_app_survives_instance_kill(streams_app_broker, tmp_path):
    from confluent_kafka import Producer

    lab.fetch()
    bs = streams_app_broker.bootstrap
    app_id = unique("streams-eos")
    input_topic = create_topic(bs, unique("streams-in"), INPUT_PARTITIONS)
    output_topic = create_topic(bs, unique("streams-out"), 2)
    instances = {name: Instance(bs, app_id, input_topic, output_topic, tmp_path / name) for name in ("a", "b")}
    reader = OutputReader(bs, output_topic)
    try:
        def both_running():
            failed = {n: i.errors() for n, i in instances.items() if i.errors() or i.proc.poll() is not None}
            assert not failed, "\n".join(f"{n}: {e}\n{instances[n].tail()}" for n, e in failed.items())
            return all(i.running() for i in instances.values())
        try:
            wait_until(both_running, timeout=90, interval=0.5, what="both Streams instances RUNNING")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n" + "\n".join(f"{n}:\n{i.tail()}" for n, i in instances.items()))

        # the broker created the internal topics of the topology
        out = lab.run_tool("kafka-topics", ["--bootstrap-server", bs, "--list"])
        assert out.returncode == 0, out.stderr
        topics = set(out.stdout.split())
        assert {f"{app_id}-by-word-repartition", f"{app_id}-sums-changelog"} <= topics, sorted(topics)

        # kafka-streams-groups sees the running group
        listed = lab.run_tool("kafka-streams-groups", ["--bootstrap-server", bs, "--list"])
        assert listed.returncode == 0 and app_id in listed.stdout.split(), listed.stdout + listed.stderr
        described = lab.run_tool("kafka-streams-groups", ["--bootstrap-server", bs, "--describe", "--group", app_id,
                                                          "--members"])
        assert described.returncode == 0, described.stdout + described.stderr
        member_rows = [ln for ln in described.stdout.splitlines() if ln.startswith(app_id)]
        assert len(member_rows) == 4, described.stdout  # 2 instances x 2 stream threads
        state = lab.run_tool("kafka-streams-groups", ["--bootstrap-server", bs, "--describe", "--group", app_id,
                                                      "--state"])
        assert state.returncode == 0 and "Stable" in state.stdout, state.stdout + state.stderr

        # input flows while instance a is killed -9 and restarted on its state dir
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": True})
        for chunk, start in enumerate(range(0, RECORDS, CHUNK)):
            for i in range(start, start + CHUNK):
                p.produce(input_topic, key=f"r{i}".encode(), value=f"{word(i)}:{amount(i)}".encode())
            assert p.flush(30) == 0
            reader.poll(0.5)
            if chunk == 6:
                assert reader.last, "no output before the kill: the app is not processing"
                instances["a"].kill()
            if chunk == 10:
                instances["a"] = Instance(bs, app_id, input_topic, output_topic, tmp_path / "a")

        def converged():
            reader.poll(1.0)
            return reader.last == EXPECTED

        try:
            wait_until(converged, timeout=150, interval=0.5, what="the output's sums to reach the expected ones")
        except Exception:
            diff = {k: (reader.last.get(k), v) for k, v in EXPECTED.items() if reader.last.get(k) != v}
            raise AssertionError(f"sums (got, expected) that differ: {diff}\n"
                                 f"a:\n{instances['a'].tail()}\nb:\n{instances['b'].tail()}")
        reader.poll(2.0)  # nothing more may come: a late duplicate would push a sum past the expected one
        assert reader.last == EXPECTED
        # sums only grow (amounts are positive) and never pass the expected total: no committed double count
        for k, vs in reader.seen.items():
            assert vs == sorted(vs) and vs[-1] == EXPECTED[k], (k, vs)
        for name, inst in instances.items():
            assert inst.errors() == [], f"{name}: {inst.errors()}"
    finally:
        reader.close()
        closed = {name: inst.terminate() for name, inst in instances.items()}
    assert all(c.startswith("CLOSED ") and c.endswith("state=NOT_RUNNING") for c in closed.values()), closed


@pytest.mark.serial
@pytest.mark.minikafka_only
@pytest.mark.timeout(420)
def test_streams_eos_app_survives_broker_kill(broker_factory, tmp_path):
    """The same app and check, with the broker killed -9 while input flows and restarted on its data dir: the
    streams group, its offsets and the open transactions come back from the logs (aborted or completed), and
    the sums end exact."""
    from confluent_kafka import Producer

    lab.fetch()
    broker = broker_factory(FAST_GROUPS)
    bs = broker.bootstrap
    app_id = unique("streams-eos-bk")
    input_topic = create_topic(bs, unique("streams-in"), INPUT_PARTITIONS)
    output_topic = create_topic(bs, unique("streams-out"), 2)
    instances = {name: Instance(bs, app_id, input_topic, output_topic, tmp_path / name) for name in ("a", "b")}
    reader = None
    try:
        wait_until(lambda: all(i.running() for i in instances.values()), timeout=90, interval=0.5,
                   what="both Streams instances RUNNING")
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "enable.idempotence": True})
        for chunk, start in enumerate(range(0, RECORDS, CHUNK)):
            for i in range(start, start + CHUNK):
                p.produce(input_topic, key=f"r{i}".encode(), value=f"{word(i)}:{amount(i)}".encode())
            assert p.flush(60) == 0
            time.sleep(0.3)
            if chunk == 6:
                broker.kill()
                broker.start()
        reader = OutputReader(bs, output_topic)

        def converged():
            reader.poll(1.0)
            return reader.last == EXPECTED
        try:
            wait_until(converged, timeout=180, interval=0.5, what="the output's sums to reach the expected ones")
        except Exception:
            diff = {k: (reader.last.get(k), v) for k, v in EXPECTED.items() if reader.last.get(k) != v}
            raise AssertionError(f"sums (got, expected) that differ: {diff}\n"
                                 f"a:\n{instances['a'].tail()}\nb:\n{instances['b'].tail()}")
        reader.poll(2.0)
        assert reader.last == EXPECTED
        for k, vs in reader.seen.items():
            assert vs == sorted(vs) and vs[-1] == EXPECTED[k], (k, vs)
    finally:
        if reader is not None:
            reader.close()
        for inst in instances.values():
            inst.terminate()
    assert "Traceback" not in broker.log_text()
