"""The Raft core's messages as Kafka's quorum RPCs (raft/wire.py): every message survives
encoding to Kafka's wire bytes and back; fenced answers carry Kafka's error codes; metadata entries
travel as valid v2 record batches stamped with their epoch. Also the core's EndQuorumEpoch (resign)
and the KRaft config keys (broker/config/core.py)."""
from __future__ import annotations

import pytest
from kafka.protocol.consumer import FetchRequest as KFetchRequest, FetchResponse as KFetchResponse

from minikafka.broker.config.core import BrokerConfig, ConfigError
from minikafka.raft.config import QuorumConfigError, parse_voters
from minikafka.raft import wire
from minikafka.raft.log import LEADER_CHANGE, Entry
from minikafka.raft.core import (FOLLOWER, LEADER, UNATTACHED, BeginQuorumEpoch, EndQuorumEpoch,
                                               FetchRequest, FetchResponse, PersistentState, RaftConfig, RaftNode,
                                               VoteRequest, VoteResponse)
from minikafka.protocol import messages as m
from minikafka.protocol.errors import FENCED_LEADER_EPOCH, INCONSISTENT_CLUSTER_ID, NOT_LEADER_OR_FOLLOWER
from minikafka.protocol.codec import decode_body
from minikafka.protocol.record_batch import validate_batches


def through_bytes(msg, cls, version):
    """Encode as Kafka would send it, decode with the broker's own request decoder (requests) or
    kafka-python's (responses)."""
    data = msg.encode(version=version)
    if cls.is_request():
        return decode_body(cls, memoryview(bytes(data)), version, exact=True)
    return cls.decode(data, version=version)


def test_pre_vote_round_trip_needs_version_2():
    req = VoteRequest(epoch=7, candidate=2, last_epoch=5, end_offset=42, pre_vote=True)
    k = through_bytes(wire.vote_request(req, 3, "cid"), m.VoteRequest, 2)
    assert wire.from_vote_request(k) == req
    assert not wire.from_vote_request(through_bytes(wire.vote_request(req, 3, "cid"), m.VoteRequest, 1)).pre_vote
    back = through_bytes(wire.vote_response(VoteResponse(6, 3, True, None, pre_vote=True)), m.VoteResponse, 2)
    assert wire.from_vote_response(back, 3, pre_vote=True) == VoteResponse(6, 3, True, None, pre_vote=True)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_vote_round_trip(version):
    req = VoteRequest(epoch=7, candidate=2, last_epoch=5, end_offset=42)
    k = through_bytes(wire.vote_request(req, 3, "cid"), m.VoteRequest, version)
    assert k.cluster_id == "cid" and wire.from_vote_request(k) == req
    for resp in (VoteResponse(7, 3, True, None), VoteResponse(8, 3, False, 1)):
        back = through_bytes(wire.vote_response(resp), m.VoteResponse, version)
        assert wire.from_vote_response(back, 3) == resp
    err = through_bytes(wire.vote_response(None, INCONSISTENT_CLUSTER_ID), m.VoteResponse, version)
    assert err.error_code == INCONSISTENT_CLUSTER_ID and wire.from_vote_response(err, 3) is None


@pytest.mark.parametrize("version", [0, 1])
def test_begin_and_end_quorum_epoch_round_trip(version):
    begin = BeginQuorumEpoch(epoch=4, leader=1)
    assert wire.from_begin_request(through_bytes(wire.begin_request(begin, 2, None), m.BeginQuorumEpochRequest,
                                                 version)) == begin
    end = EndQuorumEpoch(epoch=4, leader=1, preferred=(3, 2))
    back = through_bytes(wire.end_request(end, "cid"), m.EndQuorumEpochRequest, version)
    assert wire.from_end_request(back, version) == end
    for cls in (m.BeginQuorumEpochResponse, m.EndQuorumEpochResponse):
        resp = through_bytes(wire.epoch_response(cls, 4, None), cls, version)
        part = resp.topics[0].partitions[0]
        assert (resp.topics[0].topic_name, part.leader_id, part.leader_epoch) == ("__cluster_metadata", -1, 4)


