"""Authorized-operations sets as Kafka answers them without an authorizer configured.

Kafka (AuthHelper.authorizedOperations) then allows every operation the resource type supports
(AclEntry.supportedOperations) and sends them as a 32-bit field, bit n set for AclOperation code n.
kafka.protocol's codec takes the set of codes (and None for the schema default -2147483648, which
Kafka sends when the operations were not asked for).
"""
from __future__ import annotations

# AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

TOPIC_OPERATIONS = frozenset({READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS})
GROUP_OPERATIONS = frozenset({READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS})
CLUSTER_OPERATIONS = frozenset({CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                                DESCRIBE})


def bitfield(operations: frozenset[int] | None) -> int:
    """The wire value (Kafka's Utils.to32BitField; -2**31 for None)."""
    if operations is None:
        return -2**31
    return sum(1 << op for op in operations)
