"""Client quota entities and values as Kafka's controller validates them (ClientQuotaControlManager)
and its metadata image describes them (ClientQuotasImage.describe). Pure: no I/O.

An entity is a set of (type, name) pairs, type one of `user`, `client-id`, `ip`; a None name is the
type's default entity (`<default>` in kafka-configs). Stored quotas: entity -> key -> value.
User and client-id entities (alone or together) take producer_byte_rate, consumer_byte_rate (integral
LONGs), request_percentage and controller_mutation_rate (DOUBLEs); an ip entity, alone, takes
connection_creation_rate (an INT). Every value must be > 0.
"""
from __future__ import annotations

import asyncio
import ipaddress
from typing import Iterable, Mapping

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

LONG, DOUBLE, INT = "LONG", "DOUBLE", "INT"
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: LONG, CONSUMER_BYTE_RATE: LONG, REQUEST_PERCENTAGE: DOUBLE,
                    CONTROLLER_MUTATION_RATE: DOUBLE}
IP_KEYS = {CONNECTION_CREATION_RATE: INT}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, "str | None"], ...]  # sorted (type, name) pairs
Quotas = dict[Entity, dict[str, float]]


class QuotaError(Exception):
    """INVALID_REQUEST (or, for an unknown filter entity type, UNSUPPORTED_VERSION) with Kafka's message."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unsupported = unsupported


def entity_key(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity of a request's (type, name) list: a type named twice keeps its last name, as Kafka's
    ClientQuotaEntity map does."""
    out: dict[str, str | None] = {}
    for t, n in pairs:
        out[t] = n
    return tuple(sorted(out.items()))


