"""The metadata image: the cluster as the committed metadata log describes it (Kafka's MetadataImage),
built by applying records (records.py) in log order. Pure: no I/O, no clock.

Invariants: `offset` is the quorum offset of the last record applied; applying the same log on every
node gives the same image; a PartitionChange bumps partitionEpoch (and leaderEpoch when the leader
changes); a partition being reassigned lists its adding and removing replicas (KIP-455), all of them
in `replicas`; records naming unknown topics or brokers are ignored (they cannot occur in a valid log).
ACLs are kept by id, SCRAM credentials by user and mechanism, BROKER configs by resource name, GROUP
configs by group id (a group whose last override is removed is dropped); removing what is absent
changes nothing.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from minikafka.metadata import records as r
from minikafka.metadata.placement import UsableBroker

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    epoch: int
    incarnation_id: str
    endpoints: dict[str, tuple[str, int, str]]  # listener name -> (host, port, security protocol)
    rack: str | None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    # KIP-1066: the broker's log dir ids (registration) and the cordoned ones (heartbeats; None before any)
    log_dirs: tuple[str, ...] = ()
    cordoned_log_dirs: tuple[str, ...] | None = None

    @property
    def has_uncordoned_dirs(self) -> bool:
        """Kafka's BrokerRegistration.hasUncordonedDirs: no dirs known, nothing cordoned known, or a dir left."""
        if not self.log_dirs or self.cordoned_log_dirs is None:
            return True
        return bool(set(self.log_dirs) - set(self.cordoned_log_dirs))


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """A controller's registration (KIP-919, Kafka's ControllerRegistration): the last RegisterController
    record of its id wins (a restarted controller registers again with a new incarnation id)."""
    id: int
    incarnation_id: str
    endpoints: dict[str, tuple[str, int, str]]  # controller listener name -> (host, port, security protocol)
    features: dict[str, tuple[int, int]]  # feature -> (min, max) supported
    zk_migration_ready: bool = False


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    topic_id: bytes  # 16 bytes
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int  # NO_LEADER (-1) when none
    leader_epoch: int
    partition_epoch: int
    # an ongoing reassignment (KIP-455): `replicas` is the target followed by the replicas being removed
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # eligible leader replicas (KIP-966): out of the ISR since it fell below min.insync.replicas, yet
    # holding every acks=all record; last_known_elr: the last leader once the ISR became empty
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    # KIP-858: the log dir id of each replica, in replica order (records.UNASSIGNED_DIR while unknown)
    directories: tuple[str, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def directory(self, broker_id: int) -> str | None:
        """The log dir id of `broker_id`'s replica (None: not a replica)."""
        try:
            i = self.replicas.index(broker_id)
        except ValueError:
            return None
        return self.directories[i] if i < len(self.directories) else r.UNASSIGNED_DIR


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: bytes
    configs: dict[str, str] = field(default_factory=dict)
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)

    @property
    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.topic_id)


