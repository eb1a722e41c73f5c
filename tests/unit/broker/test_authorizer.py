"""broker/security/acl_store.py and broker/security/authorizer.py: durable store, decision cache dropped on change,
super users, resource-type checks, config keys."""
from __future__ import annotations

import asyncio
import json

import pytest

from minikafka.broker.security import acl as A
from minikafka.broker.security.acl import AclBinding, AclFilter
from minikafka.broker.security.acl_store import ACL_FILE, AclStore
from minikafka.broker.security.authorizer import Authorizer, host_of, parse_super_users

ANON = "User:ANONYMOUS"


def b(name: str, op: int, perm: int = A.ALLOW, **kw) -> AclBinding:
    return AclBinding(kw.get("rtype", A.TOPIC), name, kw.get("pattern", A.LITERAL), kw.get("principal", ANON),
                      kw.get("host", "*"), op, perm)


ANY = AclFilter(A.R_ANY, None, A.P_ANY, None, None, A.O_ANY, A.PERM_ANY)


def test_store_persists_and_reloads(tmp_path):
    store = AclStore(tmp_path)
    errors = asyncio.run(store.create([b("t", A.READ), b("t", A.READ), b("", A.READ)]))
    assert errors[0] is None and errors[1] is None and errors[2].code == 42
    assert asyncio.run(store.delete([ANY._replace(operation=A.WRITE)])) == [[]]
    again = AclStore(tmp_path)
    again.load()
    assert again.current.acls == {b("t", A.READ)}
    assert json.loads((tmp_path / ACL_FILE).read_text())["version"] == 1
    assert asyncio.run(again.delete([ANY])) == [[b("t", A.READ)]]
    third = AclStore(tmp_path)
    third.load()
    assert not third.current.acls


def test_corrupt_file_stops_start_up(tmp_path):
    (tmp_path / ACL_FILE).write_text("{not json")
    with pytest.raises(ValueError):
        AclStore(tmp_path).load()


def test_cache_dropped_when_acls_change(tmp_path):
    store = AclStore(tmp_path)
    auth = Authorizer(store, frozenset(), allow_if_no_acl=False)
    assert not auth.allowed(ANON, "127.0.0.1", A.READ, A.TOPIC, "t")
    asyncio.run(store.create([b("t", A.READ)]))
    assert auth.allowed(ANON, "127.0.0.1", A.READ, A.TOPIC, "t")
    asyncio.run(store.create([b("t", A.READ, A.DENY, host="127.0.0.1")]))
    assert not auth.allowed(ANON, "127.0.0.1", A.READ, A.TOPIC, "t")
    assert auth.allowed(ANON, "10.0.0.1", A.READ, A.TOPIC, "t")


def test_super_users_and_resource_type_checks(tmp_path):
    store = AclStore(tmp_path)
    asyncio.run(store.create([b("t", A.ALL, A.DENY, principal="User:*")]))
    auth = Authorizer(store, parse_super_users(" User:admin ; User:ops;"), allow_if_no_acl=True)
    assert auth.super_users == {"User:admin", "User:ops"}
    assert auth.allowed("User:admin", "1.2.3.4", A.WRITE, A.TOPIC, "t")
    assert not auth.allowed(ANON, "1.2.3.4", A.WRITE, A.TOPIC, "t")
    # allow.everyone: no ACL matches the fixed name the resource-type check looks at
    assert auth.allowed_by_resource_type(ANON, "1.2.3.4", A.WRITE, A.TOPIC)
    strict = Authorizer(store, frozenset(), allow_if_no_acl=False)
    assert not strict.allowed_by_resource_type(ANON, "1.2.3.4", A.WRITE, A.TOPIC)


def test_host_of():
    """As Java's InetAddress.getHostAddress, which Kafka compares ACL hosts with: IPv6 uncompressed."""
    assert host_of("127.0.0.1:5555") == "127.0.0.1"
    assert host_of("[::1]:5555") == "0:0:0:0:0:0:0:1"
    assert host_of("::1:5555") == "0:0:0:0:0:0:0:1"
    assert host_of("[2001:db8::ab:1]:9092") == "2001:db8:0:0:0:0:ab:1"
    assert host_of("[fe80::1%eth0]:9092") == "fe80:0:0:0:0:0:0:1%eth0"
    assert host_of("[::ffff:10.1.2.3]:9092") == "10.1.2.3"


def test_ipv6_host_acls_match_the_uncompressed_form(tmp_path):
    store = AclStore(tmp_path)
    auth = Authorizer(store, frozenset(), allow_if_no_acl=False)
    asyncio.run(store.create([b("t", A.READ, host="0:0:0:0:0:0:0:1")]))
    assert auth.allowed(ANON, host_of("[::1]:1234"), A.READ, A.TOPIC, "t")
    asyncio.run(store.create([b("u", A.READ, host="::1")]))  # Kafka never matches the compressed form
    assert not auth.allowed(ANON, host_of("[::1]:1234"), A.READ, A.TOPIC, "u")


def test_denials_are_not_cached_by_name(tmp_path):
    """No per-name memory: a client asking about many long names leaves nothing behind but the bounded
    audit digests."""
    from minikafka.broker.security import authorizer as mod
    store = AclStore(tmp_path)
    auth = Authorizer(store, frozenset(), allow_if_no_acl=False)
    for i in range(mod.AUDIT_MEMORY + 10):
        assert not auth.allowed(ANON, "127.0.0.1", A.DESCRIBE, A.GROUP, f"{i}-" + "g" * 32768)
    assert len(auth._audited) <= mod.AUDIT_MEMORY
    assert not hasattr(auth, "_cache")
