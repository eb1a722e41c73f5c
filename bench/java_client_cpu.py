"""Where the Java producer's CPU goes, by thread, against minikafka and a warm Kafka: the perf tool of the
matrix's Java cells (kafka-producer-perf-test, the client's defaults, 1 KiB records, 6 partitions), run
to saturation, its threads' CPU read from /proc while it runs.

    python -m bench.java_client_cpu [--records 600000] [--warmup-records 0] [--rounds 2]
                                    [--brokers minikafka,kafka]

Both brokers run for the whole run (warm), one discarded round each, then rounds alternating the
brokers; the broker not under test runs at nice 19 meanwhile (bench.brokers.backgrounded). Per round:
the perf tool's rate (its steady-state line when --warmup-records is given), the broker's CPU s/GB and
the client's CPU s/GB per thread kind (main: the perf tool's loop, which also makes each record's
random payload; kafka-producer-network-thread: the sender; C2/C1 CompilerThread: the JIT; GC threads).
A short run is mostly a cold client JVM, whose JIT compiler takes a large share of the client's CPU;
`--records 3000000 --warmup-records 1000000` measures a client whose JIT has settled.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .brokers import BrokerProc, alternating_rounds, cpu_seconds
from .matrix import JAVA_CLIENT_JVM
from .workloads import create_topic

RECORD = 1024
_TICK = os.sysconf("SC_CLK_TCK")
_RATE = re.compile(r"(\d+) (?:steady state )?records sent, [\d.]+ records/sec \(([\d.]+) MB/sec\)")


def _thread_kind(name: str) -> str:
    """'C2 CompilerThre' and 'GC Thread#3' -> one kind each; the perf tool's own thread is 'java'."""
    kind = name.split("#")[0].rstrip("0123456789 ")
    return "main" if kind == "java" else kind


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (thread kind, user + system CPU seconds) of every live thread of `pid`."""
    out: dict[int, tuple[str, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended between listing and reading
            continue
        out[int(tid)] = (_thread_kind(name), (int(fields[11]) + int(fields[12])) / _TICK)
    return out


def run(broker: BrokerProc, records: int, warmup: int) -> dict[str, float]:
    """One perf-tool run on a fresh 6-partition topic: MB/s, broker CPU s/GB, client CPU s/GB by kind."""
    from scripts import apache_kafka
    topic = f"java-cpu-{time.time_ns()}"
    create_topic(broker.bootstrap, topic, 6)
    args = ["--topic", topic, "--num-records", str(records), "--record-size", str(RECORD), "--throughput", "-1",
            "--command-property", f"bootstrap.servers={broker.bootstrap}"]
    if warmup:
        args += ["--warmup-records", str(warmup)]
    cmd = apache_kafka.tool_command("kafka-producer-perf-test", args, jvm_opts=JAVA_CLIENT_JVM)
    b0 = cpu_seconds(broker.pid)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    last: dict[int, tuple[str, float]] = {}
    while proc.poll() is None:  # a thread's last reading before it (or the JVM) exits is what it used
        try:
            last.update(thread_cpu(proc.pid))
        except OSError:
            pass
        time.sleep(0.1)
    out = proc.stdout.read() if proc.stdout else ""
    broker_cpu = cpu_seconds(broker.pid) - b0
    rates = _RATE.findall(out)
    if proc.returncode != 0 or not rates:
        raise RuntimeError(f"perf tool exited {proc.returncode}: {out[-800:]}")
    gb = records * RECORD / 1e9
    res: dict[str, float] = {"MB/s": float(rates[-1][1]), "broker s/GB": broker_cpu / gb}
    kinds: collections.Counter[str] = collections.Counter()
    for kind, cpu in last.values():
        kinds[kind] += cpu
    res["client s/GB"] = sum(kinds.values()) / gb
    for kind, cpu in kinds.most_common(6):
        res[f"{kind} s/GB"] = cpu / gb
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--warmup-records", type=int, default=0, help="the perf tool's own warm-up (left out of its rate)")
    ap.add_argument("--rounds", type=int, default=2, help="measured rounds per broker (after one discarded)")
    ap.add_argument("--brokers", default="minikafka,kafka")
    args = ap.parse_args()
    kinds = args.brokers.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-java-cpu-"))
    brokers = {kind: BrokerProc(kind, work / kind) for kind in kinds}
    try:
        for b in brokers.values():
            b.work_dir.mkdir(parents=True, exist_ok=True)
            b.start()
        for label, kind, _idle in alternating_rounds(brokers, args.rounds):
            res = run(brokers[kind], args.records, args.warmup_records)
            print(f"{label} {kind:9} " + ", ".join(f"{k} {v:.1f}" for k, v in res.items()), flush=True)
    finally:
        for b in brokers.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
