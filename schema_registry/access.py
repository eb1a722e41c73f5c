"""Authorization of registry requests by the broker's ACL authorizer, with Kafka's own resource types, so
that `kafka-acls` / AdminClient.create_acls manage it. The mapping is Confluent's Topic ACL Authorizer's for
subjects, plus the `_schemas` topic for what is registry-wide:

- a subject's topic: `T-key` and `T-value` belong to TOPIC `T` (TopicNameStrategy); any other subject to
  the TOPIC of its own name. Reading a subject (its versions, schemas, lookup, compatibility checks, its
  config and mode) needs READ on that topic; changing it (register, delete, set or delete its config or
  mode) needs WRITE.
- the same operation on TOPIC `_schemas` allows it for every subject: whoever may read or write `_schemas`
  with a Kafka client can read or forge every registry record anyway.
- a schema by id: READ on the topic of one subject using it (or on `_schemas`).
- the global config and mode: DESCRIBE_CONFIGS (read) / ALTER_CONFIGS (change) on TOPIC `_schemas`.
- lists (`/subjects`, `/schemas`, an id's subjects and versions) show only the subjects the principal may
  DESCRIBE (READ for `/schemas`, which returns the schemas), as Kafka's Metadata shows only describable topics.
- `/` and `/schemas/types`: any authenticated principal. Any other route: READ (GET) or WRITE on the
  subject's topic if it names a subject, else on `_schemas`.

Super users and `allow.everyone.if.no.acl.found` are the authorizer's. Pure: the broker injects `authorize`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, NamedTuple

SCHEMAS_TOPIC = "_schemas"
# (principal, client address, operation (READ, WRITE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS), topic) -> bool
Authorize = Callable[[str, str, str, str], bool]
OPERATION_WORDS = {"READ": "Read", "WRITE": "Write", "DESCRIBE": "Describe", "DESCRIBE_CONFIGS": "DescribeConfigs",
                   "ALTER_CONFIGS": "AlterConfigs"}
OPEN_ROUTES = frozenset({"/", "/schemas/types"})
READ_POSTS = ("/subjects/{subject}", "/compatibility/")  # POSTs that only read: lookup, compatibility checks
# list routes: the operation a subject in the answer needs
LISTS = {"/subjects": "DESCRIBE", "/schemas": "READ", "/schemas/ids/{id}/subjects": "DESCRIBE",
         "/schemas/ids/{id}/versions": "DESCRIBE"}


def topic_of(subject: str) -> str:
    """The topic a subject's ACLs are those of: `T` for `T-key` and `T-value`, else the subject itself."""
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[:-len(suffix)]
    return subject


class Rule(NamedTuple):
    scope: str  # open | subject | id | global
    operation: str


def rule(method: str, route: str) -> Rule:
    """What a request to `route` (aiohttp's canonical path, e.g. /subjects/{subject}/versions) needs."""
    reads = method in ("GET", "HEAD") or (method == "POST" and (route == READ_POSTS[0]
                                                                  or route.startswith(READ_POSTS[1])))
    if route in OPEN_ROUTES or route in ("/subjects", "/schemas"):
        return Rule("open", "")
    if "{subject}" in route:
        return Rule("subject", "READ" if reads else "WRITE")
    if "{id}" in route:
        return Rule("id", "READ")
    if route in ("/config", "/mode"):
        return Rule("global", "DESCRIBE_CONFIGS" if reads else "ALTER_CONFIGS")
    return Rule("global", "READ" if reads else "WRITE")


class Access:
    """Decisions for one authorizer; `subjects_of_id` names the subjects (deleted ones too) using an id."""

    def __init__(self, authorize: Authorize, subjects_of_id: Callable[[int], Iterable[str]]) -> None:
        self._authorize = authorize
        self._subjects_of_id = subjects_of_id

    def may(self, principal: str, host: str, operation: str, subject: str) -> bool:
        return (self._authorize(principal, host, operation, topic_of(subject))
                or self._authorize(principal, host, operation, SCHEMAS_TOPIC))

    def denial(self, principal: str, host: str, method: str, route: str, params: Mapping[str, str]) -> str | None:
        """None if allowed, else the 403 message."""
        scope, operation = rule(method, route)
        if scope == "open":
            return None
        if scope == "subject":
            subject = params.get("subject", "")
            if self.may(principal, host, operation, subject):
                return None
            return f"User is denied operation {OPERATION_WORDS[operation]} on Subject: {subject}"
        if scope == "id":
            try:
                schema_id = int(params.get("id", ""))
            except ValueError:
                return None  # no such schema: the registry answers 40403
            subjects = set(self._subjects_of_id(schema_id))
            if not subjects or any(self._authorize(principal, host, operation, topic_of(s)) for s in sorted(subjects)) \
                    or self._authorize(principal, host, operation, SCHEMAS_TOPIC):
                return None
            return f"User is denied operation {OPERATION_WORDS[operation]} on Schema: {schema_id}"
        if self._authorize(principal, host, operation, SCHEMAS_TOPIC):
            return None
        return f"User is denied operation {OPERATION_WORDS[operation]} on Topic: {SCHEMAS_TOPIC}"

    def filtered(self, principal: str, host: str, route: str, body: Any) -> Any:
        """A list answer without the subjects the principal may not see (`body` as is if not a list route)."""
        operation = LISTS.get(route)
        if operation is None or not isinstance(body, list) \
                or self._authorize(principal, host, operation, SCHEMAS_TOPIC):
            return body
        decided: dict[str, bool] = {}

        def visible(subject: str) -> bool:
            if subject not in decided:
                decided[subject] = self._authorize(principal, host, operation, topic_of(subject))
            return decided[subject]
        return [item for item in body
                if visible(item if isinstance(item, str) else item.get("subject", "") if isinstance(item, dict)
                           else "")]
