"""The client-defaults matrix: minikafka against a warm and a cold Apache Kafka, with the settings users
run (`python -m bench.matrix`, section `matrix` of BENCHMARKS.md).

    python -m bench.matrix [--mode warm|cold|all] [--rounds 2] [--mb 300] [--clients librdkafka,java]
                           [--cells NAME,...] [--quick] [--out FILE]

Cells vary one setting at a time around each client's plain defaults (librdkafka via confluent-kafka:
linger 5 ms, batch.size 1 MB, acks=all, not idempotent; the Java client 4.3.1 through Kafka's own
kafka-producer-perf-test / kafka-consumer-perf-test: linger 5 ms, batch.size 16 KiB, acks=all,
idempotent), 1 KiB incompressible records, 6 partitions, one producer: linger.ms 0 / 50, batch.size 1 MB
(Java), records of 100 B / 10 KiB, 1 / 60 partitions, 4 producers. Each cell produces --mb MB (at most
1,000,000 records) to a fresh topic, then one consumer with its client's defaults reads them back; the
broker's CPU seconds (utime + stime, all threads) per GB are taken around each phase. Two transaction
cells (librdkafka, 10 records of 100 B over 3 partitions, default linger and linger 0) close it.

warm: both brokers run for the whole matrix; one warm-up pass over every cell is discarded, then
--rounds passes alternate the brokers cell by cell; medians. The broker not under test runs at nice 19
during the other's cell (bench.brokers.backgrounded): a warm JVM goes on with GC and JIT work for
seconds after its own cell, which would otherwise land on the other broker's figures. Each producer
phase also samples the clients' and the broker's cores in its steady middle part (CpuSampler), so a
table says how much of the machine the client itself takes. cold: both brokers are started afresh for
every cell, which runs once (Kafka's JIT has seen nothing of that shape yet), as in a CI job.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from .brokers import BrokerProc, backgrounded, cpu_seconds
from .report import ROOT, fmt, load_average, replace_section, setup_block
from .workloads import create_topic, transactions

RESULTS = ROOT / "bench" / "results"
CLIENTS = ("librdkafka", "java")
# kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh: KAFKA_HEAP_OPTS=-Xmx512M, and
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS
JAVA_CLIENT_JVM = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                   "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
MAX_RECORDS = 1_000_000
CORES = os.cpu_count() or 1
Result = dict[str, float | None]


@dataclass(frozen=True)
class Cell:
    """One client setting; None = the client's default."""
    client: str
    linger_ms: int | None = None
    batch_size: int | None = None
    record: int = 1024
    partitions: int = 6
    producers: int = 1
    transactions: bool = False

    @property
    def name(self) -> str:
        if self.transactions:
            return f"{self.client} txn 10x100B/3p" + ("" if self.linger_ms is None else f" linger {self.linger_ms}")
        parts = [f"linger {self.linger_ms}" if self.linger_ms is not None else "",
                 "batch 1MB" if self.batch_size else "",
                 f"{self.record} B" if self.record != 1024 else "",
                 f"{self.partitions}p" if self.partitions != 6 else "",
                 f"{self.producers} producers" if self.producers != 1 else ""]
        return f"{self.client} " + (", ".join(p for p in parts if p) or "defaults")

    def props(self) -> list[str]:
        out = []
        if self.linger_ms is not None:
            out.append(f"linger.ms={self.linger_ms}")
        if self.batch_size is not None:
            out.append(f"batch.size={self.batch_size}")
        return out


def cells(clients: list[str]) -> list[Cell]:
    out: list[Cell] = []
    for client in clients:
        base = Cell(client)
        out += [base, replace(base, linger_ms=0), replace(base, linger_ms=50)]
        if client == "java":  # librdkafka's default batch.size already is 1 MB
            out.append(replace(base, batch_size=1_000_000))
        out += [replace(base, record=100), replace(base, record=10240), replace(base, partitions=1),
                replace(base, partitions=60), replace(base, producers=4)]
    if "librdkafka" in clients:
        out += [Cell("librdkafka", transactions=True), Cell("librdkafka", linger_ms=0, transactions=True)]
    return out


