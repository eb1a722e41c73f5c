"""Throughput over TLS next to PLAINTEXT, for minikafka and a warm Apache Kafka.

Each broker runs once with two listeners (PLAINTEXT and SSL, one server certificate from a CA made
for the run with the `openssl` CLI; no client authentication). librdkafka (confluent-kafka) produces
1 KiB records with acks=all to a 1-partition topic and consumes them back, through each listener in
turn; the first round is discarded (JVM warm-up, page cache), the others give medians. Broker CPU
seconds per GB moved are read from /proc around each workload.

    python -m bench.tls [--records 200000] [--rounds 3] [--brokers minikafka,kafka]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .common import free_port
from .startup import answers_api_versions

ROOT = Path(__file__).resolve().parent.parent
RECORD = 1024
PAYLOAD = b"x" * RECORD


def make_certs(d: Path) -> dict[str, Path]:
    """A CA, and a server certificate for 127.0.0.1/localhost signed by it: PEM (key + chain) and PKCS12."""
    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
        "-extfile", "san.ext", "-out", "server.pem")
    ssl("pkcs12", "-export", "-in", "server.pem", "-inkey", "server.key", "-certfile", "ca.pem",
        "-passout", "pass:benchpass", "-out", "server.p12")
    (d / "server-keystore.pem").write_text((d / "server.key").read_text() + (d / "server.pem").read_text())
    return {"ca": d / "ca.pem", "pem": d / "server-keystore.pem", "p12": d / "server.p12"}


@contextlib.contextmanager
def minikafka(work: Path, certs: dict[str, Path]) -> Iterator[tuple[dict[str, str], int]]:
    plain, tls = free_port(), free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}", "log.dirs": str(work / "mk-data"),
             "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs["pem"])}
    args = [sys.executable, "-m", "minikafka.broker.cli.main", "serve", "--log-level", "warning"]
    for k, v in props.items():
        args += ["--override", f"{k}={v}"]
    log = open(work / "minikafka.log", "ab")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not answers_api_versions(plain):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"minikafka did not start: {(work / 'minikafka.log').read_text()[-2000:]}")
            time.sleep(0.01)
        yield {"PLAINTEXT": f"127.0.0.1:{plain}", "SSL": f"127.0.0.1:{tls}"}, proc.pid
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()


@contextlib.contextmanager
def kafka(work: Path, certs: dict[str, Path]) -> Iterator[tuple[dict[str, str], int]]:
    sys.path.insert(0, str(ROOT))
    from bench.brokers import KAFKA_HEAP, KAFKA_JVM_OPTS, KAFKA_OVERRIDES
    from scripts import apache_kafka
    from unittest import mock
    plain, tls, ctl = free_port(), free_port(), free_port()
    broker = apache_kafka.KafkaBroker(work_dir=work / "kafka", heap=KAFKA_HEAP)
    overrides = {**KAFKA_OVERRIDES,
                 "controller.quorum.voters": f"1@127.0.0.1:{ctl}",
                 "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},CONTROLLER://127.0.0.1:{ctl}",
                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
                 "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
                 "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs["p12"]),
                 "ssl.keystore.password": "benchpass", "ssl.key.password": "benchpass"}
    with mock.patch.object(apache_kafka, "SERVER_JVM_OPTS", ["-Xmx", *KAFKA_JVM_OPTS]):
        broker.start(port=plain, overrides=overrides, timeout=180)
    try:
        yield {"PLAINTEXT": f"127.0.0.1:{plain}", "SSL": f"127.0.0.1:{tls}"}, broker.proc.pid
    finally:
        broker.stop(60)


def client_conf(listener: str, bootstrap: str, ca: Path) -> dict[str, object]:
    conf: dict[str, object] = {"bootstrap.servers": bootstrap}
    if listener == "SSL":
        conf.update({"security.protocol": "SSL", "ssl.ca.location": str(ca)})
    return conf


def cpu_seconds(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def produce_consume(conf: dict[str, object], records: int, pid: int) -> dict[str, float]:
    topic = f"tls-{time.time_ns()}"
    admin = AdminClient(dict(conf))
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(60)
    p = Producer({**conf, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": False})
    time.sleep(0.5)  # metadata for the new topic
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, PAYLOAD, partition=0)
                break
            except BufferError:
                p.poll(0.005)
    assert p.flush(120) == 0
    produce_s, produce_cpu = time.perf_counter() - t0, cpu_seconds(pid) - c0
    c = Consumer({**conf, "group.id": topic, "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                  "max.partition.fetch.bytes": 1_048_576, "queued.max.messages.kbytes": 1_048_576})
    c.assign([TopicPartition(topic, 0, 0)])
    got, c0, t0 = 0, cpu_seconds(pid), time.perf_counter()
    while got < records:
        msgs = c.consume(10_000, 10.0)
        if not msgs:
            raise RuntimeError(f"consumer stalled at {got}/{records}")
        got += sum(1 for m in msgs if not m.error())
    consume_s, consume_cpu = time.perf_counter() - t0, cpu_seconds(pid) - c0
    c.close()
    gb = records * RECORD / 1e9
    return {"produce MB/s": gb * 1000 / produce_s, "consume MB/s": gb * 1000 / consume_s,
            "produce CPU s/GB": produce_cpu / gb, "consume CPU s/GB": consume_cpu / gb}


def run(kinds: list[str], records: int, rounds: int) -> dict[tuple[str, str], dict[str, float]]:
    results: dict[tuple[str, str], dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        certs = make_certs(work)
        for kind in kinds:
            starter = minikafka if kind == "minikafka" else kafka
            with starter(work, certs) as (bootstraps, pid):
                samples: dict[str, list[dict[str, float]]] = {"PLAINTEXT": [], "SSL": []}
                for r in range(rounds + 1):
                    for listener in ("PLAINTEXT", "SSL"):
                        row = produce_consume(client_conf(listener, bootstraps[listener], certs["ca"]), records, pid)
                        print(f"{kind} {listener} round {r}{' (discarded)' if r == 0 else ''}: "
                              + ", ".join(f"{k} {v:.1f}" for k, v in row.items()), flush=True)
                        if r:
                            samples[listener].append(row)
                for listener, rows in samples.items():
                    results[(kind, listener)] = {k: statistics.median(x[k] for x in rows) for k in rows[0]}
    return results


def markdown(results: dict[tuple[str, str], dict[str, float]], records: int, rounds: int) -> str:
    metrics = list(next(iter(results.values())))
    lines = ["| broker | listener | " + " | ".join(metrics) + " |", "|---|---|" + "---:|" * len(metrics)]
    for (kind, listener), row in results.items():
        lines.append(f"| {kind} | {listener} | " + " | ".join(f"{row[m]:.1f}" for m in metrics) + " |")
    return (f"`python -m bench.tls --records {records} --rounds {rounds}`: 1 KiB records, 1 partition, acks=all, "
            f"librdkafka; medians of {rounds} rounds after a discarded one, each broker warm.\n\n" + "\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--brokers", default="minikafka,kafka")
    args = ap.parse_args()
    print(markdown(run(args.brokers.split(","), args.records, args.rounds), args.records, args.rounds))


if __name__ == "__main__":
    main()
