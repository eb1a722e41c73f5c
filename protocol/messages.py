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
           "DefaultPrincipalData"]


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
