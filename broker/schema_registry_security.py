"""The Schema Registry listener's security, from the broker's own (schema_registry/auth.py, access.py):

- authentication (`schema.registry.authentication.method`; empty: BASIC when a broker listener uses SASL):
  HTTP Basic credentials checked against the PLAIN users of the SASL listeners' JAAS configs and the broker's
  SCRAM credentials, read at each check (a user added by AlterUserScramCredentials logs in at once);
- authorization: the broker's ACL authorizer (`authorizer.class.name`), TOPIC resources only, its super users
  and `allow.everyone.if.no.acl.found` included; none configured: everything is allowed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minikafka.broker.state import BrokerState
    from minikafka.schema_registry.registry import SchemaRegistry
    from minikafka.schema_registry.rest_security import Security


def registry_security(state: "BrokerState", registry: "SchemaRegistry") -> "Security | None":
    """None when the listener is open: no authentication and no authorizer."""
    from minikafka.schema_registry.auth import KEY, Authenticator, resolve_method
    method = resolve_method(state.config.get(KEY), bool(state.config.sasl))  # checked by the config already
    authenticator = Authenticator(*_lookups(state)) if method == "BASIC" else None
    access = _access(state, registry) if state.authorizer is not None else None
    if authenticator is None and access is None:
        return None
    from minikafka.schema_registry.rest_security import Security
    return Security(authenticator, access)


def _lookups(state: "BrokerState") -> tuple[Any, Any]:
    plain: dict[str, tuple[str, ...]] = {}
    for settings in state.config.sasl.values():
        if "PLAIN" in settings.mechanisms:
            for user, password in settings.plain_users.items():
                plain[user] = (*plain.get(user, ()), password)

    def scram(user: str) -> dict[str, Any]:
        from minikafka.broker.security.sasl.scram import MECHANISMS
        store = state.scram_credentials
        found = {mechanism: store.get(user, mechanism) for mechanism in MECHANISMS}
        return {mechanism: cred for mechanism, cred in found.items() if cred is not None}
    return (lambda user: plain.get(user, ())), scram


def _access(state: "BrokerState", registry: "SchemaRegistry") -> Any:
    from minikafka.broker.security import acl as A
    from minikafka.broker.security.authorizer import host_of
    from minikafka.schema_registry.access import Access
    operations = {"READ": A.READ, "WRITE": A.WRITE, "DESCRIBE": A.DESCRIBE, "DESCRIBE_CONFIGS": A.DESCRIBE_CONFIGS,
                  "ALTER_CONFIGS": A.ALTER_CONFIGS}
    authorizer = state.authorizer
    assert authorizer is not None

    def authorize(principal: str, host: str, operation: str, topic: str) -> bool:
        return authorizer.allowed(principal, host_of(f"[{host}]:0"), operations[operation], A.TOPIC, topic)

    def subjects_of_id(schema_id: int) -> set[str]:
        return {subject for subject, _version in registry.state.id_users.get(schema_id, ())}
    return Access(authorize, subjects_of_id)
