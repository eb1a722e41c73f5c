"""kraft.version 0 -> 1 on a static quorum (KAFKA-16538), the leader's check: every voter must have told the leader
in this epoch (UpdateRaftVoter) that it supports the level; Kafka's LeaderState messages."""
from __future__ import annotations

from types import SimpleNamespace

from minikafka.broker.handlers.update_features import kraft_upgrade_check
from minikafka.raft.core import LEADER


def _driver(role: str, told: dict[int, int]):
    def entry(v: int, hi: int) -> dict:
        return {"voterId": v, "voterDirectoryId": f"dir{v}", "endpoints": [],
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": hi}}
    return SimpleNamespace(id=1, node=SimpleNamespace(role=role, voters=(1, 2, 3)),
                           own_voter_entry=lambda d: entry(1, 1),
                           static_info=lambda: {v: entry(v, hi) for v, hi in told.items()})


NOT_ALL = "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it"


def test_every_voter_must_support_the_level():
    assert kraft_upgrade_check(_driver(LEADER, {2: 1, 3: 1}), 1) is None
    assert kraft_upgrade_check(_driver(LEADER, {2: 1}), 1) == NOT_ALL  # voter 3 has not told the leader
    assert kraft_upgrade_check(_driver(LEADER, {2: 1, 3: 0}), 1) == NOT_ALL  # voter 3 supports 0 only


def test_only_the_leader_upgrades():
    assert kraft_upgrade_check(_driver("follower", {2: 1, 3: 1}), 1) == \
        "Upgrade kraft version failed because the replica is not the current leader"
