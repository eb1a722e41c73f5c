"""What the configured role needs of this installation, checked before any listener opens.

Most modules load after the port opens (broker/warmup.py) or on first use, so an installation that lacks
one (a sub-package left out of a wheel, a file removed by hand) would otherwise fail late: a broker that
answers clients, then errors. `missing_modules` locates every module the role imports during start-up and
warm-up (their files are found, not executed: a few ms), so such a broker exits with one line instead.
The module lists here are also the warm-up's import order (leaf modules first). Imports nothing of ours at
module level, so that the command line can explain even a missing server module with it.
"""
from __future__ import annotations

import importlib.util

# every package of the installation (tests/unit/broker/test_installation.py keeps it equal to the source tree): the
# handlers import from all of them, so any role needs them all
PACKAGES = (
    "minikafka.protocol",
    "minikafka.protocol.schemas",
    "minikafka.storage",
    "minikafka.raft",
    "minikafka.metadata",
    "minikafka.coordinator",
    "minikafka.coordinator.group",
    "minikafka.coordinator.group.consumer",
    "minikafka.coordinator.group.share",
    "minikafka.coordinator.group.streams",
    "minikafka.coordinator.txn",
    "minikafka.coordinator.share",
    "minikafka.broker",
    "minikafka.broker.network",
    "minikafka.broker.config",
    "minikafka.broker.security",
    "minikafka.broker.security.sasl",
    "minikafka.broker.ops",
    "minikafka.broker.cli",
    "minikafka.broker.handlers",
    "minikafka.broker.cluster",
    "minikafka.broker.replication",
    "minikafka.broker.quota",
    "minikafka.broker.share",
    "minikafka.pipelines",
    "minikafka.schema_registry",
)
STORAGE_MODULES = (
    "minikafka.protocol.record_batch",
    "minikafka.storage.batch_io",
    "minikafka.storage.index",
    "minikafka.storage.txn_index",
    "minikafka.storage.segment",
    "minikafka.storage.producer_state",
    "minikafka.protocol.record_validator",
    "minikafka.storage.partition_log",
    "minikafka.broker.errors",
)
GROUP_MODULES = STORAGE_MODULES + (
    "minikafka.coordinator.group.metadata",
    "minikafka.coordinator.group.records",
    "minikafka.coordinator.group.offsets",
    "minikafka.coordinator.group.membership",
    "minikafka.coordinator.group.commits",
    "minikafka.coordinator.group.admin",
    "minikafka.coordinator.group.coordinator",
    "minikafka.coordinator.group.loader",
    "minikafka.broker.background",
)
TXN_MODULES = STORAGE_MODULES + (
    "minikafka.coordinator.txn.state",
    "minikafka.coordinator.txn.log",
    "minikafka.coordinator.txn.markers",
    "minikafka.coordinator.txn.state_manager",
    "minikafka.coordinator.txn.coordinator",
)
# a node of a multi-node quorum: the metadata quorum, the controller and its image, replication (every
# module of these packages; tests/unit/broker/test_installation.py keeps the list equal to the source tree)
CLUSTER_MODULES = (
    "minikafka.raft.config",
    "minikafka.raft.core",
    "minikafka.raft.log",
    "minikafka.raft.store",
    "minikafka.raft.wire",
    "minikafka.protocol.peer_client",
    "minikafka.raft.driver",
    "minikafka.metadata.records",
    "minikafka.metadata.image",
    "minikafka.metadata.partition_change",
    "minikafka.metadata.placement",
    "minikafka.metadata.controller",
    "minikafka.broker.cluster.views",
    "minikafka.broker.cluster.storage_format",
    "minikafka.broker.cluster.producer_ids",
    "minikafka.broker.cluster.forwarding",
    "minikafka.broker.cluster.security_sync",
    "minikafka.metadata.active_controller",
    "minikafka.broker.cluster.runtime",
    "minikafka.broker.cluster.controller_registration",
    "minikafka.broker.cluster.dir_assignments",
    "minikafka.broker.replication.partition_state",
    "minikafka.broker.replication.throttle",
    "minikafka.broker.replication.alter_partition",
    "minikafka.broker.replication.fetcher",
    "minikafka.broker.replication.replica_manager",
    "minikafka.broker.cluster.coordinator_failover",
)


def handler_modules(quorum: bool = False) -> list[str]:
    """The handler modules of the broker listeners, and of the controller listeners of a quorum node."""
    from minikafka.broker.network.registry import API_TABLE, CONTROLLER_API_TABLE, QUORUM_BROKER_API_TABLE, module_name
    tables = [API_TABLE, QUORUM_BROKER_API_TABLE, CONTROLLER_API_TABLE] if quorum else [API_TABLE]
    return list(dict.fromkeys(module_name(e) for table in tables for _key, e in sorted(table.items())))


def required_modules(quorum: bool) -> list[str]:
    """Every module start-up and warm-up import for this role (`quorum`: a node of a multi-node quorum)."""
    names = [*PACKAGES, *GROUP_MODULES, *TXN_MODULES, *handler_modules(quorum)]
    if quorum:
        names += CLUSTER_MODULES
    return list(dict.fromkeys(names))


def missing_modules(quorum: bool) -> list[str]:
    """The required modules this installation cannot locate (their packages are imported to look)."""
    missing = []
    for name in required_modules(quorum):
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:  # a parent package is itself missing
            found = False
        if not found:
            missing.append(name)
    return missing


def missing_module_message(exc: ImportError) -> str:
    """One line for a module that failed to import at start-up (an incomplete or broken installation)."""
    what = f"module {exc.name!r} cannot be imported" if exc.name else "a module cannot be imported"
    return f"this installation of minikafka is incomplete: {what} ({exc}); reinstall minikafka"
