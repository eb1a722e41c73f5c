"""`minikafka` command line: `serve` runs the broker; `topics` manages topics over the wire;
`transactions` / `producers` inspect transactions and abort hanging ones (broker/cli/transactions.py); `faults`
injects failures for client tests (broker/ops/faults.py); `storage format --add-scram` creates the first
SCRAM users before the broker starts (broker/security/sasl/bootstrap.py)."""
from __future__ import annotations

import argparse
import os
import sys

from minikafka.broker.config.core import BrokerConfig, ConfigError


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--override expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def cmd_serve(args: argparse.Namespace) -> int:
    import gc
    gc.disable()  # start-up allocates only long-lived objects (modules, tables): collect once ready
    from minikafka.broker.ops.log_format import configure
    overrides = _overrides(args.override)
    if args.metrics_listener:
        overrides["minikafka.metrics.listener"] = args.metrics_listener
    if args.log_format:
        overrides["minikafka.log.format"] = args.log_format
    configure(args.log_level, args.log_format or "text")  # until the config says otherwise
    try:
        config = BrokerConfig.load(args.config or os.environ.get("MINIKAFKA_CONFIG"), overrides)
    except (ConfigError, OSError) as exc:
        print(f"minikafka: configuration error: {exc}", file=sys.stderr)
        return 2
    configure(args.log_level, config.get("minikafka.log.format"))
    try:
        from minikafka.broker.server import run
    except ImportError as exc:  # an incomplete installation: one line, not a traceback
        from minikafka.broker.installation import missing_module_message
        print(f"minikafka: {missing_module_message(exc)}", file=sys.stderr)
        return 2
    return run(config)  # 0 after a clean shutdown, 1 after a failed shutdown, 2 after a failed start-up


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


def cmd_faults(args: argparse.Namespace) -> int:
    """`minikafka faults inject|list|clear --admin-url URL`: the broker's /faults (broker/ops/faults.py)."""
    import json
    from minikafka.faults import FaultsClient, FaultsError
    client = FaultsClient(args.admin_url)
    try:
        if args.action == "inject":
            if not args.api:
                print("minikafka faults inject: --api is required", file=sys.stderr)
                return 2
            rule_id = client.inject(api=args.api, error=args.error, disconnect=args.disconnect, delay_ms=args.delay_ms,
                                    times=args.times, topic=args.topic, partition=args.partition,
                                    transactional_id=args.transactional_id, group_id=args.group_id)
            print(rule_id)
        elif args.action == "list":
            print(json.dumps(client.injected(), indent=2))
        else:
            client.clear()
    except FaultsError as exc:
        print(f"minikafka faults {args.action}: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_storage(args: argparse.Namespace) -> int:
    """`minikafka storage format --add-scram SPEC ...`: the first SCRAM users, written into the data
    dir (the first of log.dirs) before the broker starts, as `kafka-storage format --add-scram`."""
    from minikafka.broker.security.sasl.bootstrap import ScramSpecError, add_scram_credentials
    from minikafka.broker.security.sasl.credentials import CredentialStoreError
    overrides = _overrides(args.override)
    try:
        config = BrokerConfig.load(args.config or os.environ.get("MINIKAFKA_CONFIG"), overrides)
    except (ConfigError, OSError) as exc:
        print(f"minikafka storage: configuration error: {exc}", file=sys.stderr)
        return 2
    data_dir = config.log_dirs[0]
    if args.action == "random-uuid":
        from minikafka.raft.config import new_cluster_id
        print(new_cluster_id())
        return 0
    if args.standalone or args.initial_controllers or args.no_initial_controllers or args.cluster_id:
        from minikafka.broker.cluster.storage_format import FormatError, format_storage
        try:
            for line in format_storage(config, args.cluster_id, standalone=args.standalone,
                                       initial_controllers=args.initial_controllers,
                                       no_initial_controllers=args.no_initial_controllers,
                                       ignore_formatted=args.ignore_formatted):
                print(line)
        except (FormatError, OSError) as exc:
            print(f"minikafka storage format: {exc}", file=sys.stderr)
            return 1
        if not args.add_scram:
            return 0
    try:
        added = add_scram_credentials(data_dir, args.add_scram or [])
    except (ScramSpecError, CredentialStoreError, OSError) as exc:
        print(f"minikafka storage format: {exc}", file=sys.stderr)
        return 1
    for user, mechanism in added:
        print(f"Added {mechanism} credential for user {user} in {data_dir}")
    if not added:
        print(f"Nothing to do for {data_dir} (give --add-scram)")
    return 0


def _add_storage_parser(sub: argparse._SubParsersAction) -> None:
    storage = sub.add_parser("storage", help="prepare a data dir before the first start (SCRAM users)")
    storage.add_argument("action", choices=["format", "random-uuid"])
    storage.add_argument("--config", "-c", help="server.properties file (its log.dirs is the data dir)")
    storage.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                         help="override one config key, e.g. log.dirs=/var/lib/minikafka (repeatable)")
    storage.add_argument("--add-scram", "-S", action="append", metavar="SPEC",
                         help="'SCRAM-SHA-256=[name=admin,password=admin-secret]' (repeatable; "
                              "optional iterations=N, 4096..16384)")
    # KIP-853 (a dynamic metadata quorum, kraft.version 1), as kafka-storage format
    storage.add_argument("--cluster-id", "-t", help="the cluster id (meta.properties)")
    storage.add_argument("--standalone", "-s", action="store_true",
                         help="this controller alone is the quorum's first voter")
    storage.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIRID,...",
                         help="the quorum's first voters")
    storage.add_argument("--no-initial-controllers", "-N", action="store_true",
                         help="a controller that joins an existing dynamic quorum (add-controller)")
    storage.add_argument("--ignore-formatted", "-g", action="store_true",
                         help="keep log dirs already formatted")
    storage.set_defaults(fn=cmd_storage)


