"""The Raft core's messages (raft.py) as Kafka's quorum RPCs (KIP-595) on partition 0 of
`__cluster_metadata` — pure translation, no I/O:

* VoteRequest/VoteResponse <-> Vote (API 52) request/response;
* BeginQuorumEpoch <-> BeginQuorumEpoch (53) request (its response only acknowledges);
* EndQuorumEpoch <-> EndQuorumEpoch (54) request (a leader resigning on shutdown);
* FetchRequest/FetchResponse <-> Fetch (1, v13+: topic id, `ReplicaState.ReplicaId`, `CurrentLeaderEpoch`,
  `LastFetchedEpoch`) and its response (`HighWatermark`, `DivergingEpoch`, `CurrentLeader`, records,
  `SnapshotId` when the fetch offset lies before the leader's log start — KIP-630);
* FetchSnapshot (59): the snapshot file's bytes from `Position`, at most `MaxBytes` per answer
  (`Size` = the whole file); the follower checks and installs the whole file (store.py's format).

Records: each log entry travels as one uncompressed v2 record batch whose base offset is the entry's
offset and whose `partitionLeaderEpoch` is the entry's epoch, holding one record (no key) whose value
is the entry's payload as JSON (store.py's encoding: tuples become lists and back). Kafka's own
metadata records (and LeaderChangeMessage control records) are not used yet: payloads stay generic.

A fenced Fetch answer (the core's `fenced=True`) is the partition error FENCED_LEADER_EPOCH when the
fetcher's epoch is older than the responder's, else NOT_LEADER_OR_FOLLOWER, with `CurrentLeader`
naming the responder's epoch and known leader; any such error maps back to `fenced=True`.
"""
from __future__ import annotations

import struct
import time
import uuid
from typing import Any

from minikafka.protocol.messages import (BeginQuorumEpochRequest, EndQuorumEpochRequest, VoteRequest as KVoteRequest,
                                  VoteResponse as KVoteResponse)
from minikafka.raft.log import Entry
from minikafka.raft.core import (BeginQuorumEpoch, EndQuorumEpoch, FetchRequest, FetchResponse, FetchSnapshotRequest, VoteRequest,
                   VoteResponse)
from minikafka.raft.store import _decode_payload, _encode_payload
from minikafka.protocol.errors import FENCED_LEADER_EPOCH, NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID (AAAAAAAAAAAAAAAAAAAAAQ)
METADATA_PARTITION = 0

FENCING_ERRORS = frozenset({NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH})

FETCH_VERSION = 16
VOTE_VERSION = 2  # v2: PreVote (KIP-996)
BEGIN_VERSION = 1
END_VERSION = 1
FETCH_SNAPSHOT_VERSION = 0
SNAPSHOT_CHUNK_BYTES = 1 << 20
FETCH_MAX_BYTES = 8 << 20


def _leader_id(leader: int | None) -> int:
    return -1 if leader is None else leader


