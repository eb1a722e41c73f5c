"""Metadata record payloads: JSON dicts with a "type" and Kafka's record fields (camelCase), appended
to the metadata quorum's log by the active controller and applied by every node (image.py).

ACLs, SCRAM credentials, BROKER configs ("" = cluster default, else a broker id) and GROUP configs (by
group id) are records too (Kafka's AccessControlEntryRecord, UserScramCredentialRecord, ConfigRecord):
every node's authorizer, credential store, dynamic broker config and group configs follow them. A credential record holds salt, StoredKey and
ServerKey (base64), never a password.

RegisterBroker's brokerEpoch is the quorum offset of the record itself. A PartitionChange carries only
what changed; applying it bumps partitionEpoch, and leaderEpoch too when the leader changed or
bumpLeaderEpoch is set (replicas removed by a reassignment: Kafka bumps the epoch so they are fenced).
"""
from __future__ import annotations

from typing import Any, Iterable

REGISTER_BROKER = "RegisterBroker"
BROKER_STATE = "BrokerState"
REGISTER_CONTROLLER = "RegisterController"  # Kafka's RegisterControllerRecord (KIP-919): a controller's registration
UNREGISTER_BROKER = "UnregisterBroker"  # Kafka's UnregisterBrokerRecord: the broker leaves the cluster's registrations
TOPIC = "Topic"
PARTITION = "Partition"
PARTITION_CHANGE = "PartitionChange"
REMOVE_TOPIC = "RemoveTopic"
PRODUCER_IDS = "ProducerIds"
CONFIG = "Config"
ACCESS_CONTROL_ENTRY = "AccessControlEntry"
REMOVE_ACCESS_CONTROL_ENTRY = "RemoveAccessControlEntry"
USER_SCRAM_CREDENTIAL = "UserScramCredential"
REMOVE_USER_SCRAM_CREDENTIAL = "RemoveUserScramCredential"
CLIENT_QUOTA = "ClientQuota"  # Kafka's ClientQuotaRecord: one key of one entity, set or removed
DELEGATION_TOKEN = "DelegationToken"  # Kafka's DelegationTokenRecord: a token created, renewed or expired
REMOVE_DELEGATION_TOKEN = "RemoveDelegationToken"
BOOTSTRAP_DONE = "BootstrapDone"  # the formatted SCRAM credentials (`storage format --add-scram`) are in the log
FEATURE_LEVEL = "FeatureLevel"  # Kafka's FeatureLevelRecord: a finalized feature level (0: no longer finalized)

TOPIC_RESOURCE = 2  # Kafka's ConfigResource.Type.TOPIC
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
CLIENT_METRICS_RESOURCE = 16

Record = dict[str, Any]

# Kafka's DirectoryId (KIP-858): the reserved log dir ids of a replica's Directories entry, written as
# Kafka prints a Uuid (url-safe base64), as the brokers' registered log dir ids are
MIGRATING_DIR = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid(0, 0)
UNASSIGNED_DIR = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid(0, 1): not yet placed in a dir
LOST_DIR = "AAAAAAAAAAAAAAAAAAAAAg"  # Uuid(0, 2): its dir went offline
RESERVED_DIRS = (MIGRATING_DIR, UNASSIGNED_DIR, LOST_DIR)


def register_broker(broker_id: int, broker_epoch: int, incarnation_id: str,
                    endpoints: Iterable[tuple[str, str, int, str]], rack: str | None,
                    log_dirs: Iterable[str] = ()) -> Record:
    """Kafka's RegisterBrokerRecord; `logDirs`: the broker's log dir ids (its CordonedLogDirs start null:
    the broker's heartbeats bring them, KIP-1066)."""
    rec: Record = {"type": REGISTER_BROKER, "brokerId": broker_id, "brokerEpoch": broker_epoch,
                   "incarnationId": incarnation_id, "rack": rack, "fenced": True,
                   "endpoints": [{"name": n, "host": h, "port": p, "securityProtocol": sp}
                                 for n, h, p, sp in endpoints]}
    log_dirs = sorted(log_dirs)
    if log_dirs:
        rec["logDirs"] = log_dirs
    return rec


def register_controller(controller_id: int, incarnation_id: str, endpoints: Iterable[tuple[str, str, int, str]],
                        features: Iterable[tuple[str, int, int]]) -> Record:
    """Kafka's RegisterControllerRecord v0: the controller listeners' (name, host, port, security protocol)
    and the supported (feature, min, max); zkMigrationReady always false (Kafka 4 writes false)."""
    return {"type": REGISTER_CONTROLLER, "controllerId": controller_id, "incarnationId": incarnation_id,
            "zkMigrationReady": False,
            "endPoints": [{"name": n, "host": h, "port": p, "securityProtocol": sp} for n, h, p, sp in endpoints],
            "features": [{"name": n, "minSupportedVersion": lo, "maxSupportedVersion": hi} for n, lo, hi in features]}


def broker_state(broker_id: int, fenced: bool, in_controlled_shutdown: bool = False,
                 cordoned_log_dirs: Iterable[str] | None = None) -> Record:
    """Kafka's BrokerRegistrationChangeRecord; `cordonedLogDirs` (KIP-1066) only when they change."""
    rec: Record = {"type": BROKER_STATE, "brokerId": broker_id, "fenced": fenced,
                   "inControlledShutdown": in_controlled_shutdown}
    if cordoned_log_dirs is not None:
        rec["cordonedLogDirs"] = sorted(cordoned_log_dirs)
    return rec


