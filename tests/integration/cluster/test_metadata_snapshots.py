"""Metadata-log snapshots (KIP-630) between three `minikafka serve` processes: with a tiny
`metadata.log.max.record.bytes.between.snapshots` every node snapshots its committed metadata
(`<offset>-<epoch>.checkpoint`) and drops the log prefix; a node killed (-9) while the leader's log start
moves past its log end catches up with FetchSnapshot when it comes back and then describes every topic."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.cluster_harness import Cluster
from tests.support.helpers import RawClient, metadata_raw, wait_until
from tests.integration.cluster.test_cluster_metadata import brokers, create

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]  # three processes with short timeouts

CONFIG = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300",
          "metadata.log.max.record.bytes.between.snapshots": "2000"}
CHECKPOINT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def snapshot_offsets(root: Path, n: int) -> list[int]:
    return sorted(int(m.group(1)) for f in (root / f"node{n}").rglob("*.checkpoint")
                  if (m := CHECKPOINT.match(f.name)))


def topics(c: Cluster, n: int) -> set[str]:
    try:
        with RawClient(c.nodes[n].bootstrap, timeout=3) as cl:
            return {t.name for t in metadata_raw(cl).topics if t.error_code == 0 and t.partitions}
    except OSError:
        return set()


def test_a_node_behind_the_leaders_log_start_catches_up_with_fetch_snapshot(tmp_path):
    c = Cluster(tmp_path, config=CONFIG).start()
    try:
        wait_until(lambda: all(len(brokers(c, n)) == 3 for n in c.ids), timeout=15, what="three brokers registered")
        leader, _epoch = c.agreed_leader(c.ids, timeout=20)
        victim = next(n for n in c.ids if n != leader)
        first = [f"before-{i}" for i in range(15)]
        for name in first:
            assert create(c.nodes[leader].bootstrap, name, 1, 3).error_code == 0
        wait_until(lambda: all(set(first) <= topics(c, n) for n in c.ids), timeout=20, what="first topics everywhere")
        wait_until(lambda: all(snapshot_offsets(tmp_path, n) for n in c.ids), timeout=20,
                   what="every node took a snapshot on its own")
        _e, _l, _ep, _hw, ends = c.describe(leader)
        victim_end = ends[victim]
        c.kill(victim)
        later = [f"after-{i}" for i in range(15)]
        for name in later:
            assert create(c.nodes[leader].bootstrap, name, 1, 2).error_code == 0
        # the leader's log now starts (its snapshot) beyond the killed node's log end
        wait_until(lambda: max(snapshot_offsets(tmp_path, leader), default=0) > victim_end + 5, timeout=20,
                   what="the leader snapshotted past the killed node's log end")
        leader_snapshot = max(snapshot_offsets(tmp_path, leader))
        c.restart(victim)
        everything = set(first) | set(later)
        wait_until(lambda: everything <= topics(c, victim), timeout=30, what="the restarted node knows every topic")
        # it got there through the leader's snapshot: it holds one at or past the leader's log start then
        assert max(snapshot_offsets(tmp_path, victim)) >= leader_snapshot
        logs = "".join(p.read_text(errors="replace") for p in (tmp_path / f"node{victim}").glob("broker-*.log"))
        assert re.search(rf"snapshot at offset (\d+) .* fetched from node {leader}", logs), logs[-3000:]
        # and it goes on: registered again, a replica of a later topic
        wait_until(lambda: len(brokers(c, leader)) == 3, timeout=15, what="the restarted broker registered")
        assert create(c.nodes[leader].bootstrap, "last", 1, 3).error_code == 0
        wait_until(lambda: "last" in topics(c, victim), timeout=20, what="a later topic on the restarted node")
    finally:
        for n in c.ids:
            if c.nodes[n].pid is not None:
                c.kill(n)
        c.stop()
