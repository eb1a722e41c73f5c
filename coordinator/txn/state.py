"""Transaction metadata of one transactional id and its state machine (Kafka's TransactionState,
TransactionMetadata and TxnTransitMetadata).

Every change goes in two steps, as in Kafka: a `prepare_*` method checks the transition against the
state machine and returns the target `TxnTransit` while recording it as the pending state; once the
transit has been written to `__transaction_state`, `complete_transition` applies it (or
`abort_transition` drops it if the write failed). A transition the state machine does not allow is a
bug: it raises IllegalTxnTransition instead of being answered with an error code.

Transaction version 2 (KIP-890 part 2): a transit records the client's transaction version. A TV2
commit/abort bumps the producer epoch when it is prepared (the markers carry the bumped epoch, so a
late request of the ended transaction is fenced everywhere); when that bump exhausts the epochs, a
new producer id is chosen at the same time (`next_producer_id`) and takes over, at epoch 0, when the
transaction completes. A TV2 abort may also start from Empty/CompleteCommit/CompleteAbort (a client
that added partitions only implicitly cannot know whether its transaction is empty).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 2**15 - 1

TopicPartition = tuple[str, int]


class TxnState(Enum):
    """States with Kafka's ids (persisted in the log) and names (shown by DescribeTransactions)."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> "TxnState | None":
        return _BY_NAME.get(name)

    @property
    def valid_previous(self) -> frozenset["TxnState"]:
        return _VALID_PREVIOUS[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire (transactional.id.expiration.ms)."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_S = TxnState
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT,
                                 _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTxnTransition(RuntimeError):
    """A transition the state machine forbids: a coordinator bug, never a client error."""


TV2 = 2  # transaction.version with an epoch bump per transaction


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps Short.MAX_VALUE free so that a producer can always be fenced once more."""
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransit:
    """The target of a prepared transition (what gets written to the log)."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int
    next_producer_id: int = NO_PRODUCER_ID
    client_tv: int = 0  # the client's transaction version (TransactionLogValue ClientTransactionVersion)


class TxnMetadata:
    """Current state of one transactional id. Single-threaded (the event loop)."""

    __slots__ = ("transactional_id", "producer_id", "last_producer_id", "producer_epoch", "last_producer_epoch",
                 "timeout_ms", "state", "partitions", "start_ms", "update_ms", "pending_state",
                 "has_failed_epoch_fence", "next_producer_id", "client_tv")

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int, timeout_ms: int,
                 state: TxnState = TxnState.EMPTY, partitions: set[TopicPartition] | None = None,
                 start_ms: int = -1, update_ms: int = -1, last_producer_id: int = NO_PRODUCER_ID,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, next_producer_id: int = NO_PRODUCER_ID,
                 client_tv: int = 0) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions or ())
        self.start_ms = start_ms
        self.update_ms = update_ms
        self.pending_state: TxnState | None = None
        self.has_failed_epoch_fence = False
        self.next_producer_id = next_producer_id
        self.client_tv = client_tv

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"state={self.state.kafka_name}, pending={self.pending_state}, partitions={sorted(self.partitions)}, "
                f"timeout={self.timeout_ms}, start={self.start_ms}, update={self.update_ms}, tv={self.client_tv}, "
                f"next_pid={self.next_producer_id})")

    @property
    def pending_transition(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def snapshot(self) -> TxnTransit:
        """The current state as a transit (what the log holds for this id)."""
        return TxnTransit(self.producer_id, self.last_producer_id, self.producer_epoch, self.last_producer_epoch,
                          self.timeout_ms, self.state, frozenset(self.partitions), self.start_ms, self.update_ms,
                          self.next_producer_id, self.client_tv)

    # ---------------------------------------------------------------- prepare (validate + mark pending)

    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start_ms: int, update_ms: int,
                 next_producer_id: int = NO_PRODUCER_ID, client_tv: int | None = None) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTxnTransition(f"{self.transactional_id}: preparing {state.kafka_name} while "
                                       f"{self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTxnTransition(f"{self.transactional_id}: illegal producer id {producer_id}")
        if state is not TxnState.DEAD and epoch < 0:
            raise IllegalTxnTransition(f"{self.transactional_id}: illegal producer epoch {epoch}")
        if self.state not in state.valid_previous:
            raise IllegalTxnTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name} "
                                       "is not a valid transition")
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, partitions,
                          start_ms, update_ms, next_producer_id, self.client_tv if client_tv is None else client_tv)

    def prepare_fence_epoch(self) -> TxnTransit:
        """Ongoing -> PrepareEpochFence with the epoch bumped (never written: the abort follows)."""
        keep = self.has_failed_epoch_fence or self.producer_epoch == SHORT_MAX  # Kafka logs the latter as a bug
        epoch = self.producer_epoch if keep else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.timeout_ms, frozenset(self.partitions), self.start_ms, self.update_ms)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                now_ms: int) -> TxnTransit | None:
        """InitProducerId on an existing id: -> Empty with the epoch bumped; None means the expected
        epoch is stale (PRODUCER_FENCED). A retry of a bump that succeeded keeps the epoch (KIP-360)."""
        if self.epoch_exhausted:
            raise IllegalTxnTransition(f"{self.transactional_id}: no producer epochs left for {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """Epochs exhausted: -> Empty with a new producer id at epoch 0."""
        if self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTxnTransition(f"{self.transactional_id}: cannot rotate producer ids mid-transaction")
        return self._prepare(TxnState.EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int, client_tv: int = 0) -> TxnTransit:
        start = now_ms if self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) \
            else self.start_ms
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(self.partitions | added), start, now_ms, client_tv=client_tv)

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int, client_tv: int = 0,
                                next_producer_id: int = NO_PRODUCER_ID,
                                no_partition_added: bool = False) -> TxnTransit:
        """-> PrepareCommit/PrepareAbort. TV2 bumps the epoch here (not past Short.MAX_VALUE, which only
        an abort can meet, as Kafka); `no_partition_added`: a TV2 abort of a transaction that never
        became Ongoing starts now."""
        if client_tv >= TV2 and not (self.producer_epoch == SHORT_MAX and state is TxnState.PREPARE_ABORT):
            epoch, last = self.producer_epoch + 1, self.producer_epoch
        elif client_tv >= TV2:
            epoch, last = self.producer_epoch, self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._prepare(state, self.producer_id, epoch, last, self.timeout_ms, frozenset(self.partitions),
                             now_ms if no_partition_added else self.start_ms, now_ms, next_producer_id, client_tv)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """-> CompleteCommit/CompleteAbort; a TV2 transaction that exhausted the epochs hands over to
        its next producer id at epoch 0."""
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        pid, epoch = self.producer_id, self.producer_epoch
        if self.client_tv >= TV2 and self.next_producer_id != NO_PRODUCER_ID:
            pid, epoch = self.next_producer_id, 0
        return self._prepare(state, pid, epoch, self.last_producer_epoch, self.timeout_ms, frozenset(),
                             self.start_ms, now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.timeout_ms, frozenset(), self.start_ms, self.update_ms)

    # ---------------------------------------------------------------- complete / abort

    def abort_transition(self) -> None:
        """The log write of the pending transit failed: nothing changes."""
        self.pending_state = None

    def complete_transition(self, transit: TxnTransit) -> None:
        """Apply a transit that has been written to the log (Kafka completeTransitionTo's checks)."""
        to = self.pending_state
        if to is None or to is not transit.state:
            raise IllegalTxnTransition(f"{self.transactional_id}: completing {transit.state.kafka_name} but the "
                                       f"pending state is {to}")
        same_producer = transit.producer_id == self.producer_id and transit.producer_epoch == self.producer_epoch
        if to is TxnState.EMPTY:
            bump_ok = (transit.producer_epoch == self.producer_epoch + 1
                       or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))
            if (self.producer_epoch != transit.producer_epoch and not bump_ok) or transit.partitions \
                    or transit.start_ms != -1:
                self._fail(transit)
            self.timeout_ms = transit.timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to is TxnState.ONGOING:
            if not same_producer or not self.partitions <= transit.partitions or self.timeout_ms != transit.timeout_ms:
                self._fail(transit)
            self.start_ms = transit.start_ms
            self.partitions |= transit.partitions
        elif to.is_prepare:
            tv2 = transit.client_tv >= TV2
            ok_producer = (transit.producer_id == self.producer_id
                           and (transit.last_producer_epoch if tv2 else transit.producer_epoch) == self.producer_epoch)
            # a TV2 abort of a transaction that never became Ongoing starts with the abort
            started = self.start_ms == transit.start_ms or (tv2 and self.state is not TxnState.ONGOING)
            if not ok_producer or self.partitions != transit.partitions or self.timeout_ms != transit.timeout_ms \
                    or not started:
                self._fail(transit)
            self.start_ms = transit.start_ms
            if tv2:
                self.producer_epoch = transit.producer_epoch
                self.last_producer_epoch = transit.last_producer_epoch
                self.next_producer_id = transit.next_producer_id
        elif to in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            tv2 = transit.client_tv >= TV2
            rotated = tv2 and transit.producer_id != self.producer_id and transit.producer_id == self.next_producer_id \
                and transit.producer_epoch == 0
            if not (same_producer or rotated) or self.timeout_ms != transit.timeout_ms or transit.start_ms == -1:
                self._fail(transit)
            self.start_ms = transit.start_ms
            self.partitions.clear()
            if tv2:
                self.producer_id = transit.producer_id
                self.last_producer_id = transit.last_producer_id
                self.producer_epoch = transit.producer_epoch
                self.last_producer_epoch = transit.last_producer_epoch
                self.next_producer_id = transit.next_producer_id
        else:  # PrepareEpochFence is never completed; Dead ends in removal from the cache
            self._fail(transit)
        self.update_ms = transit.update_ms
        self.client_tv = transit.client_tv
        self.pending_state = None
        self.state = to

    def _fail(self, transit: TxnTransit) -> None:
        raise IllegalTxnTransition(f"{self!r}: transition to {transit} does not fit the current metadata")

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker could not be written because the partition no longer exists (topic deleted)."""
        if not self.state.is_prepare:
            raise IllegalTxnTransition(f"{self.transactional_id}: removing a partition in {self.state.kafka_name}")
        self.partitions.discard(tp)

    @classmethod
    def from_transit(cls, transactional_id: str, t: TxnTransit) -> "TxnMetadata":
        """Metadata loaded from the log."""
        return cls(transactional_id, t.producer_id, t.producer_epoch, t.timeout_ms, t.state, set(t.partitions),
                   t.start_ms, t.update_ms, t.last_producer_id, t.last_producer_epoch, t.next_producer_id, t.client_tv)