def unregister_broker(broker_id: int, broker_epoch: int) -> Record:
    return {"type": UNREGISTER_BROKER, "brokerId": broker_id, "brokerEpoch": broker_epoch}


def topic(name: str, topic_id: str, configs: dict[str, str] | None = None) -> Record:
    return {"type": TOPIC, "name": name, "topicId": topic_id, "configs": dict(configs or {})}


def partition(topic_id: str, index: int, replicas: list[int], isr: list[int], leader: int,
              leader_epoch: int = 0, partition_epoch: int = 0, directories: list[str] | None = None) -> Record:
    """`directories` (KIP-858): one log dir id per replica, in replica order (UNASSIGNED_DIR when unknown)."""
    rec: Record = {"type": PARTITION, "topicId": topic_id, "partition": index, "replicas": list(replicas),
                   "isr": list(isr), "leader": leader, "leaderEpoch": leader_epoch, "partitionEpoch": partition_epoch}
    if directories is not None:
        rec["directories"] = list(directories)
    return rec


def partition_change(topic_id: str, index: int, *, isr: list[int] | None = None, leader: int | None = None,
                     replicas: list[int] | None = None, adding: list[int] | None = None,
                     removing: list[int] | None = None, bump_leader_epoch: bool = False,
                     elr: list[int] | None = None, last_known_elr: list[int] | None = None,
                     directories: list[str] | None = None) -> Record:
    """`elr` / `last_known_elr`: Kafka's EligibleLeaderReplicas / LastKnownElr (KIP-966), when they change;
    `directories`: Kafka's Directories (KIP-858), one log dir id per replica of the (new) replica list."""
    rec: Record = {"type": PARTITION_CHANGE, "topicId": topic_id, "partition": index}
    if adding is not None:
        rec["addingReplicas"] = list(adding)
    if removing is not None:
        rec["removingReplicas"] = list(removing)
    if bump_leader_epoch:
        rec["bumpLeaderEpoch"] = True
    if isr is not None:
        rec["isr"] = list(isr)
    if leader is not None:
        rec["leader"] = leader
    if replicas is not None:
        rec["replicas"] = list(replicas)
    if elr is not None:
        rec["eligibleLeaderReplicas"] = list(elr)
    if last_known_elr is not None:
        rec["lastKnownElr"] = list(last_known_elr)
    if directories is not None:
        rec["directories"] = list(directories)
    return rec


def remove_topic(topic_id: str) -> Record:
    return {"type": REMOVE_TOPIC, "topicId": topic_id}


def producer_ids(broker_id: int, broker_epoch: int, next_producer_id: int) -> Record:
    return {"type": PRODUCER_IDS, "brokerId": broker_id, "brokerEpoch": broker_epoch,
            "nextProducerId": next_producer_id}


def config(resource_type: int, resource_name: str, name: str, value: str | None) -> Record:
    return {"type": CONFIG, "resourceType": resource_type, "resourceName": resource_name, "name": name,
            "value": value}


AclRow = tuple[int, str, int, str, str, int, int]  # resource type, name, pattern type, principal, host, op, permission


def access_control_entry(acl_id: str, row: AclRow) -> Record:
    rt, name, pt, principal, host, op, perm = row
    return {"type": ACCESS_CONTROL_ENTRY, "id": acl_id, "resourceType": rt, "resourceName": name,
            "patternType": pt, "principal": principal, "host": host, "operation": op, "permissionType": perm}


def remove_access_control_entry(acl_id: str) -> Record:
    return {"type": REMOVE_ACCESS_CONTROL_ENTRY, "id": acl_id}


def user_scram_credential(name: str, mechanism: str, salt: str, stored_key: str, server_key: str,
                          iterations: int) -> Record:
    """`mechanism` as Kafka names it (SCRAM-SHA-256); salt and keys base64."""
    return {"type": USER_SCRAM_CREDENTIAL, "name": name, "mechanism": mechanism, "salt": salt,
            "storedKey": stored_key, "serverKey": server_key, "iterations": iterations}


def remove_user_scram_credential(name: str, mechanism: str) -> Record:
    return {"type": REMOVE_USER_SCRAM_CREDENTIAL, "name": name, "mechanism": mechanism}


def delegation_token(token_id: str, owner: str, requester: str, renewers: list[str], issue_ms: int, max_ms: int,
                     expiry_ms: int) -> Record:
    """Principals as "Type:name"; never the HMAC (derived from the secret key, as Kafka)."""
    return {"type": DELEGATION_TOKEN, "tokenId": token_id, "owner": owner, "requester": requester,
            "renewers": list(renewers), "issueTimestamp": issue_ms, "maxTimestamp": max_ms,
            "expirationTimestamp": expiry_ms}


def remove_delegation_token(token_id: str) -> Record:
    return {"type": REMOVE_DELEGATION_TOKEN, "tokenId": token_id}


def bootstrap_done() -> Record:
    return {"type": BOOTSTRAP_DONE}


def client_quota(entity: Iterable[tuple[str, str | None]], key: str, value: float | None) -> Record:
    """`entity`: (type, name) pairs, a None name the type's default; value None removes the key."""
    rec: Record = {"type": CLIENT_QUOTA, "entity": [[t, n] for t, n in entity], "key": key}
    if value is None:
        rec["remove"] = True
    else:
        rec["value"] = value
    return rec


def feature_level(name: str, level: int) -> Record:
    return {"type": FEATURE_LEVEL, "name": name, "featureLevel": level}
