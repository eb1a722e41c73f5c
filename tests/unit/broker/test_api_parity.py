"""ApiVersions parity with Apache Kafka 4.3.1 (issue 31, item 7): every API that Kafka 4.3.1 advertises on
a BROKER listener must be advertised by minikafka's broker listeners (single node and quorum broker) at
the same or a higher max version. What is still missing or lower is listed, with the reason, in
OPEN_IN_ISSUE_31; the set can only shrink: an entry whose API is now served at Kafka's version fails too,
so whoever closes a gap removes its key here.
"""
from __future__ import annotations

from minikafka.broker.network.registry import advertised_versions

# Kafka 4.3.1's ApiVersions on the broker listener of a fresh single combined node (KRaft, all features
# at their defaults), obtained by sending ApiVersions v3 to `python3 scripts/apache_kafka.py run` and
# checked against the JSON schemas of kafka-clients-4.3.1.jar (common/message/*Request.json: the
# requests whose `listeners` hold "broker", with their `validVersions`). Where the two differ:
# - Produce: the schema says 3-13, the broker advertises 0-13 (KIP-896 keeps v0-v2 advertised for old
#   librdkafka, which refuses a broker without them, and answers them UNSUPPORTED_VERSION).
# - InitProducerId: the schema says 0-6 with the last version unstable; the broker advertises 0-5.
# - GetTelemetrySubscriptions (71) / PushTelemetry (72) are advertised only with a client-telemetry
#   receiver (a metrics reporter plugin) configured, so a stock broker leaves them out. minikafka has one
#   built in (pushed metrics on /metrics) and advertises both at Kafka's versions (v0).
# api key -> (name, min version, max version)
KAFKA_4_3_1_BROKER_APIS: dict[int, tuple[str, int, int]] = {
    0: ("Produce", 0, 13),
    1: ("Fetch", 4, 18),
    2: ("ListOffsets", 1, 11),
    3: ("Metadata", 0, 13),
    8: ("OffsetCommit", 2, 10),
    9: ("OffsetFetch", 1, 10),
    10: ("FindCoordinator", 0, 6),
    11: ("JoinGroup", 0, 9),
    12: ("Heartbeat", 0, 4),
    13: ("LeaveGroup", 0, 5),
    14: ("SyncGroup", 0, 5),
    15: ("DescribeGroups", 0, 6),
    16: ("ListGroups", 0, 5),
    17: ("SaslHandshake", 0, 1),
    18: ("ApiVersions", 0, 4),
    19: ("CreateTopics", 2, 7),
    20: ("DeleteTopics", 1, 6),
    21: ("DeleteRecords", 0, 2),
    22: ("InitProducerId", 0, 5),
    23: ("OffsetForLeaderEpoch", 2, 4),
    24: ("AddPartitionsToTxn", 0, 5),
    25: ("AddOffsetsToTxn", 0, 4),
    26: ("EndTxn", 0, 5),
    27: ("WriteTxnMarkers", 1, 2),
    28: ("TxnOffsetCommit", 0, 5),
    29: ("DescribeAcls", 1, 3),
    30: ("CreateAcls", 1, 3),
    31: ("DeleteAcls", 1, 3),
    32: ("DescribeConfigs", 1, 4),
    33: ("AlterConfigs", 0, 2),
    34: ("AlterReplicaLogDirs", 1, 2),
    35: ("DescribeLogDirs", 1, 5),
    36: ("SaslAuthenticate", 0, 2),
    37: ("CreatePartitions", 0, 3),
    38: ("CreateDelegationToken", 1, 3),
    39: ("RenewDelegationToken", 1, 2),
    40: ("ExpireDelegationToken", 1, 2),
    41: ("DescribeDelegationToken", 1, 3),
    42: ("DeleteGroups", 0, 2),
    43: ("ElectLeaders", 0, 2),
    44: ("IncrementalAlterConfigs", 0, 1),
    45: ("AlterPartitionReassignments", 0, 1),
    46: ("ListPartitionReassignments", 0, 0),
    47: ("OffsetDelete", 0, 0),
    48: ("DescribeClientQuotas", 0, 1),
    49: ("AlterClientQuotas", 0, 1),
    50: ("DescribeUserScramCredentials", 0, 0),
    51: ("AlterUserScramCredentials", 0, 0),
    55: ("DescribeQuorum", 0, 2),
    57: ("UpdateFeatures", 0, 2),
    60: ("DescribeCluster", 0, 2),
    61: ("DescribeProducers", 0, 0),
    64: ("UnregisterBroker", 0, 0),
    65: ("DescribeTransactions", 0, 0),
    66: ("ListTransactions", 0, 2),
    68: ("ConsumerGroupHeartbeat", 0, 1),
    69: ("ConsumerGroupDescribe", 0, 1),
    74: ("ListConfigResources", 0, 1),
    75: ("DescribeTopicPartitions", 0, 0),
    76: ("ShareGroupHeartbeat", 1, 1),
    77: ("ShareGroupDescribe", 1, 1),
    78: ("ShareFetch", 1, 2),
    79: ("ShareAcknowledge", 1, 2),
    80: ("AddRaftVoter", 0, 1),
    81: ("RemoveRaftVoter", 0, 0),
    83: ("InitializeShareGroupState", 0, 0),
    84: ("ReadShareGroupState", 0, 0),
    85: ("WriteShareGroupState", 0, 1),
    86: ("DeleteShareGroupState", 0, 0),
    87: ("ReadShareGroupStateSummary", 0, 1),
    88: ("StreamsGroupHeartbeat", 0, 0),
    89: ("StreamsGroupDescribe", 0, 0),
    90: ("DescribeShareGroupOffsets", 0, 1),
    91: ("AlterShareGroupOffsets", 0, 0),
    92: ("DeleteShareGroupOffsets", 0, 0),
}