def test_a_request_for_another_partition_is_not_ours():
    req = wire.vote_request(VoteRequest(1, 1, 0, 0), 2, None)
    req.topics[0].topic_name = "other"
    assert wire.from_vote_request(req) is None


@pytest.mark.parametrize("version", [15, 16, 17])
def test_fetch_request_round_trip(version):
    req = FetchRequest(epoch=3, replica=2, fetch_offset=17, last_fetched_epoch=2)
    k = through_bytes(wire.fetch_request(req, "cid"), KFetchRequest, version)
    assert k.topics[0].topic_id == wire.METADATA_TOPIC_ID and k.replica_state.replica_id == 2
    assert k.cluster_id == "cid" and wire.from_fetch_request(k, version) == req


def test_a_consumer_fetch_is_not_a_replica_fetch():
    k = wire.fetch_request(FetchRequest(1, 2, 0, 0), None)
    k.replica_state = KFetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    assert wire.from_fetch_request(k, 16) is None


ENTRIES = (Entry(1, LEADER_CHANGE), Entry(1, {"type": "ClusterId", "clusterId": "abc"}), Entry(3, ("x", 1)),
           Entry(3, "plain"))


@pytest.mark.parametrize("version", [13, 16, 17])
def test_fetch_response_with_entries_round_trip(version):
    resp = FetchResponse(epoch=3, leader=1, high_watermark=2, entries=ENTRIES, base_offset=10)
    back = wire.from_fetch_response(through_bytes(wire.fetch_response(resp, 3), KFetchResponse, version), 10)
    assert back == resp  # payloads are JSON: tuples come back as tuples (lists too, as in the store)


def test_entries_are_valid_record_batches_stamped_with_their_epoch():
    data = wire.encode_entries(5, ENTRIES)
    batches = validate_batches(data)  # CRCs, sizes, magic 2
    assert [(h.base_offset, h.partition_leader_epoch) for _pos, h in batches] == [(5, 1), (6, 1), (7, 3), (8, 3)]
    assert wire.decode_entries(data)[0] == 5
    assert wire.decode_entries(data[:-3]) == (5, ENTRIES[:3])  # a partial trailing batch is left out
    bad = bytearray(data)
    bad[-2] ^= 0xFF
    with pytest.raises(ValueError):
        wire.decode_entries(bytes(bad))


def test_empty_and_diverging_answers():
    empty = wire.from_fetch_response(through_bytes(wire.fetch_response(FetchResponse(2, 1, 4, (), 9), 2),
                                                   KFetchResponse, 16), 9)
    assert empty == FetchResponse(2, 1, 4, (), 9)  # base offset: the fetch's own offset
    div = FetchResponse(5, 1, 4, diverging=(3, 7))
    assert wire.from_fetch_response(through_bytes(wire.fetch_response(div, 5), KFetchResponse, 16), 20) == \
        FetchResponse(5, 1, 4, (), 20, diverging=(3, 7))


@pytest.mark.parametrize("request_epoch, code", [(2, FENCED_LEADER_EPOCH), (5, NOT_LEADER_OR_FOLLOWER)])
def test_fenced_answers_carry_kafka_error_codes(request_epoch, code):
    fenced = FetchResponse(5, 3, fenced=True)
    k = through_bytes(wire.fetch_response(fenced, request_epoch), KFetchResponse, 16)
    part = k.responses[0].partitions[0]
    assert part.error_code == code and (part.current_leader.leader_id, part.current_leader.leader_epoch) == (3, 5)
    assert wire.from_fetch_response(k, 0) == FetchResponse(5, 3, fenced=True)
    unknown_leader = FetchResponse(5, None, fenced=True)
    assert wire.from_fetch_response(wire.fetch_response(unknown_leader, 5), 0) == unknown_leader


# -- the core's resignation (EndQuorumEpoch) -------------------------------------------------------------
CONFIG = RaftConfig(fetch_timeout_ms=1000, election_timeout_ms=500, election_backoff_max_ms=300)


