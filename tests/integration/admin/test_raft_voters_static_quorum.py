"""AddRaftVoter (80) / RemoveRaftVoter (81) on a broker listener of a node whose quorum has static voters
(kraft.version 0): Kafka 4.3.1's single combined node (and minikafka's single node) refuse a well-formed
change with UNSUPPORTED_VERSION and Kafka's message, and a request naming no valid voter (no directory id)
with INVALID_REQUEST; `kafka-metadata-quorum add-controller` reports the same. Black-box (also runs with
--broker=kafka). The dynamic quorum (kraft.version 1) is tests/integration/cluster/test_dynamic_quorum.py."""
from __future__ import annotations

import sys
import uuid

import pytest

from minikafka.protocol.messages import (AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest,
                                         RemoveRaftVoterResponse)
from minikafka.testing import free_port
from tests.conftest import ROOT
from tests.support.helpers import RawClient, wait_broker_connections_closed

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

UNSUPPORTED_VERSION, INVALID_REQUEST = 35, 42


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


def _add(voter_id: int, directory: uuid.UUID) -> AddRaftVoterRequest:
    L = AddRaftVoterRequest.Listener
    return AddRaftVoterRequest(cluster_id=None, timeout_ms=30000, voter_id=voter_id, voter_directory_id=directory,
                               listeners=[L(name="CONTROLLER", host="127.0.0.1", port=free_port())],
                               ack_when_committed=True)


def test_add_and_remove_raft_voter_need_kraft_version_1(shared_broker):
    with RawClient(shared_broker.bootstrap) as c:
        for version in (0, 1):
            r = c.request(_add(1999, uuid.uuid4()), version, AddRaftVoterResponse)
            assert (r.error_code, r.error_message) == (
                UNSUPPORTED_VERSION, "Cluster doesn't support adding voter because the kraft.version feature is 0")
        r = c.request(_add(1999, uuid.UUID(int=0)), 1, AddRaftVoterResponse)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "Add voter request didn't include a valid voter")
        r = c.request(RemoveRaftVoterRequest(cluster_id=None, voter_id=1999, voter_directory_id=uuid.uuid4()), 0,
                      RemoveRaftVoterResponse)
        assert (r.error_code, r.error_message) == (
            UNSUPPORTED_VERSION, "Cluster doesn't support removing voter because the kraft.version feature is 0")
        r = c.request(RemoveRaftVoterRequest(cluster_id=None, voter_id=1999, voter_directory_id=uuid.UUID(int=0)), 0,
                      RemoveRaftVoterResponse)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST,
                                                   "Remove voter request didn't include a valid voter")


def test_kafka_metadata_quorum_add_controller_is_refused(shared_broker, tmp_path):
    lab.fetch()
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "meta.properties").write_text(
        "version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=1999\ndirectory.id=7HyVEqVWT9eWSzw5TdD0tA\n")
    props = tmp_path / "controller.properties"
    props.write_text(f"node.id=1999\nprocess.roles=controller\ncontroller.listener.names=CONTROLLER\n"
                     f"listeners=CONTROLLER://127.0.0.1:{free_port()}\nlog.dirs={tmp_path / 'meta'}\n")
    res = lab.run_tool("kafka-metadata-quorum", ["--bootstrap-server", shared_broker.bootstrap, "--command-config",
                                                 str(props), "add-controller"], timeout=90)
    assert res.returncode != 0
    assert ("UnsupportedVersionException: Cluster doesn't support adding voter because the kraft.version feature "
            "is 0") in res.stderr, res.stderr[-2000:]