def entity_text(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _keys_for(entity: Entity, resolvable: frozenset[str]) -> dict[str, str]:
    types = {t for t, _ in entity}
    for t, n in entity:
        if t not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {t}")
        if n is not None and n == "":
            raise QuotaError(f"Empty {t} not supported")
    if IP in types:
        if USER in types or CLIENT_ID in types:
            # sic: Kafka's message lacks the space
            raise QuotaError("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        name = dict(entity)[IP]
        if name is not None and not is_ip_literal(name) and name not in resolvable:
            raise QuotaError(f"{name} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


def _check_value(keys: Mapping[str, str], key: str, value: float) -> None:
    kind = keys.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if value <= 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind == DOUBLE:
        return
    if kind == INT and value > 2**31 - 1:
        raise QuotaError(f"Proposed value for {key} is too large for an INT.")
    if kind == LONG and value > 2.0**63 - 1:
        raise QuotaError(f"Proposed value for {key} is too large for a LONG.")
    if abs(_java_mod1(value)) > 1e-6:
        raise QuotaError(f"{key} cannot be a fractional value.")


def _java_mod1(value: float) -> float:
    import math
    return math.fmod(value, 1.0)


Op = tuple[str, float, bool]  # key, value, remove
Change = tuple[Entity, str, "float | None"]  # None: remove


def plan_alterations(entries: Iterable[tuple[Iterable[tuple[str, str | None]], Iterable[Op]]],
                     current: Quotas, resolvable: Iterable[str] = ()) -> tuple[list[tuple[Entity, str | None]],
                                                                             list[Change]]:
    """(one (entity, error message or None) per distinct entity, in first-seen order; the changes to
    store), as ClientQuotaControlManager.alterClientQuotas decides them (one entity's error leaves its
    other keys unchanged too). An ip entity's name must be an address or one of the host names in
    `resolvable` (resolved beforehand, off the event loop, by `resolve_hosts`)."""
    resolvable = frozenset(resolvable)
    results: dict[Entity, str | None] = {}
    pending: dict[Entity, list[Change]] = {}
    for pairs, ops in entries:
        entity = entity_key(pairs)
        alterations: dict[str, float | None] = {}
        error: str | None = None
        for key, value, remove in ops:
            if key in alterations:
                error = f"Duplicate quota key {key} not updating quota for this entity {entity_text(entity)}"
            else:
                alterations[key] = None if remove else value
        if entity in results or entity in pending:
            results[entity] = f"Ignoring duplicate entity {entity_text(entity)}"
            pending.pop(entity, None)
            continue
        if error is not None:
            results[entity] = error
            continue
        try:
            if not entity:
                raise QuotaError("Invalid empty client quota entity")
            keys = _keys_for(entity, resolvable)
            have = current.get(entity, {})
            changes: list[Change] = []
            for key, value in alterations.items():
                if value is None:
                    if key in have:
                        changes.append((entity, key, None))
                    continue
                _check_value(keys, key, value)
                if have.get(key) != value:
                    changes.append((entity, key, value))
        except QuotaError as exc:
            results[entity] = exc.message
            continue
        results[entity] = None
        pending[entity] = changes
    return list(results.items()), [c for changes in pending.values() for c in changes]


def apply(quotas: Quotas, changes: Iterable[Change]) -> None:
    for entity, key, value in changes:
        if value is None:
            values = quotas.get(entity)
            if values is not None:
                values.pop(key, None)
                if not values:
                    del quotas[entity]
        else:
            quotas.setdefault(entity, {})[key] = value


async def resolve_hosts(names: Iterable[str | None], timeout_s: float = 5.0) -> frozenset[str]:
    """The host names among `names` that resolve (Kafka: InetAddress.getByName), looked up in the
    event loop's resolver threads, each bounded by `timeout_s`."""
    loop = asyncio.get_running_loop()
    out = set()
    for name in {n for n in names if n and not is_ip_literal(n)}:
        try:
            await asyncio.wait_for(loop.getaddrinfo(name, None), timeout_s)
            out.add(name)
        except (OSError, UnicodeError, asyncio.TimeoutError):
            pass
    return frozenset(out)


Component = tuple[str, int, "str | None"]  # entity type, match type, match


def describe(quotas: Quotas, components: Iterable[Component], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """The stored entities a DescribeClientQuotas filter matches (ClientQuotasImage.describe); raises
    QuotaError for a bad filter."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for etype, match_type, match in components:
        if not etype:
            raise QuotaError("Invalid empty entity type.")
        if etype in exact or etype in typed:
            raise QuotaError(f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in (IP, USER, CLIENT_ID):
            raise QuotaError(f"Unsupported entity type {etype}", unsupported=True)
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(etype)
        else:
            raise QuotaError(f"Unknown match type {match_type}")
    if (IP in exact or IP in typed) and (USER in exact or USER in typed or CLIENT_ID in exact or CLIENT_ID in typed):
        raise QuotaError("Invalid entity filter component combination. IP filter component should not be used "
                         "with user or clientId filter component.")
    out = []
    for entity, values in quotas.items():
        names = dict(entity)
        if strict and len(names) != len(exact) + len(typed):
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(t not in names for t in typed):
            continue
        out.append((entity, dict(values)))
    return out


# -- precedence (Kafka's DefaultQuotaCallback.quotaMetricTags / quotaLimit) -----------------------------
def _precedence(user: str, client_id: str) -> list[Entity]:
    u, c = (USER, user), (CLIENT_ID, client_id)
    du, dc = (USER, None), (CLIENT_ID, None)
    return [(c, u), (dc, u), (u,), (c, du), (dc, du), (du,), (c,), (dc,)]  # sorted pairs: client-id < user


def resolve(quotas: Quotas, key: str, user: str, client_id: str) -> tuple[Entity, float] | None:
    """The entity whose `key` quota applies to (user, client id), with its value, in Kafka's order:
    /users/u/clients/c, /users/u/clients/<default>, /users/u, /users/<default>/clients/c,
    /users/<default>/clients/<default>, /users/<default>, /clients/c, /clients/<default>."""
    for entity in _precedence(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return entity, values[key]
    return None


def to_json(quotas: Quotas) -> list:
    return [[[list(p) for p in entity], dict(values)] for entity, values in quotas.items()]


def from_json(data: list) -> Quotas:
    return {tuple((t, n) for t, n in entity): {k: float(v) for k, v in values.items()} for entity, values in data}
