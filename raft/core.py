"""The Raft core of the metadata quorum, KRaft-flavoured (KIP-595), as a pure state machine.

No sockets, no clocks, no threads: `tick(now)` and `receive(message, now)` return the messages to
send; the caller owns delivery and time (the deterministic simulation in tests, the broker's quorum
driver, driver.py, over Kafka's RPCs). KRaft's shape rather than textbook Raft's:

* **Pull replication.** Followers send `Fetch(epoch, fetch_offset, last_fetched_epoch)` to the leader;
  the leader answers entries and its high watermark, or a `diverging` (epoch, end offset) when the
  follower's log does not match its own there; the follower truncates to the matching point and
  fetches again. The leader learns follower progress from the fetches themselves.
* **Commit** (the high watermark) = the largest offset a majority of voters have fetched up to, and
  only once it covers an entry of the leader's own epoch — a new leader begins its epoch by appending a
  LEADER_CHANGE entry, so earlier epochs' entries commit only underneath one of its own.
* **Elections.** A follower that has not heard from its leader for `fetch_timeout_ms`, or an unattached
  node after its randomized election timeout, first becomes *prospective* (KIP-996 pre-vote): it asks
  the voters, without changing its epoch, whether they would vote for it in epoch + 1. A voter grants a
  pre-vote to a node whose log is at least as up to date unless it leads, or follows a leader it has
  fetched from in this epoch (it answers that leader, and the prospective node follows it again). Only
  with a majority of pre-votes does it become a candidate for epoch + 1 and ask for votes; a voter
  grants at most one vote per epoch, only to a candidate whose log is at least as up to date
  ((last epoch, end offset) ordering). The winner announces itself with BeginQuorumEpoch. So a voter
  that was paused or cut off and comes back does not depose a working leader.
* **Fencing.** Every message carries its epoch; anything from an older epoch is answered with the
  newer epoch (and the known leader) and changes nothing. A leader that has not been fetched from by a
  majority within `fetch_timeout_ms` resigns (check quorum), so a partitioned old leader stops acting;
  its uncommitted entries are truncated once it follows the new leader. A leader repeats
  BeginQuorumEpoch to voters that do not fetch, and a candidate told of its epoch's leader follows it.
* **Resignation.** `resign` (shutdown) sends EndQuorumEpoch; its preferred successor campaigns at once.
* **Observers** (a broker-only node, KIP-595): a node outside the voters replicates the log like a
  follower but never stands for election (a Vote request it answers as any replica, as Kafka's),
  and its fetches count for neither the high watermark
  nor the leader's check quorum. Without a leader (or when its fetches time out) it sends a Fetch to
  every voter; the first answer naming a leader is followed.

Persistent state is `epoch`, `voted_for` and the log (`PersistentState`); a restart keeps it and forgets
everything else. Invariants (checked by the simulation): at most one leader per epoch; committed
entries never change and are the same on every node; the high watermark never moves back on a node
while it stays up.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Union

from minikafka.raft.log import LEADER_CHANGE, Entry, QuorumLog

# KIP-853 (kraft.version 1): the voter set is a record of the log — the last VotersRecord in it (committed
# or not) is the set in use; before the first, the one in the snapshot (the bootstrap checkpoint written by
# `storage format --standalone/--initial-controllers`), else the static controller.quorum.voters
VOTERS_RECORD = "Voters"
KRAFT_VERSION_RECORD = "KRaftVersion"


def voters_of(payload: Any) -> list[dict] | None:
    """The voter entries of a VotersRecord payload (`{"type": "Voters", "voters": [{"voterId", "voterDirectoryId",
    "endpoints": [{"name", "host", "port"}], "kRaftVersionFeature": {...}}]}`), None for any other payload."""
    if isinstance(payload, dict) and payload.get("type") == VOTERS_RECORD:
        return list(payload.get("voters") or ())
    return None


def voters_record(voters: list[dict]) -> dict:
    return {"type": VOTERS_RECORD, "version": 0, "voters": sorted(voters, key=lambda v: v["voterId"])}


# -- messages -------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class VoteRequest:
    epoch: int  # the epoch the candidate stands in (a pre-vote: the one it would stand in)
    candidate: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    voter: int
    granted: bool
    leader: int | None = None
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    epoch: int
    leader: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """A leader resigning (graceful shutdown): voters need not wait for the fetch timeout to elect
    another; `preferred` ranks the successors (the most caught-up first), each waits by its rank."""
    epoch: int
    leader: int
    preferred: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchRequest:
    epoch: int
    replica: int
    fetch_offset: int
    last_fetched_epoch: int
    fetch_id: int = 0  # the follower's count of its fetches; the answer carries it back (not on the wire:
    # the driver pairs each answer with its request)


@dataclass(frozen=True, slots=True)
class FetchResponse:
    epoch: int
    leader: int | None
    high_watermark: int = 0
    entries: tuple[Entry, ...] = ()
    base_offset: int = 0
    diverging: tuple[int, int] | None = None  # (epoch, end offset) to truncate to
    fenced: bool = False  # the request's epoch is stale (or the responder is no leader)
    snapshot_id: tuple[int, int] | None = None  # (end offset, epoch): fetch below the log start, get this snapshot
    fetch_id: int = 0  # the FetchRequest.fetch_id answered


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """KIP-630: a follower whose fetch offset lies before the leader's log start downloads the snapshot."""
    epoch: int
    replica: int
    snapshot_id: tuple[int, int]


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    epoch: int
    leader: int | None
    snapshot_id: tuple[int, int] | None = None  # None: no such snapshot (anymore) / fenced
    state: Any = None
    fenced: bool = False


