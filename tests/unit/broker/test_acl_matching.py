"""broker/security/acl.py: StandardAuthorizer matching rules (literal, wildcard, prefixed, DENY wins, implied
operations, allow.everyone.if.no.acl.found) and AclBindingFilter matching."""
from __future__ import annotations

import pytest

from minikafka.broker.security import acl as A
from minikafka.broker.security.acl import AclBinding, AclFilter, AclSet, InvalidAclError, validate_new_acl

ANON = "User:ANONYMOUS"
HOST = "127.0.0.1"


def acl(name, op, perm=A.ALLOW, *, rtype=A.TOPIC, pattern=A.LITERAL, principal=ANON, host="*"):
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(acls, op, name, *, rtype=A.TOPIC, principal=ANON, host=HOST, everyone=False):
    return AclSet(acls).find(principal, host, op, rtype, name, everyone)


def test_literal_prefixed_and_wildcard_resources():
    assert allowed([acl("orders", A.READ)], A.READ, "orders")
    assert not allowed([acl("orders", A.READ)], A.READ, "orders2")
    assert allowed([acl("ord", A.READ, pattern=A.PREFIXED)], A.READ, "orders")
    assert not allowed([acl("ord", A.READ, pattern=A.PREFIXED)], A.READ, "or")
    assert allowed([acl("*", A.READ)], A.READ, "anything")
    assert not allowed([acl("*", A.READ, pattern=A.PREFIXED)], A.READ, "anything")  # prefix '*', not a wildcard
    assert not allowed([acl("orders", A.READ, rtype=A.GROUP)], A.READ, "orders")


def test_principal_and_host_match():
    assert allowed([acl("t", A.READ, principal="User:*")], A.READ, "t")
    assert not allowed([acl("t", A.READ, principal="User:alice")], A.READ, "t")
    assert allowed([acl("t", A.READ, host=HOST)], A.READ, "t")
    assert not allowed([acl("t", A.READ, host="10.0.0.1")], A.READ, "t")


def test_deny_wins_and_applies_to_its_operation_only():
    assert not allowed([acl("t", A.ALL), acl("t", A.READ, A.DENY)], A.READ, "t")
    assert not allowed([acl("t", A.READ), acl("t", A.ALL, A.DENY, pattern=A.PREFIXED)], A.READ, "t")
    assert not allowed([acl("t", A.READ), acl("*", A.READ, A.DENY, principal="User:*")], A.READ, "t")
    # a DENY of READ does not deny DESCRIBE (no implication for DENY)
    assert allowed([acl("t", A.DESCRIBE), acl("t", A.READ, A.DENY)], A.DESCRIBE, "t")


def test_implied_operations():
    for op in (A.READ, A.WRITE, A.DELETE, A.ALTER, A.DESCRIBE, A.ALL):
        assert allowed([acl("t", op)], A.DESCRIBE, "t"), op
    assert not allowed([acl("t", A.CREATE)], A.DESCRIBE, "t")
    assert allowed([acl("t", A.ALTER_CONFIGS)], A.DESCRIBE_CONFIGS, "t")
    assert not allowed([acl("t", A.DESCRIBE)], A.READ, "t")
    assert not allowed([acl("t", A.ALTER)], A.ALTER_CONFIGS, "t")


def test_allow_everyone_only_without_any_acl_on_the_resource():
    assert allowed([], A.READ, "t", everyone=True)
    assert not allowed([], A.READ, "t", everyone=False)
    # an ACL on the resource for someone else: no longer "no ACL found"
    assert not allowed([acl("t", A.READ, principal="User:bob")], A.READ, "t", everyone=True)
    assert allowed([acl("u", A.READ, principal="User:bob")], A.READ, "t", everyone=True)


def test_by_resource_type():
    s = AclSet([acl("a", A.WRITE)])
    assert s.by_resource_type(ANON, HOST, A.WRITE, A.TOPIC)
    assert not s.by_resource_type(ANON, HOST, A.READ, A.TOPIC)
    assert not AclSet([acl("abc", A.WRITE), acl("a", A.WRITE, A.DENY, pattern=A.PREFIXED)]).by_resource_type(
        ANON, HOST, A.WRITE, A.TOPIC)
    assert not AclSet([acl("*", A.WRITE), acl("*", A.WRITE, A.DENY)]).by_resource_type(ANON, HOST, A.WRITE, A.TOPIC)


def test_filters():
    lit = acl("orders", A.READ)
    pre = acl("ord", A.WRITE, pattern=A.PREFIXED)
    star = acl("*", A.READ)
    any_filter = AclFilter(A.R_ANY, None, A.P_ANY, None, None, A.O_ANY, A.PERM_ANY)
    assert all(any_filter.matches(a) for a in (lit, pre, star))
    match = any_filter._replace(resource_type=A.TOPIC, name="orders", pattern_type=A.MATCH)
    assert match.matches(lit) and match.matches(pre) and match.matches(star)
    exact = match._replace(pattern_type=A.LITERAL)
    assert exact.matches(lit) and not exact.matches(pre) and not exact.matches(star)
    assert not any_filter._replace(operation=A.WRITE).matches(lit)
    assert not any_filter._replace(principal="User:bob").matches(lit)
    assert any_filter._replace(name="ord").matches(pre) and not any_filter._replace(name="ord").matches(lit)


@pytest.mark.parametrize("bad", [
    acl("", A.READ), acl("x", A.READ, rtype=A.CLUSTER), acl("x", A.READ, pattern=A.MATCH),
    acl("x", A.O_ANY), acl("x", A.READ, A.PERM_ANY), acl("x", A.READ, principal="nocolon"),
    acl("x", A.READ, rtype=A.R_ANY),
])
def test_invalid_acls(bad):
    with pytest.raises(InvalidAclError):
        validate_new_acl(bad)
