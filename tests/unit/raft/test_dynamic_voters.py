"""KIP-853 in the Raft core (raft/core.py): the voter set is the last VotersRecord of the log (committed
or not), else the bootstrap checkpoint's; a lone bootstrapped voter writes it into the log as leader;
observers found through bootstrap ids follow the leader; a voter added is used as soon as appended; a
truncated VotersRecord gives back the previous set; a removed leader resigns once the removal commits."""
from __future__ import annotations

from minikafka.raft.core import (FOLLOWER, LEADER, UNATTACHED, FetchResponse, PersistentState, RaftConfig, RaftNode,
                                 VOTERS_RECORD, voters_of, voters_record)
from minikafka.raft.log import Entry

CONFIG = RaftConfig(fetch_timeout_ms=1000, election_timeout_ms=500, election_backoff_max_ms=0)
BOOTSTRAP = -2  # controller.quorum.bootstrap.servers' first entry: node 1's controller listener


def voter(n: int) -> dict:
    return {"voterId": n, "voterDirectoryId": f"dir{n}", "endpoints": [{"name": "CONTROLLER", "host": "h", "port": n}]}


def standalone() -> RaftNode:
    return RaftNode(1, (), PersistentState(snapshot=(0, 0, {"voters": [voter(1)], "kraftVersion": 1})), CONFIG)


def observer(n: int) -> RaftNode:
    return RaftNode(n, (), PersistentState(), CONFIG, bootstrap=(BOOTSTRAP,))


def deliver(nodes: dict[int, RaftNode], out, now: int) -> None:
    queue = list(out)
    while queue:
        dst, msg = queue.pop(0)
        dst = 1 if dst == BOOTSTRAP else dst
        if dst in nodes:
            queue.extend(nodes[dst].receive(msg, now))


def run(nodes: dict[int, RaftNode], start: int, until: int, step: int = 10) -> int:
    now = start
    while now < until:
        for n in list(nodes.values()):
            deliver(nodes, n.tick(now), now)
        now += step
    return now


def test_static_voters_are_unchanged():
    n = RaftNode(1, (1, 2, 3), PersistentState(), CONFIG)
    assert (n.voters, n.kraft_version, n.voter_nodes, n.observer) == ((1, 2, 3), 0, {}, False)


def test_a_standalone_controller_writes_its_voter_set_into_the_log():
    n = standalone()
    assert (n.voters, n.kraft_version, n.voters_offset) == ((1,), 1, -1)
    n.tick(0)
    n.tick(2000)
    assert n.role == LEADER
    kinds = [e.payload if not isinstance(e.payload, dict) else e.payload["type"] for e in n.log.entries]
    assert kinds[1:] == ["KRaftVersion", VOTERS_RECORD] and n.voters_offset == 2 and n.high_watermark == 3


def test_grow_one_to_three_then_remove_the_leader():
    nodes = {1: standalone(), 2: observer(2), 3: observer(3)}
    now = run(nodes, 0, 3000)
    assert nodes[1].role == LEADER and nodes[2].observer and nodes[2].role == FOLLOWER and nodes[2].leader == 1
    assert nodes[2].voters == (1,)  # learned from the log
    for n in (2, 3):
        nodes[1].propose(voters_record([*nodes[1].voter_nodes.values(), voter(n)]))
        assert nodes[1].voters == tuple(range(1, n + 1))  # used as soon as appended
        now = run(nodes, now, now + 500)
        assert all(node.voters == tuple(range(1, n + 1)) for node in nodes.values())
        assert not nodes[n].observer
    hw = nodes[1].high_watermark
    nodes[1].propose("x")
    now = run(nodes, now, now + 300)
    assert nodes[1].high_watermark > hw and nodes[1].role == LEADER
    # remove the leader itself: once committed it resigns, 2 and 3 elect one of them
    nodes[1].propose(voters_record([voter(2), voter(3)]))
    now = run(nodes, now, now + 4000)
    assert nodes[1].role != LEADER and nodes[1].observer
    leaders = [n for n in (2, 3) if nodes[n].role == LEADER]
    assert len(leaders) == 1 and nodes[1].leader == leaders[0]
    assert all(node.voters == (2, 3) for node in nodes.values())


