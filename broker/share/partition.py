"""One share-partition's in-flight records (KIP-932, Kafka's SharePartition): the window from the share-partition
start offset (SPSO, `start`) to the first offset never acquired (`end`), with a state per offset.

Invariants:
- Every offset in [start, end) has an entry; offsets below `start` are done (acknowledged or archived) and
  offsets from `end` on were never delivered.
- `start` only moves forward, past a prefix of ACKNOWLEDGED / ARCHIVED offsets (or the log start offset).
- An ACQUIRED offset has an owner (member id), a lock deadline and an acquisition delivery count >= 1; it
  becomes AVAILABLE again when released or when its lock expires, or ARCHIVED once its delivery count has
  reached the delivery-count limit. Only its owner may acknowledge it.
- The window never holds more than `max_in_flight` offsets (group.share.partition.max.record.locks): a
  full window acquires nothing new until `start` moves.

Pure: no I/O, no clock of its own (callers pass `now_ms`); the manager (manager.py) reads the log, persists
`state_batches()` through the share coordinator and runs the lock timer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from minikafka.protocol.errors import INVALID_RECORD_STATE, INVALID_REQUEST

# Kafka's RecordState ids (what the share coordinator persists: ACQUIRED is persisted as AVAILABLE)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
# AcknowledgeType ids of ShareFetch / ShareAcknowledge (RENEW: v2, KIP-1222)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_DONE = (ACKNOWLEDGED, ARCHIVED)


@dataclass(slots=True)
class InFlight:
    state: int
    delivery_count: int
    member: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of offsets acquired by one fetch with the same delivery count (ShareFetch AcquiredRecords)."""
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Span:
    """Offsets [first, last] of one stored batch as read from the log; `skip`: never deliver them
    (control batches, aborted transactional batches under read_committed): archived on acquisition."""
    first: int
    last: int
    skip: bool = False