Message = Union[VoteRequest, VoteResponse, BeginQuorumEpoch, EndQuorumEpoch, FetchRequest, FetchResponse,
                FetchSnapshotRequest, FetchSnapshotResponse]
Outgoing = list[tuple[int, Message]]


@dataclass
class PersistentState:
    """What survives a crash: fsynced before any message that depends on it is sent."""
    epoch: int = 0
    voted_for: int | None = None
    log: QuorumLog = field(default_factory=QuorumLog)

    snapshot: tuple[int, int, Any] | None = None  # (end offset, epoch, state) of the newest snapshot

    def save(self, epoch: int, voted_for: int | None) -> None:
        """Record the epoch and vote durably (raft/store.py writes a file)."""
        self.epoch, self.voted_for = epoch, voted_for

    def save_snapshot(self, offset: int, epoch: int, state: Any, drop_prefix: bool = True) -> None:
        """Keep `state` as the snapshot of the committed log up to `offset` (whose last entry has `epoch`),
        durably first, then forget the log prefix it covers."""
        self.snapshot = (offset, epoch, state)
        if drop_prefix:
            self.log.drop_prefix(offset)

    def install_snapshot(self, offset: int, epoch: int, state: Any) -> None:
        """A follower installs the leader's snapshot: it replaces the whole log (durably: snapshot first)."""
        self.snapshot = (offset, epoch, state)
        self.log.reset_to(offset, epoch)

    def recover(self) -> None:
        """On open after a crash: make the log continue the newest snapshot — a crash between writing a
        snapshot and dropping the prefix leaves the prefix (cut now), one mid-install leaves a log that
        does not reach the snapshot or disagrees with its epoch (replaced by an empty one there)."""
        if self.snapshot is None:
            return
        offset, epoch, _state = self.snapshot
        log = self.log
        if log.start_offset <= offset <= log.end_offset and log.epoch_at(offset) == epoch:
            log.drop_prefix(offset)
        else:
            log.reset_to(offset, epoch)


@dataclass(frozen=True)
class RaftConfig:
    fetch_timeout_ms: int = 2000       # KRaft controller.quorum.fetch.timeout.ms
    election_timeout_ms: int = 1000    # controller.quorum.election.timeout.ms (randomized up to 2×)
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    fetch_interval_ms: int = 50        # how often a caught-up follower fetches again (no long poll here)
    max_fetch_entries: int = 64


FOLLOWER, UNATTACHED, PROSPECTIVE, CANDIDATE, LEADER = "follower", "unattached", "prospective", "candidate", "leader"


