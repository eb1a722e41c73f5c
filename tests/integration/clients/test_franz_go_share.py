"""franz-go's own share-group tests (pkg/kgo, fetched through the Go module proxy by
scripts/franz_go_share.py) against the broker under test: TestShareGroup, TestShareGroupETL,
TestShareGroupAckOnClose, TestShareGroupOffsetsAdmin (and whatever else in that release skips itself
unless ShareFetch and ShareAcknowledge v2 are advertised). A SKIP is a failure. Runs against minikafka and,
with --broker=kafka, against Apache Kafka 4.3.1."""
from __future__ import annotations

import sys
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import ROOT
from tests.support.helpers import RawClient, wait_topic_ready

sys.path.insert(0, str(ROOT))
from scripts import franz_go_share  # noqa: E402


@pytest.fixture(scope="module")
def franz_go_binary():
    # fetch + `go test -c` once per franz-go version (~2 min the first time, cached under ~/.cache/minikafka)
    return franz_go_share.prepare()


COORDINATOR_NOT_READY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


def wait_share_offsets_serviceable(bootstrap: str, timeout: float = 90.0) -> None:
    """Until AlterShareGroupOffsets of a throwaway share group is answered without a coordinator error.

    Apache Kafka loads its group and share coordinators (and creates `__share_group_state`) asynchronously after
    start; franz-go's TestShareGroupOffsetsAdmin calls AlterShareGroupOffsets once and fails on NOT_COORDINATOR,
    so a freshly started broker is first brought to the state a long-running one is in."""
    from minikafka.protocol.messages import AlterShareGroupOffsetsRequest as A
    topic = f"share-warmup-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    wait_topic_ready(bootstrap, topic, 1)
    T = A.AlterShareGroupOffsetsRequestTopic
    request = A(group_id=f"share-warmup-{uuid.uuid4().hex[:8]}", topics=[T(topic_name=topic, partitions=[
        T.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
    deadline = time.monotonic() + timeout
    while True:
        with RawClient(bootstrap) as c:
            resp = c.request(request, 0)
        code = resp.error_code or resp.responses[0].partitions[0].error_code
        if code not in COORDINATOR_NOT_READY:
            assert code == 0, f"AlterShareGroupOffsets of a new share group: error {code}"
            return
        assert time.monotonic() < deadline, f"share group offsets still answer error {code} after {timeout} s"
        time.sleep(0.5)


@pytest.mark.serial  # franz-go runs its tests in parallel, several clients each, with its own timeouts
@pytest.mark.timeout(420)
def test_franz_go_share_group_tests(shared_broker, franz_go_binary):
    binary, tests = franz_go_binary
    assert set(franz_go_share.KNOWN) <= set(tests), tests
    wait_share_offsets_serviceable(shared_broker.bootstrap)
    ok, results, out = franz_go_share.run(shared_broker.bootstrap, timeout=170)
    assert ok, f"{results}\n{out[-15000:]}"
    assert set(results.values()) == {"PASS"}, results
