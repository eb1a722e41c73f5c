"""The dispatch table: API key -> handler.

Two views of it, kept identical by tests/unit/broker/test_registry.py:
- `API_TABLE`, static: API key -> (handler module, min version, max version). ApiVersions is
  answered from it, so the broker can advertise every API before any handler module is imported.
- `HANDLERS`, filled by the `@handles(request, response, min, max)` decorator of each handler module
  (one module per API family) as the module is imported: request/response classes and the function.
`spec_for` imports a handler module the first time its API is requested (on the event loop, once);
broker/warmup.py imports the rest in small steps after the listeners open.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Awaitable, Callable, NamedTuple

from minikafka.broker.log_opening import opening_partitions

if TYPE_CHECKING:
    from minikafka.broker.network.context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[Any]]
HANDLER_PACKAGE = "minikafka.broker.handlers"


class ApiEntry(NamedTuple):
    module: str  # under HANDLER_PACKAGE
    min_version: int
    max_version: int


API_TABLE: dict[int, ApiEntry] = {
    0: ApiEntry("produce", 3, 13),
    1: ApiEntry("fetch", 4, 18),
    2: ApiEntry("list_offsets", 1, 11),
    3: ApiEntry("metadata", 0, 13),
    8: ApiEntry("offset_commit", 2, 10),
    9: ApiEntry("offset_fetch", 1, 10),
    10: ApiEntry("find_coordinator", 0, 6),
    11: ApiEntry("groups", 0, 9),  # JoinGroup
    12: ApiEntry("groups", 0, 4),  # Heartbeat
    13: ApiEntry("groups", 0, 5),  # LeaveGroup
    14: ApiEntry("groups", 0, 5),  # SyncGroup
    15: ApiEntry("describe_groups", 0, 6),
    16: ApiEntry("list_groups", 0, 5),
    17: ApiEntry("sasl", 0, 1),  # SaslHandshake
    18: ApiEntry("api_versions", 0, 4),
    19: ApiEntry("topics", 2, 7),  # CreateTopics
    20: ApiEntry("topics", 1, 6),  # DeleteTopics
    21: ApiEntry("delete_records", 0, 2),
    22: ApiEntry("init_producer_id", 0, 5),
    23: ApiEntry("offset_for_leader_epoch", 2, 4),
    24: ApiEntry("add_partitions_to_txn", 0, 5),
    25: ApiEntry("add_offsets_to_txn", 0, 4),
    26: ApiEntry("end_txn", 0, 5),
    27: ApiEntry("write_txn_markers", 1, 2),
    28: ApiEntry("txn_offset_commit", 0, 5),
    29: ApiEntry("acls", 1, 3),  # DescribeAcls
    30: ApiEntry("acls", 1, 3),  # CreateAcls
    31: ApiEntry("acls", 1, 3),  # DeleteAcls
    32: ApiEntry("configs", 1, 4),  # DescribeConfigs
    33: ApiEntry("configs", 0, 2),  # AlterConfigs
    34: ApiEntry("log_dirs", 1, 2),  # AlterReplicaLogDirs
    35: ApiEntry("log_dirs", 1, 5),  # DescribeLogDirs
    36: ApiEntry("sasl", 0, 2),  # SaslAuthenticate
    37: ApiEntry("topics", 0, 3),  # CreatePartitions
    38: ApiEntry("delegation_tokens", 1, 3),  # CreateDelegationToken
    39: ApiEntry("delegation_tokens", 1, 2),  # RenewDelegationToken
    40: ApiEntry("delegation_tokens", 1, 2),  # ExpireDelegationToken
    41: ApiEntry("delegation_tokens", 1, 3),  # DescribeDelegationToken
    42: ApiEntry("delete_groups", 0, 2),
    43: ApiEntry("elect_leaders", 0, 2),
    44: ApiEntry("configs", 0, 1),  # IncrementalAlterConfigs
    45: ApiEntry("reassignments", 0, 1),  # AlterPartitionReassignments (forwarded to the active controller)
    46: ApiEntry("reassignments", 0, 0),  # ListPartitionReassignments
    47: ApiEntry("offset_delete", 0, 0),
    48: ApiEntry("client_quotas", 0, 1),  # DescribeClientQuotas
    49: ApiEntry("client_quotas", 0, 1),  # AlterClientQuotas (forwarded to the active controller in a cluster)
    50: ApiEntry("scram_credentials", 0, 0),  # DescribeUserScramCredentials
    51: ApiEntry("scram_credentials", 0, 0),  # AlterUserScramCredentials
    55: ApiEntry("describe_quorum", 0, 2),  # DescribeQuorum (a single node; a quorum node: QUORUM_BROKER_API_TABLE)
    80: ApiEntry("describe_quorum", 0, 1),  # AddRaftVoter (a single node: kraft.version 0, as Kafka's static node)
    81: ApiEntry("describe_quorum", 0, 0),  # RemoveRaftVoter
    57: ApiEntry("update_features", 0, 2),
    60: ApiEntry("cluster", 0, 2),  # DescribeCluster
    61: ApiEntry("describe_producers", 0, 0),
    64: ApiEntry("unregister_broker", 0, 0),  # UnregisterBroker (forwarded to the active controller in a cluster)
    65: ApiEntry("describe_transactions", 0, 0),
    66: ApiEntry("list_transactions", 0, 2),
    68: ApiEntry("consumer_group", 0, 1),  # ConsumerGroupHeartbeat
    69: ApiEntry("consumer_group", 0, 1),  # ConsumerGroupDescribe
    71: ApiEntry("telemetry", 0, 0),  # GetTelemetrySubscriptions (KIP-714)
    72: ApiEntry("telemetry", 0, 0),  # PushTelemetry
    74: ApiEntry("telemetry", 0, 1),  # ListConfigResources (v0: ListClientMetricsResources)
    75: ApiEntry("describe_topic_partitions", 0, 0),
    83: ApiEntry("share_group_state", 0, 0),  # InitializeShareGroupState (broker to broker)
    84: ApiEntry("share_group_state", 0, 0),  # ReadShareGroupState
    85: ApiEntry("share_group_state", 0, 1),  # WriteShareGroupState
    86: ApiEntry("share_group_state", 0, 0),  # DeleteShareGroupState
    87: ApiEntry("share_group_state", 0, 1),  # ReadShareGroupStateSummary
    76: ApiEntry("share_group", 1, 1),  # ShareGroupHeartbeat
    77: ApiEntry("share_group", 1, 1),  # ShareGroupDescribe
    78: ApiEntry("share_fetch", 1, 2),  # ShareFetch
    79: ApiEntry("share_fetch", 1, 2),  # ShareAcknowledge
    90: ApiEntry("share_group_offsets", 0, 1),  # DescribeShareGroupOffsets
    91: ApiEntry("share_group_offsets", 0, 0),  # AlterShareGroupOffsets
    92: ApiEntry("share_group_offsets", 0, 0),  # DeleteShareGroupOffsets
    88: ApiEntry("streams_group", 0, 0),  # StreamsGroupHeartbeat
    89: ApiEntry("streams_group", 0, 0),  # StreamsGroupDescribe
}

# What a CONTROLLER listener (controller.listener.names, KRaft combined mode) serves instead: the
# metadata quorum's RPCs (KIP-595) and what Kafka's admin tools ask a controller (--bootstrap-controller).
# As Kafka, these listeners answer nothing else, and broker listeners neither advertise nor serve
# Vote/BeginQuorumEpoch/EndQuorumEpoch. Fetch here is the quorum's Fetch of `__cluster_metadata`.
CONTROLLER_API_TABLE: dict[int, ApiEntry] = {
    1: ApiEntry("quorum", 13, 18),  # Fetch (the metadata log; v18: the follower's high watermark, KIP-1166)
    17: ApiEntry("sasl", 0, 1),  # SaslHandshake (SASL_* controller listeners: peers log in first)
    18: ApiEntry("api_versions", 0, 4),
    19: ApiEntry("controller", 2, 7),  # CreateTopics (forwarded by brokers; the active controller decides)
    20: ApiEntry("controller", 1, 6),  # DeleteTopics
    29: ApiEntry("acls", 1, 3),  # DescribeAcls (describe-side APIs: what `--bootstrap-controller` tools ask)
    32: ApiEntry("configs", 1, 4),  # DescribeConfigs
    41: ApiEntry("delegation_tokens", 1, 3),  # DescribeDelegationToken
    50: ApiEntry("scram_credentials", 0, 0),  # DescribeUserScramCredentials
    57: ApiEntry("update_features", 0, 2),  # UpdateFeatures
    30: ApiEntry("controller_security", 1, 3),  # CreateAcls (forwarded by brokers: AccessControlEntry records)
    31: ApiEntry("controller_security", 1, 3),  # DeleteAcls
    33: ApiEntry("controller", 0, 2),  # AlterConfigs (topic overrides forwarded by brokers)
    37: ApiEntry("controller", 0, 3),  # CreatePartitions
    38: ApiEntry("delegation_tokens", 1, 3),  # CreateDelegationToken (forwarded by brokers: DelegationToken records)
    39: ApiEntry("delegation_tokens", 1, 2),  # RenewDelegationToken
    40: ApiEntry("delegation_tokens", 1, 2),  # ExpireDelegationToken
    43: ApiEntry("controller", 0, 2),  # ElectLeaders
    44: ApiEntry("controller_security", 0, 1),  # IncrementalAlterConfigs (BROKER configs forwarded by brokers)
    45: ApiEntry("reassignments", 0, 1),  # AlterPartitionReassignments (KIP-455)
    46: ApiEntry("reassignments", 0, 0),  # ListPartitionReassignments
    51: ApiEntry("controller_security", 0, 0),  # AlterUserScramCredentials (forwarded by brokers)
    49: ApiEntry("controller_quotas", 0, 1),  # AlterClientQuotas (forwarded by brokers: ClientQuota records)
    52: ApiEntry("quorum", 0, 2),  # Vote (v2: KIP-996 pre-vote)
    53: ApiEntry("quorum", 0, 1),  # BeginQuorumEpoch
    54: ApiEntry("quorum", 0, 1),  # EndQuorumEpoch
    55: ApiEntry("quorum", 0, 2),  # DescribeQuorum
    36: ApiEntry("sasl", 0, 2),  # SaslAuthenticate
    56: ApiEntry("controller", 2, 3),  # AlterPartition (partition leaders' ISR changes)
    59: ApiEntry("quorum", 0, 1),  # FetchSnapshot (KIP-630: a follower behind the leader's log start)
    80: ApiEntry("quorum", 0, 1),  # AddRaftVoter (KIP-853, the quorum leader; kraft.version 1)
    81: ApiEntry("quorum", 0, 0),  # RemoveRaftVoter
    82: ApiEntry("quorum", 0, 0),  # UpdateRaftVoter (a voter's endpoints changed; controller listener only)
    60: ApiEntry("cluster", 0, 2),  # DescribeCluster
    62: ApiEntry("controller", 0, 4),  # BrokerRegistration
    63: ApiEntry("controller", 0, 2),  # BrokerHeartbeat
    67: ApiEntry("controller", 0, 0),  # AllocateProducerIds (KIP-730)
    64: ApiEntry("controller", 0, 0),  # UnregisterBroker (forwarded by brokers)
    70: ApiEntry("controller", 0, 0),  # ControllerRegistration (KIP-919: each controller registers with the active one)
    73: ApiEntry("dir_assignments", 0, 0),  # AssignReplicasToDirs (KIP-858: the dir of each broker's replicas)
    58: ApiEntry("envelope", 0, 0),  # Envelope: a client's request forwarded by a broker, with its principal
}

# Served on broker listeners too, but only by a node in a multi-node quorum: Kafka's brokers forward
# DescribeQuorum to the active controller (`kafka-metadata-quorum --bootstrap-server`). A single node
# advertises none of these (as before the quorum existed).
QUORUM_BROKER_API_TABLE: dict[int, ApiEntry] = {
    55: ApiEntry("quorum", 0, 2),  # DescribeQuorum
    80: ApiEntry("quorum", 0, 1),  # AddRaftVoter (forwarded to the quorum leader)
    81: ApiEntry("quorum", 0, 0),  # RemoveRaftVoter
}

# imported before the listeners open: what a client's first requests need
EAGER_MODULES = ("api_versions", "metadata")


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    request_class: type
    response_class: type
    min_version: int
    max_version: int
    handler: Handler

    def flexible(self, version: int) -> bool:
        return self.request_class.flexible_version_q(version)

    @cached_property
    def api_name(self) -> str:
        """Kafka's name of the API (ProduceRequest -> Produce), the `api` label of metrics."""
        return self.request_class.__name__.removesuffix("Request")