def _add_faults_parser(sub: argparse._SubParsersAction) -> None:
    faults = sub.add_parser("faults", help="fault injection for client tests (minikafka.faults.enable=true)")
    faults.add_argument("action", choices=["inject", "list", "clear"])
    faults.add_argument("--admin-url", required=True, metavar="URL",
                        help="the broker's admin listener, http://HOST:PORT (minikafka.metrics.listener)")
    faults.add_argument("--api", help="Kafka API name: Produce, Fetch, EndTxn, ...")
    faults.add_argument("--error", help="Kafka error name, e.g. NOT_LEADER_OR_FOLLOWER")
    faults.add_argument("--disconnect", choices=["before_apply", "after_apply"])
    faults.add_argument("--delay-ms", type=int)
    faults.add_argument("--times", type=int, default=1)
    faults.add_argument("--topic")
    faults.add_argument("--partition", type=int)
    faults.add_argument("--transactional-id")
    faults.add_argument("--group-id")
    faults.set_defaults(fn=cmd_faults)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minikafka", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--config", help="server.properties file (Kafka key names)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="override one config key (repeatable)")
    serve.add_argument("--log-level", default=os.environ.get("MINIKAFKA_LOG_LEVEL", "info"))
    serve.add_argument("--metrics-listener", metavar="URL",
                       help="serve /metrics and /health/* on http://HOST:PORT (minikafka.metrics.listener)")
    serve.add_argument("--log-format", choices=["text", "json"],
                       help="log lines as text (default) or one JSON object per line (minikafka.log.format)")
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
        from minikafka.broker.cli.transactions import add_parsers as add_txn_parsers
        add_txn_parsers(sub)  # transactions list|describe|abort, producers describe
        from minikafka.broker.cli.groups import add_parsers as add_group_parsers
        add_group_parsers(sub)  # groups list|describe
        _add_faults_parser(sub)  # faults inject|list|clear
        _add_storage_parser(sub)  # storage format --add-scram
    args = parser.parse_args(argv)
    if args.command == "topics" and args.action in ("create", "delete", "alter") and not args.topic:
        parser.error(f"topics {args.action} needs a topic name")
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
