"""Eligible leader replicas (KIP-966): one partition's next ISR, ELR, LastKnownElr and leader, pure, as
Kafka 4.3's PartitionChangeBuilder computes them with eligible.leader.replicas.version >= 1 (the level
a new Kafka 4.3 cluster finalizes).

* While the ISR is at least the topic's effective min.insync.replicas (min.insync.replicas capped by the
  replication factor) the ELR and LastKnownElr are empty. When a change takes the ISR below it, the
  replicas that were in the ISR (or already in the ELR) and are not in the new ISR become the ELR:
  they held every record committed with acks=all, so any of them may lead without data loss. A broker
  that comes back from an unclean shutdown (a new incarnation without its clean-shutdown epoch) leaves
  the ELR too. The ISR may become empty.
* A leader is chosen among live ISR members in replica order; when the ISR is empty, among live ELR
  members: that replica becomes the ISR alone and leaves the ELR. When ISR and ELR are both empty and
  LastKnownElr holds one live broker, that last known leader leads (Kafka's balanced recovery; an
  unclean election). Otherwise, where unclean election is allowed, the first live replica leads.
* LastKnownElr holds the last leader (Kafka's useLastKnownLeaderInBalancedRecovery, on in 4.3): it is
  set when the ISR becomes empty and cleared when the partition has a leader again. An unclean election
  clears ELR and LastKnownElr.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

NO_LEADER = -1


@dataclass(frozen=True)
class ElrChange:
    """What changes (None: unchanged)."""
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    unclean: bool = False

    @property
    def empty(self) -> bool:
        return self.leader is None and self.isr is None and self.elr is None and self.last_known_elr is None


def effective_min_isr(min_isr: int, replication_factor: int) -> int:
    """Kafka's getTopicEffectiveMinIsr: min.insync.replicas capped by the replication factor."""
    return max(1, min(min_isr, replication_factor)) if replication_factor > 0 else max(1, min_isr)


def elr_change(*, replicas: Sequence[int], isr: Sequence[int], elr: Sequence[int], last_known_elr: Sequence[int],
               leader: int, target_isr: Iterable[int], min_isr: int, acceptable: Callable[[int], bool],
               unclean_allowed: bool = False, unclean_shutdown: Iterable[int] = ()) -> ElrChange:
    """The change of one partition towards `target_isr` (Kafka's PartitionChangeBuilder.build with an
    ONLINE election, or UNCLEAN when `unclean_allowed`); `acceptable(b)`: b may lead (alive, not being
    removed)."""
    target_isr = list(target_isr)
    dropped = set(unclean_shutdown)
    target_elr = list(elr)
    # maybePopulateTargetElr
    if len(target_isr) >= min_isr:
        target_elr = []
    else:
        candidates = set(target_elr) | set(isr)
        target_elr = sorted(b for b in candidates if b not in target_isr and b not in dropped)

    # tryElection
    def valid(b: int) -> bool:
        return (b in target_isr or (not target_isr and b in target_elr)) and acceptable(b)

    unclean = False
    if valid(leader):
        new_leader = leader
    else:
        new_leader = next((b for b in replicas if valid(b)), NO_LEADER)
        if new_leader == NO_LEADER:
            if not target_elr and not target_isr and len(last_known_elr) == 1 and acceptable(last_known_elr[0]):
                new_leader, unclean = last_known_elr[0], True
            elif unclean_allowed:
                new_leader = next((b for b in replicas if acceptable(b)), NO_LEADER)
                unclean = new_leader != NO_LEADER
    rec_leader: int | None = None
    rec_isr: list[int] | None = None
    if new_leader != leader:
        if new_leader in target_elr:
            target_isr = [new_leader]
            target_elr = [b for b in target_elr if b != new_leader]
        rec_leader = new_leader
        if unclean:
            rec_isr = [new_leader]
    # maybeUpdateRecordElr
    if rec_isr is not None:  # an unclean election
        target_elr = []
    rec_elr = tuple(target_elr) if tuple(target_elr) != tuple(elr) else None
    if rec_isr is None and tuple(target_isr) != tuple(isr):
        rec_isr = target_isr
    # maybeUpdateLastKnownLeader
    rec_lke: tuple[int, ...] | None = None
    if rec_isr is not None and not rec_isr and tuple(last_known_elr) != (leader,):
        rec_lke = (leader,)
    elif ((rec_leader is not None and rec_leader >= 0) or (leader != NO_LEADER and rec_leader != NO_LEADER)) \
            and last_known_elr:
        rec_lke = ()
    return ElrChange(rec_leader, None if rec_isr is None else tuple(rec_isr), rec_elr, rec_lke, unclean)