def _java(tool: str, args: list[str], timeout: float) -> str:
    from scripts import apache_kafka
    cmd = apache_kafka.tool_command(tool, args, jvm_opts=JAVA_CLIENT_JVM)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        raise RuntimeError(f"{tool} exited {res.returncode}: {res.stderr[-1500:]}")
    return res.stdout


_JAVA_SENT = re.compile(r"^(\d+) steady state records sent, ([\d.]+) records/sec .*?, (\d+) ms 50th, "
                        r"\d+ ms 95th, (\d+) ms 99th", re.M)


def _producer_cmd(cell: Cell, bs: str, topic: str, records: int) -> list[str]:
    if cell.client == "java":
        from scripts import apache_kafka
        return apache_kafka.tool_command("kafka-producer-perf-test", [
            "--topic", topic, "--num-records", str(records), "--record-size", str(cell.record),
            "--throughput", "-1", "--warmup-records", str(max(1, records // 10)),
            "--command-property", f"bootstrap.servers={bs}", *cell.props()], jvm_opts=JAVA_CLIENT_JVM)
    return [sys.executable, "-m", "bench.matrix_producer", bs, topic, str(records), str(cell.record), *cell.props()]


def _parse_producer(cell: Cell, out: str) -> tuple[float, float, float]:
    """(records/s, p50 ms, p99 ms) of one producer's timed part."""
    if cell.client == "java":
        m = _JAVA_SENT.search(out)
        if m is None:
            raise RuntimeError(f"no steady-state line in: {out[-800:]}")
        return float(m.group(2)), float(m.group(3)), float(m.group(4))
    r = json.loads(out.strip().splitlines()[-1])
    return r["records"] / r["seconds"], r["p50_ms"], r["p99_ms"]


class CpuSampler:
    """Samples the CPU seconds of the producer processes and of the broker while they run, so that the
    steady state (the middle of the run: no JVM start, JIT warm-up or final drain) can be told apart."""

    def __init__(self, clients: list[subprocess.Popen], broker_pid: int) -> None:
        self.samples: list[tuple[float, float, float]] = []  # (time, clients' CPU s, broker CPU s)
        self._clients, self._broker = clients, broker_pid
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.samples.append((time.monotonic(), sum(cpu_seconds(p.pid) for p in self._clients),
                                     cpu_seconds(self._broker)))
            except (OSError, IndexError, ValueError):  # a producer exited: the run is ending
                return

    def steady_cores(self) -> tuple[float, float] | None:
        """(clients' cores, broker's cores) from 40% to 90% of the sampled time, or None if too short."""
        self._stop.set()
        self._thread.join()
        if len(self.samples) < 10:
            return None
        t0, t1 = self.samples[0][0], self.samples[-1][0]
        a = next(s for s in self.samples if s[0] >= t0 + 0.4 * (t1 - t0))
        b = [s for s in self.samples if s[0] <= t0 + 0.9 * (t1 - t0)][-1]
        if b[0] - a[0] < 0.3:
            return None
        return (b[1] - a[1]) / (b[0] - a[0]), (b[2] - a[2]) / (b[0] - a[0])


def produce(cell: Cell, bs: str, topic: str, records: int, timeout: float, broker_pid: int
            ) -> tuple[float, float, float, tuple[float, float] | None]:
    """All producers at once; (MB/s summed over the producers' own timed windows, worst p50, worst p99,
    steady-state (clients' cores, broker's cores) or None)."""
    per = records // cell.producers
    procs = [subprocess.Popen(_producer_cmd(cell, bs, topic, per), cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
             for _ in range(cell.producers)]
    sampler = CpuSampler(procs, broker_pid)
    rates, p50s, p99s = [], [], []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"producer exited {proc.returncode}: {err[-1500:]}")
            rate, p50, p99_ms = _parse_producer(cell, out)
            rates.append(rate)
            p50s.append(p50)
            p99s.append(p99_ms)
    finally:
        cores = sampler.steady_cores()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return sum(rates) * cell.record / 1e6, max(p50s), max(p99s), cores


def consume(cell: Cell, bs: str, topic: str, records: int, timeout: float) -> float:
    """One consumer with its client's defaults reads every record from the start; MB/s of the fetching
    (Java: the tool's fetch time, which leaves out the group join; librdkafka: assign, no group join)."""
    if cell.client == "java":
        out = _java("kafka-consumer-perf-test", ["--bootstrap-server", bs, "--topic", topic, "--messages",
                                                 str(records), "--timeout", "30000"], timeout)
        head, values = [line for line in out.splitlines() if line.strip()][-2:]
        row = dict(zip([h.strip() for h in head.split(",")], [v.strip() for v in values.split(",")]))
        got, fetch_ms = int(row["data.consumed.in.nMsg"]), float(row["fetch.time.ms"])
        if got < records:
            raise RuntimeError(f"java consumer read {got}/{records}")
        return got * cell.record / 1e6 / (fetch_ms / 1000)
    c = Consumer({"bootstrap.servers": bs, "group.id": f"matrix-{time.time_ns()}"})
    try:
        c.list_topics(topic, timeout=30)
        c.assign([TopicPartition(topic, p, 0) for p in range(cell.partitions)])
        got, t0 = 0, time.perf_counter()
        deadline = t0 + timeout
        while got < records:
            msgs = c.consume(min(10_000, records - got), 5.0)  # returns once that many are there
            if not msgs and time.perf_counter() > deadline:
                raise RuntimeError(f"consumer stalled at {got}/{records}")
            got += sum(1 for m in msgs if not m.error())
        return got * cell.record / 1e6 / (time.perf_counter() - t0)
    finally:
        c.close()


def run_cell(cell: Cell, b: BrokerProc, mb: float) -> Result:
    bs = b.bootstrap
    topic = f"m-{time.time_ns()}"
    if cell.transactions:
        create_topic(bs, topic, 3)
        tps, commit = transactions(bs, topic, 300, cell.linger_ms)
        _delete(bs, topic)
        return {"txn/s": tps, "commit p99": commit}
    records = min(MAX_RECORDS, int(mb * 1e6 / cell.record))
    records -= records % cell.producers
    gb = records * cell.record / 1e9
    timeout = 120 + mb  # gives up below ~1 MB/s
    create_topic(bs, topic, cell.partitions)
    c0 = cpu_seconds(b.pid)
    mbps, p50, p99_ms, cores = produce(cell, bs, topic, records, timeout, b.pid)
    c1 = cpu_seconds(b.pid)
    out: Result = {"produce": mbps, "p50": p50, "p99": p99_ms, "cpu produce": (c1 - c0) / gb}
    if cores is not None:  # steady state: the clients' and the broker's cores (the rate is the producers')
        out["client cores"], out["broker cores"] = cores
        out["cpu client"] = cores[0] / (mbps / 1000)
    out["consume"] = consume(cell, bs, topic, records, timeout)
    out["cpu consume"] = (cpu_seconds(b.pid) - c1) / gb
    _delete(bs, topic)
    return out


def _delete(bs: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bs})  # referenced until the futures are done
    for f in admin.delete_topics([topic], operation_timeout=60).values():
        f.result(60)


def _guarded(what: str, fn: Callable[[], Result]) -> Result | None:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a failed cell is n/a in the table, and said
        print(f"  ! {what}: {str(exc)[:300]}", flush=True)
        FAILED.append(f"{what}: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}")
        return None


FAILED: list[str] = []


def warm(all_cells: list[Cell], rounds: int, mb: float) -> dict[str, dict[str, list[Result]]]:
    """cell name -> broker kind -> the measured rounds' results."""
    work = Path(tempfile.mkdtemp(prefix="bench-matrix-"))
    brokers = {kind: BrokerProc(kind, work / kind) for kind in ("minikafka", "kafka")}
    runs: dict[str, dict[str, list[Result]]] = {c.name: {"minikafka": [], "kafka": []} for c in all_cells}
    try:
        for b in brokers.values():
            (b.work_dir).mkdir(parents=True, exist_ok=True)
            b.start()
        for r in range(rounds + 1):
            for cell in all_cells:
                for kind in (("minikafka", "kafka") if r % 2 == 0 else ("kafka", "minikafka")):
                    with backgrounded([b for k, b in brokers.items() if k != kind]) as idle_cpu:
                        res = _guarded(f"warm round {r} {kind} {cell.name}", lambda: run_cell(cell, brokers[kind], mb))
                    if res is not None:
                        res["idle broker cpu"] = sum(idle_cpu.values())
                    print(f"warm {'warm-up' if r == 0 else r} {kind:9} {cell.name}: {res}", flush=True)
                    if r > 0 and res is not None:
                        runs[cell.name][kind].append(res)
    finally:
        for b in brokers.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    return runs


def cold(all_cells: list[Cell], mb: float) -> dict[str, dict[str, list[Result]]]:
    runs: dict[str, dict[str, list[Result]]] = {c.name: {"minikafka": [], "kafka": []} for c in all_cells}
    for cell in all_cells:
        for kind in ("minikafka", "kafka"):
            work = Path(tempfile.mkdtemp(prefix=f"bench-matrix-cold-{kind}-"))
            b = BrokerProc(kind, work)
            try:
                b.start()
                res = _guarded(f"cold {kind} {cell.name}", lambda: run_cell(cell, b, mb))
                print(f"cold {kind:9} {cell.name}: {res}", flush=True)
                if res is not None:
                    runs[cell.name][kind].append(res)
            finally:
                b.stop()
                shutil.rmtree(work, ignore_errors=True)
    return runs


def _median(results: list[Result], key: str) -> float | None:
    values = [r[key] for r in results if r.get(key) is not None]
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None, higher_better: bool = True) -> str:
    if a is None or b is None or not a or not b:
        return "n/a"
    return f"{a / b:.2f}×" if higher_better else f"{a / b:.2f}"


