"""Request/response classes of APIs kafka-python does not ship: kafka-python's ApiMessage built from
the JSON schemas in protocol/schemas/ (same codec as every other API)."""
from __future__ import annotations

from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage

from minikafka.protocol import schemas

__all__ = ["ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse", "ConsumerGroupDescribeRequest",
           "ConsumerGroupDescribeResponse", "VoteRequest", "VoteResponse", "BeginQuorumEpochRequest",
           "BeginQuorumEpochResponse", "EndQuorumEpochRequest", "EndQuorumEpochResponse",
           "BrokerRegistrationRequest", "BrokerRegistrationResponse", "BrokerHeartbeatRequest", "BrokerHeartbeatResponse", "AlterPartitionRequest", "AlterPartitionResponse", "AllocateProducerIdsRequest", "AllocateProducerIdsResponse",
           "FetchSnapshotRequest", "FetchSnapshotResponse", "EnvelopeRequest", "EnvelopeResponse",
           "DefaultPrincipalData",
           "ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponse", "ShareGroupDescribeRequest",
           "ShareGroupDescribeResponse", "ShareFetchRequest", "ShareFetchResponse", "ShareAcknowledgeRequest",
           "ShareAcknowledgeResponse", "InitializeShareGroupStateRequest", "InitializeShareGroupStateResponse",
           "ReadShareGroupStateRequest", "ReadShareGroupStateResponse", "WriteShareGroupStateRequest",
           "WriteShareGroupStateResponse", "DeleteShareGroupStateRequest", "DeleteShareGroupStateResponse",
           "ReadShareGroupStateSummaryRequest", "ReadShareGroupStateSummaryResponse", "StreamsGroupHeartbeatRequest",
           "StreamsGroupHeartbeatResponse", "StreamsGroupDescribeRequest", "StreamsGroupDescribeResponse",
           "DescribeShareGroupOffsetsRequest", "DescribeShareGroupOffsetsResponse", "AlterShareGroupOffsetsRequest",
           "AlterShareGroupOffsetsResponse", "DeleteShareGroupOffsetsRequest", "DeleteShareGroupOffsetsResponse",
           "ShareSnapshotKey", "ShareSnapshotValue", "ShareUpdateKey", "ShareUpdateValue",
           "ShareGroupMemberMetadataKey", "ShareGroupMemberMetadataValue", "ShareGroupMetadataKey",
           "ShareGroupMetadataValue", "ShareGroupTargetAssignmentMetadataKey",
           "ShareGroupTargetAssignmentMetadataValue", "ShareGroupTargetAssignmentMemberKey",
           "ShareGroupTargetAssignmentMemberValue", "ShareGroupCurrentMemberAssignmentKey",
           "ShareGroupCurrentMemberAssignmentValue", "ShareGroupStatePartitionMetadataKey",
           "ShareGroupStatePartitionMetadataValue", "StreamsGroupMetadataKey", "StreamsGroupMetadataValue",
           "StreamsGroupMemberMetadataKey", "StreamsGroupMemberMetadataValue",
           "StreamsGroupTargetAssignmentMetadataKey", "StreamsGroupTargetAssignmentMetadataValue",
           "StreamsGroupTargetAssignmentMemberKey", "StreamsGroupTargetAssignmentMemberValue",
           "StreamsGroupCurrentMemberAssignmentKey", "StreamsGroupCurrentMemberAssignmentValue",
           "StreamsGroupTopologyKey", "StreamsGroupTopologyValue",
           "CreateDelegationTokenRequest", "CreateDelegationTokenResponse", "RenewDelegationTokenRequest", "RenewDelegationTokenResponse", "ExpireDelegationTokenRequest", "ExpireDelegationTokenResponse", "DescribeDelegationTokenRequest", "DescribeDelegationTokenResponse",
           "GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse", "PushTelemetryRequest",
           "PushTelemetryResponse", "UnregisterBrokerRequest", "UnregisterBrokerResponse",
           "AddRaftVoterRequest", "AddRaftVoterResponse", "RemoveRaftVoterRequest", "RemoveRaftVoterResponse",
           "UpdateRaftVoterRequest", "UpdateRaftVoterResponse",
           "ControllerRegistrationRequest", "ControllerRegistrationResponse",
           "AssignReplicasToDirsRequest", "AssignReplicasToDirsResponse"]


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


class VoteRequest(ApiMessage, load_json=schemas):
    pass


class VoteResponse(ApiMessage, load_json=schemas):
    pass


class BeginQuorumEpochRequest(ApiMessage, load_json=schemas):
    pass


class BeginQuorumEpochResponse(ApiMessage, load_json=schemas):
    pass


class EndQuorumEpochRequest(ApiMessage, load_json=schemas):
    pass


class EndQuorumEpochResponse(ApiMessage, load_json=schemas):
    pass


class BrokerRegistrationRequest(ApiMessage, load_json=schemas):
    pass


class BrokerRegistrationResponse(ApiMessage, load_json=schemas):
    pass


class BrokerHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class BrokerHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class AlterPartitionRequest(ApiMessage, load_json=schemas):
    pass


class AlterPartitionResponse(ApiMessage, load_json=schemas):
    pass


class AllocateProducerIdsRequest(ApiMessage, load_json=schemas):
    pass


class AllocateProducerIdsResponse(ApiMessage, load_json=schemas):
    pass


class FetchSnapshotRequest(ApiMessage, load_json=schemas):
    pass


class FetchSnapshotResponse(ApiMessage, load_json=schemas):
    pass


class EnvelopeRequest(ApiMessage, load_json=schemas):
    pass


class EnvelopeResponse(ApiMessage, load_json=schemas):
    pass


