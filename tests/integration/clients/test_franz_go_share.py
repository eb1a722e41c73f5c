"""franz-go's own share-group tests (pkg/kgo, fetched through the Go module proxy by
scripts/franz_go_share.py) against the broker under test: TestShareGroup, TestShareGroupETL,
TestShareGroupAckOnClose, TestShareGroupOffsetsAdmin (and whatever else in that release skips itself
unless ShareFetch and ShareAcknowledge v2 are advertised). A SKIP is a failure. Runs against minikafka and,
with --broker=kafka, against Apache Kafka 4.3.1."""
from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT))
from scripts import franz_go_share  # noqa: E402


@pytest.fixture(scope="module")
def franz_go_binary():
    # fetch + `go test -c` once per franz-go version (~2 min the first time, cached under ~/.cache/minikafka)
    return franz_go_share.prepare()


@pytest.mark.serial  # franz-go runs its tests in parallel, several clients each, with its own timeouts
@pytest.mark.timeout(420)
def test_franz_go_share_group_tests(shared_broker, franz_go_binary):
    binary, tests = franz_go_binary
    assert set(franz_go_share.KNOWN) <= set(tests), tests
    ok, results, out = franz_go_share.run(shared_broker.bootstrap, timeout=170)
    assert ok, f"{results}\n{out[-15000:]}"
    assert set(results.values()) == {"PASS"}, results