Change = tuple[str, int]  # (topic, partition)


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.controllers: dict[int, ControllerInfo] = {}  # controller id -> registration (RegisterController)
        self.topics: dict[str, TopicImage] = {}
        self.topics_by_id: dict[bytes, TopicImage] = {}
        self.offset = -1
        self.next_producer_id = 0
        self.broker_configs: dict[str, dict[str, str]] = {}  # resource name ("" = cluster default) -> configs
        self.group_configs: dict[str, dict[str, str]] = {}  # group id -> overrides (GROUP resources, type 32)
        # subscription name -> configs (CLIENT_METRICS resources, type 16: KIP-714 client metrics subscriptions)
        self.client_metrics_configs: dict[str, dict[str, str]] = {}
        self.acls: dict[str, r.AclRow] = {}  # ACL id -> binding
        self.scram: dict[str, dict[str, dict]] = {}  # user -> mechanism -> {salt, storedKey, serverKey, iterations}
        self.delegation_tokens: dict[str, dict] = {}  # token id -> its DelegationToken record's fields
        # client quotas: entity (sorted (type, name) pairs, None = default) -> key -> value (ClientQuota records)
        self.client_quotas: dict[tuple, dict[str, float]] = {}
        # bumped by every ACL / SCRAM / BROKER or GROUP config record: followers re-read only when it moved
        self.security_version = 0
        self.bootstrapped = False  # a BootstrapDone record was applied (formatted credentials are in the log)
        # finalized feature levels (FeatureLevel records; level 0 removes one); features_epoch: the offset of
        # the last FeatureLevel record, -1 while the log holds none (the first controller writes them)
        self.features: dict[str, int] = {}
        self.features_epoch = -1

    # -- queries ---------------------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def topic_by_id(self, topic_id: bytes | str | uuid.UUID) -> TopicImage | None:
        return self.topics_by_id.get(_id_bytes(topic_id))

    def usable_brokers(self) -> list[UsableBroker]:
        """Registered brokers not shutting down, with rack and fencing: where replicas may be placed
        (Kafka's usableBrokers; a fenced one never leads a new partition; one whose every log dir is
        cordoned is left out)."""
        return [UsableBroker(b.id, b.rack, b.fenced) for b in sorted(self.brokers.values(), key=lambda b: b.id)
                if not b.in_controlled_shutdown and b.has_uncordoned_dirs]

    def copy(self) -> "MetadataImage":
        """An independent image (PartitionInfo/BrokerInfo are immutable, the containers are copied)."""
        out = MetadataImage()
        out.brokers = dict(self.brokers)
        out.controllers = dict(self.controllers)
        for name, t in self.topics.items():
            nt = TopicImage(t.name, t.topic_id, dict(t.configs), dict(t.partitions))
            out.topics[name] = nt
            out.topics_by_id[nt.topic_id] = nt
        out.offset, out.next_producer_id = self.offset, self.next_producer_id
        out.broker_configs = {k: dict(v) for k, v in self.broker_configs.items()}
        out.group_configs = {k: dict(v) for k, v in self.group_configs.items()}
        out.client_metrics_configs = {k: dict(v) for k, v in self.client_metrics_configs.items()}
        out.acls = dict(self.acls)
        out.scram = {u: dict(m) for u, m in self.scram.items()}
        out.delegation_tokens = dict(self.delegation_tokens)
        out.client_quotas = {e: dict(v) for e, v in self.client_quotas.items()}
        out.security_version = self.security_version
        out.bootstrapped = self.bootstrapped
        out.features, out.features_epoch = dict(self.features), self.features_epoch
        return out

    def has_acl(self, row: r.AclRow) -> bool:
        return row in self.acls.values()

    # -- snapshots (KIP-630) ----------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The whole image as JSON-able data; `from_json(to_json())` equals this image."""
        return {
            "offset": self.offset, "nextProducerId": self.next_producer_id, "brokerConfigs": self.broker_configs,
            "groupConfigs": self.group_configs, "clientMetricsConfigs": self.client_metrics_configs,
            "acls": {acl_id: list(row) for acl_id, row in self.acls.items()}, "scram": self.scram,
            "delegationTokens": self.delegation_tokens,
            "clientQuotas": [[[list(p) for p in e], v] for e, v in self.client_quotas.items()],
            "securityVersion": self.security_version, "bootstrapped": self.bootstrapped,
            "features": self.features, "featuresEpoch": self.features_epoch,
            "brokers": [[b.id, b.epoch, b.incarnation_id, {k: list(v) for k, v in b.endpoints.items()}, b.rack,
                         b.fenced, b.in_controlled_shutdown, list(b.log_dirs),
                         None if b.cordoned_log_dirs is None else list(b.cordoned_log_dirs)]
                        for b in self.brokers.values()],
            "controllers": [[c.id, c.incarnation_id, {k: list(v) for k, v in c.endpoints.items()},
                             {k: list(v) for k, v in c.features.items()}, c.zk_migration_ready]
                            for c in self.controllers.values()],
            "topics": [[t.name, t.topic_id.hex(), t.configs,
                        [[p.partition, list(p.replicas), list(p.isr), p.leader, p.leader_epoch, p.partition_epoch,
                          list(p.adding), list(p.removing), list(p.elr), list(p.last_known_elr),
                          list(p.directories)]
                         for p in t.partitions.values()]] for t in self.topics.values()],
        }

    @classmethod
    def from_json(cls, data: dict) -> "MetadataImage":
        out = cls()
        out.offset, out.next_producer_id = int(data["offset"]), int(data["nextProducerId"])
        out.broker_configs = {k: dict(v) for k, v in data["brokerConfigs"].items()}
        out.group_configs = {k: dict(v) for k, v in data.get("groupConfigs", {}).items()}  # absent before them
        out.client_metrics_configs = {k: dict(v) for k, v in data.get("clientMetricsConfigs", {}).items()}
        out.acls = {acl_id: tuple(row) for acl_id, row in data.get("acls", {}).items()}  # type: ignore[misc]
        out.scram = {u: {m: dict(c) for m, c in by_mech.items()} for u, by_mech in data.get("scram", {}).items()}
        out.delegation_tokens = {t: dict(v) for t, v in data.get("delegationTokens", {}).items()}
        out.client_quotas = {tuple((t, n) for t, n in e): {k: float(x) for k, x in v.items()}
                             for e, v in data.get("clientQuotas", [])}
        # the count of security records applied: carried, so equal counts mean equal ACLs and credentials
        out.security_version = int(data.get("securityVersion", 0))
        out.bootstrapped = bool(data.get("bootstrapped", False))
        out.features = {str(k): int(v) for k, v in data.get("features", {}).items()}  # absent before them
        out.features_epoch = int(data.get("featuresEpoch", -1))
        for bid, epoch, inc, endpoints, rack, fenced, shutting, *dirs in data["brokers"]:
            log_dirs, cordoned = (list(dirs) + [(), None][len(dirs):])[:2]  # absent before KIP-1066
            out.brokers[bid] = BrokerInfo(bid, epoch, inc, {k: tuple(v) for k, v in endpoints.items()}, rack,
                                          fenced, shutting, tuple(log_dirs),
                                          None if cordoned is None else tuple(cordoned))
        for cid, inc, endpoints, features, zk_ready in data.get("controllers", []):  # absent before KIP-919
            out.controllers[cid] = ControllerInfo(cid, inc, {k: tuple(v) for k, v in endpoints.items()},
                                                  {k: tuple(v) for k, v in features.items()}, zk_ready)
        for name, tid, configs, parts in data["topics"]:
            topic_id = bytes.fromhex(tid)
            t = TopicImage(name, topic_id, dict(configs))
            for idx, replicas, isr, leader, leader_epoch, partition_epoch, *moving in parts:
                # snapshots from before reassignments / eligible leader replicas / directories have fewer fields
                adding, removing, elr, lke, dirs = (list(moving) + [(), (), (), (), ()][len(moving):])[:5]
                t.partitions[idx] = PartitionInfo(name, topic_id, idx, tuple(replicas), tuple(isr), leader,
                                                  leader_epoch, partition_epoch, tuple(adding), tuple(removing),
                                                  tuple(elr), tuple(lke), _dirs(replicas, dirs))
            out.topics[name] = t
            out.topics_by_id[topic_id] = t
        return out

    # -- applying records -----------------------------------------------------------------------------
    def apply(self, payload: Any, offset: int) -> tuple[list[Change], list[str]]:
        """Apply one committed entry at `offset`; (changed partitions, deleted topic names)."""
        self.offset = max(self.offset, offset)
        if not isinstance(payload, dict):
            return [], []
        kind = payload.get("type")
        handler = _APPLY.get(kind)
        if handler is None:
            return [], []
        return handler(self, payload)

    def _register_broker(self, p: dict) -> tuple[list[Change], list[str]]:
        endpoints = {e["name"]: (e["host"], int(e["port"]), e.get("securityProtocol", "PLAINTEXT"))
                     for e in p.get("endpoints", ())}
        self.brokers[p["brokerId"]] = BrokerInfo(p["brokerId"], p["brokerEpoch"], p.get("incarnationId", ""),
                                                 endpoints, p.get("rack"), bool(p.get("fenced", True)), False,
                                                 tuple(p.get("logDirs", ())),
                                                 None if p.get("cordonedLogDirs") is None
                                                 else tuple(p["cordonedLogDirs"]))
        return [], []

    def _register_controller(self, p: dict) -> tuple[list[Change], list[str]]:
        endpoints = {e["name"]: (e["host"], int(e["port"]), e.get("securityProtocol", "PLAINTEXT"))
                     for e in p.get("endPoints", ())}
        features = {f["name"]: (int(f["minSupportedVersion"]), int(f["maxSupportedVersion"]))
                    for f in p.get("features", ())}
        cid = int(p["controllerId"])
        self.controllers[cid] = ControllerInfo(cid, p.get("incarnationId", ""), endpoints, features,
                                               bool(p.get("zkMigrationReady", False)))
        return [], []

    def _broker_state(self, p: dict) -> tuple[list[Change], list[str]]:
        b = self.brokers.get(p["brokerId"])
        if b is not None:
            b = replace(b, fenced=bool(p.get("fenced", b.fenced)),
                        in_controlled_shutdown=bool(p.get("inControlledShutdown", False)))
            if p.get("cordonedLogDirs") is not None:  # Kafka's CordonedLogDirs: null if no change
                b = replace(b, cordoned_log_dirs=tuple(p["cordonedLogDirs"]))
            self.brokers[b.id] = b
        return [], []

    def _unregister_broker(self, p: dict) -> tuple[list[Change], list[str]]:
        b = self.brokers.get(p["brokerId"])
        if b is not None and b.epoch == p.get("brokerEpoch", b.epoch):
            del self.brokers[b.id]
        return [], []

    def _topic(self, p: dict) -> tuple[list[Change], list[str]]:
        tid = _id_bytes(p["topicId"])
        old = self.topics.get(p["name"])
        if old is not None and old.topic_id != tid:  # cannot happen in a valid log (RemoveTopic comes first)
            self.topics_by_id.pop(old.topic_id, None)
        t = TopicImage(p["name"], tid, dict(p.get("configs") or {}))
        self.topics[t.name] = t
        self.topics_by_id[tid] = t
        return [], []

    def _partition(self, p: dict) -> tuple[list[Change], list[str]]:
        t = self.topics_by_id.get(_id_bytes(p["topicId"]))
        if t is None:
            return [], []
        info = PartitionInfo(t.name, t.topic_id, p["partition"], tuple(p["replicas"]), tuple(p["isr"]),
                             p["leader"], p.get("leaderEpoch", 0), p.get("partitionEpoch", 0),
                             tuple(p.get("addingReplicas", ())), tuple(p.get("removingReplicas", ())),
                             tuple(p.get("eligibleLeaderReplicas", ())), tuple(p.get("lastKnownElr", ())),
                             _dirs(p["replicas"], p.get("directories", ())))
        t.partitions[info.partition] = info
        return [(t.name, info.partition)], []

    def _partition_change(self, p: dict) -> tuple[list[Change], list[str]]:
        t = self.topics_by_id.get(_id_bytes(p["topicId"]))
        old = t.partitions.get(p["partition"]) if t is not None else None
        if t is None or old is None:
            return [], []
        new = old
        if "replicas" in p:
            # a replica kept keeps its dir, a new one is UNASSIGNED (Kafka's PartitionChangeBuilder), unless
            # the record carries the directories
            kept = {b: old.directory(b) for b in old.replicas}
            new = replace(new, replicas=tuple(p["replicas"]),
                          directories=tuple(kept.get(b) or r.UNASSIGNED_DIR for b in p["replicas"]))
        if "directories" in p:
            new = replace(new, directories=_dirs(new.replicas, p["directories"]))
        if "isr" in p:
            new = replace(new, isr=tuple(p["isr"]))
        if "addingReplicas" in p:
            new = replace(new, adding=tuple(p["addingReplicas"]))
        if "removingReplicas" in p:
            new = replace(new, removing=tuple(p["removingReplicas"]))
        if "eligibleLeaderReplicas" in p:
            new = replace(new, elr=tuple(p["eligibleLeaderReplicas"]))
        if "lastKnownElr" in p:
            new = replace(new, last_known_elr=tuple(p["lastKnownElr"]))
        if "leader" in p and p["leader"] != old.leader:
            new = replace(new, leader=p["leader"], leader_epoch=old.leader_epoch + 1)
        elif p.get("bumpLeaderEpoch"):
            new = replace(new, leader_epoch=old.leader_epoch + 1)
        new = replace(new, partition_epoch=old.partition_epoch + 1)
        t.partitions[new.partition] = new
        return [(t.name, new.partition)], []

    def _remove_topic(self, p: dict) -> tuple[list[Change], list[str]]:
        t = self.topics_by_id.pop(_id_bytes(p["topicId"]), None)
        if t is None:
            return [], []
        if self.topics.get(t.name) is t:
            del self.topics[t.name]
        return [], [t.name]

    def _producer_ids(self, p: dict) -> tuple[list[Change], list[str]]:
        self.next_producer_id = max(self.next_producer_id, int(p["nextProducerId"]))
        return [], []

    def _config(self, p: dict) -> tuple[list[Change], list[str]]:
        name, value = p["name"], p.get("value")
        if p.get("resourceType") == r.TOPIC_RESOURCE:
            t = self.topics.get(p["resourceName"])
            if t is None:
                return [], []
            target = t.configs
        elif p.get("resourceType") == r.GROUP_RESOURCE:
            target = self.group_configs.setdefault(p["resourceName"], {})
            self.security_version += 1
        elif p.get("resourceType") == r.CLIENT_METRICS_RESOURCE:
            target = self.client_metrics_configs.setdefault(p["resourceName"], {})
            self.security_version += 1
        else:
            target = self.broker_configs.setdefault(p["resourceName"], {})
            self.security_version += 1
        if value is None:
            target.pop(name, None)
            if not target and p.get("resourceType") == r.GROUP_RESOURCE:
                del self.group_configs[p["resourceName"]]
            elif not target and p.get("resourceType") == r.CLIENT_METRICS_RESOURCE:
                del self.client_metrics_configs[p["resourceName"]]
        else:
            target[name] = value
        return [], []

    def _acl(self, p: dict) -> tuple[list[Change], list[str]]:
        self.acls[p["id"]] = (int(p["resourceType"]), p["resourceName"], int(p["patternType"]), p["principal"],
                              p["host"], int(p["operation"]), int(p["permissionType"]))
        self.security_version += 1
        return [], []

    def _remove_acl(self, p: dict) -> tuple[list[Change], list[str]]:
        if self.acls.pop(p["id"], None) is not None:
            self.security_version += 1
        return [], []

    def _scram(self, p: dict) -> tuple[list[Change], list[str]]:
        self.scram.setdefault(p["name"], {})[p["mechanism"]] = {
            "salt": p["salt"], "storedKey": p["storedKey"], "serverKey": p["serverKey"],
            "iterations": int(p["iterations"])}
        self.security_version += 1
        return [], []

    def _client_quota(self, p: dict) -> tuple[list[Change], list[str]]:
        entity = tuple(sorted((t, n) for t, n in p["entity"]))
        if p.get("remove"):
            values = self.client_quotas.get(entity)
            if values is not None and values.pop(p["key"], None) is not None and not values:
                del self.client_quotas[entity]
        else:
            self.client_quotas.setdefault(entity, {})[p["key"]] = float(p["value"])
        self.security_version += 1
        return [], []

    def _delegation_token(self, p: dict) -> tuple[list[Change], list[str]]:
        self.delegation_tokens[p["tokenId"]] = {k: v for k, v in p.items() if k != "type"}
        self.security_version += 1
        return [], []

    def _remove_delegation_token(self, p: dict) -> tuple[list[Change], list[str]]:
        if self.delegation_tokens.pop(p["tokenId"], None) is not None:
            self.security_version += 1
        return [], []

    def _bootstrap_done(self, p: dict) -> tuple[list[Change], list[str]]:
        self.bootstrapped = True
        return [], []

    def _feature_level(self, p: dict) -> tuple[list[Change], list[str]]:
        level = int(p["featureLevel"])
        if level == 0:
            self.features.pop(p["name"], None)
        else:
            self.features[p["name"]] = level
        self.features_epoch = self.offset
        return [], []

    def _remove_scram(self, p: dict) -> tuple[list[Change], list[str]]:
        by_mech = self.scram.get(p["name"])
        if by_mech is not None and by_mech.pop(p["mechanism"], None) is not None:
            if not by_mech:
                del self.scram[p["name"]]
            self.security_version += 1
        return [], []