def _leader(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


# -- Vote -------------------------------------------------------------------------------------------------
def vote_request(msg: VoteRequest, voter: int, cluster_id: str | None) -> KVoteRequest:
    part = KVoteRequest.TopicData.PartitionData(
        partition_index=METADATA_PARTITION, candidate_epoch=msg.epoch, candidate_id=msg.candidate,
        last_offset_epoch=msg.last_epoch, last_offset=msg.end_offset, pre_vote=msg.pre_vote)
    return KVoteRequest(cluster_id=cluster_id, voter_id=voter,
                        topics=[KVoteRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def from_vote_request(req: KVoteRequest) -> VoteRequest | None:
    """The core's VoteRequest, or None when the request names no partition of ours."""
    part = _our_partition(req)
    if part is None:
        return None
    return VoteRequest(part.candidate_epoch, part.candidate_id, part.last_offset_epoch, part.last_offset,
                       bool(getattr(part, "pre_vote", False)))


def vote_response(msg: VoteResponse | None, error: int = NONE) -> KVoteResponse:
    if msg is None:
        return KVoteResponse(error_code=error, topics=[], node_endpoints=[])
    part = KVoteResponse.TopicData.PartitionData(partition_index=METADATA_PARTITION, error_code=NONE,
                                                 leader_id=_leader_id(msg.leader), leader_epoch=msg.epoch,
                                                 vote_granted=msg.granted)
    return KVoteResponse(error_code=NONE, topics=[KVoteResponse.TopicData(topic_name=METADATA_TOPIC,
                                                                           partitions=[part])],
                         node_endpoints=[])


def from_vote_response(resp: KVoteResponse, voter: int, pre_vote: bool = False) -> VoteResponse | None:
    """The core's VoteResponse; `pre_vote` comes from the request it answers (the answer does not say)."""
    part = _our_partition(resp)
    if resp.error_code != NONE or part is None or part.error_code != NONE:
        return None
    return VoteResponse(part.leader_epoch, voter, bool(part.vote_granted), _leader(part.leader_id), pre_vote)


# -- BeginQuorumEpoch / EndQuorumEpoch ---------------------------------------------------------------------
def begin_request(msg: BeginQuorumEpoch, voter: int, cluster_id: str | None) -> BeginQuorumEpochRequest:
    part = BeginQuorumEpochRequest.TopicData.PartitionData(partition_index=METADATA_PARTITION,
                                                           leader_id=msg.leader, leader_epoch=msg.epoch)
    return BeginQuorumEpochRequest(cluster_id=cluster_id, voter_id=voter, leader_endpoints=[],
                                   topics=[BeginQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC,
                                                                             partitions=[part])])


def from_begin_request(req: BeginQuorumEpochRequest) -> BeginQuorumEpoch | None:
    part = _our_partition(req)
    return None if part is None else BeginQuorumEpoch(part.leader_epoch, part.leader_id)


def end_request(msg: EndQuorumEpoch, cluster_id: str | None) -> EndQuorumEpochRequest:
    part = EndQuorumEpochRequest.TopicData.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=msg.leader, leader_epoch=msg.epoch,
        preferred_successors=list(msg.preferred),
        preferred_candidates=[EndQuorumEpochRequest.TopicData.PartitionData.ReplicaInfo(
            candidate_id=c, candidate_directory_id=None) for c in msg.preferred])
    return EndQuorumEpochRequest(cluster_id=cluster_id, leader_endpoints=[],
                                 topics=[EndQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC,
                                                                         partitions=[part])])


def from_end_request(req: EndQuorumEpochRequest, version: int) -> EndQuorumEpoch | None:
    part = _our_partition(req)
    if part is None:
        return None
    preferred = (tuple(part.preferred_successors or ()) if version == 0
                 else tuple(c.candidate_id for c in part.preferred_candidates or ()))
    return EndQuorumEpoch(part.leader_epoch, part.leader_id, preferred)