# Minimum versions minikafka may advertise above Kafka's advertised minimum (documented departures).
HIGHER_MIN_ALLOWED: dict[int, str] = {
    0: "Produce v0-v2 are advertised by Kafka 4.x only to be answered UNSUPPORTED_VERSION (KIP-896)",
}

# API key -> why minikafka's broker listener does not serve it at Kafka's version yet (issue 31).
OPEN_IN_ISSUE_31: dict[int, str] = {
}

VIEWS = {"single node": advertised_versions(), "quorum broker": advertised_versions(quorum=True)}


def _gaps(view: list[tuple[int, int, int]]) -> dict[int, str]:
    ours = {key: (lo, hi) for key, lo, hi in view}
    gaps = {}
    for key, (name, lo, hi) in KAFKA_4_3_1_BROKER_APIS.items():
        if key not in ours:
            gaps[key] = f"{name} ({key}) not advertised; Kafka 4.3.1: v{lo}-{hi}"
        elif ours[key][1] < hi:
            gaps[key] = f"{name} ({key}) up to v{ours[key][1]}; Kafka 4.3.1: v{hi}"
    return gaps


def test_every_kafka_broker_api_is_served_at_kafkas_version_or_listed_as_open():
    for view_name, view in VIEWS.items():
        unlisted = {k: why for k, why in _gaps(view).items() if k not in OPEN_IN_ISSUE_31}
        assert not unlisted, f"{view_name}: missing or lower than Kafka 4.3.1 and not in OPEN_IN_ISSUE_31: {unlisted}"


def test_open_entries_are_still_open():
    """An API served at Kafka's version on every broker listener must leave OPEN_IN_ISSUE_31."""
    still_open = set().union(*(_gaps(view) for view in VIEWS.values()))
    closed = {k: OPEN_IN_ISSUE_31[k] for k in OPEN_IN_ISSUE_31 if k not in still_open}
    assert not closed, f"now served at Kafka 4.3.1's version, remove from OPEN_IN_ISSUE_31: {closed}"


