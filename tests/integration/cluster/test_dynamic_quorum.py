"""A dynamic metadata quorum (KIP-853, kraft.version 1): one controller formatted `--standalone`, two more
formatted `--no-initial-controllers` that find it through controller.quorum.bootstrap.servers and fetch
as observers, grown to three voters with Kafka's own `kafka-metadata-quorum add-controller`, a leader
kill after the growth (the other two elect a leader and keep serving), `remove-controller` shrinking it,
and Kafka's errors of AddRaftVoter / RemoveRaftVoter. minikafka only: Kafka's lab runs one combined node
with static voters, so the growth cannot be run against it (the tool and the Java Admin client are Kafka's)."""
from __future__ import annotations

import base64
import re
import subprocess
import time
import uuid

import pytest

from minikafka.testing import MiniKafka, free_port, minikafka_command
from minikafka.testing_cluster import FAST_FAILOVER
from minikafka.raft.config import new_cluster_id

pytestmark = [pytest.mark.minikafka_only]

HOST = "127.0.0.1"


def _config(n: int, port: int, controller: int, bootstrap: str) -> dict[str, str]:
    return {"node.id": str(n), "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "controller.quorum.bootstrap.servers": bootstrap, **FAST_FAILOVER}


def _format(config: dict[str, str], data_dir, *args: str) -> subprocess.CompletedProcess:
    overrides = [a for k, v in {**config, "log.dirs": str(data_dir)}.items() for a in ("--override", f"{k}={v}")]
    return subprocess.run([*minikafka_command(), "storage", "format", *overrides, *args], capture_output=True,
                          text=True, timeout=60)


def _props_file(path, config: dict[str, str], data_dir) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in {**config, "log.dirs": str(data_dir)}.items()))
    return str(path)


def _quorum(lab, controller_port: int, *args: str) -> subprocess.CompletedProcess:
    return lab.run_tool("kafka-metadata-quorum", ["--bootstrap-controller", f"{HOST}:{controller_port}", *args],
                        timeout=90)


def _status(lab, controller_port: int) -> dict[str, str]:
    res = _quorum(lab, controller_port, "describe", "--status")
    assert res.returncode == 0, res.stderr[-2000:]
    return dict(re.findall(r"^(\w+):\s+(.*)$", res.stdout, re.M))


def _voter_ids(status: dict[str, str]) -> list[int]:
    return sorted(int(i) for i in re.findall(r'"id": (\d+)', status["CurrentVoters"]))


def _active_controller(controller_port: int) -> int:
    from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
    from tests.support.helpers import RawClient
    with RawClient(f"{HOST}:{controller_port}") as client:
        resp = client.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2), 1,
                              DescribeClusterResponse)
    return resp.controller_id