def deliver(nodes, out, now):
    queue = list(out)
    while queue:
        dst, msg = queue.pop(0)
        if dst in nodes:
            queue.extend(nodes[dst].receive(msg, now))


def test_a_resigning_leader_hands_over_without_waiting_for_the_fetch_timeout():
    nodes = {v: RaftNode(v, (1, 2, 3), PersistentState(), CONFIG) for v in (1, 2, 3)}
    nodes[1]._deadline = 0
    deliver(nodes, nodes[1].tick(0), 0)
    assert nodes[1].role == LEADER
    for now in (10, 20):  # followers fetch; node 3 ahead of node 2 in the leader's view
        for v in (3, 2) if now == 10 else (3,):
            deliver(nodes, nodes[v].tick(now), now)
    out = nodes[1].resign(30)
    assert nodes[1].role == UNATTACHED and {d for d, _ in out} == {2, 3}
    assert all(isinstance(msg, EndQuorumEpoch) and msg.preferred[0] == 3 for _, msg in out)
    deliver(nodes, out, 30)
    assert nodes[2].role == nodes[3].role == UNATTACHED
    deliver(nodes, nodes[3].tick(31), 31)  # the first preferred successor campaigns at once
    assert nodes[3].role == LEADER and nodes[3].epoch == 2
    assert nodes[1].resign(40) == [] and nodes[2].role == FOLLOWER


def test_end_quorum_epoch_from_another_epoch_or_leader_changes_nothing():
    n = RaftNode(2, (1, 2, 3), PersistentState(), CONFIG)
    n.receive(BeginQuorumEpoch(3, 1), 0)
    for msg in (EndQuorumEpoch(2, 1, (2,)), EndQuorumEpoch(3, 3, (2,))):
        assert n.receive(msg, 5) == [] and n.role == FOLLOWER and n.leader == 1


# -- config ------------------------------------------------------------------------------------------------
BASE = {"node.id": "1", "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@[::1]:9095"}


def test_three_voters_make_a_quorum():
    cfg = BrokerConfig(BASE)
    assert cfg.quorum is not None and cfg.quorum.voters == {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9094),
                                                            3: ("::1", 9095)}
    assert cfg.controller_listener_names == ("CONTROLLER",)
    assert [l.name for l in cfg.advertised_listeners] == ["PLAINTEXT"]  # the controller listener is not advertised
    assert (cfg.quorum.fetch_timeout_ms, cfg.quorum.election_timeout_ms) == (2000, 1000)


def test_a_single_voter_or_no_voters_is_a_single_node_as_before():
    assert BrokerConfig({**BASE, "controller.quorum.voters": "1@127.0.0.1:9093"}).quorum is None
    assert BrokerConfig({}).quorum is None and BrokerConfig({}).controller_listener_names == ()


@pytest.mark.parametrize("change, message", [
    ({"controller.quorum.voters": "1@127.0.0.1:9093,x@h:1"}, "id@host:port"),
    ({"controller.quorum.voters": "2@127.0.0.1:9094,3@127.0.0.1:9095"}, "must be included in the set of voters"),
    ({"process.roles": "broker"}, "must not be included in the set of voters"),
    ({"process.roles": "broker", "node.id": "4"}, "must not contain a value appearing in the 'listeners'"),
    ({"process.roles": "controller"}, "must only contain KRaft controller listeners"),
    ({"controller.listener.names": "NOPE"}, "not a listener"),
    ({"controller.listener.names": ""}, "controller.listener.names"),
    ({"controller.quorum.voters": "", "controller.quorum.bootstrap.servers": "h:1:2"}, "is not host:port"),
    ({"controller.quorum.fetch.timeout.ms": "0"}, "positive"),
])
def test_bad_quorum_configs_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({**BASE, **change})


