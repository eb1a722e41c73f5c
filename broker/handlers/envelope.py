"""Envelope (API 58) on the CONTROLLER listener: a broker forwards a client's admin request with the client's
principal and address (protocol/envelope.py), and the request inside is handled here as that client's:
every authorization of the controller's handlers uses the forwarded principal and host, as Kafka's
ControllerApis does (EnvelopeUtils).

Checks, in Kafka's order: CLUSTER_ACTION on the cluster for the sender (a broker's inter-broker principal),
else CLUSTER_AUTHORIZATION_FAILED; a principal that does not deserialize, PRINCIPAL_DESERIALIZATION_FAILURE;
a client address that is not 4 or 16 bytes, INVALID_REQUEST; an inner request that does not parse,
UNSUPPORTED_VERSION; an inner API that is not forwardable (a nested Envelope included), INVALID_REQUEST. Errors
of the inner request travel inside the response, with the envelope's own error 0.
"""
from __future__ import annotations

import kafka.errors as ke

from minikafka.protocol.codec import decode_body
from minikafka.protocol.envelope import (EnvelopeError, address_from_bytes, inner_body_offset, inner_response_bytes,
                                  principal_from_bytes)
from minikafka.protocol.headers import HeaderError, peek_header
from minikafka.protocol.messages import EnvelopeRequest, EnvelopeResponse
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles, spec_for
from minikafka.protocol.errors import PRINCIPAL_DESERIALIZATION_FAILURE

CLUSTER_AUTHORIZATION_FAILED = ke.ClusterAuthorizationFailedError.errno
INVALID_REQUEST = ke.InvalidRequestError.errno
UNSUPPORTED_VERSION = ke.UnsupportedVersionError.errno
# the APIs brokers forward to the controller (Kafka's ApiKeys.forwardable among the controller's APIs)
FORWARDABLE = frozenset({
    19,  # CreateTopics
    20,  # DeleteTopics
    30,  # CreateAcls
    31,  # DeleteAcls
    33,  # AlterConfigs
    37,  # CreatePartitions
    38,  # CreateDelegationToken
    39,  # RenewDelegationToken
    40,  # ExpireDelegationToken
    43,  # ElectLeaders
    44,  # IncrementalAlterConfigs
    45,  # AlterPartitionReassignments
    46,  # ListPartitionReassignments
    49,  # AlterClientQuotas
    51,  # AlterUserScramCredentials
    57,  # UpdateFeatures
    64,  # UnregisterBroker
})


def _refused(code: int) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=None, error_code=code)


@handles(EnvelopeRequest, EnvelopeResponse, 0, 0, controller=True)
async def handle_envelope(ctx: RequestContext, req: EnvelopeRequest) -> EnvelopeResponse:
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return _refused(CLUSTER_AUTHORIZATION_FAILED)
    try:
        principal = principal_from_bytes(req.request_principal)
    except EnvelopeError:
        return _refused(PRINCIPAL_DESERIALIZATION_FAILURE)
    try:
        host = address_from_bytes(bytes(req.client_host_address or b""))
    except EnvelopeError:
        return _refused(INVALID_REQUEST)
    data = bytes(req.request_data or b"")
    try:
        header = peek_header(data)
    except HeaderError:
        return _refused(UNSUPPORTED_VERSION)
    if header.api_key not in FORWARDABLE:
        return _refused(INVALID_REQUEST)
    spec = spec_for(header.api_key, controller=True)
    version = header.api_version
    if spec is None or not spec.min_version <= version <= spec.max_version:
        return _refused(UNSUPPORTED_VERSION)
    flexible = spec.flexible(version)
    try:
        inner = decode_body(spec.request_class, memoryview(data)[inner_body_offset(data, flexible):], version)
    except Exception:  # untrusted bytes (inside a trusted sender's envelope, but still)
        return _refused(UNSUPPORTED_VERSION)
    peer = f"[{host}]:0" if ":" in host else f"{host}:0"
    client = RequestContext(ctx.broker, version, header.correlation_id, header.client_id, peer, ctx.listener,
                            principal, ctx.security_protocol, None, forwarded=True)
    response = await spec.handler(client, inner)
    body = response if isinstance(response, (bytes, bytearray)) else response.encode(version=version)
    return EnvelopeResponse(response_data=inner_response_bytes(header.correlation_id, flexible, body), error_code=0)
