"""Pure per-partition replication state, as Kafka's Partition/Replica keep it (no I/O, no clock).

Invariants:
- the high watermark never moves backwards while this node leads (`advance_hw` only raises it);
  it is the smallest log end offset over the maximal ISR (the committed ISR plus an expansion in
  flight), the leader's own LEO included, and never above the leader's LEO;
- a follower is caught up at time t when its fetch offset reached the leader's LEO as of its
  previous fetch (Kafka's Replica.updateFetchState); it is out of sync once it has not been caught
  up for `replica.lag.time.max.ms` and its LEO differs from the leader's;
- it may join the ISR once its LEO >= HW and >= the start offset of the current leader epoch;
- at most one ISR change (AlterPartition) is in flight; `pending_isr` is its proposed ISR. It stays
  part of the maximal ISR until its outcome is known (Kafka's PendingExpandIsr/PendingShrinkIsr): an
  answer that applies it, a refusal that says it was not applied, or a metadata update newer than the
  partition epoch it was proposed against. (Dropping it on an unclear answer let the HW pass a follower
  the controller had just put into the ISR — a reassignment's completion bumps the leader epoch, so its
  answer is not applied here — and that follower then led without an acknowledged record.)
"""
from __future__ import annotations

from dataclasses import dataclass, field

UNKNOWN = -1


@dataclass(slots=True)
class FollowerView:
    """What the leader knows of one follower, from its fetches."""
    leo: int = UNKNOWN
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_leo: int = UNKNOWN


@dataclass(slots=True)
class PartitionState:
    topic: str
    partition: int
    local_id: int
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    high_watermark: int = 0
    epoch_start_offset: int = 0  # leader: its LEO when it became leader in this epoch
    followers: dict[int, FollowerView] = field(default_factory=dict)
    pending_isr: tuple[int, ...] | None = None
    pending_partition_epoch: int = -1  # the partition epoch `pending_isr` was proposed against

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the HW must respect: the committed one, plus members of an expansion in flight."""
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys((*self.isr, *self.pending_isr)))

    # -- leadership ----------------------------------------------------------------------------
    def become_leader(self, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
                      isr: tuple[int, ...], leo: int, hw: int, now_ms: float) -> bool:
        """Lead from now on in `leader_epoch`; True if this is a new leadership (new epoch or was not
        leader), False for an ISR/replica update within the same epoch. Followers' LEOs are unknown
        after a leader change; in-sync ones count as caught up now (Kafka resetReplicaState)."""
        new = not self.is_leader or leader_epoch != self.leader_epoch
        self.leader, self.leader_epoch, self.partition_epoch = self.local_id, leader_epoch, partition_epoch
        self.replicas, self.isr = tuple(replicas), tuple(isr)
        if new:
            self.epoch_start_offset = leo
            self.high_watermark = min(hw, leo)
            self.pending_isr = None
            self.followers = {r: FollowerView(last_caught_up_ms=now_ms if r in self.isr else 0.0)
                              for r in self.replicas if r != self.local_id}
        else:
            if self.pending_isr is not None and (self.pending_isr == self.isr
                                                 or partition_epoch > self.pending_partition_epoch):
                self.pending_isr = None  # the metadata settled it
            for r in self.replicas:
                if r != self.local_id and r not in self.followers:
                    self.followers[r] = FollowerView()
            for r in list(self.followers):
                if r not in self.replicas:
                    del self.followers[r]
        return new

    def become_follower(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: tuple[int, ...],
                        isr: tuple[int, ...]) -> bool:
        """Follow `leader` (-1: none); True if leader or epoch changed (fetching must restart)."""
        new = leader != self.leader or leader_epoch != self.leader_epoch
        self.leader, self.leader_epoch, self.partition_epoch = leader, leader_epoch, partition_epoch
        self.replicas, self.isr = tuple(replicas), tuple(isr)
        self.followers = {}
        self.pending_isr = None
        return new

    # -- leader side ---------------------------------------------------------------------------
    def update_follower(self, replica: int, fetch_offset: int, leader_leo: int, now_ms: float) -> bool:
        """A follower fetched from `fetch_offset` (= its LEO); True if it is a known follower."""
        view = self.followers.get(replica)
        if view is None:
            return False
        if fetch_offset >= leader_leo:
            view.last_caught_up_ms = max(view.last_caught_up_ms, now_ms)
        elif view.last_fetch_leader_leo != UNKNOWN and fetch_offset >= view.last_fetch_leader_leo:
            view.last_caught_up_ms = max(view.last_caught_up_ms, view.last_fetch_ms)
        view.leo = fetch_offset
        view.last_fetch_leader_leo = leader_leo
        view.last_fetch_ms = now_ms
        return True

    def advance_hw(self, leader_leo: int) -> bool:
        """Raise the HW to the smallest LEO over the maximal ISR; True if it moved."""
        if not self.is_leader:
            return False
        new = leader_leo
        for r in self.maximal_isr:
            if r == self.local_id:
                continue
            view = self.followers.get(r)
            leo = view.leo if view is not None else UNKNOWN
            if leo == UNKNOWN:
                return False  # an in-sync follower's position is not known yet: no progress
            new = min(new, leo)
        if new > self.high_watermark:
            self.high_watermark = new
            return True
        return False

    def out_of_sync(self, leader_leo: int, now_ms: float, lag_ms: float) -> list[int]:
        """ISR followers to remove: not caught up for more than `lag_ms` (Kafka isCaughtUp)."""
        out = []
        for r in self.isr:
            if r == self.local_id:
                continue
            view = self.followers.get(r)
            if view is None:
                out.append(r)
            elif view.leo != leader_leo and now_ms - view.last_caught_up_ms > lag_ms:
                out.append(r)
        return out

    def can_join_isr(self, replica: int) -> bool:
        """A follower outside the ISR that reached the HW within the current leader epoch."""
        if replica in self.isr or replica not in self.replicas:
            return False
        view = self.followers.get(replica)
        return view is not None and view.leo != UNKNOWN and view.leo >= self.high_watermark \
            and view.leo >= self.epoch_start_offset

    def propose_isr(self, isr: tuple[int, ...]) -> None:
        self.pending_isr, self.pending_partition_epoch = tuple(isr), self.partition_epoch

    def isr_change_allowed(self) -> bool:
        return self.is_leader and self.pending_isr is None
