"""minikafka vs Apache Kafka on one machine, written into BENCHMARKS.md (`make bench`).

    python -m bench.run_all [--mode warm|cold|all] [--rounds 3] [--records 200000] [--no-scaling] [--quick]

* warm: one long-running process per broker; a warm-up round (discarded), then --rounds rounds
  alternating brokers (A B A B ...) on the same processes, fresh topics each round; medians. Also
  the brokers' own CPU seconds per GB produced and consumed.
* cold: a fresh broker per round (start + the same workloads), as a CI job sees it; start-to-ready
  and idle RSS.
* scaling: partitions, client processes (on the long-running brokers) and restart time as
  partitions and data grow (fresh brokers).
Each part replaces only its own marked section of --out. --quick is a smoke run of every code path
with small numbers, written to bench/results/BENCHMARKS-quick.md.tmp unless --out is given.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from . import scaling
from .brokers import KINDS, BrokerProc, cpu_seconds, running
from .report import ROOT, Row, chart, fmt, load_average, replace_section, setup_block, table
from .workloads import (FAILURES, RECORD, RssSampler, consume_mbps, create_topic, e2e_p99_ms, failure_label, guarded,
                        produce_mbps, transactions)

RESULTS = ROOT / "bench" / "results"
PRODUCES = (("produce 1p acks=all", 1, False), ("produce 6p acks=all", 6, False), ("produce 6p idempotent", 6, True))
# metric -> (unit, higher is better)
WORKLOAD_METRICS: dict[str, tuple[str, bool]] = {
    **{name: ("MB/s", True) for name, _, _ in PRODUCES},
    "consume 6p read_committed": ("MB/s", True),
    "e2e p99 @10MB/s": ("ms", False),
    "transactions (10 rec, 3p)": ("txn/s", True),
    "txn commit p99": ("ms", False),
    "loaded RSS": ("MB", False),
}
COLD_METRICS = {"start-to-ready": ("ms", False), "idle RSS": ("MB", False), **WORKLOAD_METRICS}
CPU_METRICS = {f"CPU {name}": ("s/GB", False) for name in [*(n for n, _, _ in PRODUCES), "consume 6p read_committed"]}


def workloads(b: BrokerProc, records: int, quick: bool) -> Row:
    """One round on a running broker: produce, consume, e2e latency, transactions, peak RSS and the
    broker's CPU seconds per GB around each produce/consume workload."""
    bs, out = b.bootstrap, {}
    gb = records * RECORD / 1e9
    timeout = 120 + records * RECORD / 1e6  # gives up below ~1 MB/s

    def timed_cpu(name: str, fn: Callable[[], float]) -> None:
        try:
            c0 = cpu_seconds(b.pid)
            out[name] = guarded(name, fn, timeout)
            out[f"CPU {name}"] = (cpu_seconds(b.pid) - c0) / gb if out[name] is not None else None
        except OSError:  # the broker is gone
            out[name] = None
    with RssSampler(b.pid) as rss:
        topic = ""
        for name, parts, idem in PRODUCES:
            topic = f"b{parts}{int(idem)}-{time.time_ns()}"
            if guarded("create topic", lambda: create_topic(bs, topic, parts), 120) is not None:
                timed_cpu(name, lambda: produce_mbps(bs, topic, records, idem))
        timed_cpu("consume 6p read_committed", lambda: consume_mbps(bs, topic, 6, records))
        e2e = f"e2e-{time.time_ns()}"
        if guarded("create topic", lambda: create_topic(bs, e2e, 1), 120) is not None:
            out["e2e p99 @10MB/s"] = guarded("e2e", lambda: e2e_p99_ms(bs, e2e, 2.0 if quick else 5.0), 180)
        txn = f"txn-{time.time_ns()}"
        if guarded("create topic", lambda: create_topic(bs, txn, 3), 120) is not None:
            res = guarded("transactions", lambda: transactions(bs, txn, 50 if quick else 300), 300)
            out["transactions (10 rec, 3p)"], out["txn commit p99"] = res or (None, None)
    out["loaded RSS"] = rss.peak
    return out


def show(label: str, row: Row) -> None:
    print(f"{label}: " + ", ".join(f"{k}={fmt(v)}" for k, v in row.items()), flush=True)


