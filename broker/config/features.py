"""Feature versions (KIP-584, KIP-1022): the feature ranges this broker supports, the levels
finalized for the cluster, and their changes (UpdateFeatures).

Invariants:
- A finalized level always lies inside the feature's supported range; level 0 means "not finalized"
  (Kafka removes the feature from the finalized set), except metadata.version, which is always set.
- The finalized levels and their epoch live in one file of the first log dir, replaced atomically
  (temp file + fsync + rename), so they survive restart and kill -9; a new data dir starts from the
  levels Kafka 4.3 finalizes on a freshly formatted cluster.
- A cluster node's levels are the metadata image's (FeatureLevel records written by the active controller,
  which validates UpdateFeatures with plan_update; broker/handlers/update_features.py): the file only
  answers until the log holds a FeatureLevel record, and is what the first controller writes to it.
- The epoch grows with every change that is applied (never with a validate-only request), so a
  client that picks the newest finalized set by epoch (the Java client does) sees every change.

What the levels mean here: transaction.version >= 2 lets clients run transactions with epoch bumps
per transaction (KIP-890 part 2; the coordinator follows the version each request carries, as Kafka
does, and uses the finalized level for the aborts it starts itself); group.version >= 1 enables the
consumer group protocol (KIP-848); metadata.version is reported as Kafka reports it. Features whose
behaviour is missing (NOT_IMPLEMENTED) are neither supported nor finalized.
"""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

import kafka.errors as ke

from minikafka.storage.partition_metadata import atomic_write

log = logging.getLogger(__name__)

FEATURES_FILE = "finalized-features.json"
FILE_VERSION = 1
INITIAL_EPOCH = 1

METADATA_VERSION = "metadata.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"
ELR_VERSION = "eligible.leader.replicas.version"

INVALID_UPDATE_VERSION = ke.InvalidUpdateVersionError.errno

# UpdateFeatures upgrade types (FeatureUpdate.UpgradeType)
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True)
class FeatureSpec:
    """One feature: the range this broker supports and its level on a new cluster."""
    name: str
    min_version: int
    max_version: int
    default_level: int
    dependencies: dict[str, int] = field(default_factory=dict)

    def range_text(self) -> str:
        """Kafka's VersionRange.toString."""
        if self.min_version == self.max_version:
            return str(self.min_version)
        return f"{self.min_version}-{self.max_version}"


# What this broker implements, with Kafka 4.3.1's ranges and the levels it finalizes on a freshly formatted
# cluster, for the features whose behaviour is here. A feature is listed (and reported in ApiVersions, and
# accepted by UpdateFeatures) only once its APIs and behaviour exist: a client or tool that reads a level
# here may rely on it.
SUPPORTED: dict[str, FeatureSpec] = {spec.name: spec for spec in (
    FeatureSpec(METADATA_VERSION, 7, 30, 30),
    # a single node: 0 only (Kafka: 0-1); a quorum node reports 0-1 and the Raft leader upgrades it
    # (broker/handlers/api_versions.py, update_features.py: never a FeatureLevel record)
    FeatureSpec("kraft.version", 0, 0, 0),
    FeatureSpec(TRANSACTION_VERSION, 0, 2, 2),
    FeatureSpec(GROUP_VERSION, 0, 1, 1),
    FeatureSpec(SHARE_VERSION, 0, 1, 1),  # share groups (KIP-932)
    FeatureSpec(STREAMS_VERSION, 0, 1, 1),  # streams groups (KIP-1071)
    # eligible leader replicas (KIP-966; Kafka's ELRV_1 needs metadata.version 4.0-IV1 = 23)
    FeatureSpec(ELR_VERSION, 0, 1, 1, {METADATA_VERSION: 23}),
)}

# Kafka 4.3 finalizes these too, but their behaviour is not here yet: a dynamic quorum (kraft.version 1, KIP-853).
# Data dirs written by minikafka releases that still claimed them have them dropped at load.
NOT_IMPLEMENTED = frozenset({"kraft.version"})


class FeatureUpdate(NamedTuple):
    feature: str
    level: int
    upgrade_type: int = UPGRADE


class FeatureUpdateError(Exception):
    """An UpdateFeatures request that cannot be applied: Kafka's error code and message."""

    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno
        self.message = message