def test_a_voter_that_missed_its_own_voters_record_still_votes_after_the_leader_dies():
    """Voter 3's VotersRecord commits on 1 and 2 alone; 1 dies before 3 fetches it. 3 still thinks it
    observes, but 2 needs its vote: it grants it (as Kafka's canGrantVote) and learns from the new
    leader's BeginQuorumEpoch and log that it votes."""
    nodes = {1: standalone(), 2: observer(2), 3: observer(3)}
    now = run(nodes, 0, 3000)
    nodes[1].propose(voters_record([voter(1), voter(2)]))
    now = run(nodes, now, now + 500)
    assert nodes[3].voters == (1, 2) and nodes[3].observer
    up = {1: nodes[1], 2: nodes[2]}  # 3 is cut off while the leader appends {1, 2, 3} and commits it with 2
    nodes[1].propose(voters_record([voter(1), voter(2), voter(3)]))
    hw = nodes[1].voters_offset
    now = run(up, now, now + 300)
    assert nodes[1].high_watermark > hw and nodes[2].voters == (1, 2, 3) and nodes[3].observer
    del nodes[1]  # kill -9 of the leader
    now = run(nodes, now, now + 6000)
    assert nodes[2].role == LEADER, (nodes[2].role, nodes[3].role)
    assert nodes[3].leader == 2 and nodes[3].voters == (1, 2, 3) and not nodes[3].observer


def test_a_truncated_voters_record_restores_the_previous_set():
    n = RaftNode(2, (), PersistentState(epoch=1), CONFIG, bootstrap=(BOOTSTRAP,))
    n.role, n.leader = FOLLOWER, 1
    n._fetch_id = 1
    n.receive(FetchResponse(1, 1, 0, (Entry(1, voters_record([voter(1)])),), 0, fetch_id=1), 0)
    n.receive(FetchResponse(1, 1, 0, (Entry(1, voters_record([voter(1), voter(2)])),), 1, fetch_id=1), 0)
    assert n.voters == (1, 2) and not n.observer
    n.receive(FetchResponse(1, 1, 0, base_offset=2, diverging=(1, 1), fetch_id=1), 0)  # the leader's log ends at 1
    assert n.log.end_offset == 1 and n.voters == (1,) and n.observer
    assert voters_of(n.log.entries[0].payload) == [voter(1)] and n.voter_records_at(1) == [voter(1)]
    assert n.role in (FOLLOWER, UNATTACHED)


def test_fetch_v17_carries_the_directory_id_and_the_answer_the_leader_endpoint():
    from kafka.protocol.consumer import FetchRequest as KFetch, FetchResponse as KFetchResponse

    from minikafka.protocol.codec import decode_body
    from minikafka.raft import wire
    from minikafka.raft.core import FetchRequest
    req = wire.fetch_request(FetchRequest(3, 2, 10, 3), "cid", 500, "7HyVEqVWT9eWSzw5TdD0tA")
    back = decode_body(KFetch, memoryview(bytes(req.encode(version=17))), 17, exact=True)
    assert wire.fetch_directory_id(back, 17) == "7HyVEqVWT9eWSzw5TdD0tA"
    assert wire.from_fetch_request(back, 17) == FetchRequest(3, 2, 10, 3)
    assert wire.fetch_directory_id(back, 16) is None
    assert wire.directory_str(wire.directory_uuid("7HyVEqVWT9eWSzw5TdD0tA")) == "7HyVEqVWT9eWSzw5TdD0tA"
    resp = wire.fetch_response(FetchResponse(3, 1, 5), 3, [(1, "127.0.0.1", 9093)])
    back = KFetchResponse.decode(resp.encode(version=16), version=16)
    assert [(e.node_id, e.host, e.port) for e in back.node_endpoints] == [(1, "127.0.0.1", 9093)]
