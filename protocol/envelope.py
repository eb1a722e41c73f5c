"""Kafka's Envelope (API 58): a broker forwards a client's admin request to the active controller inside
an Envelope that carries the request's bytes (header included), the client's principal (Kafka's
DefaultKafkaPrincipalBuilder serialization: a version-prefixed DefaultPrincipalData) and the client's IP
address (4 or 16 bytes). The controller authorizes the inner request as that principal from that address,
and answers with the inner response's bytes (header included) inside an EnvelopeResponse.

Pure encode/decode helpers; what is forwarded and how it is authorized is broker/cluster/forwarding.py and
broker/handlers/envelope.py.
"""
from __future__ import annotations

import ipaddress
import struct
from typing import Any

from minikafka.protocol.headers import body_offset
from minikafka.protocol.messages import DefaultPrincipalData

PRINCIPAL_VERSION = 0
_INT32 = struct.Struct(">i")


class EnvelopeError(ValueError):
    """An Envelope field that cannot be read (the controller answers with Kafka's error code)."""


def principal_bytes(principal: str) -> bytes:
    """"User:alice" as Kafka's principal serde writes it."""
    kind, _, name = principal.partition(":")
    return bytes(DefaultPrincipalData(type=kind, name=name, token_authenticated=False).encode(version=PRINCIPAL_VERSION))


def principal_from_bytes(data: bytes | None) -> str:
    """The "Type:name" principal of `principal_bytes`; EnvelopeError if absent or unreadable."""
    if not data:
        raise EnvelopeError("no principal in the envelope")
    try:
        p = DefaultPrincipalData.decode(bytes(data))
    except Exception as exc:  # untrusted bytes
        raise EnvelopeError(f"principal does not deserialize: {exc!r}") from None
    if not p.type or p.name is None:
        raise EnvelopeError("principal without type or name")
    return f"{p.type}:{p.name}"


def address_bytes(host: str) -> bytes:
    """The client's IP as Java's InetAddress.getAddress (4 bytes IPv4, 16 bytes IPv6)."""
    return ipaddress.ip_address(host.split("%")[0]).packed


def address_from_bytes(data: bytes) -> str:
    """The textual IP of `address_bytes` (compressed IPv6, as a socket peer name reads)."""
    if len(data) not in (4, 16):
        raise EnvelopeError(f"client address of {len(data)} bytes")
    return str(ipaddress.ip_address(bytes(data)))


def inner_request_bytes(req: Any, version: int, client_id: str | None, correlation_id: int = 0) -> bytes:
    """`req` encoded with its request header, as the envelope carries it (no size prefix)."""
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(req.encode(version=version, header=True))


def inner_body_offset(data: bytes, flexible: bool) -> int:
    try:
        return body_offset(data, flexible)
    except Exception as exc:
        raise EnvelopeError(f"inner request header: {exc}") from None


def inner_response_bytes(correlation_id: int, flexible_header: bool, body: bytes | bytearray) -> bytes:
    """A response with its header (v1 adds an empty tagged-field section), without size prefix."""
    return _INT32.pack(correlation_id) + (b"\x00" if flexible_header else b"") + bytes(body)


def inner_response_body(data: bytes, flexible_header: bool) -> memoryview:
    """The body of an inner response (after its header)."""
    if len(data) < 4 + flexible_header:
        raise EnvelopeError("inner response shorter than its header")
    return memoryview(data)[4 + (1 if flexible_header else 0):]