class SharePartition:
    def __init__(self, start_offset: int, batches: Iterable[tuple[int, int, int, int]] = (), *,
                 max_in_flight: int = 2000, delivery_limit: int = 5, state_epoch: int = 0,
                 leader_epoch: int = 0, topic_id: Any = None, partition_index: int = -1) -> None:
        """`batches`: persisted (first, last, state, delivery_count) runs, any order."""
        self.topic_id = topic_id
        self.partition_index = partition_index
        self.start = start_offset
        self.end = start_offset
        self.records: dict[int, InFlight] = {}
        self.max_in_flight = max_in_flight
        self.delivery_limit = delivery_limit
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        for first, last, state, count in sorted(batches):
            for offset in range(max(first, start_offset), last + 1):
                self.records[offset] = InFlight(AVAILABLE if state in (AVAILABLE, ACQUIRED) else state, count)
            self.end = max(self.end, last + 1)
        for offset in range(self.start, self.end):  # gaps between persisted runs were never delivered
            self.records.setdefault(offset, InFlight(AVAILABLE, 0))
        self._advance()

    # ------------------------------------------------------------------ reading

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts: the first AVAILABLE offset of the window, else `end`."""
        for offset in range(self.start, self.end):
            if self.records[offset].state == AVAILABLE:
                return offset
        return self.end

    def can_acquire(self) -> bool:
        """Whether a fetch may find something: an AVAILABLE offset, or room for new ones."""
        return self.end - self.start < self.max_in_flight or self.next_fetch_offset() < self.end

    def acquired_by(self, member: str) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED and r.member == member)

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The window as persisted runs (first, last, state, delivery_count); ACQUIRED counts as AVAILABLE."""
        runs: list[list[int]] = []
        for offset in range(self.start, self.end):
            r = self.records[offset]
            state = AVAILABLE if r.state == ACQUIRED else r.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == state and runs[-1][3] == r.delivery_count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, state, r.delivery_count])
        return [tuple(r) for r in runs]  # type: ignore[misc]

    # ------------------------------------------------------------------ acquiring

    def acquire(self, member: str, spans: Iterable[Span], max_records: int, lock_ms: int, now_ms: int,
                strict: bool = False) -> list[Acquired]:
        """Acquire for `member` the AVAILABLE offsets of the window and the new offsets that `spans` (the
        batches just read from `next_fetch_offset()`) cover, up to `max_records` — exceeded only to finish
        the batch that reached it, unless `strict` (ShareAcquireMode record-limit)."""
        got: list[int] = []
        deadline = now_ms + lock_ms
        for span in spans:
            if len(got) >= max_records:
                break
            if span.last < self.start:
                continue
            if span.first > self.end:  # offsets missing from the log (compacted away): nothing to deliver
                if self.start == self.end:
                    self.start = self.end = span.first
                elif self.end - self.start + (span.first - self.end) > self.max_in_flight:
                    break  # jump the gap once the window before it is done
                else:
                    for offset in range(self.end, span.first):
                        self.records[offset] = InFlight(ARCHIVED, 0)
                    self.end = span.first
            for offset in range(max(span.first, self.start), span.last + 1):
                if strict and len(got) >= max_records:
                    break
                if offset >= self.end:
                    if self.end - self.start >= self.max_in_flight:
                        break
                    rec = self.records[offset] = InFlight(AVAILABLE, 0)
                    self.end = offset + 1
                    if span.skip:
                        rec.state = ARCHIVED
                        continue
                else:
                    rec = self.records[offset]
                    if rec.state != AVAILABLE:
                        continue
                    if span.skip:
                        rec.state = ARCHIVED
                        continue
                rec.state = ACQUIRED
                rec.member = member
                rec.deadline_ms = deadline
                rec.delivery_count += 1
                got.append(offset)
        self._advance()
        return self._runs(got)

    def _runs(self, offsets: list[int]) -> list[Acquired]:
        out: list[Acquired] = []
        for offset in offsets:
            count = self.records[offset].delivery_count
            if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
                out[-1] = Acquired(out[-1].first_offset, offset, count)
            else:
                out.append(Acquired(offset, offset, count))
        return out

    # ------------------------------------------------------------------ acknowledging, releasing

    def acknowledge(self, member: str, first: int, last: int, types: list[int], now_ms: int,
                    lock_ms: int) -> tuple[int, str | None]:
        """Apply one acknowledgement batch; (0, None) or Kafka's (error code, message), nothing applied on error."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return INVALID_REQUEST, "Invalid acknowledgement batch."
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            return INVALID_REQUEST, "Invalid acknowledge type."
        if first < self.start or first >= self.end:
            return INVALID_REQUEST, "Batch record not found. The request batch offsets are not found in the cache."
        if last >= self.end:
            return INVALID_REQUEST, "Batch record not found. The last offset in request is past acquired records."
        for offset in range(first, last + 1):
            rec = self.records[offset]
            if rec.state != ACQUIRED:
                return INVALID_RECORD_STATE, f"The record state is invalid. The acknowledgement of offset {offset} cannot be completed."
            if rec.member != member:
                return INVALID_RECORD_STATE, f"Member is not the owner of offset {offset}."

        for i, offset in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            rec = self.records[offset]
            if kind == ACCEPT:
                self._finish(rec, ACKNOWLEDGED)
            elif kind in (REJECT, GAP):
                self._finish(rec, ARCHIVED)
            elif kind == RELEASE:
                self._release(rec)
            else:  # RENEW: the lock runs again from now
                rec.deadline_ms = now_ms + lock_ms
        self._advance()
        return 0, None

    def release_member(self, member: str) -> bool:
        """Every offset `member` holds goes back (its share session closed)."""
        changed = False
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.member == member:
                self._release(rec)
                changed = True
        if changed:
            self._advance()
        return changed

    def expire_locks(self, now_ms: int) -> bool:
        """Acquired offsets whose lock deadline passed go back; whether any did."""
        changed = False
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.deadline_ms <= now_ms:
                self._release(rec)
                changed = True
        if changed:
            self._advance()
        return changed

    def move_start(self, log_start_offset: int) -> bool:
        """Records deleted from the log (retention, DeleteRecords) are no longer in flight."""
        if log_start_offset <= self.start:
            return False
        for offset in range(self.start, min(log_start_offset, self.end)):
            del self.records[offset]
        self.start = log_start_offset
        self.end = max(self.end, self.start)
        self._advance()
        return True

    def _release(self, rec: InFlight) -> None:
        rec.member = None
        rec.deadline_ms = 0
        rec.state = ARCHIVED if rec.delivery_count >= self.delivery_limit else AVAILABLE

    @staticmethod
    def _finish(rec: InFlight, state: int) -> None:
        rec.state = state
        rec.member = None
        rec.deadline_ms = 0

    def _advance(self) -> None:
        while self.start < self.end and self.records[self.start].state in _DONE:
            del self.records[self.start]
            self.start += 1
