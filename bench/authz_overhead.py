"""What authorization costs on the produce/fetch path: the same workload against minikafka without an
authorizer and with StandardAuthorizer (ACLs allowing User:* everything on topics and groups, so the
work is the same and only the checks differ).

Usage: python -m bench.authz_overhead [--records N] [--rounds N]
Two producer shapes: `bulk` (1 KiB records in big batches: bench.produce_consume) and `small`
(100-byte records, one Produce request per record: where a per-request check would show most).
Variants are interleaved round by round; the medians are printed.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from bench.produce_consume import consume, create_topic, produce

AUTHZ = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
         "allow.everyone.if.no.acl.found": "true"}


def small_produce(bootstrap: str, topic: str, n: int) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": False,
                  "max.in.flight.requests.per.connection": 1})
    t0 = time.perf_counter()
    for i in range(n):
        p.produce(topic, b"y" * 100)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def grant_everything(bootstrap: str) -> None:
    """User:* may do ALL on every topic and group (the cluster too, for the admin calls)."""
    from tests.support.authz_helpers import Admin, binding
    from minikafka.broker.security import acl as A
    admin = Admin(bootstrap)
    admin.grant(*[binding(t, n, A.ALL, principal="User:*", host="*")
                  for t, n in ((A.CLUSTER, A.CLUSTER_NAME), (A.TOPIC, "*"), (A.GROUP, "*"))])
    admin.close()


def measure(config: dict[str, str], records: int, small: int) -> dict[str, float]:
    from minikafka.testing import MiniKafka

    with tempfile.TemporaryDirectory() as d:
        with MiniKafka(config=config, data_dir=Path(d) / "data") as mk:
            bs = mk.bootstrap_servers
            if config:
                grant_everything(bs)
            topic = f"authz-{time.time_ns()}"
            create_topic(bs, topic, 1)
            p = produce(bs, topic, records)
            c = consume(bs, topic, 1, records)
            s = small_produce(bs, topic + "-s", small) if small else float("nan")
    return {"bulk_produce_rps": records / p, "consume_rps": records / c, "small_produce_rps": small / s}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--small", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    results: dict[str, list[dict[str, float]]] = {"no authorizer": [], "StandardAuthorizer": []}
    for _ in range(args.rounds):
        results["no authorizer"].append(measure({}, args.records, args.small))
        results["StandardAuthorizer"].append(measure(AUTHZ, args.records, args.small))
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name:20s} " + "  ".join(f"{k}={v:,.0f}" for k, v in med.items()))


if __name__ == "__main__":
    main()
