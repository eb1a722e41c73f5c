"""KIP-890 verification failures as Kafka answers them: a transaction coordinator that cannot be asked
(NETWORK_EXCEPTION) is retried by clients — Produce gets NOT_ENOUGH_REPLICAS (no metadata refresh),
TxnOffsetCommit gets COORDINATOR_LOAD_IN_PROGRESS (no group coordinator lookup)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import kafka.errors as ke

from minikafka.broker.handlers import txn_common
from minikafka.broker.handlers.txn_offset_commit import _verification_error


def test_txn_offset_commit_maps_a_network_failure_to_load_in_progress() -> None:
    assert _verification_error(ke.NetworkExceptionError.errno, 5) == ke.CoordinatorLoadInProgressError.errno
    assert _verification_error(ke.NotCoordinatorError.errno, 5) == ke.NotCoordinatorError.errno
    assert _verification_error(ke.ProducerFencedError.errno, 5) == ke.InvalidProducerEpochError.errno


def test_produce_maps_a_network_failure_to_not_enough_replicas(monkeypatch) -> None:
    async def unreachable(*_args, **_kwargs) -> int:
        return ke.NetworkExceptionError.errno
    monkeypatch.setattr(txn_common, "verify_in_transaction", unreachable)
    code, message = asyncio.run(txn_common.verify_transactional_produce(
        SimpleNamespace(), "tx", 7, 0, "t", 0, version=11))
    assert code == ke.NotEnoughReplicasError.errno
    assert message == ("Unable to verify the partition has been added to the transaction. "
                       "Underlying error: NETWORK_EXCEPTION")
