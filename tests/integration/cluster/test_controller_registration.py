"""ControllerRegistration (API 70, KIP-919) in a three-node cluster, seen as a client and Kafka's tools see it:
every controller registers its controller listener with the active controller once caught up; DescribeCluster
on a controller listener (`kafka-cluster list-endpoints --bootstrap-controller`, the Java Admin with
bootstrap.controllers) lists the registrations; `kafka-metadata-quorum` and `kafka-features` work against the
controller listener; the error codes of a raw request (NOT_CONTROLLER from a follower, UNKNOWN_SERVER_ERROR for
an unknown security protocol) are Kafka's; UpdateFeatures refuses a level a registered controller does not
support; the registrations survive a controller failover; a controller restarted on another port registers
again and its new endpoint shows up. (Kafka 4.3.1's answers to the same raw requests on its single combined
node were checked by hand: the same codes and messages, error_message "" on success.)"""
from __future__ import annotations

import re
import sys
import uuid

import pytest
from kafka.protocol.admin import (DescribeClusterRequest, DescribeClusterResponse, UpdateFeaturesRequest,
                                  UpdateFeaturesResponse)

from minikafka.protocol.messages import ControllerRegistrationRequest as Reg
from minikafka.protocol.messages import ControllerRegistrationResponse as RegResp
from tests.conftest import ROOT, free_port
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, wait_until

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

HOST = "127.0.0.1"
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
UNKNOWN_SERVER_ERROR_MESSAGE = "The server experienced an unexpected error when processing the request."
OWN_FEATURES = [("metadata.version", 7, 30), ("group.version", 0, 1), ("transaction.version", 0, 2),
                ("share.version", 0, 1), ("streams.version", 0, 1), ("kraft.version", 0, 1)]


def controllers(port: int) -> tuple[int, dict[int, tuple[str, int]]]:
    """(controller id, {controller: (host, port)}) as DescribeCluster on a controller listener answers."""
    try:
        with RawClient(f"{HOST}:{port}", timeout=3) as c:
            resp = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2,
                                                    include_fenced_brokers=False), 2, DescribeClusterResponse)
    except OSError:
        return -1, {}
    assert resp.error_code == 0, resp
    return resp.controller_id, {b.broker_id: (b.host, b.port) for b in resp.brokers}


def register(port: int, controller_id: int, *, protocol: int = 0, features=OWN_FEATURES,
             endpoint_port: int = 1) -> tuple[int, str | None]:
    with RawClient(f"{HOST}:{port}") as c:
        resp = c.request(Reg(controller_id=controller_id, incarnation_id=uuid.uuid4(), zk_migration_ready=False,
                             listeners=[Reg.Listener(name="CONTROLLER", host=HOST, port=endpoint_port,
                                                     security_protocol=protocol)],
                             features=[Reg.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                                       for n, lo, hi in features]), 0, RegResp)
    return resp.error_code, resp.error_message


def validate_feature(bootstrap: str, feature: str, level: int) -> tuple[int, str | None]:
    U = UpdateFeaturesRequest.FeatureUpdateKey
    with RawClient(bootstrap) as c:
        resp = c.request(UpdateFeaturesRequest(timeout_ms=10000, validate_only=True, feature_updates=[
            U(feature=feature, max_version_level=level, upgrade_type=1)]), 1, UpdateFeaturesResponse)
    return resp.error_code, resp.error_message


def expected(c: Cluster) -> dict[int, tuple[str, int]]:
    return {n: (HOST, c.controller_ports[n]) for n in c.voters}