def epoch_response(response_class: type, epoch: int, leader: int | None, error: int = NONE) -> Any:
    """A BeginQuorumEpoch/EndQuorumEpoch answer: the responder's epoch and known leader."""
    part = response_class.TopicData.PartitionData(partition_index=METADATA_PARTITION, error_code=error,
                                                  leader_id=_leader_id(leader), leader_epoch=epoch)
    return response_class(error_code=NONE, node_endpoints=[],
                          topics=[response_class.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


def warm_codecs() -> None:
    """Generate the codecs of the election RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch: request encoder
    and decoder, response encoder and decoder) before the first election needs them. kafka-python and
    protocol/codec.py generate a codec on the first use of each (message, version): ~16 ms for one Vote
    round trip on a 2-core VM, paid in the pre-vote round right after a leader died, where it widens the
    window in which two voters stand at once and split the vote."""
    from minikafka.protocol.codec import decode_body
    from minikafka.protocol.messages import BeginQuorumEpochResponse, EndQuorumEpochResponse
    rounds = ((vote_request(VoteRequest(1, 1, 0, 0, True), 2, None),
               vote_response(VoteResponse(1, 2, True, None, True)), VOTE_VERSION),
              (begin_request(BeginQuorumEpoch(1, 1), 2, None), epoch_response(BeginQuorumEpochResponse, 1, 1),
               BEGIN_VERSION),
              (end_request(EndQuorumEpoch(1, 1, (2,)), None), epoch_response(EndQuorumEpochResponse, 1, 1),
               END_VERSION))
    for req, resp, version in rounds:
        decode_body(type(req), memoryview(bytes(req.encode(version=version))), version)
        type(resp).decode(bytes(resp.encode(version=version)), version=version)


def _our_partition(msg: Any) -> Any:
    for topic in msg.topics or ():
        if topic.topic_name == METADATA_TOPIC:
            for part in topic.partitions or ():
                if part.partition_index == METADATA_PARTITION:
                    return part
    return None


# -- Fetch ------------------------------------------------------------------------------------------------
def fetch_request(msg: FetchRequest, cluster_id: str | None, max_wait_ms: int = 0,
                  directory_id: str | None = None) -> Any:
    """`directory_id` (KIP-853, Fetch v17's ReplicaDirectoryId): the fetching replica's metadata log dir id."""
    from kafka.protocol.consumer import FetchRequest as KFetchRequest
    extra = {"replica_directory_id": directory_uuid(directory_id)} if directory_id else {}
    part = KFetchRequest.FetchTopic.FetchPartition(
        partition=METADATA_PARTITION, current_leader_epoch=msg.epoch, fetch_offset=msg.fetch_offset,
        last_fetched_epoch=msg.last_fetched_epoch, log_start_offset=-1, partition_max_bytes=FETCH_MAX_BYTES, **extra)
    return KFetchRequest(cluster_id=cluster_id, replica_state=KFetchRequest.ReplicaState(replica_id=msg.replica,
                                                                                         replica_epoch=-1),
                         max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0,
                         session_epoch=-1, forgotten_topics_data=[], rack_id="",
                         topics=[KFetchRequest.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[part])])


def directory_uuid(directory_id: str) -> uuid.UUID:
    """Kafka's Uuid string (url-safe base64, no padding) as a UUID."""
    import base64
    return uuid.UUID(bytes=base64.urlsafe_b64decode(directory_id + "=" * (-len(directory_id) % 4)))


def directory_str(value: Any) -> str | None:
    """A UUID as Kafka's Uuid string; None for none or the zero id."""
    import base64
    if value is None or getattr(value, "int", 0) == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def _metadata_partition(req: Any) -> Any | None:
    """The request's `__cluster_metadata`-0 entry (a Fetch's FetchPartition), None without one."""
    for topic in req.topics or ():
        if topic.topic_id == METADATA_TOPIC_ID:
            for part in topic.partitions or ():
                if part.partition == METADATA_PARTITION:
                    return part
    return None


def fetch_directory_id(req: Any, version: int) -> str | None:
    """The fetching replica's directory id (Fetch v17+), None before or without one."""
    part = _metadata_partition(req) if version >= 17 else None
    return None if part is None else directory_str(getattr(part, "replica_directory_id", None))


UNKNOWN_HIGH_WATERMARK = 2**63 - 1  # Fetch v18's default: the follower does not send its high watermark


def fetch_high_watermark(req: Any, version: int) -> int | None:
    """The high watermark the fetching replica knows (Fetch v18+, KIP-1166); None before v18, when it sends
    none (Long.MAX_VALUE) or does not know one (-1)."""
    part = _metadata_partition(req) if version >= 18 else None
    hw = None if part is None else getattr(part, "high_watermark", None)
    return None if hw is None or hw < 0 or hw == UNKNOWN_HIGH_WATERMARK else hw


def from_fetch_request(req: Any, version: int) -> FetchRequest | None:
    """The core's FetchRequest; None unless it fetches `__cluster_metadata`-0 as a replica."""
    replica = req.replica_state.replica_id if version >= 15 else req.replica_id
    part = _metadata_partition(req)
    if part is None or replica < 0:
        return None
    return FetchRequest(part.current_leader_epoch, replica, part.fetch_offset, max(0, part.last_fetched_epoch))


def fetch_response(msg: FetchResponse, request_epoch: int,
                   endpoints: list[tuple[int, str, int]] | None = None) -> Any:
    from kafka.protocol.consumer import FetchResponse as KFetchResponse
    P = KFetchResponse.FetchableTopicResponse.PartitionData
    error = NONE
    if msg.fenced:
        error = FENCED_LEADER_EPOCH if request_epoch < msg.epoch else NOT_LEADER_OR_FOLLOWER
    diverging = (P.EpochEndOffset(epoch=msg.diverging[0], end_offset=msg.diverging[1]) if msg.diverging
                 else P.EpochEndOffset(epoch=-1, end_offset=-1))
    part = P(partition_index=METADATA_PARTITION, error_code=error, high_watermark=msg.high_watermark,
             last_stable_offset=msg.high_watermark, log_start_offset=0, diverging_epoch=diverging,
             current_leader=P.LeaderIdAndEpoch(leader_id=_leader_id(msg.leader), leader_epoch=msg.epoch),
             snapshot_id=(P.SnapshotId(end_offset=msg.snapshot_id[0], epoch=msg.snapshot_id[1]) if msg.snapshot_id
                          else P.SnapshotId(end_offset=-1, epoch=-1)), aborted_transactions=None,
             preferred_read_replica=-1, records=encode_entries(msg.base_offset, msg.entries))
    # NodeEndpoints (v16+): the leader's controller endpoint, so that an observer that found it through a
    # bootstrap server (KIP-853) can fetch from it
    nodes = [KFetchResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=None) for n, h, p in endpoints or ()]
    return KFetchResponse(throttle_time_ms=0, error_code=NONE, session_id=0, node_endpoints=nodes,
                          responses=[KFetchResponse.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID,
                                                                           partitions=[part])])