def _wait(predicate, timeout: float = 30.0, what: str = ""):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
            if value:
                return value
        except (AssertionError, OSError, subprocess.SubprocessError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out: {what}")
        time.sleep(0.5)


def _directory_id(data_dir) -> str:
    return re.search(r"^directory.id=(\S+)$", (data_dir / "meta.properties").read_text(), re.M).group(1)


def _update_raft_voter_errors(controller_port: int, epoch: int, dirs) -> None:
    """UpdateRaftVoter as Kafka's leader refuses it: a stale epoch, a voter not in the set (or with
    another directory id), no endpoint on the controller listener."""
    from minikafka.protocol.messages import UpdateRaftVoterRequest as Req, UpdateRaftVoterResponse as Resp
    from tests.support.helpers import RawClient

    def req(epoch_: int, voter: int, directory: str, listener: str = "CONTROLLER") -> Req:
        return Req(cluster_id=None, current_leader_epoch=epoch_, voter_id=voter,
                   voter_directory_id=uuid.UUID(bytes=base64.urlsafe_b64decode(directory + "==")),
                   listeners=[Req.Listener(name=listener, host=HOST, port=1)],
                   k_raft_version_feature=Req.KRaftVersionFeature(min_supported_version=0, max_supported_version=1))
    with RawClient(f"{HOST}:{controller_port}") as client:
        cases = [(req(epoch - 1, 2, _directory_id(dirs[2])), 74),  # FENCED_LEADER_EPOCH
                 (req(epoch + 1, 2, _directory_id(dirs[2])), 75),  # UNKNOWN_LEADER_EPOCH
                 (req(epoch, 9, _directory_id(dirs[2])), 127),  # VOTER_NOT_FOUND
                 (req(epoch, 2, "AAAAAAAAAAAAAAAAAAAAAQ"), 127),  # another directory id: VOTER_NOT_FOUND
                 (req(epoch, 2, _directory_id(dirs[2]), "OTHER"), 42)]  # INVALID_REQUEST
        for request, error in cases:
            resp = client.request(request, 0, Resp)
            assert resp.error_code == error, (request, resp)
            assert resp.current_leader.leader_epoch == epoch and resp.current_leader.port > 0


@pytest.fixture()
def dynamic(tmp_path):
    ports = {n: free_port() for n in (1, 2, 3)}
    controllers = {n: free_port() for n in (1, 2, 3)}
    bootstrap = f"{HOST}:{controllers[1]}"
    cluster_id = new_cluster_id()
    configs = {n: _config(n, ports[n], controllers[n], bootstrap) for n in (1, 2, 3)}
    dirs = {n: tmp_path / f"node{n}" for n in (1, 2, 3)}
    res = _format(configs[1], dirs[1], "--cluster-id", cluster_id, "--standalone")
    assert res.returncode == 0, res.stderr
    for n in (2, 3):
        res = _format(configs[n], dirs[n], "--cluster-id", cluster_id, "--no-initial-controllers")
        assert res.returncode == 0, res.stderr
    nodes = {n: MiniKafka(config=configs[n], data_dir=dirs[n], port=ports[n], start=False) for n in (1, 2, 3)}
    try:
        for n in (1, 2, 3):
            nodes[n].start()
        yield {"nodes": nodes, "controllers": controllers, "configs": configs, "dirs": dirs, "ports": ports,
               "cluster_id": cluster_id, "tmp": tmp_path}
    finally:
        for node in nodes.values():
            node.close()


def test_storage_format_refuses_as_kafka(tmp_path):
    config = _config(1, free_port(), free_port(), f"{HOST}:1")
    res = _format(config, tmp_path / "d", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA")
    assert res.returncode == 1 and "you must specify one of the following: --standalone" in res.stderr
    res = _format(config, tmp_path / "d", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA", "--standalone",
                  "--no-initial-controllers")
    assert res.returncode == 1
    assert _format(config, tmp_path / "d", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA", "--standalone").returncode == 0
    assert (tmp_path / "d" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").exists()
    res = _format(config, tmp_path / "d", "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA", "--standalone")
    assert res.returncode == 1 and "is already formatted" in res.stderr


def test_grow_from_one_standalone_controller_to_three_then_shrink(dynamic):
    lab = pytest.importorskip("scripts.apache_kafka")
    c, dirs, configs, tmp = dynamic["controllers"], dynamic["dirs"], dynamic["configs"], dynamic["tmp"]
    status = _wait(lambda: _status(lab, c[1]), what="describe --status")
    assert _voter_ids(status) == [1] and int(status["LeaderId"]) == 1
    assert status["ClusterId"] == dynamic["cluster_id"]
    # the observers fetch the log: they show up as observers of the quorum
    _wait(lambda: {2, 3} <= {int(i) for i in re.findall(r'"id": (\d+)', _status(lab, c[1])["CurrentObservers"])},
          what="nodes 2 and 3 observe")
    # observers fetch with their directory id (Fetch v17): DescribeQuorum shows it
    observers = _status(lab, c[1])["CurrentObservers"]
    for n in (2, 3):
        assert f'{{"id": {n}, "directoryId": "{_directory_id(dirs[n])}"}}' in observers, observers
    # node 2 under another directory id is not the replica that fetches: it is lagging (REQUEST_TIMED_OUT)
    from minikafka.protocol.messages import AddRaftVoterRequest as Add, AddRaftVoterResponse as AddResp
    from tests.support.helpers import RawClient
    with RawClient(f"{HOST}:{c[1]}") as client:
        other_dir = uuid.uuid4()
        resp = client.request(Add(cluster_id=None, timeout_ms=10000, voter_id=2, voter_directory_id=other_dir,
                                  listeners=[Add.Listener(name="CONTROLLER", host=HOST, port=c[2])],
                                  ack_when_committed=True), 1, AddResp)
        shown = base64.urlsafe_b64encode(other_dir.bytes).decode().rstrip("=")
        assert (resp.error_code, resp.error_message) == (7, f"Aborted add voter operation for ReplicaKey(id=2, "
                                                            f"directoryId=Optional[{shown}]) since it is lagging behind")
        resp = client.request(Add(cluster_id=None, timeout_ms=10000, voter_id=2, voter_directory_id=other_dir,
                                  listeners=[Add.Listener(name="OTHER", host=HOST, port=c[2])],
                                  ack_when_committed=True), 1, AddResp)
        assert resp.error_code == 42 and "didn't include the endpoint" in resp.error_message
    # kraft.version 1 is finalized (ApiVersions of a broker and a controller listener)
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    for address in (f"{HOST}:{dynamic['ports'][2]}", f"{HOST}:{c[1]}"):
        with RawClient(address) as client:
            resp = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4,
                                  ApiVersionsResponse)
        assert ("kraft.version", 0, 1) in [(f.name, f.min_version, f.max_version) for f in resp.supported_features]
        assert ("kraft.version", 1) in [(f.name, f.max_version_level) for f in resp.finalized_features]
    # a voter that already is one: DUPLICATE_VOTER (Kafka's message)
    res = _quorum(lab, c[1], "--command-config", _props_file(tmp / "n1.properties", configs[1], dirs[1]),
                  "add-controller")
    assert res.returncode != 0 and "DuplicateVoterException" in res.stderr, res.stderr[-2000:]
    for n in (2, 3):
        props = _props_file(tmp / f"n{n}.properties", configs[n], dirs[n])
        res = _quorum(lab, c[1], "--command-config", props, "add-controller")
        assert res.returncode == 0, res.stderr[-3000:]
        assert (f"Added controller {n} with directory id {_directory_id(dirs[n])} and endpoints: "
                f"CONTROLLER://{HOST}:{c[n]}") in res.stdout
    status = _status(lab, c[2])
    assert _voter_ids(status) == [1, 2, 3]
    res = _quorum(lab, c[1], "describe", "--replication")
    assert res.returncode == 0, res.stderr[-2000:]
    rows = [line.split() for line in res.stdout.splitlines()[1:] if line.strip()]
    assert sorted((int(r[0]), r[-1]) for r in rows) == [(1, "Leader"), (2, "Follower"), (3, "Follower")]

    # kill -9 the leader: nodes 2 and 3 (a majority of the three voters) elect one of them and serve
    dynamic["nodes"][1].kill()
    # the election first (raw DescribeCluster): the Java admin of the tool keeps asking the controller it was
    # told of (the killed one) until its metadata is refreshed, which a tool started in that second may never see
    _wait(lambda: _active_controller(c[2]) in (2, 3), timeout=30, what="an elected controller among 2 and 3")
    status = _wait(lambda: (s := _status(lab, c[2])) and int(s["LeaderId"]) in (2, 3) and s, timeout=60,
                   what="a new leader among 2 and 3")
    leader = int(status["LeaderId"])
    res = lab.run_tool("kafka-topics", ["--bootstrap-server", f"{HOST}:{dynamic['ports'][leader]}", "--create",
                                        "--topic", "after-failover", "--partitions", "1",
                                        "--replication-factor", "2"], timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]

    # node 1 restarts from its data: the voter set is in its log, it follows the new leader as a voter
    dynamic["nodes"][1].start()
    _wait(lambda: (s := _status(lab, c[leader])) and int(s["LeaderId"]) == leader and _voter_ids(s) == [1, 2, 3]
          and int(s["MaxFollowerLag"]) == 0, timeout=60, what="node 1 back as a caught-up voter")

    # node 3 restarts on another controller port: it tells the leader (UpdateRaftVoter), whose voter set
    # then names the new endpoint
    other = 2 if leader == 3 else 3
    if other != leader:
        moved = free_port()
        node = dynamic["nodes"][other]
        node.stop()
        node.config["listeners"] = f"PLAINTEXT://{HOST}:{dynamic['ports'][other]},CONTROLLER://{HOST}:{moved}"
        node.start()
        _wait(lambda: f'{{"id": {other}, "directoryId": "{_directory_id(dirs[other])}", "endpoints": '
                      f'["CONTROLLER://{HOST}:{moved}"]}}' in _status(lab, c[leader])["CurrentVoters"],
              timeout=60, what="the voter set names the moved endpoint")
    _update_raft_voter_errors(c[leader], int(_status(lab, c[leader])["LeaderEpoch"]), dirs)

    # remove-controller node 1 (its directory id): the quorum shrinks to 2 and 3
    res = _quorum(lab, c[leader], "remove-controller", "--controller-id", "1",
                  "--controller-directory-id", _directory_id(dirs[1]))
    assert res.returncode == 0, res.stderr[-2000:]
    assert _voter_ids(_status(lab, c[leader])) == [2, 3]
    # removing it again: VOTER_NOT_FOUND
    res = _quorum(lab, c[leader], "remove-controller", "--controller-id", "1",
                  "--controller-directory-id", _directory_id(dirs[1]))
    assert res.returncode != 0 and "VoterNotFoundException" in res.stderr, res.stderr[-2000:]
    # node 1 stays an observer of the quorum (it still fetches the log)
    _wait(lambda: 1 in {int(i) for i in re.findall(r'"id": (\d+)', _status(lab, c[leader])["CurrentObservers"])},
          what="node 1 observes")


def test_three_initial_controllers_formatted_with_directory_ids(tmp_path):
    """`storage format --initial-controllers id@host:port:directoryId,...` on three nodes (Kafka's way to
    start a dynamic quorum with several voters): every node starts as a voter with the directory id it
    was formatted with, they elect a leader, a kill -9 of the leader elects another, and Kafka's
    `remove-controller` / `add-controller` work on the result."""
    lab = pytest.importorskip("scripts.apache_kafka")
    ports = {n: free_port() for n in (1, 2, 3)}
    controllers = {n: free_port() for n in (1, 2, 3)}
    directories = {n: new_cluster_id() for n in (1, 2, 3)}  # never starts with "-", as Kafka's ids
    cluster_id = new_cluster_id()
    bootstrap = ",".join(f"{HOST}:{controllers[n]}" for n in (1, 2, 3))
    initial = ",".join(f"{n}@{HOST}:{controllers[n]}:{directories[n]}" for n in (1, 2, 3))
    configs = {n: _config(n, ports[n], controllers[n], bootstrap) for n in (1, 2, 3)}
    dirs = {n: tmp_path / f"node{n}" for n in (1, 2, 3)}
    for n in (1, 2, 3):
        res = _format(configs[n], dirs[n], "--cluster-id", cluster_id, "--initial-controllers", initial)
        assert res.returncode == 0, res.stderr
        assert _directory_id(dirs[n]) == directories[n]  # the local voter's directory id is the one given
    nodes = {n: MiniKafka(config=configs[n], data_dir=dirs[n], port=ports[n], start=False) for n in (1, 2, 3)}
    try:
        for node in nodes.values():
            node.start()
        status = _wait(lambda: (s := _status(lab, controllers[1])) and int(s["LeaderId"]) > 0 and s,
                       what="a leader among the three")
        assert _voter_ids(status) == [1, 2, 3]
        for n in (1, 2, 3):
            assert f'{{"id": {n}, "directoryId": "{directories[n]}"' in status["CurrentVoters"], status
        leader = int(status["LeaderId"])
        nodes[leader].kill()
        rest = [n for n in (1, 2, 3) if n != leader]
        _wait(lambda: _active_controller(controllers[rest[0]]) in rest, timeout=30,
              what="an elected controller among the other two")
        status = _wait(lambda: (s := _status(lab, controllers[rest[0]])) and int(s["LeaderId"]) in rest and s,
                       timeout=60, what="a new leader among the other two")
        new_leader = int(status["LeaderId"])
        res = _quorum(lab, controllers[new_leader], "remove-controller", "--controller-id", str(leader),
                      "--controller-directory-id", directories[leader])
        assert res.returncode == 0, res.stderr[-2000:]
        assert _voter_ids(_status(lab, controllers[new_leader])) == rest
        nodes[leader].start()  # back as an observer: it fetches, and add-controller makes it a voter again
        props = _props_file(tmp_path / "back.properties", configs[leader], dirs[leader])
        _wait(lambda: leader in {int(i) for i in re.findall(r'"id": (\d+)', _status(
            lab, controllers[new_leader])["CurrentObservers"])}, timeout=60, what="the old leader observes")
        res = _quorum(lab, controllers[new_leader], "--command-config", props, "add-controller")
        assert res.returncode == 0, res.stderr[-3000:]
        assert _voter_ids(_status(lab, controllers[new_leader])) == [1, 2, 3]
    finally:
        for node in nodes.values():
            node.close()