def test_controllers_register_and_kafkas_tools_list_them(tmp_path):
    lab.fetch()
    with running(Cluster(tmp_path, size=3)) as c:
        leader, _epoch = c.agreed_leader(c.voters, timeout=20)
        follower = next(n for n in c.voters if n != leader)
        for n in c.voters:  # every node's image holds every registration
            seen: list = []
            try:
                wait_until(lambda n=n: seen.append(controllers(c.controller_ports[n])) or seen[-1] == (leader, expected(c)),
                           timeout=30, what=f"node {n} listing the three registered controllers")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: {seen[-1]} instead of {(leader, expected(c))}") from None

        # Kafka's tools on the controller listener
        res = lab.run_tool("kafka-cluster", ["list-endpoints", "--bootstrap-controller",
                                             f"{HOST}:{c.controller_ports[follower]}"], timeout=90)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        rows = {int(m[0]): (m[1], int(m[2])) for m in
                re.findall(r"^(\d+)\s+(\S+)\s+(\d+)\s+null\s+controller\s*$", res.stdout, re.M)}
        assert rows == expected(c), res.stdout
        res = lab.run_tool("kafka-metadata-quorum", ["--bootstrap-controller", f"{HOST}:{c.controller_ports[follower]}",
                                                     "describe", "--replication"], timeout=90)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        statuses = dict(re.findall(r"^(\d+)\s.*\s(Leader|Follower|Observer)\s*$", res.stdout, re.M))
        assert statuses == {str(n): "Leader" if n == leader else "Follower" for n in c.voters}, res.stdout
        res = lab.run_tool("kafka-features", ["--bootstrap-controller", f"{HOST}:{c.controller_ports[leader]}",
                                              "describe"], timeout=90)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        assert re.search(r"Feature: group.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 1\s+"
                         r"FinalizedVersionLevel: 1", res.stdout), res.stdout

        # raw requests: Kafka's codes and messages
        assert register(c.controller_ports[follower], 9) == (41, NOT_CONTROLLER_MESSAGE)
        assert register(c.controller_ports[leader], 9, protocol=99) == (-1, UNKNOWN_SERVER_ERROR_MESSAGE)
        assert controllers(c.controller_ports[leader])[1] == expected(c)  # neither was registered

        # a registered controller without group.version: UpdateFeatures may not finalize it (Kafka's message)
        assert register(c.controller_ports[leader], 9, features=[("metadata.version", 7, 30)]) == (0, "")
        broker = c.nodes[follower].bootstrap
        wait_until(lambda: 9 in controllers(c.controller_ports[follower])[1], timeout=20,
                   what="controller 9's registration on the follower")
        assert controllers(c.controller_ports[follower])[1][9] == (HOST, 1)
        assert validate_feature(broker, "group.version", 1) == (95, (
            "The update failed for all features since the following feature had an error: Invalid update version 1 "
            "for feature group.version. Controller 9 does not support this feature."))
        assert validate_feature(broker, "metadata.version", 30)[0] == 0
        assert register(c.controller_ports[leader], 9, features=[("metadata.version", 7, 20)]) == (0, "")
        wait_until(lambda: validate_feature(broker, "metadata.version", 30)[1] == (
            "The update failed for all features since the following feature had an error: Invalid update version "
            "30 for feature metadata.version. Controller 9 only supports versions 7-20"), timeout=20,
            what="controller 9's second registration applied")
        assert register(c.controller_ports[leader], 9, endpoint_port=2) == (0, "")  # supports all again
        wait_until(lambda: validate_feature(broker, "group.version", 1)[0] == 0, timeout=20,
                   what="controller 9's third registration applied")
        assert controllers(c.controller_ports[follower])[1][9] == (HOST, 2)


def test_registrations_survive_a_failover_and_follow_a_new_port(tmp_path):
    with running(Cluster(tmp_path, size=3)) as c:
        leader, epoch = c.agreed_leader(c.voters, timeout=20)
        wait_until(lambda: controllers(c.controller_ports[leader]) == (leader, expected(c)), timeout=30,
                   what="the three controllers registered")

        # the active controller dies: the new one still lists all three (the dead one's registration stays)
        c.kill(leader)
        rest = [n for n in c.voters if n != leader]
        new_leader, _ = c.agreed_leader(rest, timeout=20, newer_than=epoch)
        assert controllers(c.controller_ports[new_leader]) == (new_leader, expected(c))
        c.restart(leader)  # it registers again, with a new incarnation, at the new active controller
        wait_until(lambda: re.search(rf"controller {leader} registered \(incarnation",
                                     c.nodes[new_leader].log_path.read_text()), timeout=30,
                   what=f"controller {leader} registering again at controller {new_leader}")
        assert controllers(c.controller_ports[leader])[1] == expected(c)

        # a follower restarted with another controller port registers its new endpoint
        moved = next(n for n in rest if n != new_leader)
        c.kill(moved)
        node = c.nodes[moved]
        old_port, new_port = c.controller_ports[moved], free_port()
        node.config["listeners"] = node.config["listeners"].replace(f"CONTROLLER://{HOST}:{old_port}",
                                                                    f"CONTROLLER://{HOST}:{new_port}")
        node.config["controller.quorum.voters"] = node.config["controller.quorum.voters"].replace(
            f"{moved}@{HOST}:{old_port}", f"{moved}@{HOST}:{new_port}")
        c.restart(moved)
        c.controller_ports[moved] = new_port
        wait_until(lambda: controllers(c.controller_ports[new_leader])[1].get(moved) == (HOST, new_port), timeout=30,
                   what=f"controller {moved}'s new port registered")
        wait_until(lambda: controllers(new_port) == (new_leader, expected(c)), timeout=30,
                   what=f"controller {moved} itself listing the new registrations")


def test_controller_only_nodes_register_and_a_broker_only_node_does_not(tmp_path):
    with running(Cluster(tmp_path, size=3, broker_only=1, controller_only=True), timeout=40) as c:
        leader, _epoch = c.agreed_leader(c.voters, timeout=20)
        for n in c.voters:
            wait_until(lambda n=n: controllers(c.controller_ports[n]) == (leader, expected(c)), timeout=30,
                       what=f"controller-only node {n} listing the three controllers (not broker 4)")
