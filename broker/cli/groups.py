"""`minikafka groups list|describe GROUP`: consumer groups over the wire (kafka-python admin client;
ConsumerGroupDescribe for KIP-848 groups), with the columns of Kafka's kafka-consumer-groups.sh
--describe (committed offset, log end, lag)."""
from __future__ import annotations

import argparse
import sys


def add_parsers(sub) -> None:
    groups = sub.add_parser("groups", help="list consumer groups, describe one (members, offsets, lag)")
    groups.add_argument("action", choices=["list", "describe"])
    groups.add_argument("group", nargs="?")
    groups.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    groups.set_defaults(fn=cmd_groups)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def cmd_groups(args: argparse.Namespace) -> int:
    from kafka.admin import KafkaAdminClient

    if args.action == "describe" and not args.group:
        print("minikafka groups describe needs a group id", file=sys.stderr)
        return 2
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id="minikafka-cli")
    try:
        if args.action == "list":
            groups = sorted(admin.list_groups(), key=lambda g: g["group_id"])
            rows = [["GROUP", "STATE", "PROTOCOL-TYPE"]]
            rows += [[g["group_id"], g.get("group_state", ""), g.get("protocol_type") or "-"] for g in groups]
            print(_table(rows))
            return 0
        return _describe(admin, args.group)
    finally:
        admin.close()


def _consumer_group_description(admin, group: str) -> dict | None:
    """ConsumerGroupDescribe of `group` in the shape of kafka-python's describe_groups(); None if it is
    not a consumer group."""
    from minikafka.protocol.messages import ConsumerGroupDescribeRequest

    async def describe():
        coordinator = await admin._find_coordinator_id(group)
        request = ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)
        return await admin._manager.send(request, node_id=coordinator)

    try:
        (g,) = admin._manager.run(describe).groups
    except Exception:  # a broker without API 69, or an answer we cannot use: the classic view stays
        return None
    if g.error_code:
        return None
    members = []
    for m in g.members:
        parts = [{"topic": tp.topic_name, "partitions": list(tp.partitions)} for tp in m.assignment.topic_partitions]
        members.append({"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                        "client_host": m.client_host, "member_assignment": {"assigned_partitions": parts}})
    return {"group_state": g.group_state, "protocol_type": "consumer", "protocol_data": g.assignor_name,
            "members": members}


def _describe(admin, group: str) -> int:
    from kafka.protocol.consumer import OffsetSpec
    from kafka.structs import TopicPartition

    desc = admin.describe_groups([group])[group]
    if desc.get("group_state") == "Dead":  # not a classic group: maybe a KIP-848 consumer group
        desc = _consumer_group_description(admin, group) or desc
    committed = admin.list_group_offsets({group: None}).get(group, {})
    if desc.get("group_state") == "Dead" and not committed:
        print(f"Consumer group '{group}' does not exist.", file=sys.stderr)
        return 1
    owner: dict[tuple[str, int], dict] = {}
    for m in desc.get("members", []):
        assignment = m.get("member_assignment") or {}
        for tp in assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []:
            for p in tp["partitions"]:
                owner[(tp["topic"], p)] = m
    partitions = sorted(set(owner) | {(tp.topic, tp.partition) for tp in committed})
    ends = {}
    if partitions:
        ends = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.LATEST for t, p in partitions})
    print(f"Group {group}: state {desc.get('group_state')}, protocol {desc.get('protocol_type') or '-'}"
          f"/{desc.get('protocol_data') or '-'}, {len(desc.get('members', []))} member(s)\n")
    rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID"]]
    for t, p in partitions:
        tp = TopicPartition(t, p)
        current = committed.get(tp)
        end = ends.get(tp)
        cur = current.offset if current is not None and current.offset >= 0 else None
        leo = end.offset if end is not None else None
        lag = leo - cur if cur is not None and leo is not None else None
        m = owner.get((t, p))
        rows.append([group, t, p, "-" if cur is None else cur, "-" if leo is None else leo,
                     "-" if lag is None else lag, m["member_id"] if m else "-", m["client_host"] if m else "-",
                     m["client_id"] if m else "-"])
    print(_table(rows))
    if desc.get("members"):
        print()
        rows = [["MEMBER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST", "#PARTITIONS"]]
        for m in desc["members"]:
            count = sum(1 for o in owner.values() if o is m)
            rows.append([m["member_id"], m.get("group_instance_id") or "-", m["client_id"], m["client_host"], count])
        print(_table(rows))
    return 0