class RaftNode:
    def __init__(self, node_id: int, voters: tuple[int, ...], persistent: PersistentState,
                 config: RaftConfig = RaftConfig(), rng: random.Random | None = None, now: int = 0,
                 bootstrap: tuple[int, ...] = ()) -> None:
        self.id = node_id
        self.static_voters = tuple(sorted(voters))
        self.bootstrap = tuple(bootstrap)  # controller.quorum.bootstrap.servers (ids < 0): asked while no voter is known
        self.voters: tuple[int, ...] = ()
        self.voter_nodes: dict[int, dict] = {}  # a dynamic quorum's voters: id -> their VotersRecord entry
        self.voters_offset = -1  # the offset of the VotersRecord in use (-1: snapshot, bootstrap or static)
        self.kraft_version = 0
        self.p = persistent
        self.config = config
        self.rng = rng or random.Random(node_id)
        self.role = UNATTACHED
        self.leader: int | None = None
        self.high_watermark = self.p.log.start_offset  # a snapshot is committed state
        self._votes: set[int] = set()
        self._follower_end: dict[int, int] = {}
        self._fetched_at: dict[int, int] = {}
        self.observer_end: dict[int, int] = {}  # leader: observers' fetch offsets (DescribeQuorum)
        self._observer_fetched_at: dict[int, int] = {}  # leader: when each observer last fetched
        self._now = now  # the latest time the caller gave
        self._epoch_start = 0  # leader: offset of its LEADER_CHANGE entry
        self._deadline = now + self._election_timeout()
        self._next_fetch = 0
        self._next_begin = 0  # leader: when BeginQuorumEpoch goes again to voters that have not fetched
        self._fetch_inflight = False
        self._fetched_from_leader = False  # follower: a fetch answer of this leader applied (pre-votes refused)
        self._fetch_id = 0  # the last fetch sent: only its answer is applied (an older one is stale)
        self._refresh_voters()

    # -- views ----------------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.p.epoch

    @property
    def log(self) -> QuorumLog:
        return self.p.log

    def committed(self) -> list[Entry]:
        """The committed entries after the log start (those before it are in the snapshot)."""
        return self.log.entries[:self.high_watermark - self.log.start_offset]

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    # -- the voter set (KIP-853) ----------------------------------------------------------------------
    def _snapshot_voters(self) -> list[dict] | None:
        snap = self.p.snapshot
        if snap is not None and isinstance(snap[2], dict) and snap[2].get("voters") is not None:
            return list(snap[2]["voters"])
        return None

    def voter_records_at(self, offset: int) -> list[dict] | None:
        """The dynamic voter set in force after the entries before `offset` (None: static voters)."""
        log = self.log
        for o in range(min(offset, log.end_offset) - 1, log.start_offset - 1, -1):
            found = voters_of(log.entries[o - log.start_offset].payload)
            if found is not None:
                return found
        return self._snapshot_voters()

    def _refresh_voters(self) -> None:
        """Recompute the voter set from the whole log (start-up, truncation, snapshot install)."""
        log = self.log
        for i in range(len(log.entries) - 1, -1, -1):
            found = voters_of(log.entries[i].payload)
            if found is not None:
                self._set_voters(found, log.start_offset + i)
                return
        snap = self._snapshot_voters()
        if snap is not None:
            self._set_voters(snap, -1)
            return
        self.kraft_version, self.voters_offset, self.voter_nodes = 0, -1, {}
        self._apply_voter_ids(self.static_voters)

    def _scan_appended(self, first_offset: int, entries) -> None:
        for i in range(len(entries) - 1, -1, -1):
            found = voters_of(entries[i].payload)
            if found is not None:
                self._set_voters(found, first_offset + i)
                return

    def _set_voters(self, voters: list[dict], offset: int) -> None:
        self.kraft_version, self.voters_offset = 1, offset
        self.voter_nodes = {int(v["voterId"]): v for v in voters}
        self._apply_voter_ids(tuple(self.voter_nodes))

    def _apply_voter_ids(self, ids) -> None:
        self.voters = tuple(sorted(ids))
        self.observer = self.id not in self.voters
        if self.role == LEADER:  # the new set is used as soon as it is in the log (KIP-853)
            # the check quorum starts afresh with the new set (a lone voter's never ran)
            self._deadline = max(self._deadline, self._now + self.config.fetch_timeout_ms)
            for v in self.voters:
                if v != self.id and v not in self._follower_end:
                    self._follower_end[v] = self.observer_end.pop(v, 0)
                    if v in self._observer_fetched_at:
                        self._fetched_at[v] = self._observer_fetched_at.pop(v)
            for v in [v for v in self._follower_end if v not in self.voters]:
                del self._follower_end[v]
                self._fetched_at.pop(v, None)

    # -- the caller's entry points --------------------------------------------------------------------
    def propose(self, payload: Any) -> int | None:
        """Append `payload` as leader; its offset (committed once high_watermark > offset), or None if
        this node is not the leader."""
        if self.role != LEADER:
            return None
        offset = self.log.append(Entry(self.epoch, payload))
        found = voters_of(payload)
        if found is not None:
            self._set_voters(found, offset)
        self._advance_high_watermark()
        return offset

    def resign(self, now: int) -> Outgoing:
        """Stop leading (shutdown): the EndQuorumEpoch to send to the other voters, most caught-up
        first. This node stays in its epoch, unattached, and does not stand for election again
        before an election timeout; [] unless leader."""
        if self.role != LEADER:
            return []
        preferred = tuple(sorted(self._follower_end, key=lambda v: -self._follower_end[v]))
        self._become_unattached(self.epoch, now, keep_vote=True)
        msg = EndQuorumEpoch(self.epoch, self.id, preferred)
        return [(v, msg) for v in self.voters if v != self.id]

    def next_wakeup(self) -> int:
        """The earliest time at which `tick` may do anything: ticking earlier returns [] and changes
        nothing, so a driver may sleep until then (or until a message arrives)."""
        if self.role == LEADER:
            return min(self._deadline, self._next_begin)
        wake = self._deadline
        if self.role == FOLLOWER and self.leader is not None:
            wake = min(wake, self._next_fetch if not self._fetch_inflight
                       else self._next_fetch + self.config.fetch_timeout_ms)
        return wake

    def tick(self, now: int) -> Outgoing:
        self._now = max(self._now, now)
        out: Outgoing = []
        if self.role == LEADER and self.id not in self.voters and self.high_watermark > self.voters_offset:
            return self.resign(now)  # removed from the voters and that is committed: step down (KIP-853)
        if self.role == LEADER:
            if len(self.voters) > 1 and now >= self._deadline:
                recent = 1 + sum(1 for v, t in self._fetched_at.items() if now - t < self.config.fetch_timeout_ms)
                if recent < self.majority:  # check quorum: a cut-off leader resigns
                    self._become_unattached(self.epoch, now, keep_vote=True)
                    return out
                self._deadline = now + self.config.fetch_timeout_ms
            if now >= self._next_begin:  # KRaft: repeat BeginQuorumEpoch to voters that do not fetch
                # (a restarted or cut-off voter learns the leader before it would stand for election)
                every = max(1, self.config.election_timeout_ms // 2)
                self._next_begin = now + every
                msg = BeginQuorumEpoch(self.epoch, self.id)
                out.extend((v, msg) for v in self.voters
                           if v != self.id and now - self._fetched_at.get(v, now - every) >= every)
            return out
        if now >= self._deadline:
            if self.observer:
                return self._discover(now)
            return self._become_prospective(now)
        if self.role == FOLLOWER and self.leader is not None and not self._fetch_inflight and now >= self._next_fetch:
            self._fetch_inflight = True
            self._next_fetch = now + self.config.fetch_interval_ms
            self._fetch_id += 1
            out.append((self.leader, FetchRequest(self.epoch, self.id, self.log.end_offset, self.log.last_epoch,
                                                  self._fetch_id)))
        elif self.role == FOLLOWER and self._fetch_inflight and now >= self._next_fetch + self.config.fetch_timeout_ms:
            self._fetch_inflight = False  # the request (or its answer) was lost: send another
        return out

    def receive(self, msg: Message, now: int) -> Outgoing:
        self._now = max(self._now, now)
        if isinstance(msg, FetchRequest):
            return self._on_fetch(msg, now)
        if isinstance(msg, FetchResponse):
            return self._on_fetch_response(msg, now)
        if isinstance(msg, FetchSnapshotRequest):
            return self._on_fetch_snapshot(msg, now)
        if isinstance(msg, FetchSnapshotResponse):
            return self._on_fetch_snapshot_response(msg, now)
        if isinstance(msg, VoteRequest):
            return self._on_vote(msg, now)
        if isinstance(msg, VoteResponse):
            return self._on_vote_response(msg, now)
        if isinstance(msg, BeginQuorumEpoch):
            if self.role == FOLLOWER and msg.epoch == self.epoch and msg.leader == self.leader:
                # a repeat (the leader has not seen this node fetch lately): fetch again now, but only the
                # leader's answers to fetches prove the link works — the fetch timeout runs on (KRaft:
                # no transition), so a follower whose fetches fail still times out and stands for election
                self._fetch_inflight = False
                self._next_fetch = min(self._next_fetch, now)
            elif msg.epoch > self.epoch or (msg.epoch == self.epoch and self.role != LEADER):
                self._become_follower(msg.epoch, msg.leader, now)
            return []
        if isinstance(msg, EndQuorumEpoch):
            if msg.epoch == self.epoch and self.role == FOLLOWER and self.leader == msg.leader:
                rank = msg.preferred.index(self.id) if self.id in msg.preferred else len(msg.preferred)
                # the first preferred successor campaigns at once, the others after a backoff each
                backoff = rank * max(self.config.election_backoff_max_ms, 1)
                self._become_unattached(self.epoch, now, keep_vote=True)
                self._deadline = now + backoff
            return []
        raise TypeError(f"not a quorum message: {msg!r}")

    # -- transitions ----------------------------------------------------------------------------------
    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t)

    def _persist(self, epoch: int, voted_for: int | None) -> None:
        self.p.save(epoch, voted_for)

    def _become_unattached(self, epoch: int, now: int, keep_vote: bool = False) -> None:
        if epoch != self.epoch or not keep_vote:
            self._persist(epoch, None if epoch != self.epoch else self.p.voted_for)
        self.role, self.leader = UNATTACHED, None
        self._fetch_inflight = False
        self._deadline = now + self._election_timeout()

    def _become_follower(self, epoch: int, leader: int, now: int) -> None:
        if epoch != self.epoch:
            self._persist(epoch, None)
        self.role, self.leader = FOLLOWER, leader
        self._fetch_inflight = False
        self._fetched_from_leader = False
        self._next_fetch = now
        self._deadline = now + self.config.fetch_timeout_ms

    def _discover(self, now: int) -> Outgoing:
        """Observer without a (responsive) leader: ask every voter at once (the old leader may be the
        one that died); the first answer that names a leader is followed."""
        self.role, self.leader = UNATTACHED, None
        self._fetch_inflight = False
        self._deadline = now + self.config.fetch_timeout_ms
        self._fetch_id += 1
        req = FetchRequest(self.epoch, self.id, self.log.end_offset, self.log.last_epoch, self._fetch_id)
        return [(v, req) for v in (self.voters or self.bootstrap) if v != self.id]

    def _become_prospective(self, now: int) -> Outgoing:
        """The fetch or election timeout passed: ask for pre-votes (KIP-996); the epoch stays."""
        if self.majority <= 1:
            return self._start_election(now)
        self.role, self.leader = PROSPECTIVE, None
        self._fetch_inflight = False
        self._votes = {self.id}
        self._deadline = now + self._election_timeout()
        req = VoteRequest(self.epoch + 1, self.id, self.log.last_epoch, self.log.end_offset, pre_vote=True)
        return [(v, req) for v in self.voters if v != self.id]

    def _start_election(self, now: int) -> Outgoing:
        self._persist(self.epoch + 1, self.id)
        self.role, self.leader = CANDIDATE, None
        self._votes = {self.id}
        self._deadline = now + self._election_timeout() + self.rng.randrange(self.config.election_backoff_max_ms + 1)
        if len(self._votes) >= self.majority:
            return self._become_leader(now)
        req = VoteRequest(self.epoch, self.id, self.log.last_epoch, self.log.end_offset)
        return [(v, req) for v in self.voters if v != self.id]

    def _become_leader(self, now: int) -> Outgoing:
        assert not self.observer, "an observer never leads"
        self.role, self.leader = LEADER, self.id
        self.observer_end = {}
        self._observer_fetched_at = {}
        self._epoch_start = self.log.append(Entry(self.epoch, LEADER_CHANGE))
        self._follower_end = {v: 0 for v in self.voters if v != self.id}
        self._fetched_at = {}
        if self.kraft_version >= 1 and self.voters_offset < 0:
            # the voter set comes from the bootstrap checkpoint: write it into the log (Kafka's
            # KRaftVersionRecord and VotersRecord at the start of the leader's epoch)
            self.log.append(Entry(self.epoch, {"type": KRAFT_VERSION_RECORD, "version": 0, "kRaftVersion": 1}))
            self.voters_offset = self.log.append(Entry(self.epoch, voters_record(list(self.voter_nodes.values()))))
        self._deadline = now + self.config.fetch_timeout_ms
        self._next_begin = now + max(1, self.config.election_timeout_ms // 2)
        self._advance_high_watermark()
        msg = BeginQuorumEpoch(self.epoch, self.id)
        return [(v, msg) for v in self.voters if v != self.id]

    def _observe_epoch(self, epoch: int, leader: int | None, now: int) -> None:
        """A message shows a newer epoch: follow its leader if known, else wait unattached."""
        if leader is not None and leader != self.id:
            self._become_follower(epoch, leader, now)
        else:
            self._become_unattached(epoch, now)

    # -- votes ----------------------------------------------------------------------------------------
    def _on_vote(self, req: VoteRequest, now: int) -> Outgoing:
        # an observer answers as a voter does (Kafka's canGrantVote looks only at the epoch, the vote and the
        # log): a replica added to the voters whose copy of that VotersRecord the dead leader never sent
        # still thinks it observes, and the other voters need its vote to elect a leader, whose
        # BeginQuorumEpoch then tells it that it votes
        if req.pre_vote:
            return [(req.candidate, self._pre_vote(req))]
        if req.epoch < self.epoch:
            return [(req.candidate, VoteResponse(self.epoch, self.id, False, self.leader))]
        if req.epoch > self.epoch:
            self._become_unattached(req.epoch, now)
        if self.role in (LEADER, FOLLOWER) and self.leader is not None:
            return [(req.candidate, VoteResponse(self.epoch, self.id, False, self.leader))]
        up_to_date = (req.last_epoch, req.end_offset) >= (self.log.last_epoch, self.log.end_offset)
        granted = up_to_date and self.p.voted_for in (None, req.candidate)
        if granted:
            self._persist(self.epoch, req.candidate)
            self._deadline = now + self._election_timeout()
        return [(req.candidate, VoteResponse(self.epoch, self.id, granted, self.leader))]

    def _pre_vote(self, req: VoteRequest) -> VoteResponse:
        """A pre-vote changes nothing here (no epoch, no vote, no timer). Refused when the asking node is
        behind this one's epoch, when this node leads, or follows a leader it has fetched from; else
        granted to a log at least as up to date."""
        if req.epoch - 1 < self.epoch or self.role == LEADER or (self.role == FOLLOWER and self._fetched_from_leader):
            return VoteResponse(self.epoch, self.id, False, self.leader, pre_vote=True)
        up_to_date = (req.last_epoch, req.end_offset) >= (self.log.last_epoch, self.log.end_offset)
        return VoteResponse(self.epoch, self.id, up_to_date, None, pre_vote=True)

    def _on_pre_vote_response(self, resp: VoteResponse, now: int) -> Outgoing:
        if self.role != PROSPECTIVE or resp.epoch < self.epoch:
            return []
        if not resp.granted:
            if resp.leader is not None and resp.leader != self.id:
                self._become_follower(self.epoch, resp.leader, now)  # its leader is alive: follow it again
            return []
        self._votes.add(resp.voter)
        if len(self._votes) >= self.majority:
            return self._start_election(now)
        return []

    def _on_vote_response(self, resp: VoteResponse, now: int) -> Outgoing:
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader, now)
            return []
        if resp.pre_vote:
            return self._on_pre_vote_response(resp, now)
        if self.role == CANDIDATE and resp.epoch == self.epoch and resp.leader not in (None, self.id):
            self._become_follower(resp.epoch, resp.leader, now)  # this epoch already has its leader
            return []
        if self.role != CANDIDATE or resp.epoch < self.epoch or not resp.granted:
            return []
        self._votes.add(resp.voter)
        if len(self._votes) >= self.majority:
            return self._become_leader(now)
        return []

    # -- replication ----------------------------------------------------------------------------------
    def _on_fetch(self, req: FetchRequest, now: int) -> Outgoing:
        if req.epoch > self.epoch:
            self._become_unattached(req.epoch, now)  # a leader we have not heard of yet
        if self.role != LEADER or req.epoch < self.epoch:
            return [(req.replica, FetchResponse(self.epoch, self.leader, fenced=True, fetch_id=req.fetch_id))]
        log = self.log
        voter = req.replica in self._follower_end
        if req.fetch_offset < log.start_offset and self.p.snapshot is not None:
            if voter:
                self._fetched_at[req.replica] = now  # alive, though not caught up
            return [(req.replica, FetchResponse(self.epoch, self.id, self.high_watermark,
                                                snapshot_id=self.p.snapshot[:2], fetch_id=req.fetch_id))]
        if req.fetch_offset > 0 or req.last_fetched_epoch > 0:
            epoch, end = log.end_offset_for_epoch(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or end < req.fetch_offset:
                if end < log.start_offset and self.p.snapshot is not None:  # diverges inside the snapshot
                    if voter:
                        self._fetched_at[req.replica] = now
                    return [(req.replica, FetchResponse(self.epoch, self.id, self.high_watermark,
                                                        snapshot_id=self.p.snapshot[:2], fetch_id=req.fetch_id))]
                return [(req.replica, FetchResponse(self.epoch, self.id, self.high_watermark,
                                                    base_offset=req.fetch_offset, diverging=(epoch, end),
                                                    fetch_id=req.fetch_id))]
        if voter:
            self._follower_end[req.replica] = max(self._follower_end[req.replica], req.fetch_offset)
            self._fetched_at[req.replica] = now
            self._advance_high_watermark()
        elif req.replica not in self.voters:
            self.observer_end[req.replica] = req.fetch_offset
            self._observer_fetched_at[req.replica] = now
        entries = tuple(log.read(req.fetch_offset, self.config.max_fetch_entries))
        return [(req.replica, FetchResponse(self.epoch, self.id, self.high_watermark, entries, req.fetch_offset,
                                            fetch_id=req.fetch_id))]

    def _on_fetch_response(self, resp: FetchResponse, now: int) -> Outgoing:
        if self.observer and self.role == UNATTACHED and resp.leader is not None and resp.epoch >= self.epoch \
                and resp.leader != self.id:
            self._become_follower(resp.epoch, resp.leader, now)  # the discovery answer: fetch from it
            return []
        if resp.epoch > self.epoch or (resp.fenced and resp.epoch == self.epoch and resp.leader not in (None, self.leader)):
            self._observe_epoch(resp.epoch, resp.leader, now)
            return []
        if self.role != FOLLOWER or resp.epoch < self.epoch or resp.leader != self.leader:
            return []  # stale: from an older epoch or another node
        if resp.fetch_id != self._fetch_id:
            return []  # the answer to an earlier fetch (a repeated BeginQuorumEpoch sent another): stale
        self._fetch_inflight = False
        if resp.fenced:
            return []
        # the fetch timeout restarts only once the answer is applied: an answer that cannot be (it
        # raises, or names a divergence that truncates nothing) does not keep this node following
        log = self.log
        if resp.snapshot_id is not None:
            self._deadline = now + self.config.fetch_timeout_ms
            self._fetch_inflight = True  # no fetch while the snapshot comes (a lost answer: timeout)
            return [(self.leader, FetchSnapshotRequest(self.epoch, self.id, resp.snapshot_id))]
        if resp.diverging is not None:
            epoch, end = resp.diverging
            _, own_end = log.end_offset_for_epoch(epoch)
            truncate_at = max(min(end, own_end), log.start_offset)
            if truncate_at < self.high_watermark:
                raise AssertionError(f"node {self.id}: truncation to {truncate_at} below the high watermark "
                                     f"{self.high_watermark}")
            if truncate_at >= log.end_offset:
                return []  # no progress: fetch again later (next_fetch), the fetch timeout runs on
            log.truncate_to(truncate_at)
            if self.voters_offset >= truncate_at:
                self._refresh_voters()  # the VotersRecord in use was truncated: the one before it again
            self._fetched_from_leader = True
            self._deadline = now + self.config.fetch_timeout_ms
            self._next_fetch = now  # fetch again at once from the matching point
            return []
        if resp.base_offset != log.end_offset:
            return []  # an answer to an older fetch
        first = log.end_offset
        log.extend(resp.entries)
        self._scan_appended(first, resp.entries)
        self._fetched_from_leader = True
        self._deadline = now + self.config.fetch_timeout_ms
        self.high_watermark = max(self.high_watermark, min(resp.high_watermark, log.end_offset))
        if resp.entries:
            self._next_fetch = now  # more may be waiting
        return []

    def fetch_failed(self, now: int) -> None:
        """The driver's Fetch got no answer (refused, timed out): fetch again after the fetch interval;
        the fetch timeout runs on (only the leader's answers restart it)."""
        if self.role == FOLLOWER and self._fetch_inflight:
            self._fetch_inflight = False
            self._next_fetch = now + self.config.fetch_interval_ms

    def _on_fetch_snapshot(self, req: FetchSnapshotRequest, now: int) -> Outgoing:
        if req.epoch > self.epoch:
            self._become_unattached(req.epoch, now)
        if self.role != LEADER or req.epoch < self.epoch:
            return [(req.replica, FetchSnapshotResponse(self.epoch, self.leader, fenced=True))]
        snap = self.p.snapshot
        if snap is None or snap[:2] != req.snapshot_id:
            return [(req.replica, FetchSnapshotResponse(self.epoch, self.id))]  # gone: fetch again
        if req.replica in self._follower_end:
            self._fetched_at[req.replica] = now
        return [(req.replica, FetchSnapshotResponse(self.epoch, self.id, snap[:2], snap[2]))]

    def _on_fetch_snapshot_response(self, resp: FetchSnapshotResponse, now: int) -> Outgoing:
        if resp.epoch > self.epoch:
            self._observe_epoch(resp.epoch, resp.leader, now)
            return []
        if self.role != FOLLOWER or resp.epoch < self.epoch or resp.leader != self.leader:
            return []
        self._fetch_inflight = False
        self._next_fetch = now
        if resp.fenced or resp.snapshot_id is None:
            return []
        offset, epoch = resp.snapshot_id
        if offset <= self.log.start_offset or offset < self.high_watermark:
            return []  # not newer than what this node has
        self._deadline = now + self.config.fetch_timeout_ms
        self._fetched_from_leader = True
        self.p.install_snapshot(offset, epoch, resp.state)  # the snapshot is committed: at most the HW
        self._refresh_voters()
        self.high_watermark = max(self.high_watermark, offset)
        return []

    def _advance_high_watermark(self) -> None:
        own = [self.log.end_offset] if self.id in self.voters else []
        ends = sorted([*own, *self._follower_end.values()], reverse=True)
        candidate = ends[self.majority - 1] if len(ends) >= self.majority else 0
        if candidate > self._epoch_start and candidate > self.high_watermark:
            self.high_watermark = candidate
