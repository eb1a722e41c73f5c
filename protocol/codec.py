"""Adapter over kafka-python's generated `kafka.protocol` message classes.

`decode_body` is ApiMessage.decode plus one check the generated decoder skips: a length field that
runs past the end of the frame (a truncated body) must be an error, not a silently short value.
"""
from __future__ import annotations


class DecodeError(ValueError):
    """The body does not decode as the declared API/version."""


def decode_body(message_class: type, data: memoryview, version: int):
    flexible = message_class.flexible_version_q(version)
    decoder = message_class._struct.compiled_decode_from(
        version, compact=flexible, tagged=flexible, data_class=message_class[None])
    try:
        message, end = decoder(data, 0)
    except Exception as exc:
        raise DecodeError(f"{message_class.__name__} v{version}: {exc!r}") from None
    if end > len(data):
        raise DecodeError(f"{message_class.__name__} v{version}: a length field runs {end - len(data)} bytes "
                          "past the end of the frame")
    message._version = version
    return message
