"""pytest plugin (entry point `pytest11`, loaded once minikafka is installed): Kafka brokers as fixtures.

    def test_orders(minikafka):                       # one broker per session (per xdist worker)
        minikafka.create_topic("orders", partitions=3)
        Producer({"bootstrap.servers": minikafka.bootstrap_servers}) ...

    def test_crash(minikafka_factory):                # extra brokers, stopped when the test ends
        kafka = minikafka_factory(config={"log.retention.ms": "1000"})
        kafka.kill(); kafka.start()

    def test_failover(minikafka_cluster):             # a three-node cluster of its own for this test
        minikafka_cluster.create_topic("orders", replication_factor=3)
        minikafka_cluster.kill(minikafka_cluster.leader_of("orders", 0))

Broker config for every broker started here: `--minikafka-config KEY=VALUE` (repeatable) over the ini key
`minikafka_config` (one KEY=VALUE a line); a factory call's own `config` goes on top. Each pytest
process has its own session, so under pytest-xdist every worker gets its own broker on its own port.
"""
from __future__ import annotations

from typing import Callable, Iterator

import pytest

from minikafka.testing import MiniKafka
from minikafka.testing_cluster import MiniKafkaCluster


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikafka", "minikafka broker fixtures")
    group.addoption("--minikafka-config", action="append", default=[], metavar="KEY=VALUE",
                    help="broker config for the minikafka fixtures (repeatable; over the ini key minikafka_config)")
    parser.addini("minikafka_config", type="linelist", default=[],
                  help="broker config for the minikafka fixtures, one KEY=VALUE a line")


def _parse(items: list[str], source: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"{source} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def minikafka_config(config: pytest.Config) -> dict[str, str]:
    """The broker config from the ini key, then the command line (which wins)."""
    merged = _parse(config.getini("minikafka_config"), "minikafka_config")
    merged.update(_parse(config.getoption("minikafka_config") or [], "--minikafka-config"))
    return merged


@pytest.fixture(scope="session")
def minikafka(pytestconfig: pytest.Config) -> Iterator[MiniKafka]:
    """One minikafka for the test session (per xdist worker), shared: tests use distinct topic names."""
    kafka = MiniKafka(config=minikafka_config(pytestconfig))
    try:
        yield kafka
    finally:
        kafka.close()


@pytest.fixture
def minikafka_factory(pytestconfig: pytest.Config) -> Iterator[Callable[..., MiniKafka]]:
    """`minikafka_factory(config=None, **kwargs)` starts another MiniKafka (kwargs as MiniKafka's);
    every broker it started is closed (stopped, temp data removed) when the test ends."""
    base = minikafka_config(pytestconfig)
    started: list[MiniKafka] = []

    def make(config: dict[str, object] | None = None, **kwargs) -> MiniKafka:
        kafka = MiniKafka(config={**base, **(config or {})}, **kwargs)
        started.append(kafka)
        return kafka

    try:
        yield make
    finally:
        for kafka in started:
            kafka.close()


@pytest.fixture
def minikafka_cluster(pytestconfig: pytest.Config) -> Iterator[MiniKafkaCluster]:
    """A three-node minikafka cluster for this test (it may kill and pause nodes), closed at the end."""
    cluster = MiniKafkaCluster(3, config=minikafka_config(pytestconfig))
    try:
        yield cluster
    finally:
        cluster.close()
