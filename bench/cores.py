"""Would a second core pay on this machine? One minikafka node against a two-node minikafka cluster on
the same host (replication factor 1: each node leads half the partitions, so two Python processes
share the work), on cells of the client-defaults matrix (bench/matrix.py).

    python -m bench.cores [--mb 300] [--rounds 2] [--cells "librdkafka 4 producers,java 4 producers"]

A warm-up pass is discarded; medians of --rounds. The brokers' CPU is summed over their processes.
This is the experiment docs/development/multicore.md asks for before building a multi-core node.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from .brokers import BrokerProc, cpu_seconds
from .matrix import cells, run_cell


class TwoNodes:
    """A two-node minikafka cluster (KRaft combined mode) seen as one broker by run_cell: bootstrap of
    both, CPU of both."""

    def __init__(self) -> None:
        from minikafka.testing_cluster import MiniKafkaCluster
        self.cluster = MiniKafkaCluster(2, config={"default.replication.factor": "1",
                                                   "offsets.topic.replication.factor": "1",
                                                   "transaction.state.log.replication.factor": "1",
                                                   "transaction.state.log.min.isr": "1"}, startup_timeout=60)
        self.bootstrap = self.cluster.bootstrap_servers
        self.pid = 0  # run_cell's CPU figure is replaced below

    def cpu(self) -> float:
        return sum(cpu_seconds(node.pid) for node in self.cluster.nodes.values())

    def close(self) -> None:
        self.cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cells", default="librdkafka 4 producers,java 4 producers,java defaults")
    args = ap.parse_args()
    wanted = [c for c in cells(["librdkafka", "java"]) if c.name in args.cells.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-cores-") as tmp:
        one = BrokerProc("minikafka", Path(tmp) / "one")
        one.start()
        two = TwoNodes()
        two.pid = two.cluster.nodes[1].pid  # run_cell reads one pid; the sum is taken here
        try:
            results: dict[str, dict[str, list[float]]] = {c.name: {"1 node": [], "2 nodes": []} for c in wanted}
            for r in range(args.rounds + 1):
                for cell in wanted:
                    for label, broker, cpu in (("1 node", one, lambda: cpu_seconds(one.pid)), ("2 nodes", two, two.cpu)):
                        c0 = cpu()
                        res = run_cell(cell, broker, args.mb)
                        used = cpu() - c0
                        print(f"round {r} {label:7} {cell.name}: produce {res['produce']:.0f} MB/s, consume "
                              f"{res['consume']:.0f} MB/s, broker CPU {used:.1f} s", flush=True)
                        if r > 0:
                            results[cell.name][label].append(res["produce"])
            print("\n| cell | 1 node produce MB/s | 2 nodes (RF 1) produce MB/s | ratio |\n| --- | ---: | ---: | ---: |")
            for name, by in results.items():
                a, b = statistics.median(by["1 node"]), statistics.median(by["2 nodes"])
                print(f"| {name} | {a:.0f} | {b:.0f} | {b / a:.2f} |")
        finally:
            one.stop()
            two.close()


if __name__ == "__main__":
    main()
