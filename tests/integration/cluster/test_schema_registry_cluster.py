"""The built-in Schema Registry on a three-node cluster, each node with its own registry listener: one registry
served by all (same ids, versions, configs through every node), writes on a node that does not lead `_schemas`
forwarded to the leader (and read back at once on that node), a kill -9 of the `_schemas` leader after which
every survivor still serves everything and new registrations get new ids (never one used before), confluent-kafka's
SchemaRegistryClient and Avro serde against a survivor, and the killed node serving the same registry once
restarted."""
from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from minikafka.testing import free_port
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, metadata_raw, wait_until

sr = pytest.importorskip("confluent_kafka.schema_registry")
pytest.importorskip("confluent_kafka.schema_registry.avro")

from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

CONFIG = {"replica.lag.time.max.ms": "3000", "broker.session.timeout.ms": "2000",
          "broker.heartbeat.interval.ms": "400"}
CT = "application/vnd.schemaregistry.v1+json"


def record(name: str, *fields: str) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "cluster",
                       "fields": [{"name": f, "type": "int", "default": 0} for f in fields]})


def call(url: str, method: str, path: str, body: object = None) -> tuple[int, object]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": CT})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def answers(url: str, path: str) -> object:
    """GET `path`'s body when it answers 200, else None (also while the node is unreachable)."""
    try:
        status, body = call(url, "GET", path)
    except OSError:
        return None
    return body if status == 200 else None


def schemas_leader(cluster: Cluster, among: list[int]) -> int:
    """The `_schemas` partition 0 leader as the first answering node of `among` says (-1: none)."""
    for n in among:
        try:
            with RawClient(cluster.nodes[n].bootstrap, timeout=3.0) as c:
                md = metadata_raw(c, ["_schemas"])
        except OSError:
            continue
        topic = md.topics[0]
        if topic.error_code == 0 and topic.partitions:
            return topic.partitions[0].leader_id
    return -1


def view(url: str) -> dict | None:
    """What a node serves: every subject's versions with their ids and schemas, the global and subjects'
    configs; None while it cannot answer all of it."""
    subjects = answers(url, "/subjects")
    glob = answers(url, "/config")
    if subjects is None or glob is None:
        return None
    out: dict = {"config": glob, "subjects": {}}
    for s in subjects:
        versions = answers(url, f"/subjects/{s}/versions")
        if versions is None:
            return None
        entries = [answers(url, f"/subjects/{s}/versions/{v}") for v in versions]
        config = answers(url, f"/config/{s}")  # None when the subject has none
        out["subjects"][s] = ([(e["version"], e["id"], e["schema"]) if e else None for e in entries], config)
    return out


def test_schema_registry_on_three_nodes_fails_over(tmp_path):
    cluster = Cluster(tmp_path, config=CONFIG)
    urls = {}
    for n, node in cluster.nodes.items():
        urls[n] = node.config["schema.registry.listener"] = f"http://127.0.0.1:{free_port()}"
        node.schema_registry_url = urls[n]
    with running(cluster):
        for n in cluster.ids:
            wait_until(lambda: answers(urls[n], "/subjects") == [], 60, 0.2, f"node {n}'s registry loaded")
        leader = wait_until(lambda: max(schemas_leader(cluster, cluster.ids), 0), 30, 0.2, "a _schemas leader")
        a = leader
        b, c = [n for n in cluster.ids if n != leader]

        # through the leader A; B and C serve the same
        status, first = call(urls[a], "POST", "/subjects/orders-value/versions", {"schema": record("Order", "x")})
        assert status == 200, first
        status, second = call(urls[a], "POST", "/subjects/orders-value/versions", {"schema": record("Order", "x", "y")})
        assert status == 200, second
        assert call(urls[a], "PUT", "/config/orders-value", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
        expected = view(urls[a])
        assert expected["subjects"]["orders-value"][1] == {"compatibilityLevel": "FULL"}
        for n in (b, c):
            wait_until(lambda: view(urls[n]) == expected, 20, 0.1, f"node {n} serves what node {a} wrote")

        # through B, which does not lead: forwarded, and read back on B at once (read-your-writes)
        status, forwarded = call(urls[b], "POST", "/subjects/users-value/versions", {"schema": record("User", "a")})
        assert status == 200, forwarded
        assert forwarded["id"] not in (first["id"], second["id"])
        status, body = call(urls[b], "GET", "/subjects/users-value/versions/latest")
        assert status == 200 and body["id"] == forwarded["id"] and body["version"] == 1
        assert call(urls[c], "PUT", "/config", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
        assert call(urls[c], "GET", "/config") == (200, {"compatibilityLevel": "NONE"})
        # an error from the leader comes back as it is (FULL: a new field without a default is incompatible)
        bad = json.dumps({"type": "record", "name": "Order", "namespace": "cluster",
                          "fields": [{"name": "x", "type": "int", "default": 0}, {"name": "z", "type": "int"}]})
        status, body = call(urls[c], "POST", "/subjects/orders-value/versions", {"schema": bad})
        assert status == 409 and body["error_code"] == 409, body
        wait_until(lambda: answers(urls[b], "/config") == {"compatibilityLevel": "NONE"}, 20, 0.1, "B sees C's write")
        before = view(urls[b])
        used_ids = {v[1] for versions, _ in before["subjects"].values() for v in versions}
        for n in cluster.ids:
            wait_until(lambda: view(urls[n]) == before, 20, 0.1, f"node {n} serves every write")

        # kill -9 the _schemas leader: the survivors serve all of it and go on writing, ids never reused
        cluster.kill(leader)
        survivors = [b, c]
        wait_until(lambda: schemas_leader(cluster, survivors) in survivors, 30, 0.2, "a new _schemas leader")
        for n in survivors:
            wait_until(lambda: view(urls[n]) == before, 20, 0.1, f"survivor {n} serves the registry")
        new_ids = set()
        for i, n in enumerate(survivors + survivors):
            status, body = call(urls[n], "POST", f"/subjects/after-{i}-value/versions",
                                {"schema": record(f"After{i}", "q")})
            assert status == 200, body
            new_ids.add(body["id"])
        assert len(new_ids) == 4 and not new_ids & used_ids and min(new_ids) > max(used_ids)

        client = SchemaRegistryClient({"url": urls[c]})
        ctx = SerializationContext("payments", MessageField.VALUE)
        serializer = AvroSerializer(client, record("Payment", "amount"))
        data = serializer({"amount": 42}, ctx)
        assert AvroDeserializer(SchemaRegistryClient({"url": urls[b]}))(data, ctx) == {"amount": 42}
        payment = client.get_latest_version("payments-value")
        assert payment.schema_id not in used_ids | new_ids
        assert client.get_compatibility() == "NONE"
        assert sorted(client.get_subjects()) == sorted([*before["subjects"], *(f"after-{i}-value" for i in range(4)),
                                                        "payments-value"])

        # the killed node comes back and serves the same registry
        final = wait_until(lambda: (v := view(urls[b])) == view(urls[c]) and v, 20, 0.1, "the survivors agree")
        cluster.restart(leader)
        wait_until(lambda: view(urls[leader]) == final, 60, 0.2, f"restarted node {leader} serves the registry")
        status, body = call(urls[leader], "POST", "/subjects/back-value/versions", {"schema": record("Back", "r")})
        assert status == 200 and body["id"] not in used_ids | new_ids | {payment.schema_id}, body
