"""The Dockerfile's steps without a Docker engine: minikafka installed as scripts/installed.py installs it
(sdist -> wheel -> fresh virtualenv, the image's build stage), then docker/entrypoint.sh with that venv first
on PATH and the image's environment; the broker must serve (Kafka, the admin listener, the Schema Registry)
and stop cleanly on SIGTERM."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import tomllib
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from minikafka.broker.config.core import BrokerConfig
from tests.conftest import ROOT, free_port
from tests.support.docker_image import image_env

pytestmark = pytest.mark.minikafka_only

PAYMENT = json.dumps({"type": "record", "name": "Payment", "namespace": "docker",
                      "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}]})


def test_dockerfile_mentions_the_steps_tested_here():
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    # the install is scripts/installed.py (sdist -> wheel -> fresh venv), the steps `make test` runs
    build_pin = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["test"] if d.startswith("build=="))
    assert re.search(rf"RUN pip install --no-cache-dir {re.escape(build_pin)} \\\n\s+&& python scripts/installed.py "
                     r"--venv /opt/minikafka/venv ", dockerfile), "the image must install as scripts/installed.py does"
    assert "COPY . ." in dockerfile  # the whole context: what the sdist carries is decided by the build alone
    assert re.search(r"apt-get install -y --no-install-recommends gcc libc6-dev", dockerfile)  # the C scanner
    assert "COPY --from=build /opt/minikafka/venv /opt/minikafka/venv" in dockerfile
    assert "ENV PATH=/opt/minikafka/venv/bin:$PATH" in dockerfile
    assert "ENTRYPOINT [\"minikafka-entrypoint\"]" in dockerfile
    assert "docker/entrypoint.sh /usr/local/bin/minikafka-entrypoint" in dockerfile
    assert "USER minikafka" in dockerfile and "EXPOSE 9092 9644 8081" in dockerfile
    assert re.search(r"^RUN useradd --system --uid \d+ .* minikafka$", dockerfile, re.M)  # non-root
    # the health check runs the script the entrypoint test below runs, on the ready endpoint
    assert "COPY docker/healthcheck.py /usr/local/bin/minikafka-healthcheck" in dockerfile
    assert re.search(r'^HEALTHCHECK .*\\\n\s+CMD \["python", "/usr/local/bin/minikafka-healthcheck"\]$', dockerfile, re.M)
    assert "MINIKAFKA_MINIKAFKA_METRICS_LISTENER=http://0.0.0.0:9644" in dockerfile
    # the Schema Registry is on in the image (off by default elsewhere); an empty value turns it off
    assert image_env()["MINIKAFKA_SCHEMA_REGISTRY_LISTENER"] == "http://0.0.0.0:8081"
    assert BrokerConfig.load(None, environ=image_env()).get("schema.registry.listener") == "http://0.0.0.0:8081"
    off = {**image_env(), "MINIKAFKA_SCHEMA_REGISTRY_LISTENER": ""}
    assert BrokerConfig.load(None, environ=off).get("schema.registry.listener") == ""
    assert dockerfile.index("USER minikafka") < dockerfile.index("ENTRYPOINT")
    assert "COPY config /opt/minikafka/config" in dockerfile and "/opt/minikafka/config/server.properties" in dockerfile
    # the build context leaves out local state that would leak into (or slow down) the image build
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".venv-installed", "dist", "build"} <= set(ignored)


def test_installed_package_runs_through_entrypoint(tmp_path: Path, installed_minikafka: Path):
    """The image's runtime: the installed venv's bin first on PATH, the entrypoint script, the image's env."""
    venv_bin = installed_minikafka.parent
    # with a compiler (as the Dockerfile's build stage has) the native record scanner is in the wheel
    scanner = subprocess.run([str(venv_bin / "python"), "-c", "import minikafka.protocol._recordscan as m; print(m.__file__)"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert scanner.returncode == 0, "record scanner not built: " + scanner.stderr
    port = free_port()
    metrics_port = free_port()
    registry_port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_") and k != "PYTHONPATH"}
    env.update({
        "PATH": f"{venv_bin}:{env['PATH']}",
        "MINIKAFKA_LOG_DIRS": str(data),
        "MINIKAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "MINIKAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "MINIKAFKA_MINIKAFKA_METRICS_LISTENER": f"http://0.0.0.0:{metrics_port}",
        "MINIKAFKA_SCHEMA_REGISTRY_LISTENER": f"http://0.0.0.0:{registry_port}",
    })
    assert image_env().keys() <= env.keys()  # every variable of the image, its ports free ones here

    def healthy() -> int:
        return subprocess.run(["python", str(ROOT / "docker" / "healthcheck.py")], env=env,
                              capture_output=True, timeout=20).returncode

    assert healthy() == 1  # nothing listens yet
    proc = subprocess.Popen(["sh", str(ROOT / "docker" / "entrypoint.sh"), "--config",
                             str(ROOT / "config" / "server.properties")],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "entrypoint broker did not listen"
                time.sleep(0.05)
        while healthy() != 0:  # the image's HEALTHCHECK turns healthy once recovery is done
            assert proc.poll() is None and time.monotonic() < deadline, "never healthy"
            time.sleep(0.1)
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        p.produce("docker-steps", b"hello")
        assert p.flush(15) == 0
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "x", "enable.auto.commit": False})
        c.assign([TopicPartition("docker-steps", 0, 0)])
        m = c.poll(10)
        assert m is not None and m.error() is None and m.value() == b"hello"
        c.close()
        assert (data / "docker-steps-0").is_dir()
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            assert 'minikafka_records_in_total{topic="docker-steps"} 1.0' in resp.read().decode()
        schema_registry_round_trip(f"127.0.0.1:{port}", f"http://127.0.0.1:{registry_port}")
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=20)[0].decode()
    assert proc.returncode == 0, out
    assert "shut down cleanly" in out
    where = subprocess.run([str(venv_bin / "python"), "-c", "import minikafka.broker; print(minikafka.broker.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert Path(where).resolve().is_relative_to(venv_bin.parent.resolve()), where  # not this source tree


def schema_registry_round_trip(bootstrap: str, registry: str) -> None:
    """The image's registry: GET /subjects, then confluent-kafka's Avro serde through produce and consume."""
    import urllib.request

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    def subjects() -> list[str]:
        with urllib.request.urlopen(f"{registry}/subjects", timeout=10) as resp:
            assert resp.status == 200
            return json.load(resp)

    assert subjects() == []
    client = SchemaRegistryClient({"url": registry})
    ctx = SerializationContext("docker-avro", MessageField.VALUE)
    payments = [{"id": f"p{i}", "cents": 100 * i} for i in range(5)]
    serialize = AvroSerializer(client, PAYMENT)
    p = Producer({"bootstrap.servers": bootstrap})
    for payment in payments:
        p.produce("docker-avro", serialize(payment, ctx))
    assert p.flush(15) == 0
    assert subjects() == ["docker-avro-value"]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "avro", "enable.auto.commit": False})
    c.assign([TopicPartition("docker-avro", 0, 0)])
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    got = []
    while len(got) < len(payments):
        m = c.poll(10)
        assert m is not None and m.error() is None, m and m.error()
        got.append(deserialize(m.value(), ctx))
    c.close()
    assert got == payments
