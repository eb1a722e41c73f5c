"""Unclean leader election in the controller (metadata/controller.py), pure: off by default
(the last ISR member stays, leaderless), on by topic config, cluster default or static config (a live
replica outside the ISR leads, alone in the ISR), and ElectLeaders UNCLEAN on request."""
from __future__ import annotations

from minikafka.metadata import records as r
from minikafka.metadata.controller import (ELECTION_NOT_NEEDED, ELIGIBLE_LEADERS_NOT_AVAILABLE, NONE,
                                                      ControllerConfig)
from minikafka.metadata.image import NO_LEADER

from .test_cluster_metadata import cluster


def _leaderless(c, epochs, configs=None):
    """Topic t, replicas [1, 2]: 2 fenced first (ISR [1]), then 1: no live ISR member."""
    c.create_topic("t", 1, 2, dict(configs or {}), assignments={0: [1, 2]})
    c.fence(2)
    assert c.image.partition("t", 0).isr == (1,)
    c.heartbeat(2, epochs[2], 10**6, False, False, 10**6, 0)  # 2 is back (unfenced), out of the ISR
    c.fence(1)
    return c.image.partition("t", 0)


def test_off_by_default_the_partition_stays_leaderless():
    c, log, epochs = cluster()
    p = _leaderless(c, epochs)
    assert (p.leader, p.isr) == (NO_LEADER, (1,))
    c.tick(10**9)
    assert c.image.partition("t", 0).leader == NO_LEADER
    assert log.replay().partition("t", 0) == c.image.partition("t", 0)


def test_topic_config_elects_a_live_replica_outside_the_isr():
    c, log, epochs = cluster()
    p = _leaderless(c, epochs, {"unclean.leader.election.enable": "true"})
    assert (p.leader, p.isr) == (2, (2,))
    assert log.replay().partition("t", 0) == p


def test_a_config_turned_on_later_takes_effect_on_the_next_tick():
    c, log, epochs = cluster(session_ms=10**12)
    _leaderless(c, epochs)
    c._emit(r.config(r.BROKER_RESOURCE, "", "unclean.leader.election.enable", "true"))  # cluster default
    c.tick(10**6)
    assert (c.image.partition("t", 0).leader, c.image.partition("t", 0).isr) == (2, (2,))


def test_static_config_and_topic_override():
    c, log, epochs = cluster()
    c.config = ControllerConfig(c.config.session_timeout_ms, unclean_leader_election=True)
    assert c.unclean_enabled("t")
    p = _leaderless(c, epochs, {"unclean.leader.election.enable": "false"})  # the topic says no
    assert p.leader == NO_LEADER


def test_elect_leaders_unclean_on_request():
    c, log, epochs = cluster()
    _leaderless(c, epochs)
    assert c.elect_unclean("t", 7) == 3
    assert c.elect_unclean("t", 0) == NONE
    p = c.image.partition("t", 0)
    assert (p.leader, p.isr) == (2, (2,))
    assert c.elect_unclean("t", 0) == ELECTION_NOT_NEEDED
    c.fence(2)
    assert c.elect_unclean("t", 0) == ELIGIBLE_LEADERS_NOT_AVAILABLE  # nobody alive