def _invalid(feature: str, level: int, reason: str) -> FeatureUpdateError:
    return FeatureUpdateError(INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {feature}. {reason}")


class FeatureState:
    """Finalized feature levels of the cluster (one broker: it is the controller too)."""

    def __init__(self, path: Path, node_id: int = 1) -> None:
        self.path = Path(path)
        self.node_id = node_id
        self._lock = threading.Lock()
        self.created = not self.path.exists()  # a new data dir: the levels of a freshly formatted cluster
        self._epoch, self._levels = self._load()
        # a cluster node: the metadata image's finalized levels (FeatureLevel records) once the log holds any
        self._image: Callable[[], object] | None = None

    def follow(self, image: Callable[[], object]) -> None:
        """Cluster mode: the levels are the metadata image's (`image().features`, epoch
        `image().features_epoch`: the offset of the last FeatureLevel record); until the log holds one
        (a new cluster before its first controller's bootstrap records) this node's file answers."""
        self._image = image

    def _cluster(self):
        image = self._image() if self._image is not None else None
        return image if image is not None and getattr(image, "features_epoch", -1) >= 0 else None

    @property
    def epoch(self) -> int:
        image = self._cluster()
        return self._epoch if image is None else image.features_epoch

    def file_levels(self) -> dict[str, int]:
        """This node's own file's levels (a cluster's bootstrap records: a new cluster's defaults)."""
        return dict(self._levels)

    # ---------------------------------------------------------------- persistence

    def _load(self) -> tuple[int, dict[str, int]]:
        defaults = {name: spec.default_level for name, spec in SUPPORTED.items() if spec.default_level > 0}
        if not self.path.exists():
            self._write(INITIAL_EPOCH, defaults)
            return INITIAL_EPOCH, defaults
        try:
            doc = json.loads(self.path.read_text())
            epoch = int(doc["epoch"])
            levels = {str(k): int(v) for k, v in doc["features"].items()}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"cannot read finalized features from {self.path}: {exc}") from exc
        withdrawn = {name: level for name, level in levels.items() if name in NOT_IMPLEMENTED
                     and not (name in SUPPORTED and SUPPORTED[name].min_version <= level <= SUPPORTED[name].max_version)}
        if withdrawn:
            for name in withdrawn:
                del levels[name]
            log.warning("finalized features %s dropped: minikafka does not implement them (an earlier release "
                        "claimed them)", ", ".join(f"{k}={v}" for k, v in sorted(withdrawn.items())))
            self._write(epoch + 1, levels)
            epoch += 1
        for name, level in list(levels.items()):
            spec = SUPPORTED.get(name)
            if spec is None or not spec.min_version <= level <= spec.max_version:
                raise RuntimeError(f"{self.path}: finalized {name}={level} is not supported by this broker")
            if level == 0 and name != METADATA_VERSION:
                del levels[name]
        levels.setdefault(METADATA_VERSION, SUPPORTED[METADATA_VERSION].default_level)
        return epoch, levels

    def _write(self, epoch: int, levels: dict[str, int]) -> None:
        doc = {"version": FILE_VERSION, "epoch": epoch, "features": dict(sorted(levels.items()))}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, (json.dumps(doc, indent=1) + "\n").encode())

    # ---------------------------------------------------------------- queries

    def level(self, name: str) -> int:
        """The finalized level of `name`, 0 when it is not finalized."""
        return self.finalized().get(name, 0)

    def finalized(self) -> dict[str, int]:
        image = self._cluster()
        return dict(self._levels) if image is None else dict(image.features)

    @staticmethod
    def supported() -> list[FeatureSpec]:
        return list(SUPPORTED.values())

    @property
    def transaction_version(self) -> int:
        return self.level(TRANSACTION_VERSION)

    # ---------------------------------------------------------------- UpdateFeatures

    def update(self, updates: Iterable[FeatureUpdate], validate_only: bool = False,
               elsewhere: Callable[[str, int], str | None] | None = None) -> None:
        """Apply all updates or none (Kafka's controller writes them as one atomic batch); raises
        FeatureUpdateError with Kafka's code and message for the first update that cannot be applied.
        `elsewhere(feature, level)`: why another node cannot take the level (a cluster's registered
        controllers, KIP-919), checked right after this node's own range, as Kafka's reasonNotSupported."""
        updates = list(updates)
        with self._lock:
            levels = plan_update(self._levels, updates, self.node_id, elsewhere)
            if validate_only or not updates:
                return
            epoch = self._epoch + 1
            self._write(epoch, levels)
            self._epoch, self._levels = epoch, levels
        log.info("finalized features changed (epoch %d): %s", epoch,
                 ", ".join(f"{u.feature}={u.level}" for u in updates))


def plan_update(current: dict[str, int], updates: Iterable[FeatureUpdate], node_id: int,
                elsewhere: Callable[[str, int], str | None] | None = None) -> dict[str, int]:
    """The finalized levels after `updates` (Kafka's FeatureControlManager.updateFeatures, pure): all or
    none; FeatureUpdateError with Kafka's code and message for the first update that cannot be applied.
    A level 0 removes the feature (metadata.version cannot go to 0: its range starts above)."""
    updates = list(updates)
    proposed = dict(current)
    for u in updates:
        proposed[u.feature] = u.level
    for u in updates:
        _check(u, current, proposed, node_id, elsewhere)
    levels = dict(current)
    for u in updates:
        if u.level == 0 and u.feature != METADATA_VERSION:
            levels.pop(u.feature, None)
        else:
            levels[u.feature] = u.level
    return levels


def _check(u: FeatureUpdate, current_levels: dict[str, int], proposed: dict[str, int], node_id: int,
           elsewhere: Callable[[str, int], str | None] | None = None) -> None:
    name, level = u.feature, u.level
    if u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _invalid(name, level, "The controller does not support the given upgrade type.")
    current = current_levels.get(name, 0)
    if level < 0:
        raise _invalid(name, level, "A feature version cannot be less than 0.")
    spec = SUPPORTED.get(name)
    if spec is None or not spec.min_version <= level <= spec.max_version:
        what = f"Local controller {node_id}"
        reason = (f"{what} does not support this feature." if spec is None
                  else f"{what} only supports versions {spec.range_text()}")
        raise _invalid(name, level, reason)
    reason_elsewhere = elsewhere(name, level) if elsewhere is not None else None
    if reason_elsewhere:
        raise _invalid(name, level, reason_elsewhere)
    if level < current and u.upgrade_type == UPGRADE:
        raise _invalid(name, level, "Can't downgrade the version of this feature without setting the upgrade "
                                    "type to either safe or unsafe downgrade.")
    if level > current and u.upgrade_type != UPGRADE:
        raise _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        if level < current:
            raise FeatureUpdateError(INVALID_UPDATE_VERSION, f"Unsupported metadata.version downgrade from "
                                     f"{current} to {level}. Refusing to perform the requested downgrade because "
                                     "it might delete metadata information.")
        return
    for dep, needed in spec.dependencies.items():
        if level >= 1 and proposed.get(dep, 0) < needed:
            raise _invalid(name, level, f"{name} could not be set to {level} because it depends on {dep} "
                                        f"level {needed}")