def tables(all_cells: list[Cell], warm_runs: dict | None, cold_runs: dict | None) -> str:
    """Markdown: throughput, latency and CPU per cell; the transaction cells apart."""
    def med(runs: dict | None, cell: Cell, kind: str, key: str) -> float | None:
        return _median(runs[cell.name][kind], key) if runs else None
    lines = ["| cell | produce MB/s minikafka | Kafka warm | ratio | Kafka cold | ratio | "
             "consume MB/s minikafka | Kafka warm | ratio | Kafka cold | ratio |",
             "| --- |" + " ---: |" * 10]
    lat = ["| cell | p50 ms minikafka | Kafka warm | p99 ms minikafka | Kafka warm | p99 ratio | "
           "CPU s/GB produce minikafka | Kafka | CPU s/GB consume minikafka | Kafka |", "| --- |" + " ---: |" * 9]
    txn = ["| cell | txn/s minikafka | Kafka warm | ratio | Kafka cold | ratio | commit p99 ms minikafka | "
           "Kafka warm | ratio |", "| --- |" + " ---: |" * 8]
    client = ["| cell | client cores minikafka | broker cores minikafka | client cores Kafka | broker cores Kafka | "
              "client CPU s/GB minikafka | Kafka | ceiling MB/s | ceiling ÷ Kafka warm |", "| --- |" + " ---: |" * 8]
    main = warm_runs or cold_runs
    for cell in all_cells:
        mk = {k: med(main, cell, "minikafka", k) for k in ("produce", "consume", "p50", "p99", "cpu produce",
                                                           "cpu consume", "txn/s", "commit p99", "client cores",
                                                           "broker cores", "cpu client")}
        kw = {k: med(warm_runs, cell, "kafka", k) for k in mk}
        kc = {k: med(cold_runs, cell, "kafka", k) for k in mk}
        mkc = {k: med(cold_runs, cell, "minikafka", k) for k in mk}
        if cell.transactions:
            txn.append(f"| {cell.name} | {fmt(mk['txn/s'])} | {fmt(kw['txn/s'])} | {_ratio(mk['txn/s'], kw['txn/s'])} "
                       f"| {fmt(kc['txn/s'])} | {_ratio(mkc['txn/s'], kc['txn/s'])} | {fmt(mk['commit p99'])} | "
                       f"{fmt(kw['commit p99'])} | {_ratio(mk['commit p99'], kw['commit p99'], False)} |")
            continue
        lines.append(f"| {cell.name} | {fmt(mk['produce'])} | {fmt(kw['produce'])} | "
                     f"{_ratio(mk['produce'], kw['produce'])} | {fmt(kc['produce'])} | "
                     f"{_ratio(mkc['produce'], kc['produce'])} | {fmt(mk['consume'])} | {fmt(kw['consume'])} | "
                     f"{_ratio(mk['consume'], kw['consume'])} | {fmt(kc['consume'])} | "
                     f"{_ratio(mkc['consume'], kc['consume'])} |")
        lat.append(f"| {cell.name} | {fmt(mk['p50'])} | {fmt(kw['p50'])} | {fmt(mk['p99'])} | {fmt(kw['p99'])} | "
                   f"{_ratio(mk['p99'], kw['p99'], False)} | {fmt(mk['cpu produce'])} | {fmt(kw['cpu produce'])} | "
                   f"{fmt(mk['cpu consume'])} | {fmt(kw['cpu consume'])} |")
        per_gb = [v for v in (mk["cpu client"], kw["cpu client"]) if v]
        ceiling = CORES / min(per_gb) * 1000 if per_gb else None  # MB/s with a broker that cost nothing
        client.append(f"| {cell.name} | {fmt(mk['client cores'])} | {fmt(mk['broker cores'])} | "
                      f"{fmt(kw['client cores'])} | {fmt(kw['broker cores'])} | {fmt(mk['cpu client'])} | "
                      f"{fmt(kw['cpu client'])} | {fmt(ceiling)} | {_ratio(ceiling, kw['produce'])} |")
    return ("\n".join(lines) + "\n\n" + "\n".join(lat) + "\n\n" + "\n".join(txn) + "\n\n"
            + "\n".join(client))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("warm", "cold", "all"), default="all")
    ap.add_argument("--rounds", type=int, default=2, help="measured warm rounds (after one discarded)")
    ap.add_argument("--mb", type=float, default=300, help="MB produced per cell (at most 1,000,000 records)")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--cells", help="only the cells whose names contain one of these (comma-separated)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 20 MB per cell, 1 round")
    ap.add_argument("--out", help="Markdown file to update (default BENCHMARKS.md; --quick: a .tmp file)")
    args = ap.parse_args()
    if args.quick:
        args.mb, args.rounds = 20, 1
    all_cells = cells(args.clients.split(","))
    if args.cells:
        wanted = args.cells.split(",")
        all_cells = [c for c in all_cells if any(w in c.name for w in wanted)]
    started, load_before = datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), load_average()
    warm_runs = warm(all_cells, args.rounds, args.mb) if args.mode in ("warm", "all") else None
    cold_runs = cold(all_cells, args.mb) if args.mode in ("cold", "all") else None
    command = "python -m bench.matrix " + " ".join(sys.argv[1:])
    RESULTS.mkdir(parents=True, exist_ok=True)
    saved = RESULTS / "matrix.json"
    commands = [command]
    if args.mode != "all" and saved.exists() and not args.quick:  # a partial run keeps the other mode's figures
        before = json.loads(saved.read_text())
        if before.get("cells") == [c.name for c in all_cells]:
            warm_runs = warm_runs if warm_runs is not None else before.get("warm")
            cold_runs = cold_runs if cold_runs is not None else before.get("cold")
            commands = [*before.get("commands", [])[-1:], command]
    if not args.quick:
        saved.write_text(json.dumps({"cells": [c.name for c in all_cells], "commands": commands,
                                     "warm": warm_runs, "cold": cold_runs}, indent=1))
    command = "; ".join(dict.fromkeys(commands))
    body = "\n".join([setup_block(command, started, load_before), "",
                      f"{args.mb:.0f} MB per cell (at most {MAX_RECORDS:,} records); warm: medians of "
                      f"{args.rounds} rounds after a discarded one; cold: one run on fresh brokers per cell.", "",
                      tables(all_cells, warm_runs, cold_runs)])
    if FAILED:
        body += "\n\nFailed (n/a above): " + "; ".join(FAILED)
    out = Path(args.out) if args.out else (RESULTS / "BENCHMARKS-quick.md.tmp" if args.quick
                                           else ROOT / "BENCHMARKS.md")
    replace_section(out, "matrix", body)
    print(f"written: {out}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