def test_min_versions_are_not_above_kafkas():
    for view_name, view in VIEWS.items():
        for key, lo, _hi in view:
            kafka = KAFKA_4_3_1_BROKER_APIS.get(key)
            if kafka is not None and key not in HIGHER_MIN_ALLOWED:
                assert lo <= kafka[1], (view_name, key, kafka[0], lo, kafka[1])


# Kafka 4.3.1's CONTROLLER listener: the requests whose schema's `listeners` hold "controller"
# (kafka-clients-4.3.1.jar common/message/*Request.json; Kafka's controller ApiVersions is built from them).
KAFKA_4_3_1_CONTROLLER_APIS: dict[int, tuple[str, int, int]] = {
    1: ("Fetch", 4, 18), 17: ("SaslHandshake", 0, 1), 18: ("ApiVersions", 0, 4), 19: ("CreateTopics", 2, 7),
    20: ("DeleteTopics", 1, 6), 29: ("DescribeAcls", 1, 3), 30: ("CreateAcls", 1, 3), 31: ("DeleteAcls", 1, 3),
    32: ("DescribeConfigs", 1, 4), 33: ("AlterConfigs", 0, 2), 36: ("SaslAuthenticate", 0, 2),
    37: ("CreatePartitions", 0, 3), 38: ("CreateDelegationToken", 1, 3), 39: ("RenewDelegationToken", 1, 2),
    40: ("ExpireDelegationToken", 1, 2), 41: ("DescribeDelegationToken", 1, 3), 43: ("ElectLeaders", 0, 2),
    44: ("IncrementalAlterConfigs", 0, 1), 45: ("AlterPartitionReassignments", 0, 1),
    46: ("ListPartitionReassignments", 0, 0), 49: ("AlterClientQuotas", 0, 1),
    50: ("DescribeUserScramCredentials", 0, 0), 51: ("AlterUserScramCredentials", 0, 0), 52: ("Vote", 0, 2),
    53: ("BeginQuorumEpoch", 0, 1), 54: ("EndQuorumEpoch", 0, 1), 55: ("DescribeQuorum", 0, 2),
    56: ("AlterPartition", 2, 3), 57: ("UpdateFeatures", 0, 2), 58: ("Envelope", 0, 0), 59: ("FetchSnapshot", 0, 1),
    60: ("DescribeCluster", 0, 2), 62: ("BrokerRegistration", 0, 4), 63: ("BrokerHeartbeat", 0, 2),
    64: ("UnregisterBroker", 0, 0), 67: ("AllocateProducerIds", 0, 0), 70: ("ControllerRegistration", 0, 0),
    73: ("AssignReplicasToDirs", 0, 0), 80: ("AddRaftVoter", 0, 1), 81: ("RemoveRaftVoter", 0, 0),
    82: ("UpdateRaftVoter", 0, 0),
}
# API key -> why minikafka's controller listener does not serve it at Kafka's version (a departure, stated).
CONTROLLER_DEPARTURES: dict[int, str] = {
    1: "(min version only) the controller's Fetch is the metadata quorum's: v13+ (topic ids)",
}


def test_the_controller_listener_serves_kafkas_controller_apis():
    ours = {key: (lo, hi) for key, lo, hi in advertised_versions(controller=True)}
    gaps = {}
    for key, (name, _lo, hi) in KAFKA_4_3_1_CONTROLLER_APIS.items():
        if key in ours and ours[key][1] >= hi:
            continue
        if key not in CONTROLLER_DEPARTURES:
            gaps[key] = f"{name} ({key}): ours {ours.get(key)}, Kafka 4.3.1 up to v{hi}"
    assert not gaps, gaps
    assert set(ours) <= set(KAFKA_4_3_1_CONTROLLER_APIS), set(ours) - set(KAFKA_4_3_1_CONTROLLER_APIS)
