"""The Jepsen-style run (bench/jepsen.py) on a three-node cluster: idempotent and transactional writers
while nodes are killed -9 and paused one at a time (and, in the second run, replicas are reassigned:
dropped, their log deleted, and added back, copied from the leader); nothing acknowledged is lost,
nothing duplicated or reordered, no aborted or torn transaction is read, no client hits a fatal
idempotence error. CI's budget is MINIKAFKA_JEPSEN_SECONDS (default 20) per run; `make soak` runs each
for 10 minutes."""
from __future__ import annotations

import os
import random

import pytest

from bench.jepsen import run
from minikafka.testing import MiniKafkaCluster

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]


@pytest.mark.parametrize("moves", [False, True], ids=["faults", "faults+moves"])
def test_no_anomalies_under_kills_and_pauses(tmp_path, moves):
    seconds = float(os.environ.get("MINIKAFKA_JEPSEN_SECONDS", "20"))
    seed = int(os.environ.get("MINIKAFKA_JEPSEN_SEED", random.randrange(1 << 30)))
    log: list[str] = []
    with MiniKafkaCluster(3, config={"min.insync.replicas": "2"}, data_dir=tmp_path, startup_timeout=60) as cluster:
        report, facts = run(cluster, seconds, seed, log=log.append, moves=moves)
    summary = f"seed {seed}: {report} {facts}"
    assert report.ok and report.unchecked_partitions == 0 and not facts["client_errors"], summary
    # the run did something: writes acknowledged and transactions committed under faults
    assert facts["acked"] > 100 and facts["txns_committed"] >= 3 and facts["faults"], summary
    assert bool(facts["moves"]) == moves, summary
