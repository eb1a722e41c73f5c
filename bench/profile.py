"""Where minikafka's time goes under one cell of the client-defaults matrix (bench/matrix.py): the
broker runs under py-spy (sampling, no instrumentation) while the cell runs against it.

    python -m bench.profile CELL [--mb 300] [--rate 250] [--top 30] [--raw FILE]

CELL is a cell name of bench.matrix (e.g. "java defaults", "librdkafka 100 B"). Prints the functions
with the most samples on top of the stack (self) and anywhere on it (inclusive), as shares of all the
samples taken while the broker was busy serving (idle samples, the event loop waiting in epoll, and
start-up and its background imports left out).
"""
from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import free_port
from .matrix import cells, run_cell
from .startup import answers_api_versions

IDLE = ("select (selectors.py", "run_forever", "_run_once (asyncio/base_events.py",
        "_worker (concurrent/futures/thread.py:81)", "wait (threading.py")
# start-up and the background warm-up imports (broker/warmup.py) are not the request path
NOT_SERVING = ("<frozen importlib._bootstrap", "broker/warmup.py")


class ProfiledMinikafka:
    """minikafka started by `py-spy record` (as its child, so no ptrace permission is needed)."""

    def __init__(self, work: Path, raw: Path, rate: int, native: bool = False) -> None:
        self.port = free_port()
        data = work / "data"
        data.mkdir(parents=True)
        self.spy = subprocess.Popen(
            [str(Path(sys.executable).with_name("py-spy")), "record", "-r", str(rate), "-f", "raw", "-o", str(raw),
             *(["--native"] if native else ["--nonblocking"]),
             "--", sys.executable, "-m", "minikafka.broker.cli.main", "serve", "--log-level", "warning",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "--override", f"log.dirs={data}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not answers_api_versions(self.port):
            if time.monotonic() > deadline or self.spy.poll() is not None:
                raise RuntimeError("profiled minikafka did not start")
            time.sleep(0.01)
        self.pid = int(Path(f"/proc/{self.spy.pid}/task/{self.spy.pid}/children").read_text().split()[0])

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """SIGTERM to the broker; py-spy writes its file when its child exits."""
        os.kill(self.pid, signal.SIGTERM)
        self.spy.wait(60)


def summarize(raw: Path, top: int) -> str:
    """Self and inclusive sample shares per function, busy samples only."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    busy = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f for f in stack.split(";") if f and not f.startswith("process ") and not f.startswith("thread ")]
        if not frames or any(frames[-1].startswith(i) for i in IDLE) \
                or any(marker in f for f in frames for marker in NOT_SERVING):
            continue
        n = int(count)
        busy += n
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    out = [f"{busy} busy samples", "", "self %   function"]
    out += [f"{100 * n / busy:6.1f}   {f}" for f, n in own.most_common(top)]
    out += ["", "incl %   function"]
    out += [f"{100 * n / busy:6.1f}   {f}" for f, n in incl.most_common(top)]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cell")
    ap.add_argument("--mb", type=float, default=300)
    ap.add_argument("--rate", type=int, default=250, help="samples per second")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--raw", help="keep py-spy's raw (collapsed stacks) output here")
    ap.add_argument("--native", action="store_true", help="C frames too (uvloop, the kernel entry points)")
    args = ap.parse_args()
    matching = [c for c in cells(["librdkafka", "java"]) if c.name == args.cell]
    if not matching:
        sys.exit(f"no cell {args.cell!r}; cells: {', '.join(c.name for c in cells(['librdkafka', 'java']))}")
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        raw = Path(args.raw) if args.raw else Path(tmp) / "raw.txt"
        broker = ProfiledMinikafka(Path(tmp), raw, args.rate, args.native)
        try:
            print(run_cell(matching[0], broker, args.mb), flush=True)
        finally:
            broker.stop()
        print(summarize(raw, args.top))


if __name__ == "__main__":
    main()
