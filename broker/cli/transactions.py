"""`minikafka transactions list|describe|abort` and `minikafka producers describe TOPIC PARTITION`: the
hanging-transaction tools of KIP-664 (what Kafka's kafka-transactions.sh does), over the wire with
kafka-python's admin client, printing the same tab-separated columns as Kafka's tool."""
from __future__ import annotations

import argparse
import sys
import time


def _admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="minikafka-cli")


def _row(*cols) -> None:
    print("\t".join(str(c) for c in cols))


def cmd_transactions(args: argparse.Namespace) -> int:
    admin = _admin(args.bootstrap_server)
    try:
        if args.action == "list":
            _row("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
            for broker_id, listings in sorted(admin.list_transactions(
                    state_filters=args.state or None, producer_id_filters=args.producer_id or None).items()):
                for t in sorted(listings, key=lambda t: t.transactional_id):
                    _row(t.transactional_id, broker_id, t.producer_id, getattr(t.state, "value", t.state))
        elif args.action == "describe":
            if not args.transactional_id:
                raise SystemExit("transactions describe needs --transactional-id")
            d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
            now = int(time.time() * 1000)
            start = d.transaction_start_time_ms
            _row("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions")
            _row(d.coordinator_id, args.transactional_id, d.producer_id, d.producer_epoch,
                 getattr(d.state, "value", d.state), d.transaction_timeout_ms, start if start >= 0 else "None",
                 now - start if start >= 0 else "None",
                 ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(d.topic_partitions)))
        elif args.action == "abort":
            return _abort(admin, args)
    finally:
        admin.close()
    return 0


def _abort(admin, args: argparse.Namespace) -> int:
    """Write an ABORT marker for a hanging transaction of one partition: found by its start offset
    (DescribeProducers), or given as producer id/epoch/coordinator epoch."""
    from kafka.admin import AbortTransactionSpec
    from kafka.structs import TopicPartition

    if args.topic is None or args.partition is None:
        raise SystemExit("transactions abort needs --topic and --partition")
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is not None:
        producers = admin.describe_producers([tp])[tp].active_producers
        match = [p for p in producers if p.current_transaction_start_offset == args.start_offset]
        if not match:
            print(f"Could not find any open transactions starting at offset {args.start_offset} on partition {tp.topic}-{tp.partition}",
                  file=sys.stderr)
            return 1
        p = match[0]
        spec = AbortTransactionSpec(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch)
    elif args.producer_id is not None and args.producer_epoch is not None:
        spec = AbortTransactionSpec(tp, args.producer_id[0], args.producer_epoch,
                                    args.coordinator_epoch if args.coordinator_epoch is not None else -1)
    else:
        raise SystemExit("transactions abort needs --start-offset, or --producer-id and --producer-epoch")
    admin.abort_transaction(spec)
    print(f"Aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}) on "
          f"{tp.topic}-{tp.partition}")
    return 0


def cmd_producers(args: argparse.Namespace) -> int:
    from kafka.structs import TopicPartition

    admin = _admin(args.bootstrap_server)
    try:
        tp = TopicPartition(args.topic, args.partition)
        producers = admin.describe_producers([tp])[tp].active_producers
        _row("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
             "CurrentTransactionStartOffset")
        for p in producers:
            _row(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
                 p.current_transaction_start_offset if p.current_transaction_start_offset >= 0 else "None")
    finally:
        admin.close()
    return 0


def add_parsers(sub) -> None:
    txn = sub.add_parser("transactions", help="list/describe transactions, abort a hanging one")
    txn.add_argument("action", choices=["list", "describe", "abort"])
    txn.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    txn.add_argument("--transactional-id")
    txn.add_argument("--state", action="append", help="list: only these states (repeatable)")
    txn.add_argument("--producer-id", type=int, action="append",
                     help="list: only these producer ids; abort: the producer")
    txn.add_argument("--topic")
    txn.add_argument("--partition", type=int)
    txn.add_argument("--start-offset", type=int, help="abort: the first offset of the hanging transaction")
    txn.add_argument("--producer-epoch", type=int)
    txn.add_argument("--coordinator-epoch", type=int)
    txn.set_defaults(fn=cmd_transactions)
    prod = sub.add_parser("producers", help="describe the producers with state in a partition")
    prod.add_argument("action", choices=["describe"])
    prod.add_argument("topic")
    prod.add_argument("partition", type=int)
    prod.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    prod.set_defaults(fn=cmd_producers)
