"""Markdown for BENCHMARKS.md: the setup block, tables, marker sections, the ratio chart."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from .brokers import describe_configs

ROOT = Path(__file__).resolve().parent.parent
Row = dict[str, float | None]


def fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def _proc(path: str, key: str) -> str:
    try:
        for line in open(path):
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def _cmd(args: list[str]) -> str:
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=ROOT)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def setup_block(command: str, started: str, load_before: str) -> str:
    """Machine, versions, broker configurations and the command of this run."""
    import confluent_kafka
    import kafka
    mem = _proc("/proc/meminfo", "MemTotal").split()[0]
    mem_gib = int(mem) / 2**20 if mem.isdigit() else float("nan")
    java = _cmd(["java", "-version"]).splitlines()
    commit = _cmd(["git", "rev-parse", "--short", "HEAD"])
    # the run's own outputs (BENCHMARKS.md, bench/results/) do not count as changes to what was measured
    changed = [line for line in _cmd(["git", "status", "--porcelain", "--untracked-files=no"]).splitlines()
               if not line.split()[-1].startswith(("BENCHMARKS.md", "bench/results/"))]
    dirty = " (with uncommitted changes)" if changed else ""
    return "\n".join([
        f"Run {started}: `{command}` at minikafka commit {commit}{dirty}; load average before the run "
        f"{load_before}, after {load_average()} (1/5/15 min).",
        "",
        f"* Machine: {_proc('/proc/cpuinfo', 'model name')}, {os.cpu_count()} cores, {mem_gib:.1f} GiB RAM, "
        f"{platform.system()} {platform.release()} {platform.machine()}; clients and broker on this machine.",
        f"* Clients: confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}); "
        f"kafka-python {kafka.__version__} for the raw Metadata/Fetch probes of the restart table; "
        f"Python {platform.python_version()}; {java[0] if java else 'java ?'}.",
        *describe_configs(),
    ])


def table(rows: dict[str, tuple[str, Row]], kinds: list[str]) -> str:
    """rows: metric -> (unit, {kind: value}); a ratio column minikafka/Kafka when both are there."""
    ratio = kinds == ["minikafka", "kafka"]
    head = "| metric | unit | " + " | ".join(kinds) + (" | minikafka/Kafka |" if ratio else " |")
    lines = [head, "| --- | --- |" + " ---: |" * (len(kinds) + ratio)]
    for name, (unit, vals) in rows.items():
        row = f"| {name} | {unit} | " + " | ".join(fmt(vals.get(k)) for k in kinds)
        if ratio:
            a, b = vals.get("minikafka"), vals.get("kafka")
            row += " | " + (f"{a / b:.3g}" if a is not None and b else "n/a")
        lines.append(row + " |")
    return "\n".join(lines)


def replace_section(path: Path, name: str, body: str) -> None:
    """Put body between <!-- bench:NAME:begin --> and its end marker (appended when missing)."""
    begin, end = f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if begin not in text:
        text = text.rstrip("\n") + f"\n\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _old, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{body.strip()}\n{end}{tail}")


def chart(rows: dict[str, tuple[str, Row]], higher_better: dict[str, bool], path: Path) -> bool:
    """Bar chart of minikafka relative to Kafka (> 1 = minikafka better); False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib missing: no chart (pip install '.[bench]')")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names, ratios = [], []
    for name, (_unit, vals) in rows.items():
        a, b = vals.get("minikafka"), vals.get("kafka")
        if a and b:
            names.append(name)
            ratios.append(a / b if higher_better.get(name, True) else b / a)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(names) + 1.2))
    ax.barh(names, ratios, color=["tab:green" if r >= 1 else "tab:orange" for r in ratios])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("minikafka relative to Apache Kafka, warm (>1 = minikafka better, log scale)")
    ax.invert_yaxis()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(path, dpi=110, format="png")
    except (OSError, ValueError) as exc:
        print(f"chart not written: {exc!r}")
        return False
    finally:
        plt.close(fig)
    return True
