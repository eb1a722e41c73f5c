"""`minikafka` command line: `serve` runs the broker; `topics` manages topics over the wire;
`transactions` / `producers` inspect transactions and abort hanging ones (broker/txn_cli.py)."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from .config import BrokerConfig, ConfigError


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--override expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = BrokerConfig.load(args.config or os.environ.get("MINIKAFKA_CONFIG"), _overrides(args.override))
    except (ConfigError, OSError) as exc:
        print(f"minikafka: configuration error: {exc}", file=sys.stderr)
        return 2
    from .server import run
    return run(config)  # 0 after a clean shutdown, 1 if the logs could not be closed


def cmd_topics(args: argparse.Namespace) -> int:
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id="minikafka-cli")
    try:
        if args.action == "list":
            for name in sorted(admin.list_topics()):
                print(name)
        elif args.action == "create":
            configs = _overrides(args.config or [])
            admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor,
                                          topic_configs=configs)])
            print(f"Created topic {args.topic}.")
        elif args.action == "delete":
            admin.delete_topics([args.topic])
            print(f"Deleted topic {args.topic}.")
        elif args.action == "alter":
            admin.create_partitions({args.topic: NewPartitions(args.partitions)})
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
        elif args.action == "describe":
            names = [args.topic] if args.topic else None
            for t in admin.describe_topics(names):
                # kafka-python 3 returns the MetadataResponse topic as a dict with schema field names
                parts = t["partitions"]
                print(f"Topic: {t['name']}\tTopicId: {t.get('topic_id')}\tPartitionCount: {len(parts)}"
                      f"\tInternal: {t.get('is_internal', False)}")
                for p in sorted(parts, key=lambda p: p["partition_index"]):
                    print(f"\tPartition: {p['partition_index']}\tLeader: {p['leader_id']}"
                          f"\tReplicas: {p['replica_nodes']}\tIsr: {p['isr_nodes']}")
    finally:
        admin.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minikafka", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--config", help="server.properties file (Kafka key names)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="override one config key (repeatable)")
    serve.add_argument("--log-level", default=os.environ.get("MINIKAFKA_LOG_LEVEL", "info"))
    serve.set_defaults(fn=cmd_serve)
    topics = sub.add_parser("topics", help="create/list/describe/alter/delete topics")
    topics.add_argument("action", choices=["create", "list", "describe", "alter", "delete"])
    topics.add_argument("topic", nargs="?")
    topics.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    topics.add_argument("--partitions", type=int, default=1)
    topics.add_argument("--replication-factor", type=int, default=1)
    topics.add_argument("--config", action="append", metavar="KEY=VALUE")
    topics.set_defaults(fn=cmd_topics)
    if (sys.argv[1:] if argv is None else argv)[:1] != ["serve"]:  # the broker's start-up skips these
        from .txn_cli import add_parsers as add_txn_parsers
        add_txn_parsers(sub)  # transactions list|describe|abort, producers describe
        from .groups_cli import add_parsers as add_group_parsers
        add_group_parsers(sub)  # groups list|describe
    args = parser.parse_args(argv)
    if args.command == "topics" and args.action in ("create", "delete", "alter") and not args.topic:
        parser.error(f"topics {args.action} needs a topic name")
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
