"""Start-to-ready: from spawning `minikafka serve` to the first answered ApiVersions request.

Measured for minikafka as a user runs it — installed from a wheel into a fresh virtualenv (`pip install .`,
byte-compiled as pip does), which is also what the Docker image runs — and, for comparison, from this
checkout's editable install (its import hook costs start-up time a user never pays). Wall time and the
broker's CPU time at that moment (utime + stime from /proc, less sensitive to a busy machine) are both
reported; medians over the runs.

    python -m bench.startup [--runs 15] [--keep-venv DIR]
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
# ApiVersions v0: api_key 18, version 0, correlation id 1, client id "bench"
_REQUEST = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
APIVERSIONS_FRAME = struct.pack(">i", len(_REQUEST)) + _REQUEST
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / CLOCK_TICK


def answers_api_versions(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(APIVERSIONS_FRAME)
            return len(s.recv(4)) == 4
    except OSError:
        return False


# What no broker on this stack can beat: a server that answers the probe with fixed bytes (an empty
# ApiVersions v0 answer) as soon as it listens, importing only what its name says.
FLOORS = {
    "floor: interpreter + socket": "import socket",
    "floor: + asyncio": "import asyncio",
    "floor: + asyncio + uvloop": "import asyncio, uvloop",
    "floor: + asyncio + uvloop + kafka.protocol": "import minikafka, asyncio, uvloop, kafka.protocol.metadata",
}
_FLOOR_SERVER = """
import sys, socket
{imports}
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
while True:
    c, _ = s.accept(); d = c.recv(64); c.sendall(b"\\x00\\x00\\x00\\x0a" + d[8:12] + b"\\x00\\x00\\x00\\x00\\x00\\x00"); c.close()
"""


def broker_command(python: str, port: int, data: str) -> list[str]:
    return [python, "-m", "minikafka.broker.cli.main", "serve", "--log-level", "warning",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dirs={data}/data"]


def floor_command(imports: str) -> "Callable[[str, int, str], list[str]]":
    return lambda python, port, data: [python, "-c", _FLOOR_SERVER.format(imports=imports), str(port)]


def start_once(python: str, env: dict[str, str], timeout: float = 30.0,
               command: "Callable[[str, int, str], list[str]]" = broker_command) -> tuple[float, float]:
    """(wall ms, server CPU ms) from spawn to the first ApiVersions answer; the server is stopped after."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        t0 = time.monotonic()
        proc = subprocess.Popen(command(python, port, data),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                cwd=data)  # not the checkout: `-m` puts the cwd first on sys.path
        try:
            while not answers_api_versions(port):
                if proc.poll() is not None:
                    raise RuntimeError(f"broker exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError("no ApiVersions answer")
                time.sleep(0.001)
            wall = (time.monotonic() - t0) * 1000
            cpu = cpu_ms(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)
    return wall, cpu


def installed_venv(where: Path) -> str:
    """A fresh virtualenv with minikafka installed from a wheel built from this checkout; its python."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = str(where / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(ROOT)], check=True)
    return python


def clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: the .pyc files are read
    env.pop("PYTHONPATH", None)
    return env


def measure(python: str, runs: int, command: Callable[[str, int, str], list[str]] = broker_command) -> dict[str, float]:
    env = clean_env()
    start_once(python, env, command=command)  # discarded: first run warms the page cache
    samples = [start_once(python, env, command=command) for _ in range(runs)]
    walls, cpus = [s[0] for s in samples], [s[1] for s in samples]
    return {"wall_median": statistics.median(walls), "wall_min": min(walls), "wall_max": max(walls),
            "cpu_median": statistics.median(cpus)}


def run(runs: int, keep_venv: str | None = None) -> dict[str, dict[str, float]]:
    from bench.run_all import byte_compile_minikafka
    byte_compile_minikafka()
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(keep_venv) if keep_venv else Path(tmp) / "venv"
        python = str(venv / "bin" / "python") if (venv / "bin" / "python").exists() else installed_venv(venv)
        results = {"installed (wheel in a venv)": measure(python, runs),
                   "editable checkout": measure(sys.executable, runs)}
        for name, imports in FLOORS.items():
            results[name] = measure(python, runs, floor_command(imports))
        return results


def markdown(results: dict[str, dict[str, float]], runs: int) -> str:
    rows = ["| server | wall ms, median (min–max) | server CPU ms at ready, median |", "|---|---|---|"]
    for name, r in results.items():
        rows.append(f"| {name} | {r['wall_median']:.0f} ({r['wall_min']:.0f}–{r['wall_max']:.0f}) "
                    f"| {r['cpu_median']:.0f} |")
    return (f"Spawn of `python -m minikafka.broker.cli.main serve` (empty data dir) to the first answered "
            f"ApiVersions request, {runs} runs after one discarded; `python -m bench.startup --runs {runs}`. "
            f"The floors are servers that answer the probe with fixed bytes once they listen, after importing "
            f"what their name says, with the installed venv's interpreter.\n\n" + "\n".join(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--keep-venv", help="reuse/keep the installed virtualenv at this path")
    args = ap.parse_args()
    print(markdown(run(args.runs, args.keep_venv), args.runs))


if __name__ == "__main__":
    main()