def from_fetch_response(resp: Any, fetch_offset: int, fetch_id: int = 0) -> FetchResponse | None:
    """The core's FetchResponse to the fetch `fetch_id` from `fetch_offset`; None for an answer that is no
    quorum answer (a top-level error, no partition of ours, an unexpected error code)."""
    if resp.error_code != NONE:
        return None
    for topic in resp.responses or ():
        if topic.topic_id != METADATA_TOPIC_ID:
            continue
        for part in topic.partitions or ():
            if part.partition_index != METADATA_PARTITION:
                continue
            leader = part.current_leader
            if part.error_code in FENCING_ERRORS:
                return FetchResponse(leader.leader_epoch, _leader(leader.leader_id), fenced=True, fetch_id=fetch_id)
            if part.error_code != NONE:
                return None
            snap = part.snapshot_id
            if snap is not None and snap.end_offset >= 0 and snap.epoch >= 0:
                return FetchResponse(leader.leader_epoch, _leader(leader.leader_id), part.high_watermark,
                                     snapshot_id=(snap.end_offset, snap.epoch), fetch_id=fetch_id)
            div = part.diverging_epoch
            diverging = (div.epoch, div.end_offset) if div is not None and div.epoch >= 0 else None
            base, entries = decode_entries(part.records)
            return FetchResponse(leader.leader_epoch, _leader(leader.leader_id), part.high_watermark,
                                 entries, fetch_offset if base is None else base, diverging, fetch_id=fetch_id)
    return None


