"""Share groups (KIP-932) through the admin side: Kafka's kafka-share-groups tool (ShareGroupCommand:
ListGroups with the share type, ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroups), the Java Admin API (listGroups(forShareGroups()), describeShareGroups,
listShareGroupOffsets) and Python clients' ListGroups/DescribeGroups, which see the group's type. The
group's member is the Java KafkaShareConsumer of tests/java/JavaShareConsumerCheck.java. Black-box; runs
against minikafka and, with --broker=kafka, against Apache Kafka 4.3.1."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.support.group_helpers import create_topic, group_broker, produce, unique  # noqa: F401
from tests.support.helpers import wait_until

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402
from tests.integration.groups.test_share_groups_java import java_cmd, run_check  # noqa: E402

PARTITIONS = 2


@pytest.fixture(scope="module", autouse=True)
def _lab_jars():
    lab.fetch()


def share_groups(bs: str, *args: str) -> subprocess.CompletedProcess:
    return lab.run_tool("kafka-share-groups", ["--bootstrap-server", bs, *args])


def ok(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def rows(out: str, group: str) -> list[list[str]]:
    """The table rows of a kafka-share-groups answer that belong to `group`."""
    return [ln.split() for ln in out.splitlines() if ln.split()[:1] == [group]]


def offsets(bs: str, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (START-OFFSET, LAG) from --describe (--offsets, the default sub-action)."""
    out = ok(share_groups(bs, "--describe", "--group", group))
    return {int(r[2]): (int(r[3]), int(r[4])) for r in rows(out, group)}


