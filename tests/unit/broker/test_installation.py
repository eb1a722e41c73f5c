"""broker/installation.py's lists stay equal to the source tree, so the start-up check knows every package
and every module of the cluster packages (a new one cannot be forgotten there)."""
from __future__ import annotations

import tomllib

from minikafka.broker import installation
from tests.conftest import ROOT

CLUSTER_PACKAGES = ("minikafka.raft", "minikafka.metadata", "minikafka.broker.cluster",
                    "minikafka.broker.replication")


def tree_packages() -> dict[str, list[str]]:
    """package -> its modules, for every package of the source tree (pyproject.toml's mapped folders)."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out: dict[str, list[str]] = {}
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            name = ".".join([*package.split("."), *init.parent.relative_to(ROOT / folder).parts])
            out[name] = sorted(f"{name}.{p.stem}" for p in init.parent.glob("*.py") if p.name != "__init__.py")
    return out


def test_packages_are_the_source_trees():
    assert sorted(installation.PACKAGES) == sorted(set(tree_packages()) - {"minikafka"})


def test_cluster_modules_are_every_module_of_the_cluster_packages():
    tree = tree_packages()
    expected = {m for p in CLUSTER_PACKAGES for m in tree[p]} | {"minikafka.broker.cluster.coordinator_failover",
                                                                 "minikafka.protocol.peer_client"}
    assert sorted(set(installation.CLUSTER_MODULES)) == sorted(expected)
    assert len(installation.CLUSTER_MODULES) == len(set(installation.CLUSTER_MODULES))


def test_nothing_is_missing_here_and_a_missing_module_is_named():
    assert installation.missing_modules(quorum=False) == []
    assert installation.missing_modules(quorum=True) == []
    assert set(installation.required_modules(False)) < set(installation.required_modules(True))
    assert "minikafka.broker.handlers.quorum" in installation.required_modules(True)  # the controller listener's


def test_missing_module_message_is_one_line():
    try:
        import minikafka.broker.handlers.no_such_handler  # noqa: F401
    except ImportError as exc:
        message = installation.missing_module_message(exc)
    assert "\n" not in message
    assert message.startswith("this installation of minikafka is incomplete: module "
                              "'minikafka.broker.handlers.no_such_handler' cannot be imported")