def medians(runs: list[Row], names) -> dict[str, tuple[float | None, float | None, float | None]]:
    """metric -> (median, min, max) over the rounds that produced a value."""
    out = {}
    for name in names:
        vals = [r[name] for r in runs if r.get(name) is not None]
        out[name] = (statistics.median(vals), min(vals), max(vals)) if vals else (None, None, None)
    return out


def summary_rows(runs: dict[str, list[Row]], metrics: dict[str, tuple[str, bool]]) -> dict[str, tuple[str, Row]]:
    med = {k: medians(v, metrics) for k, v in runs.items()}
    return {name: (unit, {k: med[k][name][0] for k in runs}) for name, (unit, _) in metrics.items()}


def spread_note(runs: dict[str, list[Row]], metrics: dict[str, tuple[str, bool]]) -> str:
    """One line per broker: min-max over rounds for each metric ("" for a single round)."""
    if max((len(rows) for rows in runs.values()), default=0) < 2:
        return ""
    lines = []
    for kind, rows in runs.items():
        m = medians(rows, metrics)
        cells = [f"{name} {fmt(lo)}–{fmt(hi)}" for name, (_med, lo, hi) in m.items() if lo is not None]
        lines.append(f"* {kind} min–max over the rounds: " + "; ".join(cells) + ".")
    return "\n".join(lines)