class Member:
    """A KafkaShareConsumer (JavaShareConsumerCheck consume) that reads `expect` records, then stays in
    the group, polling, until its stop file exists."""

    def __init__(self, bs: str, topic: str, group: str, expect: int, stop_file) -> None:
        self.stop_file = stop_file
        self.proc = subprocess.Popen(java_cmd("consume", bs, topic, group, f"expect={expect}", "tail=0",
                                              f"stop_file={stop_file}", "deadline=150000",
                                              "gc:share.auto.offset.reset=earliest"),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self) -> dict:
        self.stop_file.touch()
        out, err = self.proc.communicate(timeout=60)
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        assert self.proc.returncode == 0 and lines, out[-2000:] + err[-3000:]
        return json.loads(lines[-1][len("RESULT "):])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_kafka_share_groups_tool_lifecycle(group_broker, tmp_path):
    """--list / --list --state, --describe (offsets, --members, --state) of a group with a live member that
    has read everything; a reset and a delete refused while it is a member; once it left: --reset-offsets
    --to-earliest --execute makes the records deliverable again (a new member gets all of them), --to-latest
    skips them, --delete removes the group."""
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-tool"), PARTITIONS)
    other = create_topic(bs, unique("share-tool-other"), 1)
    group = unique("sg-tool")
    produce(bs, topic, PARTITIONS, 10)
    member = Member(bs, topic, group, 10, tmp_path / "stop")
    try:
        def described_member():
            out = share_groups(bs, "--describe", "--group", group, "--members").stdout
            found = rows(out, group)
            return found if len(found) == 1 and found[0][4] == str(PARTITIONS) else None
        (m,) = wait_until(described_member, timeout=60, interval=1, what=f"{group}: one member, assigned")
        # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT
        assert m[3] == "collector" and m[4] == str(PARTITIONS), m
        assert m[5] == f"{topic}:" + ",".join(str(p) for p in range(PARTITIONS)), m  # topic:0,1

        assert group in ok(share_groups(bs, "--list")).split()
        listed = {r[0]: r[1] for r in (ln.split() for ln in ok(share_groups(bs, "--list", "--state")).splitlines()[1:])
                  if len(r) == 2}
        assert listed.get(group) == "Stable", listed
        state = rows(ok(share_groups(bs, "--describe", "--group", group, "--state")), group)
        assert len(state) == 1 and state[0][-2:] == ["Stable", "1"], state

        # every record read and acknowledged (implicitly): no lag on either partition
        wait_until(lambda: {p: lag for p, (_, lag) in offsets(bs, group).items()} == {0: 0, 1: 0}, timeout=30,
                   interval=1, what=f"{group}: lag 0 on both partitions")

        # the Java Admin API: listGroups by type, describeShareGroups, listShareGroupOffsets
        adm = run_check("admin", bs, topic, group)
        assert group in adm["share_groups"] and group not in adm["consumer_groups"], adm
        assert adm["all"][group] == "Share/Stable", adm
        assert adm["state"] == "Stable", adm
        assert [(x["client_id"], x["assignment"]) for x in adm["members"]] == \
            [("collector", [f"{topic}:{p}" for p in range(PARTITIONS)])], adm
        assert {k: v["lag"] for k, v in adm["offsets"].items()} == {f"{topic}:{p}": 0 for p in range(PARTITIONS)}, adm

        # refused while the group has a member
        busy = share_groups(bs, "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
        assert "not empty" in busy.stdout + busy.stderr, busy.stdout + busy.stderr
        busy = share_groups(bs, "--delete", "--group", group)
        assert "not empty" in (busy.stdout + busy.stderr).lower() or "NonEmptyGroup" in busy.stdout + busy.stderr, \
            busy.stdout + busy.stderr
        assert group in ok(share_groups(bs, "--list")).split()

        first = member.finish()
    finally:
        member.kill()
    assert set(first["counts"]) == {f"v{i}" for i in range(10)} and first["deliveries"] == 10, first

    wait_until(lambda: (r := rows(ok(share_groups(bs, "--describe", "--group", group, "--state")), group))
               and r[0][-2:] == ["Empty", "0"], timeout=30, interval=1, what=f"{group}: Empty")

    dry = rows(ok(share_groups(bs, "--reset-offsets", "--to-earliest", "--dry-run", "--group", group, "--topic",
                               topic)), group)
    assert sorted((int(r[2]), int(r[3])) for r in dry) == [(p, 0) for p in range(PARTITIONS)], dry
    done = rows(ok(share_groups(bs, "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic",
                                topic)), group)
    assert sorted((int(r[2]), int(r[3])) for r in done) == [(p, 0) for p in range(PARTITIONS)], done
    assert offsets(bs, group) == {p: (0, 5) for p in range(PARTITIONS)}

    again = run_check("consume", bs, topic, group, "expect=10", "tail=2000")
    assert set(again["counts"]) == {f"v{i}" for i in range(10)} and again["deliveries"] == 10, again
    assert all(c == [1] for c in again["counts"].values()), again  # a reset starts the records afresh

    latest = rows(ok(share_groups(bs, "--reset-offsets", "--to-latest", "--execute", "--group", group,
                                  "--all-topics")), group)
    assert sorted((int(r[2]), int(r[3])) for r in latest) == [(p, 5) for p in range(PARTITIONS)], latest
    assert offsets(bs, group) == {p: (5, 0) for p in range(PARTITIONS)}
    produce(bs, topic, PARTITIONS, 4, start=10)
    after = run_check("consume", bs, topic, group, "expect=4", "tail=2000")
    assert set(after["counts"]) == {f"v{i}" for i in range(10, 14)}, after

    # a consumer group (same group id space) is not listed as a share group
    cgroup = unique("cg-not-share")
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": cgroup, "auto.offset.reset": "earliest"})
    c.subscribe([other])
    c.consume(1, 5)
    c.commit(offsets=[TopicPartition(other, 0, 0)], asynchronous=False)
    c.close()
    assert cgroup not in ok(share_groups(bs, "--list")).split()

    assert "successful" in ok(share_groups(bs, "--delete", "--group", group))
    assert group not in ok(share_groups(bs, "--list")).split()
    gone = share_groups(bs, "--describe", "--group", group)
    assert "GroupIdNotFoundException" in gone.stdout + gone.stderr or "does not exist" in gone.stdout + gone.stderr, \
        gone.stdout + gone.stderr


def test_python_clients_see_the_share_group_type(group_broker):
    """ListGroups v5 from kafka-python reports the share group with type 'share' (and its types filter
    selects it); DescribeGroups (the classic API) answers GROUP_ID_NOT_FOUND for it, as Kafka does for a
    group that is not a classic one; confluent-kafka's consumer-group listing leaves it out."""
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("share-py"), 1)
    group = unique("sg-py")
    produce(bs, topic, 1, 3)
    r = run_check("consume", bs, topic, group, "expect=3", "tail=0", "gc:share.auto.offset.reset=earliest")
    assert r["distinct"] == 3, r

    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        everything = {g["group_id"]: g for g in kp.list_groups()}
        assert everything[group]["group_type"] == "share" and everything[group]["protocol_type"] == "share", \
            everything[group]
        assert everything[group]["group_state"] == "Empty", everything[group]
        shares = {g["group_id"] for g in kp.list_groups(types_filter=["share"])}
        assert group in shares
        assert group not in {g["group_id"] for g in kp.list_groups(types_filter=["consumer", "classic"])}
        described = kp.describe_groups([group])[group]
        assert re.search(r"\b69\b|GroupIdNotFound", str(described["error"])), described
    finally:
        kp.close()

    ck = AdminClient({"bootstrap.servers": bs})
    listed = ck.list_consumer_groups().result(30)
    assert group not in {g.group_id for g in listed.valid}, [(g.group_id, g.type) for g in listed.valid]