HANDLERS: dict[int, HandlerSpec] = {}
CONTROLLER_HANDLERS: dict[int, HandlerSpec] = {}  # controller-listener-only handlers (CONTROLLER_API_TABLE)


def handles(request_class: type, response_class: type, min_version: int, max_version: int, *,
            controller: bool = False):
    """Register `fn` for request_class.API_KEY in [min_version, max_version]. For APIs naming
    partitions, the registered handler first waits until their logs are open (broker/log_opening.py).
    controller=True: the handler of that API on controller listeners (CONTROLLER_API_TABLE); an API in
    both tables without such a handler is served by its broker handler there too."""
    assert request_class.API_KEY == response_class.API_KEY
    assert 0 <= min_version <= max_version <= request_class.max_version

    def register(fn: Handler) -> Handler:
        key = request_class.API_KEY
        table = CONTROLLER_HANDLERS if controller else HANDLERS
        if key in table:
            raise RuntimeError(f"API key {key} registered twice")
        table[key] = HandlerSpec(key, request_class, response_class, min_version, max_version,
                                 fn if controller else opening_partitions(key, fn))
        return fn
    return register


def module_name(entry: ApiEntry) -> str:
    return f"{HANDLER_PACKAGE}.{entry.module}"


def spec_for(api_key: int, controller: bool = False, quorum: bool = False) -> HandlerSpec | None:
    """The handler of `api_key`, importing its module on first use; None for an API we do not serve
    (on a controller listener when `controller`; on a broker listener of a quorum node when `quorum`)."""
    if quorum and not controller and api_key in QUORUM_BROKER_API_TABLE:
        importlib.import_module(module_name(QUORUM_BROKER_API_TABLE[api_key]))
        return CONTROLLER_HANDLERS.get(api_key)
    if controller:
        entry = CONTROLLER_API_TABLE.get(api_key)
        if entry is None:
            return None
        spec = CONTROLLER_HANDLERS.get(api_key)
        if spec is None:
            importlib.import_module(module_name(entry))
            spec = CONTROLLER_HANDLERS.get(api_key) or HANDLERS.get(api_key)
        return spec
    spec = HANDLERS.get(api_key)
    if spec is None:
        entry = API_TABLE.get(api_key)
        if entry is None:
            return None
        importlib.import_module(module_name(entry))
        spec = HANDLERS.get(api_key)
    return spec


def import_eager_handlers() -> None:
    for name in EAGER_MODULES:
        importlib.import_module(f"{HANDLER_PACKAGE}.{name}")


def advertised_versions(controller: bool = False, quorum: bool = False) -> list[tuple[int, int, int]]:
    """(api key, min version, max version) of every API, by key: what ApiVersions advertises (on a
    controller listener when `controller`; on a broker listener of a quorum node when `quorum`)."""
    table = CONTROLLER_API_TABLE if controller else (API_TABLE | QUORUM_BROKER_API_TABLE if quorum else API_TABLE)
    return [(key, e.min_version, e.max_version) for key, e in sorted(table.items())]