# -- FetchSnapshot ----------------------------------------------------------------------------------------
def fetch_snapshot_request(msg: FetchSnapshotRequest, cluster_id: str | None, position: int) -> Any:
    from minikafka.protocol.messages import FetchSnapshotRequest as K
    P = K.TopicSnapshot.PartitionSnapshot
    part = P(partition=METADATA_PARTITION, current_leader_epoch=msg.epoch, position=position,
             snapshot_id=P.SnapshotId(end_offset=msg.snapshot_id[0], epoch=msg.snapshot_id[1]))
    return K(cluster_id=cluster_id, replica_id=msg.replica, max_bytes=SNAPSHOT_CHUNK_BYTES,
             topics=[K.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])])


def from_fetch_snapshot_request(req: Any) -> tuple[FetchSnapshotRequest, int, int] | None:
    """(the core's request, position, max bytes); None unless it asks for `__cluster_metadata`-0."""
    for topic in req.topics or ():
        if topic.name != METADATA_TOPIC:
            continue
        for part in topic.partitions or ():
            if part.partition == METADATA_PARTITION and req.replica_id >= 0:
                snap = part.snapshot_id
                return (FetchSnapshotRequest(part.current_leader_epoch, req.replica_id, (snap.end_offset, snap.epoch)),
                        part.position, req.max_bytes)
    return None


def fetch_snapshot_response(error: int, epoch: int, leader: int | None, snapshot_id: tuple[int, int],
                            size: int = 0, position: int = 0, data: bytes = b"") -> Any:
    from minikafka.protocol.messages import FetchSnapshotResponse as K
    P = K.TopicSnapshot.PartitionSnapshot
    part = P(index=METADATA_PARTITION, error_code=error,
             snapshot_id=P.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]),
             current_leader=P.LeaderIdAndEpoch(leader_id=_leader_id(leader), leader_epoch=epoch),
             size=size, position=position, unaligned_records=data)
    return K(throttle_time_ms=0, error_code=NONE, topics=[K.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])])


def from_fetch_snapshot_response(resp: Any) -> tuple[int, int, int | None, int, int, bytes] | None:
    """(error, leader epoch, leader, size, position, bytes) of our partition; None if absent."""
    if resp.error_code != NONE:
        return None
    for topic in resp.topics or ():
        for part in topic.partitions or ():
            if topic.name == METADATA_TOPIC and part.index == METADATA_PARTITION:
                leader = part.current_leader
                return (part.error_code, leader.leader_epoch if leader else -1,
                        _leader(leader.leader_id) if leader else None, part.size, part.position,
                        bytes(part.unaligned_records or b""))
    return None


# -- records ----------------------------------------------------------------------------------------------
_EPOCH_AT = 12  # partitionLeaderEpoch's byte offset in a v2 batch header (outside the CRC)


def encode_entries(base_offset: int, entries: tuple[Entry, ...] | list[Entry]) -> bytes:
    """One v2 batch per entry (see the module docstring)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    out = bytearray()
    now = int(time.time() * 1000)
    for i, entry in enumerate(entries):
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
        builder.append(0, timestamp=now, key=None, value=_encode_payload(entry.payload), headers=[])
        batch = builder.build()
        struct.pack_into(">q", batch, 0, base_offset + i)
        struct.pack_into(">i", batch, _EPOCH_AT, entry.epoch)
        out += batch
    return bytes(out)


def decode_entries(records: bytes | memoryview | None) -> tuple[int | None, tuple[Entry, ...]]:
    """(base offset of the first batch or None, the entries); a partial trailing batch is ignored.
    Offsets must be consecutive (ValueError otherwise)."""
    from kafka.record.default_records import DefaultRecordBatch
    data = bytes(records or b"")
    pos, base, entries = 0, None, []
    while pos + 12 <= len(data):
        offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        batch = DefaultRecordBatch(data[pos:end])
        if not batch.validate_crc():
            raise ValueError(f"metadata batch at offset {offset}: CRC mismatch")
        if base is None:
            base = offset
        elif offset != base + len(entries):
            raise ValueError(f"metadata batch at offset {offset}, expected {base + len(entries)}")
        for record in batch:
            entries.append(Entry(batch.leader_epoch, _decode_payload(record.value)))
        pos = end
    return base, tuple(entries)
