"""Kafka's own group tooling against the broker: ConsoleConsumer in a group (--from-beginning, then
resuming from the committed offsets) and kafka-consumer-groups --list/--describe; plus the
`minikafka groups` CLI. Black-box (also runs with --broker=kafka)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from minikafka.testing import minikafka_command, subprocess_env
from tests.conftest import ROOT
from tests.support.group_helpers import create_topic, group_broker, produce, unique  # noqa: F401

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

PARTITIONS = 2


@pytest.fixture(scope="module")
def kafka_tools():
    lab.fetch()
    return lab


def tool(name: str, *args: str, timeout: float = 90):
    res = lab.run_tool(name, [str(a) for a in args], timeout=timeout)
    out = f"$ {name} {' '.join(map(str, args))}\n--- exit {res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    assert res.returncode == 0, out
    assert "Exception" not in res.stderr, out
    return res.stdout, out


def describe_rows(stdout: str, group: str) -> dict[int, list[str]]:
    """partition -> the kafka-consumer-groups --describe columns of that row."""
    rows = {}
    for line in stdout.splitlines():
        cols = line.split()
        if cols and cols[0] == group and len(cols) >= 6 and cols[2].isdigit():
            rows[int(cols[2])] = cols
    return rows


def test_console_consumer_group_and_consumer_groups_tool(group_broker, kafka_tools):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-tools"), PARTITIONS)
    group = unique("g-console")
    first = produce(bs, topic, PARTITIONS, 10)
    out, log = tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
                    "--from-beginning", "--max-messages", "10", "--timeout-ms", "30000")
    assert sorted(out.split()) == sorted(v.decode() for v in first), log

    out, log = tool("kafka-consumer-groups", "--bootstrap-server", bs, "--list")
    assert group in out.split(), log
    out, log = tool("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group)
    rows = describe_rows(out, group)
    assert sorted(rows) == [0, 1], log
    for cols in rows.values():
        assert cols[1] == topic and cols[3] == "5" and cols[4] == "5" and cols[5] == "0", log  # offsets, lag 0
    out, log = tool("kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group, "--state")
    assert "Empty" in out, log

    # the same group resumes at its committed offsets: --from-beginning only applies without them
    second = produce(bs, topic, PARTITIONS, 4, start=10)
    out, log = tool("kafka-console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
                    "--from-beginning", "--max-messages", "4", "--timeout-ms", "30000")
    assert sorted(out.split()) == sorted(v.decode() for v in second), log

    # minikafka's own CLI shows the same group
    cli = [*minikafka_command(), "groups"]
    res = subprocess.run(cli + ["list", "--bootstrap-server", bs], capture_output=True, text=True, timeout=60,
                         env=subprocess_env())
    assert res.returncode == 0 and group in res.stdout, res.stderr
    res = subprocess.run(cli + ["describe", group, "--bootstrap-server", bs], capture_output=True, text=True,
                         timeout=60, env=subprocess_env())
    assert res.returncode == 0, res.stderr
    rows = describe_rows(res.stdout, group)
    assert sorted(rows) == [0, 1] and all(c[3] == "7" and c[4] == "7" and c[5] == "0" for c in rows.values()), \
        res.stdout
    res = subprocess.run(cli + ["describe", unique("g-none"), "--bootstrap-server", bs], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1 and "does not exist" in res.stderr