class DefaultPrincipalData(ApiData, load_json=schemas):
    """A forwarded client principal as Kafka's DefaultKafkaPrincipalBuilder serializes it (version-prefixed)."""


# Share groups (KIP-932) and streams groups (KIP-1071): API keys 76-79, 83-92, versions as in Kafka 4.3.1.

class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


class ShareFetchRequest(ApiMessage, load_json=schemas):
    pass


class ShareFetchResponse(ApiMessage, load_json=schemas):
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=schemas):
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=schemas):
    pass


class InitializeShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class InitializeShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class WriteShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class WriteShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupStateRequest(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupStateResponse(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json=schemas):
    pass


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json=schemas):
    pass


class StreamsGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class StreamsGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas):
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas):
    pass


# Client telemetry (KIP-714): API keys 71, 72, versions as in Kafka 4.3.1.

class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=schemas):
    pass


class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=schemas):
    pass


class PushTelemetryRequest(ApiMessage, load_json=schemas):
    pass


class PushTelemetryResponse(ApiMessage, load_json=schemas):
    pass


# Coordinator records: Kafka's coordinator-key/-value schemas loaded as "data". A record key on the wire is the
# int16 record type (noted per class) + the key fields, so encode keys with header=False and prepend the type
# (ApiData's header would write the version, 0); a value is its int16 version + fields (encode(header=True)).

class ShareSnapshotKey(ApiData, load_json=schemas):  # record type 0 in __share_group_state
    pass


class ShareSnapshotValue(ApiData, load_json=schemas):
    pass


class ShareUpdateKey(ApiData, load_json=schemas):  # record type 1 in __share_group_state
    pass


class ShareUpdateValue(ApiData, load_json=schemas):
    pass


class ShareGroupMemberMetadataKey(ApiData, load_json=schemas):  # record type 10 in __consumer_offsets
    pass


class ShareGroupMemberMetadataValue(ApiData, load_json=schemas):
    pass


class ShareGroupMetadataKey(ApiData, load_json=schemas):  # record type 11 in __consumer_offsets
    pass


class ShareGroupMetadataValue(ApiData, load_json=schemas):
    pass


class ShareGroupTargetAssignmentMetadataKey(ApiData, load_json=schemas):  # record type 12 in __consumer_offsets
    pass


class ShareGroupTargetAssignmentMetadataValue(ApiData, load_json=schemas):
    pass


class ShareGroupTargetAssignmentMemberKey(ApiData, load_json=schemas):  # record type 13 in __consumer_offsets
    pass


class ShareGroupTargetAssignmentMemberValue(ApiData, load_json=schemas):
    pass


class ShareGroupCurrentMemberAssignmentKey(ApiData, load_json=schemas):  # record type 14 in __consumer_offsets
    pass


class ShareGroupCurrentMemberAssignmentValue(ApiData, load_json=schemas):
    pass


class ShareGroupStatePartitionMetadataKey(ApiData, load_json=schemas):  # record type 15 in __consumer_offsets
    pass


class ShareGroupStatePartitionMetadataValue(ApiData, load_json=schemas):
    pass


class StreamsGroupMetadataKey(ApiData, load_json=schemas):  # record type 17 in __consumer_offsets
    pass


class StreamsGroupMetadataValue(ApiData, load_json=schemas):
    pass


class StreamsGroupMemberMetadataKey(ApiData, load_json=schemas):  # record type 19 in __consumer_offsets
    pass


class StreamsGroupMemberMetadataValue(ApiData, load_json=schemas):
    pass


class StreamsGroupTargetAssignmentMetadataKey(ApiData, load_json=schemas):  # record type 20 in __consumer_offsets
    pass


class StreamsGroupTargetAssignmentMetadataValue(ApiData, load_json=schemas):
    pass


class StreamsGroupTargetAssignmentMemberKey(ApiData, load_json=schemas):  # record type 21 in __consumer_offsets
    pass


class StreamsGroupTargetAssignmentMemberValue(ApiData, load_json=schemas):
    pass


class StreamsGroupCurrentMemberAssignmentKey(ApiData, load_json=schemas):  # record type 22 in __consumer_offsets
    pass


class StreamsGroupCurrentMemberAssignmentValue(ApiData, load_json=schemas):
    pass


class StreamsGroupTopologyKey(ApiData, load_json=schemas):  # record type 23 in __consumer_offsets
    pass


class StreamsGroupTopologyValue(ApiData, load_json=schemas):
    pass


class CreateDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class CreateDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class RenewDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class RenewDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class ExpireDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class ExpireDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class DescribeDelegationTokenRequest(ApiMessage, load_json=schemas):
    pass


class DescribeDelegationTokenResponse(ApiMessage, load_json=schemas):
    pass


class UnregisterBrokerRequest(ApiMessage, load_json=schemas):
    pass


class UnregisterBrokerResponse(ApiMessage, load_json=schemas):
    pass


class ControllerRegistrationRequest(ApiMessage, load_json=schemas):  # KIP-919
    pass


class ControllerRegistrationResponse(ApiMessage, load_json=schemas):
    pass


class AddRaftVoterRequest(ApiMessage, load_json=schemas):  # KIP-853
    pass


class AddRaftVoterResponse(ApiMessage, load_json=schemas):
    pass


class RemoveRaftVoterRequest(ApiMessage, load_json=schemas):
    pass


class RemoveRaftVoterResponse(ApiMessage, load_json=schemas):
    pass


class UpdateRaftVoterRequest(ApiMessage, load_json=schemas):
    pass


class UpdateRaftVoterResponse(ApiMessage, load_json=schemas):
    pass


class AssignReplicasToDirsRequest(ApiMessage, load_json=schemas):
    pass


class AssignReplicasToDirsResponse(ApiMessage, load_json=schemas):
    pass