_APPLY = {r.REGISTER_BROKER: MetadataImage._register_broker, r.REGISTER_CONTROLLER: MetadataImage._register_controller, r.BROKER_STATE: MetadataImage._broker_state,
          r.UNREGISTER_BROKER: MetadataImage._unregister_broker,
          r.TOPIC: MetadataImage._topic, r.PARTITION: MetadataImage._partition,
          r.PARTITION_CHANGE: MetadataImage._partition_change, r.REMOVE_TOPIC: MetadataImage._remove_topic,
          r.PRODUCER_IDS: MetadataImage._producer_ids, r.CONFIG: MetadataImage._config,
          r.ACCESS_CONTROL_ENTRY: MetadataImage._acl, r.REMOVE_ACCESS_CONTROL_ENTRY: MetadataImage._remove_acl,
          r.USER_SCRAM_CREDENTIAL: MetadataImage._scram, r.REMOVE_USER_SCRAM_CREDENTIAL: MetadataImage._remove_scram,
          r.DELEGATION_TOKEN: MetadataImage._delegation_token,
          r.REMOVE_DELEGATION_TOKEN: MetadataImage._remove_delegation_token,
          r.BOOTSTRAP_DONE: MetadataImage._bootstrap_done, r.CLIENT_QUOTA: MetadataImage._client_quota,
          r.FEATURE_LEVEL: MetadataImage._feature_level}


def _dirs(replicas, directories) -> tuple[str, ...]:
    """One dir id per replica: a record or snapshot from before KIP-858 (or a short list) pads with
    UNASSIGNED_DIR."""
    dirs = [str(d) for d in directories][:len(replicas)]
    return tuple(dirs + [r.UNASSIGNED_DIR] * (len(replicas) - len(dirs)))


def _id_bytes(topic_id: bytes | str | uuid.UUID) -> bytes:
    if isinstance(topic_id, bytes):
        return topic_id
    if isinstance(topic_id, uuid.UUID):
        return topic_id.bytes
    return uuid.UUID(topic_id).bytes