def paragraphs(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


def failures_since(mark: int) -> str:
    """Why values are n/a: the failures `guarded` recorded since FAILURES[mark]."""
    new = list(dict.fromkeys(FAILURES[mark:]))
    return "n/a means the workload failed or timed out: " + "; ".join(new[:12]) + "." if new else ""


@contextlib.contextmanager
def long_running(kinds: list[str], records: int, quick: bool) -> Iterator[dict[str, BrokerProc]]:
    """One process per broker kind, all running at once, each after one discarded warm-up round."""
    with contextlib.ExitStack() as stack:
        brokers = {}
        for k in kinds:
            try:
                brokers[k] = stack.enter_context(running(k))[0]
            except Exception as exc:  # noqa: BLE001 - its columns become n/a
                print(f"  ! start of {k} failed: {exc!r}")
                FAILURES.append(f"start of {k}: {str(exc).splitlines()[0][:200]}")
        for k, b in brokers.items():
            with failure_label(f"{k} warm-up"):
                show(f"warm-up {k} (discarded)", workloads(b, records, quick))
        yield brokers


def warm_rounds(brokers: dict[str, BrokerProc], kinds: list[str], rounds: int, records: int,
                quick: bool) -> dict[str, list[Row]]:
    runs: dict[str, list[Row]] = {k: [] for k in kinds}
    for r in range(rounds):
        for k in kinds:
            b = brokers.get(k)
            if b is None or not b.alive():
                print(f"  ! {k} is not running" + (f": {b.log_tail()}" if b else ""))
                FAILURES.append(f"{k} not running")
                continue
            with failure_label(f"{k} warm round {r + 1}"):
                runs[k].append(workloads(b, records, quick))
            show(f"warm round {r + 1} {k}", runs[k][-1])
    return runs


def cold_rounds(kinds: list[str], rounds: int, records: int, quick: bool) -> dict[str, list[Row]]:
    runs: dict[str, list[Row]] = {k: [] for k in kinds}
    for r in range(rounds):
        for k in kinds:
            try:
                with running(k) as (b, ready), failure_label(f"{k} cold round {r + 1}"):
                    time.sleep(1.0)
                    row = {"start-to-ready": ready * 1000, "idle RSS": b.rss_mb(), **workloads(b, records, quick)}
            except Exception as exc:  # noqa: BLE001 - a broker that does not start counts as n/a
                print(f"  ! cold start of {k} failed: {exc!r}")
                FAILURES.append(f"cold start of {k}: {str(exc).splitlines()[0][:200]}")
                row = {}
            runs[k].append(row)
            show(f"cold round {r + 1} {k}", row)
    return runs


def grid(first: str, kinds: list[str], cols: list[str], rows: list) -> str:
    """| first | broker | cols ... | with one row per point and broker."""
    lines = [f"| {first} | broker | " + " | ".join(cols) + " |", "| ---: | --- |" + " ---: |" * len(cols)]
    for point, cells in rows:
        for k in kinds:
            lines.append(f"| {point} | {k} | " + " | ".join(fmt(cells.get(k, {}).get(c)) for c in cols) + " |")
    return "\n".join(lines)


def scaling_live(brokers: dict[str, BrokerProc], plan: scaling.Plan, kinds: list[str]) -> str:
    """Partitions and clients tables, on the long-running brokers."""
    print("scaling: partitions", flush=True)
    parts = scaling.run_points(kinds, plan.partitions,
                               lambda k, p: scaling.partitions_point(brokers[k].bootstrap, p, plan), 1800)
    print("scaling: clients", flush=True)
    topics = {k: guarded("fill", lambda: scaling.fill_consume_topic(brokers[k].bootstrap, plan), 600) for k in kinds}
    clients = scaling.run_points(kinds, plan.clients, lambda k, n: scaling.clients_point(
        brokers[k].bootstrap, n, plan, topics[k] or "missing"), 1800)
    mb = plan.records * RECORD / 1e6
    return "\n".join([
        f"**Partitions** (on the warm long-running brokers). One producer process (acks=all, linger 5 ms, "
        f"1 MB batches) writes {mb:.0f} MB of 1 KiB records round robin over all partitions of a fresh topic; "
        "one consumer (assign, read_uncommitted) reads them back; then p99 of the per-record ack latency "
        "(produce() to delivery report, librdkafka's `msg.latency()`, its default linger 5 ms) at a fixed "
        f"{plan.mbps:.0f} MB/s for {plan.seconds:.0f} s, round robin over the same partitions, and the Produce "
        "requests per second librdkafka sent for it (it sends a request whenever some partition's batch is "
        "due, so the request rate grows with the partitions). `create s`: CreateTopics until every "
        "partition has a leader.",
        "",
        grid("partitions", kinds, ["create s", "produce MB/s", "consume MB/s", "p99 ack ms", "Produce req/s"],
             parts),
        "",
        f"**Clients** (separate processes, multiprocessing spawn, released together by a barrier; topics of "
        f"{scaling.CLIENT_PARTITIONS} partitions). N producers write {mb:.0f} MB in total, round robin "
        f"(aggregate MB/s = bytes / (last finish − common start)); then N producers at {plan.mbps:.0f} MB/s "
        f"in total for {plan.seconds:.0f} s (p99 ack latency over all records); N consumers split the "
        f"partitions of a {mb:.0f} MB topic (assign, partitions i, i+N, …) and read all of it. Each client "
        "connects and fetches metadata before the barrier. All client processes share the machine's cores "
        "with the broker.",
        "",
        grid("clients", kinds, ["produce MB/s", "p99 ack ms", "consume MB/s"], clients),
    ])


def scaling_restarts(plan: scaling.Plan, kinds: list[str]) -> str:
    """Restart table, a fresh broker per row (run with no other broker up)."""
    print("scaling: restarts", flush=True)
    rows = scaling.run_points(kinds, plan.restarts, lambda k, pm: scaling.restart_point(k, *pm), 1800)
    return "\n".join([
        "**Restart** (a fresh broker per row, no other broker running): one topic with the given partitions "
        "and data (1 KiB records, contiguous per partition, written with acks=all), then a restart after "
        "SIGTERM and one after kill -9. Times from spawn until a Metadata request (v9) lists the topic with a "
        "leader for every partition, and until a Fetch (v11) of partition 0 from offset 0 returns records; "
        "a probe polls every 5 ms. Kafka's restarts do not run `kafka-storage format` (already formatted).",
        "",
        grid("partitions / data", kinds, ["clean Metadata ms", "clean Fetch ms", "kill -9 Metadata ms",
                                          "kill -9 Fetch ms"], [(f"{p} / {m} MB", c) for (p, m), c in rows]),
    ])


def warm_sections(runs: dict[str, list[Row]], kinds: list[str], head: str, mark: int, quick: bool) -> dict[str, str]:
    """The warm table (+ chart) and the CPU-per-GB table."""
    rows = summary_rows(runs, WORKLOAD_METRICS)
    warm = [f"{head}; medians of the rounds; one warm-up round discarded.", table(rows, kinds),
            spread_note(runs, WORKLOAD_METRICS), failures_since(mark)]
    png = RESULTS / ("ratios-quick.png.tmp" if quick else "ratios.png")
    if kinds == ["minikafka", "kafka"] and chart(rows, {n: h for n, (_u, h) in WORKLOAD_METRICS.items()}, png):
        warm.append(f"![minikafka relative to Apache Kafka, warm]({png.relative_to(ROOT)})")
    cpu = [f"{head}: broker CPU seconds (utime + stime of the broker process, all threads) per GB moved, "
           "measured around each workload of the warm rounds; medians.",
           table(summary_rows(runs, CPU_METRICS), kinds), spread_note(runs, CPU_METRICS)]
    return {"warm": paragraphs(*warm), "cpu": paragraphs(*cpu)}


def byte_compile_minikafka() -> None:
    """Write the .pyc files of minikafka's source tree, as `pip install` / the Docker image do: an
    editable checkout under PYTHONDONTWRITEBYTECODE would otherwise compile every module at each start
    and start-to-ready would measure the compiler."""
    import compileall
    for package in ("minikafka", "broker", "protocol", "storage", "coordinator"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("warm", "cold", "all"), default="all")
    ap.add_argument("--rounds", type=int, help="measured rounds per table (default 3, --quick 1)")
    ap.add_argument("--records", type=int, help="1 KiB records per produce workload (default 200000)")
    ap.add_argument("--scaling", action=argparse.BooleanOptionalAction, default=True, help="the scaling tables")
    ap.add_argument("--brokers", default="minikafka,kafka")
    ap.add_argument("--quick", action="store_true", help="smoke run: small numbers, 1 round")
    ap.add_argument("--out", help="Markdown file to update (default BENCHMARKS.md)")
    args = ap.parse_args()
    kinds = args.brokers.split(",")
    if any(k not in KINDS for k in kinds):
        sys.exit(f"--brokers: one of {KINDS}")
    rounds = args.rounds or (1 if args.quick else 3)
    records = args.records or (20_000 if args.quick else 200_000)
    plan = scaling.Plan(records=records)
    if args.quick:
        plan = scaling.Plan(partitions=(1, 100), clients=(1, 4), restarts=((10, 5), (100, 10)), records=records,
                            seconds=1.0)
    default_out = RESULTS / "BENCHMARKS-quick.md.tmp" if args.quick else ROOT / "BENCHMARKS.md"
    out = Path(args.out) if args.out else default_out
    command = "python -m bench.run_all " + " ".join(sys.argv[1:])
    byte_compile_minikafka()
    started, load_before = datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), load_average()
    print(f"{command}: rounds={rounds} records={records} load average {load_before}", flush=True)
    head = f"Run {started}, `{command}`, {rounds} round{'s' * (rounds > 1)} of {records:,} records per produce workload"
    result: dict[str, object] = {"command": command, "started": started, "failures": FAILURES}
    sections: dict[str, str] = {}
    warm_on, cold_on = args.mode in ("warm", "all"), args.mode in ("cold", "all")
    if warm_on or args.scaling:
        with long_running(kinds, records, args.quick) as brokers:
            if warm_on:
                mark = len(FAILURES)
                runs = warm_rounds(brokers, kinds, rounds, records, args.quick)
                result["warm"] = runs
                sections.update(warm_sections(runs, kinds, head, mark, args.quick))
            if args.scaling:
                mark = len(FAILURES)
                live = scaling_live(brokers, plan, kinds)
    if args.scaling:
        sections["scaling"] = paragraphs(f"Run {started}, `{command}`; one run per point, brokers in turn.",
                                         live, scaling_restarts(plan, kinds), failures_since(mark))
    if cold_on:
        mark = len(FAILURES)
        runs = cold_rounds(kinds, rounds, records, args.quick)
        result["cold"] = runs
        sections["cold"] = paragraphs(f"{head}; medians of the rounds.", table(summary_rows(runs, COLD_METRICS), kinds),
                                      spread_note(runs, COLD_METRICS), failures_since(mark))
    sections["setup"] = setup_block(command, started, load_before)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / ("latest-quick.json.tmp" if args.quick else "latest.json")).write_text(json.dumps(result, indent=1))
    for name, body in sections.items():
        replace_section(out, name, body)
        print(f"\n## {name}\n{body}", flush=True)
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