def test_bootstrap_servers_without_voters_make_a_dynamic_quorum():
    """KIP-853: the voters come from the metadata log; the node need not be named anywhere."""
    cfg = BrokerConfig({**BASE, "controller.quorum.voters": "", "controller.quorum.bootstrap.servers":
                        "127.0.0.1:9093,[::1]:9193"})
    assert cfg.quorum is not None and cfg.quorum.dynamic and cfg.quorum.voters == {}
    assert cfg.quorum.bootstrap_servers == (("127.0.0.1", 9093), ("::1", 9193))
    static = BrokerConfig({**BASE, "controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    assert not static.quorum.dynamic and static.quorum.bootstrap_servers == ()  # the voters win, as Kafka's


def test_a_broker_only_node_is_an_observer():
    cfg = BrokerConfig({**BASE, "node.id": "4", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9096"})
    assert cfg.quorum is not None and cfg.quorum.is_broker and not cfg.quorum.is_controller
    assert 4 not in cfg.quorum.voters and cfg.controller_listener_names == ("CONTROLLER",)


def test_a_controller_only_node_is_a_voter_without_broker_listeners():
    cfg = BrokerConfig({**BASE, "process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093"})
    assert cfg.quorum is not None and cfg.quorum.is_controller and not cfg.quorum.is_broker


def test_parse_voters_refuses_duplicates():
    with pytest.raises(QuorumConfigError, match="twice"):
        parse_voters("1@a:1,1@b:2")
    with pytest.raises(ConfigError, match="twice"):  # as a broker config error at start-up
        BrokerConfig({"node.id": "1", "process.roles": "broker,controller", "controller.listener.names": "C",
                      "listeners": "PLAINTEXT://127.0.0.1:1,C://127.0.0.1:2",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,C:PLAINTEXT",
                      "controller.quorum.voters": "1@a:1,1@b:2"})


def test_snapshot_id_and_fetch_snapshot_on_the_wire():
    """KIP-630: a Fetch answer below the log start carries SnapshotId; FetchSnapshot (API 59) round-trips
    (Kafka 4.3.1's controller decodes this request field for field — checked by hand against the oracle)."""
    from minikafka.raft.core import FetchResponse, FetchSnapshotRequest
    resp = wire.fetch_response(FetchResponse(4, 1, 90, snapshot_id=(80, 3)), 4)
    back = wire.from_fetch_response(KFetchResponse.decode(resp.encode(version=16), version=16), 0)
    assert back.snapshot_id == (80, 3) and back.high_watermark == 90 and not back.entries
    req = wire.fetch_snapshot_request(FetchSnapshotRequest(4, 2, (80, 3)), "cid", 1024)
    parsed = wire.from_fetch_snapshot_request(m.FetchSnapshotRequest.decode(req.encode(version=0), version=0))
    assert parsed == (FetchSnapshotRequest(4, 2, (80, 3)), 1024, wire.SNAPSHOT_CHUNK_BYTES)
    out = wire.fetch_snapshot_response(0, 4, 1, (80, 3), 3000, 1024, b"abc")
    got = wire.from_fetch_snapshot_response(m.FetchSnapshotResponse.decode(out.encode(version=0), version=0))
    assert got == (0, 4, 1, 3000, 1024, b"abc")


def test_a_peer_down_for_thousands_of_attempts_still_backs_off():
    """The backoff after n failures is capped at max_backoff_s; n in the thousands (a peer down for many
    minutes) once overflowed the float and made every later request to that peer fail."""
    from minikafka.protocol.peer_client import PeerClient
    peer = PeerClient(2, "127.0.0.1", 1, "test", 1.0, retry_backoff_s=0.02, max_backoff_s=1.0)
    for _ in range(5000):
        peer._fail()
    assert 0.0 < peer._backoff_left() <= 1.0


def test_warm_codecs_generates_the_election_rpcs_request_decoders():
    """broker/warmup.py runs this on quorum nodes so that an election's first Vote round does not
    generate codecs; afterwards the broker's request decoders of the three election RPCs exist."""
    from minikafka.protocol import codec
    wire.warm_codecs()
    for cls, version in ((m.VoteRequest, wire.VOTE_VERSION), (m.BeginQuorumEpochRequest, wire.BEGIN_VERSION),
                         (m.EndQuorumEpochRequest, wire.END_VERSION)):
        assert (cls, version) in codec._DECODERS
