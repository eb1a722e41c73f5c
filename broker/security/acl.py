"""ACL model and Kafka's StandardAuthorizer matching rules (pure: no I/O, no broker state).

Codes are Kafka's (ResourceType, PatternType, AclOperation, AclPermissionType). An ACL binding is a
resource pattern (type, name, LITERAL or PREFIXED) plus an entry (principal, host, operation,
ALLOW/DENY). Invariants of `AclSet.find`, as StandardAuthorizerData.findAclRule:
- an ACL applies to a resource if it is LITERAL with the same name, LITERAL `*`, or PREFIXED with a
  prefix of the name; to a principal if it names it or `User:*`; to a host if it names it or `*`;
- DENY wins over ALLOW; a DENY applies to its own operation only (or ALL); an ALLOW of READ, WRITE,
  DELETE or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS;
- when no ACL at all applies to the resource, the answer is `allow.everyone.if.no.acl.found`;
  when ACLs apply to it but none allows the principal, the answer is deny.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

# ResourceType
R_UNKNOWN, R_ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = range(8)
# PatternType
P_UNKNOWN, P_ANY, MATCH, LITERAL, PREFIXED = range(5)
# AclOperation
(O_UNKNOWN, O_ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
 ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT) = range(16)
# AclPermissionType
PERM_UNKNOWN, PERM_ANY, DENY, ALLOW = range(4)

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

RESOURCE_TYPE_NAMES = {R_UNKNOWN: "UNKNOWN", R_ANY: "ANY", TOPIC: "TOPIC", GROUP: "GROUP", CLUSTER: "CLUSTER",
                       TRANSACTIONAL_ID: "TRANSACTIONAL_ID", DELEGATION_TOKEN: "DELEGATION_TOKEN", USER: "USER"}
PATTERN_TYPE_NAMES = {P_UNKNOWN: "UNKNOWN", P_ANY: "ANY", MATCH: "MATCH", LITERAL: "LITERAL", PREFIXED: "PREFIXED"}
OPERATION_NAMES = {O_UNKNOWN: "UNKNOWN", O_ANY: "ANY", ALL: "ALL", READ: "READ", WRITE: "WRITE", CREATE: "CREATE",
                   DELETE: "DELETE", ALTER: "ALTER", DESCRIBE: "DESCRIBE", CLUSTER_ACTION: "CLUSTER_ACTION",
                   DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS", ALTER_CONFIGS: "ALTER_CONFIGS",
                   IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE", CREATE_TOKENS: "CREATE_TOKENS",
                   DESCRIBE_TOKENS: "DESCRIBE_TOKENS", TWO_PHASE_COMMIT: "TWO_PHASE_COMMIT"}
PERMISSION_NAMES = {PERM_UNKNOWN: "UNKNOWN", PERM_ANY: "ANY", DENY: "DENY", ALLOW: "ALLOW"}

IMPLIES_DESCRIBE = frozenset({DESCRIBE, READ, WRITE, DELETE, ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS})


class InvalidAclError(ValueError):
    """An ACL or filter Kafka refuses: INVALID_REQUEST (42) with Kafka's message, or, for what its
    controller rejects internally (ANY/UNKNOWN/MATCH values), UNKNOWN_SERVER_ERROR (-1) without one."""

    def __init__(self, message: str | None, code: int = 42) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


class AclBinding(NamedTuple):
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def describe(self) -> str:
        return (f"(pattern=ResourcePattern(resourceType={RESOURCE_TYPE_NAMES.get(self.resource_type)}, "
                f"name={self.name}, patternType={PATTERN_TYPE_NAMES.get(self.pattern_type)}), "
                f"entry=(principal={self.principal}, host={self.host}, "
                f"operation={OPERATION_NAMES.get(self.operation)}, "
                f"permissionType={PERMISSION_NAMES.get(self.permission)}))")


class AclFilter(NamedTuple):
    """Kafka's AclBindingFilter; None for a name/principal/host matches any."""
    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def is_unknown(self) -> bool:
        return (self.pattern_type == P_UNKNOWN or self.resource_type == R_UNKNOWN
                or self.operation == O_UNKNOWN or self.permission == PERM_UNKNOWN)

    def matches(self, acl: AclBinding) -> bool:
        """ResourcePatternFilter.matches and AccessControlEntryFilter.matches together."""
        if self.resource_type != R_ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (P_ANY, MATCH) and self.pattern_type != acl.pattern_type:
            return False
        if self.name is not None:
            if self.pattern_type in (P_ANY, acl.pattern_type):
                if self.name != acl.name:
                    return False
            elif acl.pattern_type == LITERAL:  # MATCH against a literal ACL
                if self.name != acl.name and acl.name != WILDCARD:
                    return False
            elif acl.pattern_type == PREFIXED:  # MATCH against a prefixed ACL
                if not self.name.startswith(acl.name):
                    return False
            else:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != O_ANY and self.operation != acl.operation:
            return False
        return self.permission == PERM_ANY or self.permission == acl.permission


