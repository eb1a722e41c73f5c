"""Broker start-to-ready time (spawn until the port accepts) and idle RSS, median of N runs."""
from __future__ import annotations

import argparse
import statistics
import time

from .common import minikafka, rss_mb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    ready, rss = [], []
    for _ in range(args.runs):
        with minikafka() as (_bs, proc, t):
            ready.append(t)
            time.sleep(1.0)
            rss.append(rss_mb(proc.pid))
    print(f"start-to-ready median {statistics.median(ready) * 1000:.0f} ms (min {min(ready) * 1000:.0f}, "
          f"max {max(ready) * 1000:.0f}); idle RSS median {statistics.median(rss):.1f} MB")


if __name__ == "__main__":
    main()
