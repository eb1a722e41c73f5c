"""Java (kafka-clients 4.3.1) consume-transform-produce on a three-node cluster while the node that is
the transaction coordinator of the transactional id is killed -9 (on a timer, twice: while transactions
run) and restarted. A run of the Java program that fails (fenced, timed out) is restarted — the standard
recovery: a new producer with the same transactional id fences the old one and the consumer rewinds to
the committed offsets. At the end a read_committed reader sees every input record exactly once."""
from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Producer

from tests.support.cluster_harness import Cluster
from tests.integration.cluster.test_coordinator_failover import CONFIG, TOPIC, coordinator, create_topic, restart_and_wait_in_sync
from tests.integration.clients.test_java_client import classpath, lab
from tests.integration.transactions.test_java_eos_tv2 import PROGRAM
from tests.support.txn_helpers import consume_to_end

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]
N = 300


def test_java_eos_survives_the_transaction_coordinators_kill(tmp_path):
    lab.fetch()
    cluster = Cluster(tmp_path, config=CONFIG).start()
    try:
        tag = uuid.uuid4().hex[:6]
        src, out, group, tid = f"jin-{tag}", f"jout-{tag}", f"jg-{tag}", f"jtx-{tag}"
        create_topic(cluster, TOPIC)  # restart_and_wait_in_sync checks its ISRs
        create_topic(cluster, src)
        create_topic(cluster, out)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(N):
            p.produce(src, value=f"v{i:04d}".encode(), partition=i % 3)
        assert p.flush(30) == 0
        cmd = [lab.java_bin(), "-Xmx256m", "-cp", classpath("4.x"), str(PROGRAM), cluster.bootstrap,
               src, out, group, tid, "run"]
        dead: set[int] = set()
        rc = None
        kills_mid_run = 0
        failures: list[str] = []  # why earlier runs of the loop ended (a kill may fence or time it out)
        for attempt, kill_after in enumerate([2.5, 1.0, None, None, None]):
            java = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if kill_after is not None:
                time.sleep(kill_after)
                node = coordinator(cluster, 1, tid)
                kills_mid_run += java.poll() is None  # the Java loop was still running
                cluster.kill(node)
                dead.add(node)
                time.sleep(1.0)  # the node stays down a while (the fault), then comes back
                restart_and_wait_in_sync(cluster, dead)
            try:
                stdout, stderr = java.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                java.kill()
                stdout, stderr = java.communicate()
            rc = java.returncode
            if rc == 0:
                break
            failures.append(f"attempt {attempt + 1} exited {rc}: {stderr[-1500:]}")
        assert rc == 0, stdout[-2000:] + stderr[-3000:] + "\n".join(failures)
        assert kills_mid_run >= 1, "the coordinator was never killed while transactions ran"
        print(f"attempts={attempt + 1} kills_mid_run={kills_mid_run} {stdout.strip().splitlines()[-1]}", *failures,
              sep="\n")
        got = consume_to_end(cluster.bootstrap, out, [0, 1, 2])
        outputs = sorted(v.decode() for part in got.values() for _o, v in part)
        assert outputs == sorted(f"out-v{i:04d}" for i in range(N))  # nothing lost, nothing twice
    finally:
        cluster.stop()
