"""docker/compose-cluster.yml without a Docker engine: each service's environment (anchors merged as
compose merges them) runs through docker/entrypoint.sh with the image's CMD, every container address
(`nodeN:port`, `0.0.0.0:port`, the published `localhost:port`) mapped to a loopback port of its own. The
three processes must form one cluster that clients reach on the EXTERNAL listeners, replicate over
INTERNAL and keep serving when a node is killed; the image's Schema Registry listener on each node serves one
registry (Avro serialized with one node's registry, deserialized with another's)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import ROOT, free_port
from tests.support.docker_image import image_env
from tests.support.helpers import wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]


def loopback_envs(compose: dict) -> tuple[dict[str, dict[str, str]], dict[str, int]]:
    """Per service: its environment (over the Dockerfile's ENV, as in a container) with container addresses on
    loopback; and its published EXTERNAL port (the host side of `ports`) as mapped."""
    services = compose["services"]
    ports: dict[tuple[str, int], int] = {}

    def mapped(service: str, port: int) -> int:
        return ports.setdefault((service, port), free_port())

    published = {svc: {int(h): int(c) for h, c in (p.split(":") for p in spec.get("ports", []))}
                 for svc, spec in services.items()}
    envs: dict[str, dict[str, str]] = {}
    for svc, spec in services.items():
        env = {}
        for key, value in {**image_env(), **spec["environment"]}.items():  # the image's ENV, then compose's
            def address(m: re.Match) -> str:
                host, port = m.group(1), int(m.group(2))
                if host == "localhost":  # a published port: the container port behind it
                    return f"127.0.0.1:{mapped(svc, published[svc][port])}"
                return f"127.0.0.1:{mapped(svc if host == '0.0.0.0' else host, port)}"
            env[key] = re.sub(r"\b(node\d+|localhost|0\.0\.0\.0):(\d+)", address, str(value))
        envs[svc] = env
    external = {svc: mapped(svc, next(iter(published[svc].values()))) for svc in services}
    return envs, external


def test_the_compose_cluster_serves_and_survives_a_node_loss(tmp_path: Path, installed_minikafka: Path):
    """As the image runs it: the wheel's virtualenv first on PATH (scripts/installed.py), the entrypoint."""
    compose = yaml.safe_load((ROOT / "docker" / "compose-cluster.yml").read_text())
    assert sorted(compose["services"]) == ["node1", "node2", "node3"]
    envs, external = loopback_envs(compose)
    bindir = installed_minikafka.parent
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, Path] = {}
    base = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_") and k != "PYTHONPATH"}
    try:
        for svc, env in envs.items():
            logs[svc] = tmp_path / f"{svc}.log"
            with open(logs[svc], "wb") as out:
                procs[svc] = subprocess.Popen(
                    ["sh", str(ROOT / "docker" / "entrypoint.sh"), "--config", str(ROOT / "config" / "server.properties")],
                    env={**base, **env, "PATH": f"{bindir}:{base['PATH']}",
                         "MINIKAFKA_LOG_DIRS": str(tmp_path / svc / "data")},
                    cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in external.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def three_brokers() -> bool:
            try:
                return len(admin.list_topics(timeout=2).brokers) == 3
            except Exception:
                return False
        wait_until(three_brokers, timeout=40, what="three brokers in Metadata")
        md = admin.list_topics(timeout=5)
        assert sorted(b.port for b in md.brokers.values()) == sorted(external.values())  # EXTERNAL advertised
        # the image's Schema Registry listener, in every node: one registry
        schema_registry_round_trip(bootstrap, [env["MINIKAFKA_SCHEMA_REGISTRY_LISTENER"] for env in envs.values()])
        admin.create_topics([NewTopic("compose", 1, 3)])["compose"].result(30)  # default min.isr 2 from env
        wait_until(lambda: admin.list_topics("compose", timeout=5).topics["compose"].partitions[0].leader > 0,
                   what="a leader")
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(50):
            p.produce("compose", f"v{i}".encode())
        assert p.flush(30) == 0
        leader = admin.list_topics("compose", timeout=5).topics["compose"].partitions[0].leader
        procs[f"node{leader}"].kill()
        for i in range(50, 100):
            p.produce("compose", f"v{i}".encode())
        assert p.flush(60) == 0
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compose", "enable.auto.commit": False})
        c.assign([TopicPartition("compose", 0, 0)])
        got: list[str] = []
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            got += [m.value().decode() for m in c.consume(100, 0.5) if m.error() is None]
        c.close()
        assert got == [f"v{i}" for i in range(100)]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for svc, proc in procs.items():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                pytest.fail(f"{svc} did not stop on SIGTERM:\n{logs[svc].read_text()[-3000:]}")


PAYMENT = json.dumps({"type": "record", "name": "Payment", "namespace": "compose",
                      "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}]})


def schema_registry_round_trip(bootstrap: str, registries: list[str]) -> None:
    """Records serialized with the first node's registry (its schema registered there, or forwarded to the
    `_schemas` leader), the subject then listed by every node with one id, and the records deserialized with
    the last node's registry."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    def get(url: str, path: str) -> object:
        try:
            with urllib.request.urlopen(url + path, timeout=5) as resp:
                return json.load(resp)
        except OSError:  # not up yet (refused, or 5xx while it catches up)
            return None

    assert len(set(registries)) == 3
    wait_until(lambda: all(get(url, "/subjects") == [] for url in registries), timeout=40,
               what="every node's registry answering")
    ctx = SerializationContext("compose-avro", MessageField.VALUE)
    serialize = AvroSerializer(SchemaRegistryClient({"url": registries[0]}), PAYMENT)
    payments = [{"id": f"p{i}", "cents": 100 * i} for i in range(10)]
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for payment in payments:
        p.produce("compose-avro", serialize(payment, ctx))
    assert p.flush(30) == 0
    wait_until(lambda: all(get(url, "/subjects") == ["compose-avro-value"] for url in registries), timeout=20,
               what="the subject on every node")
    ids = {get(url, "/subjects/compose-avro-value/versions/latest")["id"] for url in registries}
    assert len(ids) == 1, ids
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registries[-1]}))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compose-avro", "enable.auto.commit": False})
    c.assign([TopicPartition("compose-avro", 0, 0)])
    got: list[dict] = []
    deadline = time.monotonic() + 30
    while len(got) < len(payments) and time.monotonic() < deadline:
        got += [deserialize(m.value(), ctx) for m in c.consume(100, 0.5) if m.error() is None]
    c.close()
    assert got == payments
