"""MiniKafka() start-up as a test sees it: spawn of the broker subprocess until its first ApiVersions
answer (`MiniKafka.startup_seconds`), and the whole constructor; median of N runs.

    python -m bench.testing_startup --runs 10
"""
from __future__ import annotations

import argparse
import statistics
import time

from minikafka.testing import MiniKafka


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    spawn_to_api, ctor = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        kafka = MiniKafka()
        ctor.append(time.perf_counter() - t0)
        spawn_to_api.append(kafka.startup_seconds)
        kafka.close()
    ms = lambda xs: f"median {statistics.median(xs) * 1000:.0f} ms (min {min(xs) * 1000:.0f}, max {max(xs) * 1000:.0f})"
    print(f"MiniKafka() spawn-to-ApiVersions {ms(spawn_to_api)}; constructor {ms(ctor)}; {args.runs} runs")


if __name__ == "__main__":
    main()