def validate_new_acl(acl: AclBinding) -> None:
    """AclControlManager.validateNewAcl plus AclApis' checks; raises InvalidAclError."""
    if acl.resource_type == CLUSTER and acl.name != CLUSTER_NAME:
        raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not acl.name:
        raise InvalidAclError("Invalid empty resource name")
    _principal_type, sep, _name = acl.principal.partition(":")
    if not sep:
        raise InvalidAclError(f"Could not parse principal from `{acl.principal}` (no colon is present "
                              "separating the principal type from the principal name)")
    if (acl.resource_type not in RESOURCE_TYPE_NAMES or acl.resource_type in (R_UNKNOWN, R_ANY)
            or acl.pattern_type not in (LITERAL, PREFIXED)
            or acl.operation not in OPERATION_NAMES or acl.operation in (O_UNKNOWN, O_ANY)
            or acl.permission not in (ALLOW, DENY)):
        raise InvalidAclError(None, -1)


def _entry_result(acl: AclBinding, principal: str, host: str, operation: int) -> int | None:
    """ALLOW/DENY if `acl` applies to (principal, host, operation), else None (findResult)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != ALL:
        if acl.permission == ALLOW:
            if operation == DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission


def resource_matches(acl: AclBinding, resource_type: int, name: str) -> bool:
    if acl.resource_type != resource_type:
        return False
    if acl.pattern_type == LITERAL:
        return acl.name == name or acl.name == WILDCARD
    return acl.pattern_type == PREFIXED and name.startswith(acl.name)


class AclSet:
    """The ACLs of the broker, indexed for `find` (immutable once built): literal ACLs by
    (type, name) (the wildcard `*` among them), prefixed ones by type."""

    def __init__(self, acls: Iterable[AclBinding] = ()) -> None:
        self.acls: frozenset[AclBinding] = frozenset(acls)
        by_type: dict[int, list[AclBinding]] = {}
        literal: dict[tuple[int, str], list[AclBinding]] = {}
        prefixed: dict[tuple[int, str], list[AclBinding]] = {}
        prefix_lengths: dict[int, set[int]] = {}
        for acl in self.acls:
            by_type.setdefault(acl.resource_type, []).append(acl)
            if acl.pattern_type == LITERAL:
                literal.setdefault((acl.resource_type, acl.name), []).append(acl)
            elif acl.pattern_type == PREFIXED:
                prefixed.setdefault((acl.resource_type, acl.name), []).append(acl)
                prefix_lengths.setdefault(acl.resource_type, set()).add(len(acl.name))
        self._by_type = by_type
        self._literal = literal
        self._prefixed = prefixed
        # per type, the distinct lengths of its prefixes: a lookup probes one dict entry per length
        self._prefix_lengths = {t: sorted(lengths) for t, lengths in prefix_lengths.items()}

    def _matching(self, resource_type: int, name: str) -> Iterable[AclBinding]:
        """The ACLs whose pattern covers (type, name): O(distinct prefix lengths), not O(ACLs)."""
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            yield from self._prefixed.get((resource_type, name[:length]), ())

    def find(self, principal: str, host: str, operation: int, resource_type: int, name: str,
             allow_if_no_acl: bool) -> bool:
        """True if the ACLs allow `operation` on the LITERAL resource (type, name)."""
        any_acl = False
        allowed = False
        for acl in self._matching(resource_type, name):
            any_acl = True
            result = _entry_result(acl, principal, host, operation)
            if result == DENY:
                return False
            if result == ALLOW:
                allowed = True
        if allowed:
            return True
        return allow_if_no_acl and not any_acl

    def by_resource_type(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """The ACL part of Authorizer.authorizeByResourceType: some resource of this type may be
        allowed, i.e. an ALLOW not dominated by a DENY (a literal deny of the same name or a prefix
        deny of a prefix of it; a literal `*` deny denies all)."""
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[AclBinding] = []
        wildcard_allow = False
        for acl in self._by_type.get(resource_type, ()):
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != operation and acl.operation != ALL:
                continue
            if acl.permission == DENY:
                if acl.pattern_type == LITERAL:
                    if acl.name == WILDCARD:
                        return False
                    deny_literal.add(acl.name)
                elif acl.pattern_type == PREFIXED:
                    deny_prefixed.add(acl.name)
            elif acl.permission == ALLOW:
                if acl.pattern_type == LITERAL and acl.name == WILDCARD:
                    wildcard_allow = True
                else:
                    allow.append(acl)
        if wildcard_allow:
            return True
        for acl in allow:
            if acl.pattern_type == LITERAL and acl.name in deny_literal:
                continue
            if not any(acl.name[:i] in deny_prefixed for i in range(1, len(acl.name) + 1)):
                return True
        return False
