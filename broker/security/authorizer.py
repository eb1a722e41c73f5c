"""The broker's authorizer (Kafka's StandardAuthorizer) and the checks handlers call.

`authorizer.class.name` empty: no authorizer, every request is allowed (Kafka's default); handlers
see `ctx.broker.authorizer is None` and skip every check with that one attribute test.
`org.apache.kafka.metadata.authorizer.StandardAuthorizer`: ACLs from broker/security/acl_store.py, matched by
broker/security/acl.py; `super.users` are always allowed; `allow.everyone.if.no.acl.found` applies only when
no ACL matches the resource at all. As Kafka's StandardAuthorizer, no decision is cached: a lookup is a
few dict probes (broker/security/acl.py indexes literal names and prefixes), and a cache keyed by client-chosen
names (32 KiB group ids) would be memory a client could fill. Denials are logged once per decision
while the ACLs stay the same, remembered by a 64-bit digest in a set of at most AUDIT_MEMORY entries.
Any error while deciding denies.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, TypeVar

from minikafka.broker.security import acl as A
from minikafka.broker.security.acl_store import AclStore

if TYPE_CHECKING:
    from minikafka.broker.config.core import BrokerConfig
    from minikafka.broker.network.context import RequestContext

log = logging.getLogger(__name__)
audit = logging.getLogger("minikafka.authorizer")  # denials, as Kafka's kafka.authorizer.logger

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPPORTED_AUTHORIZERS = frozenset({"", STANDARD_AUTHORIZER})
AUDIT_MEMORY = 16_384  # denial digests remembered (an int each: ~1.5 MB at most with the set)

# AclEntry.supportedOperations: what authorized-operations fields report per resource type
SUPPORTED_OPERATIONS = {
    A.TOPIC: (A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS),
    A.GROUP: (A.READ, A.DESCRIBE, A.DELETE, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS),
    A.CLUSTER: (A.CREATE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE, A.ALTER,
                A.DESCRIBE),
    A.TRANSACTIONAL_ID: (A.DESCRIBE, A.WRITE, A.TWO_PHASE_COMMIT),
}

T = TypeVar("T")


def parse_super_users(spec: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by ';' (e.g. User:admin;User:ops)."""
    return frozenset(p.strip() for p in spec.split(";") if p.strip())


def host_of(peer: str) -> str:
    """The client's address as Kafka's InetAddress.getHostAddress, which ACL hosts are compared with (peer is
    'ip:port'): IPv4 dotted; IPv6 as Java writes it, eight hex groups without leading zeros and without
    `::` compression (0:0:0:0:0:0:0:1); an IPv4-mapped IPv6 address as its IPv4 address."""
    host = (peer.rpartition(":")[0] or peer).strip("[]")
    if ":" not in host:
        return host
    import ipaddress
    addr, _, scope = host.partition("%")
    try:
        ip = ipaddress.IPv6Address(addr)
    except ValueError:
        return host
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ip.packed
    java = ":".join(f"{(groups[i] << 8) | groups[i + 1]:x}" for i in range(0, 16, 2))
    return f"{java}%{scope}" if scope else java


class Authorizer:
    def __init__(self, store: AclStore, super_users: frozenset[str], allow_if_no_acl: bool) -> None:
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._audited: set[int] = set()  # digests of denials already logged under the current ACLs
        store.on_change(lambda _acls: self._audited.clear())

    def allowed(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        if not self.store.loaded:  # a cluster node before the metadata image was applied: fail closed
            return False
        try:
            result = self.store.current.find(principal, host, operation, resource_type, name, self.allow_if_no_acl)
        except Exception:  # never fail open
            log.exception("authorization check failed; denying")
            return False
        if not result:
            self._audit_denial(principal, host, operation, resource_type, name)
        return result

    def _audit_denial(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> None:
        """Kafka's authorizer audit line, once per decision while the ACLs stay the same (bounded memory)."""
        digest = hash((principal, host, operation, resource_type, name))
        if digest in self._audited:
            return
        if len(self._audited) >= AUDIT_MEMORY:
            self._audited.clear()
        self._audited.add(digest)
        audit.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                   principal, A.OPERATION_NAMES.get(operation, operation), host,
                   A.RESOURCE_TYPE_NAMES.get(resource_type, resource_type), name[:256])

    def allowed_by_resource_type(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Authorizer.authorizeByResourceType: allowed on some resource of the type (super users and
        allow.everyone.if.no.acl.found are honoured through a check of a fixed name first)."""
        if self.allowed(principal, host, operation, resource_type, "hardcode"):
            return True
        try:
            return self.store.current.by_resource_type(principal, host, operation, resource_type)
        except Exception:
            log.exception("authorization check failed; denying")
            return False


def build_authorizer(config: "BrokerConfig", data_dir: Path) -> Authorizer | None:
    name = config.get("authorizer.class.name").strip()
    if not name:
        return None
    store = AclStore(data_dir, follow_image=getattr(config, "quorum", None) is not None)
    if not store.follows_image:
        store.load()
    return Authorizer(store, parse_super_users(config.get("super.users")),
                      config.get_bool("allow.everyone.if.no.acl.found"))


# -- checks for handlers ------------------------------------------------------------------------
def authorize(ctx: "RequestContext", operation: int, resource_type: int, name: str) -> bool:
    """True if the request's principal may do `operation` on the resource (always without authorizer)."""
    auth = ctx.broker.authorizer
    if auth is None:
        return True
    return auth.allowed(ctx.principal, host_of(ctx.peer), operation, resource_type, name)


def authorize_cluster(ctx: "RequestContext", operation: int) -> bool:
    """`operation` on the CLUSTER resource kafka-cluster (e.g. ALTER for AlterUserScramCredentials)."""
    return authorize(ctx, operation, A.CLUSTER, A.CLUSTER_NAME)


def authorize_by_resource_type(ctx: "RequestContext", operation: int, resource_type: int) -> bool:
    auth = ctx.broker.authorizer
    if auth is None:
        return True
    return auth.allowed_by_resource_type(ctx.principal, host_of(ctx.peer), operation, resource_type)


def authorized_names(ctx: "RequestContext", operation: int, resource_type: int, names: Iterable[str]) -> set[str]:
    """The names (e.g. topics of a request, each checked once) the principal may `operation`."""
    auth = ctx.broker.authorizer
    if auth is None:
        return set(names)
    principal, host = ctx.principal, host_of(ctx.peer)
    return {n for n in set(names) if auth.allowed(principal, host, operation, resource_type, n)}


def authorized_operations(ctx: "RequestContext", resource_type: int, name: str) -> frozenset[int]:
    """AuthHelper.authorizedOperations: the supported operations of the resource the principal may do."""
    ops = SUPPORTED_OPERATIONS[resource_type]
    auth = ctx.broker.authorizer
    if auth is None:
        return frozenset(ops)
    principal, host = ctx.principal, host_of(ctx.peer)
    return frozenset(op for op in ops if auth.allowed(principal, host, op, resource_type, name))
