"""Shared fixtures: the broker under test, started as a real process on a free loopback port.

`--broker=minikafka` (default) starts minikafka subprocesses; `--broker=kafka` runs the same
black-box tests against a real Apache Kafka from the reference lab (scripts/apache_kafka.py);
`--broker=HOST:PORT` uses a broker that is already running. Against anything but minikafka, tests
that need minikafka's internals (marker `minikafka_only`, or the `broker_factory` fixture, which
restarts/kills/reconfigures the broker) are deselected, and reported as such.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from minikafka.testing import MiniKafka
from minikafka.testing import free_port as _free_port

ROOT = Path(__file__).resolve().parent.parent

# the plugin users get from the `pytest11` entry point; loaded here too so that the suite runs it from
# this tree (an editable install made before the entry point existed would not load it)
pytest_plugins = ["minikafka.pytest_plugin"]


def free_port() -> int:
    """A free loopback port for a server (minikafka.testing.free_port: below the ephemeral range, per
    xdist worker): every test picks its ports here."""
    return _free_port("127.0.0.1")


class BrokerProcess(MiniKafka):
    """A minikafka subprocess that can be stopped (SIGTERM), killed (-9) and restarted on its data dir:
    the plugin's MiniKafka (so every test run exercises it), with the suite's older names and its log
    next to the data dir."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, port: int | None = None):
        super().__init__(config=overrides, data_dir=data_dir, port=port, start=False, startup_timeout=20.0)
        self._cwd = str(ROOT)
        self.log_path = Path(data_dir).parent / f"broker-{self.port}.log"

    @property
    def overrides(self) -> dict[str, str]:
        return self.config

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_servers

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        self.startup_timeout = timeout
        return super().start()

    def log_text(self) -> str:
        return super().log_text(5000)


def pytest_addoption(parser):
    parser.addoption("--broker", default=os.environ.get("MINIKAFKA_TEST_BROKER", "minikafka"),
                     help="broker under test: minikafka (default), kafka (Apache Kafka reference lab) or HOST:PORT")
    parser.addoption("--serial", choices=("include", "exclude", "only"), default="include",
                     help="tests marked `serial` (timing- or load-sensitive: run alone, not beside other xdist "
                          "workers): include (default), exclude (the parallel pass of `make test`) or only")


def broker_kind(config) -> str:
    return config.getoption("--broker")


def pytest_collection_modifyitems(config, items):
    serial = config.getoption("--serial")
    minikafka = broker_kind(config) == "minikafka"
    if minikafka and serial == "include":
        return
    keep, drop = [], []
    for item in items:
        internal = item.get_closest_marker("minikafka_only") or "broker_factory" in getattr(item, "fixturenames", ())
        wrong_pass = serial != "include" and (item.get_closest_marker("serial") is not None) != (serial == "only")
        (drop if wrong_pass or (internal and not minikafka) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class ExternalBroker:
    """A broker this test run did not start: only its address is known."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def alive(self) -> bool:
        return True

    def log_text(self) -> str:
        return ""


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Path:
    """minikafka's wheel as scripts/installed.py builds it (sdist, then the wheel from the sdist): the one
    installed for `make test` ($MINIKAFKA_EXECUTABLE's venv), else built here once per session."""
    sys.path.insert(0, str(ROOT))
    from scripts.installed import build, installed_wheel
    exe = os.environ.get("MINIKAFKA_EXECUTABLE")
    wheel = installed_wheel(Path(exe)) if exe else None
    return wheel or build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def installed_minikafka(tmp_path_factory) -> Path:
    """The `minikafka` entry point of the wheel installed into a fresh virtualenv (scripts/installed.py):
    $MINIKAFKA_EXECUTABLE under `make test`, else installed here once per session (~40 s)."""
    exe = os.environ.get("MINIKAFKA_EXECUTABLE")
    if exe:
        return Path(exe)
    sys.path.insert(0, str(ROOT))
    from scripts.installed import ensure
    base = tmp_path_factory.mktemp("installed")
    return ensure(base / "venv", base / "dist")


@pytest.fixture(scope="session")
def _reference_kafka(request):
    """One Apache Kafka for the whole run (tests use distinct topic names)."""
    sys.path.insert(0, str(ROOT))
    from scripts.apache_kafka import KafkaBroker
    kb = KafkaBroker().start(timeout=120)
    yield kb
    kb.stop()
    kb.cleanup()


def _other_broker(request):
    kind = broker_kind(request.config)
    if kind == "kafka":
        kb = request.getfixturevalue("_reference_kafka")
        return ExternalBroker(kb.bootstrap)
    return ExternalBroker(kind)


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, data_dir: Path | None = None) -> BrokerProcess:
        d = data_dir or tmp_path / f"data{len(started)}"
        d.mkdir(parents=True, exist_ok=True)
        b = BrokerProcess(d, overrides)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        if b.alive():
            b.kill()


@pytest.fixture
def broker(request):
    """A fresh minikafka per test, or the --broker under test."""
    if broker_kind(request.config) != "minikafka":
        return _other_broker(request)
    return request.getfixturevalue("broker_factory")()


@pytest.fixture(scope="module")
def shared_broker(request, tmp_path_factory):
    """One broker for a whole module (tests must use distinct topic names)."""
    if broker_kind(request.config) != "minikafka":
        yield _other_broker(request)
        return
    d = tmp_path_factory.mktemp("shared") / "data"
    d.mkdir()
    b = BrokerProcess(d).start()
    yield b
    if b.alive():
        b.stop()
    assert "Traceback" not in b.log_text(), b.log_text()
