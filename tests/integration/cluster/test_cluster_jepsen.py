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



def test_a_secured_cluster_keeps_its_invariants_while_an_intruder_tries_everything(tmp_path):
    """The same run on a cluster with ACLs (bench/jepsen_intruder.py): User:mallory, logged in on every node's
    SASL listeners, keeps trying what Kafka refuses it (writes to internal and workload topics, DeleteRecords,
    granting itself ACLs on broker and controller listeners, a forged Envelope, topic and broker config
    changes, SCRAM users). Nothing is let through, nothing of it is left, and the workload's invariants hold."""
    from bench.jepsen_intruder import secured_cluster
    seconds = float(os.environ.get("MINIKAFKA_JEPSEN_SECONDS", "20"))
    seed = int(os.environ.get("MINIKAFKA_JEPSEN_SEED", random.randrange(1 << 30)))
    log: list[str] = []
    with secured_cluster({"min.insync.replicas": "2"}, data_dir=tmp_path) as cluster:
        report, facts = run(cluster, seconds, seed, log=log.append)
    summary = f"seed {seed}: {report} {facts}"
    assert report.ok and report.unchecked_partitions == 0 and not facts["client_errors"], summary
    assert facts["acked"] > 100 and facts["txns_committed"] >= 3 and facts["faults"], summary
    assert facts["breaches"] == [] and facts["intruder_traces"] == [], summary
    assert facts["intrusions_refused"] >= 50, summary  # the intruder did try, and was answered
