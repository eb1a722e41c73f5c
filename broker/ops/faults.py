"""Fault injection for client tests: make chosen requests fail, deterministically.

Off unless `minikafka.faults.enable=true`; then `BrokerState.faults` is a `FaultEngine` (else None, and
`Connection.dispatch` pays one attribute check). Rules come from the admin HTTP listener (`/faults`,
registered here) or `minikafka faults inject` / `MiniKafka(faults=True).faults.inject(...)`.

A rule: `api` (Kafka's API name: "Produce", "Fetch", "EndTxn", ...), optional filters `topic`,
`partition`, `transactional_id`, `group_id` (a request matches only if it carries the field and the
value is in it), `times` (how many requests it fires on, default 1), and what it does:
- `error`: a Kafka error name (NOT_LEADER_OR_FOLLOWER, ...); the request is NOT applied and is answered
  with that API's error response (per-partition APIs: the error on every partition of the request —
  the whole request fails, none of it is applied; a topic/partition filter chooses which requests fail);
- `disconnect`: "before_apply" (closed unanswered, not applied) or "after_apply" (applied, then the
  connection closes without the response: the case idempotence exists for);
- `delay_ms`: wait this long before handling (alone: the request is then handled normally; with
  error/disconnect: the delay comes first).
Determinism: the first rule (in inject order) that matches and has firings left fires; one rule per
request. Every firing is appended to `fired` (bounded). A fault never corrupts state: errors and
before_apply happen before the handler runs, after_apply after it finished.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import kafka.errors as ke
from kafka.protocol.api_key import ApiKey

from minikafka.broker.ops import admin_http
from minikafka.broker.ops.admin_http import AdminContext, HttpRequest, HttpResponse

if TYPE_CHECKING:
    from minikafka.broker.state import BrokerState

log = logging.getLogger(__name__)

FIRED_MAX = 1000
MAX_RULES = 1000
DISCONNECTS = ("before_apply", "after_apply")

# Kafka's current names where kafka-python's `message` is an older one
_ALIASES = {
    "NOT_LEADER_OR_FOLLOWER": 6, "REQUEST_TIMED_OUT": 7, "MESSAGE_TOO_LARGE": 10,
    "COORDINATOR_LOAD_IN_PROGRESS": 14, "COORDINATOR_NOT_AVAILABLE": 15, "NOT_COORDINATOR": 16,
    "RECORD_LIST_TOO_LARGE": 18, "NOT_ENOUGH_REPLICAS": 19, "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
    "TOPIC_AUTHORIZATION_FAILED": 29, "GROUP_AUTHORIZATION_FAILED": 30, "INVALID_RECORD": 87,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53, "UNKNOWN_SERVER_ERROR": -1,
}


def _error_codes() -> dict[str, int]:
    codes: dict[str, int] = {}
    stack = [ke.BrokerResponseError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        errno, message = getattr(cls, "errno", None), getattr(cls, "message", None)
        if isinstance(errno, int) and errno != 0 and isinstance(message, str) and message.isupper():
            codes.setdefault(message, errno)
    codes.update(_ALIASES)
    return codes


ERROR_CODES = _error_codes()


def api_names() -> dict[str, int]:
    """Kafka API name -> key, for every API this broker serves."""
    from minikafka.broker.network.registry import API_TABLE
    return {k.name: int(k) for k in ApiKey if int(k) in API_TABLE}


class FaultRuleError(ValueError):
    """A rule that cannot be injected (unknown API or error, bad field); the message says which."""


@dataclass
class Rule:
    id: int
    api: str
    times: int = 1
    error: str | None = None
    disconnect: str | None = None
    delay_ms: int = 0
    topic: str | None = None
    partition: int | None = None
    transactional_id: str | None = None
    group_id: str | None = None
    fired: int = 0
    error_code: int = field(default=0, repr=False)

    @property
    def remaining(self) -> int:
        return self.times - self.fired

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v is not None and k != "error_code"}
        out["remaining"] = self.remaining
        return out


_RULE_KEYS = {"api", "times", "error", "disconnect", "delay_ms", "topic", "partition", "transactional_id", "group_id"}


def parse_rule(spec: dict[str, Any], rule_id: int) -> Rule:
    """Validate a JSON rule; raises FaultRuleError with a clear message."""
    if not isinstance(spec, dict):
        raise FaultRuleError("a rule is a JSON object")
    unknown = set(spec) - _RULE_KEYS
    if unknown:
        raise FaultRuleError(f"unknown rule field(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(_RULE_KEYS))}")
    api = spec.get("api")
    names = api_names()
    if api not in names:
        raise FaultRuleError(f"unknown API {api!r}; one of: {', '.join(sorted(names))}")

    def opt(key: str, typ: type) -> Any:
        value = spec.get(key)
        if value is not None and (not isinstance(value, typ) or isinstance(value, bool)):
            raise FaultRuleError(f"{key} must be {typ.__name__}, got {value!r}")
        return value

    times = opt("times", int)
    times = 1 if times is None else times
    if times < 1:
        raise FaultRuleError(f"times must be >= 1, got {times}")
    delay_ms = opt("delay_ms", int) or 0
    if not 0 <= delay_ms <= 600_000:
        raise FaultRuleError(f"delay_ms must be in [0, 600000], got {delay_ms}")
    error, disconnect = opt("error", str), opt("disconnect", str)
    if error is not None and disconnect is not None:
        raise FaultRuleError("a rule has either error or disconnect, not both")
    if error is None and disconnect is None and not delay_ms:
        raise FaultRuleError("a rule needs error, disconnect or delay_ms")
    code = 0
    if error is not None:
        code = ERROR_CODES.get(error.upper(), 0)
        if not code:
            raise FaultRuleError(f"unknown Kafka error name {error!r} (e.g. NOT_LEADER_OR_FOLLOWER)")
        if api not in ERROR_BUILDERS:
            raise FaultRuleError(f"error injection is not supported for {api}; supported: "
                                 f"{', '.join(sorted(ERROR_BUILDERS))} (disconnect and delay_ms work for every API)")
        error = error.upper()
    if disconnect is not None and disconnect not in DISCONNECTS:
        raise FaultRuleError(f"disconnect must be one of {', '.join(DISCONNECTS)}, got {disconnect!r}")
    partition = opt("partition", int)
    topic = opt("topic", str)
    if partition is not None and topic is None:
        raise FaultRuleError("partition needs topic")
    return Rule(rule_id, api, times, error, disconnect, delay_ms, topic, partition,
                opt("transactional_id", str), opt("group_id", str), error_code=code)


# -- what a request names -----------------------------------------------------------------------
def _topic_partitions(request: Any, state: "BrokerState | None") -> list[tuple[str | None, list[int]]]:
    """(topic, partitions) a request names, across the field spellings of the APIs that name them."""
    out: list[tuple[str | None, list[int]]] = []
    topics = None
    for attr in ("topic_data", "topics", "v3_and_below_topics"):
        topics = getattr(request, attr, None)
        if topics:
            break
    if not topics and getattr(request, "transactions", None):  # AddPartitionsToTxn v4+
        topics = [t for txn in request.transactions for t in txn.topics]
    for t in topics or ():
        if isinstance(t, str):
            out.append((t, []))
            continue
        name = getattr(t, "name", None) or getattr(t, "topic", None)
        if not name and getattr(t, "topic_id", None) is not None and state is not None:
            from minikafka.broker.handlers.common import topic_name_for_id
            name = topic_name_for_id(state, t.topic_id)
        parts = getattr(t, "partition_data", None) or getattr(t, "partitions", None) or ()
        indexes = []
        for p in parts:
            if isinstance(p, int):
                indexes.append(p)
            else:
                for attr in ("index", "partition_index", "partition"):
                    value = getattr(p, attr, None)
                    if isinstance(value, int):
                        indexes.append(value)
                        break
        out.append((name, indexes))
    return out


def _transactional_ids(request: Any) -> list[str]:
    ids = [getattr(request, a, None) for a in ("transactional_id", "v3_and_below_transactional_id")]
    ids += [t.transactional_id for t in getattr(request, "transactions", None) or ()]
    if getattr(request, "coordinator_keys", None):  # FindCoordinator v4+
        ids += list(request.coordinator_keys)
    if getattr(request, "key", None):
        ids.append(request.key)
    return [i for i in ids if isinstance(i, str) and i]


def _group_ids(request: Any) -> list[str]:
    ids = [getattr(request, "group_id", None)]
    if getattr(request, "coordinator_keys", None):
        ids += list(request.coordinator_keys)
    if getattr(request, "key", None):
        ids.append(request.key)
    return [i for i in ids if isinstance(i, str) and i]


def _matches(rule: Rule, request: Any, state: "BrokerState | None") -> bool:
    if rule.topic is not None:
        tps = _topic_partitions(request, state)
        if not any(name == rule.topic and (rule.partition is None or rule.partition in parts) for name, parts in tps):
            return False
    if rule.transactional_id is not None and rule.transactional_id not in _transactional_ids(request):
        return False
    if rule.group_id is not None and rule.group_id not in _group_ids(request):
        return False
    return True


# -- error responses (kafka.protocol classes; nothing applied) -------------------------------------
def _produce(request: Any, version: int, code: int, state: Any) -> Any:
    from kafka.protocol.producer import ProduceResponse
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    return ProduceResponse(responses=[
        T(name=t.name, topic_id=getattr(t, "topic_id", None),
          partition_responses=[P(index=p.index, error_code=code, base_offset=-1) for p in t.partition_data])
        for t in request.topic_data])


def _fetch(request: Any, version: int, code: int, state: Any) -> Any:
    from kafka.protocol.consumer import FetchResponse
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    return FetchResponse(error_code=0, session_id=0, responses=[
        T(topic=t.topic, topic_id=t.topic_id,
          partitions=[P(partition_index=p.partition, error_code=code, high_watermark=-1, records=None)
                      for p in t.partitions])
        for t in request.topics])


def _list_offsets(request: Any, version: int, code: int, state: Any) -> Any:
    from kafka.protocol.consumer import ListOffsetsResponse
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    return ListOffsetsResponse(topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in request.topics])


def _commit(response_cls: Callable[[], type]) -> Callable[..., Any]:
    def build(request: Any, version: int, code: int, state: Any) -> Any:
        cls = response_cls()
        topic_cls = _nested(cls, "topics")
        part_cls = _nested(topic_cls, "partitions")
        return cls(topics=[topic_cls(name=t.name, partitions=[part_cls(partition_index=p.partition_index, error_code=code)
                                                              for p in t.partitions]) for t in request.topics])
    return build


def _nested(cls: type, field_name: str) -> type:
    """The struct class of an array field (kafka.protocol names them after the schema's type)."""
    for name in dir(cls):
        sub = getattr(cls, name)
        if isinstance(sub, type) and name[0].isupper() and hasattr(sub, "__slots__"):
            try:
                obj = sub()
            except Exception:
                continue
            if field_name == "topics" and hasattr(obj, "partitions"):
                return sub
            if field_name == "partitions" and hasattr(obj, "partition_index") and hasattr(obj, "error_code"):
                return sub
    raise LookupError(f"{cls.__name__} has no {field_name} struct")


def _top_level(response_cls: Callable[[], type], **extra: Any) -> Callable[..., Any]:
    def build(request: Any, version: int, code: int, state: Any) -> Any:
        return response_cls()(error_code=code, **extra)
    return build


def _find_coordinator(request: Any, version: int, code: int, state: Any) -> Any:
    from kafka.protocol.metadata import FindCoordinatorResponse
    if version >= 4:
        C = FindCoordinatorResponse.Coordinator
        return FindCoordinatorResponse(coordinators=[
            C(key=k, node_id=-1, host="", port=-1, error_code=code) for k in request.coordinator_keys])
    return FindCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1)


def _add_partitions_to_txn(request: Any, version: int, code: int, state: Any) -> Any:
    from kafka.protocol.producer import AddPartitionsToTxnResponse as R
    if version >= 4:
        return R(error_code=code)
    T = R.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    return R(results_by_topic_v3_and_below=[
        T(name=t.name, results_by_partition=[P(partition_index=p, partition_error_code=code) for p in t.partitions])
        for t in request.v3_and_below_topics])


def _cls(module: str, name: str) -> Callable[[], type]:
    def get() -> type:
        import importlib
        return getattr(importlib.import_module(module), name)
    return get


_P, _C = "kafka.protocol.producer", "kafka.protocol.consumer"
ERROR_BUILDERS: dict[str, Callable[[Any, int, int, Any], Any]] = {
    "Produce": _produce,
    "Fetch": _fetch,
    "ListOffsets": _list_offsets,
    "OffsetCommit": _commit(_cls(_C, "OffsetCommitResponse")),
    "TxnOffsetCommit": _commit(_cls(_P, "TxnOffsetCommitResponse")),
    "FindCoordinator": _find_coordinator,
    "InitProducerId": _top_level(_cls(_P, "InitProducerIdResponse"), producer_id=-1, producer_epoch=-1),
    "AddPartitionsToTxn": _add_partitions_to_txn,
    "AddOffsetsToTxn": _top_level(_cls(_P, "AddOffsetsToTxnResponse")),
    "EndTxn": _top_level(_cls(_P, "EndTxnResponse")),
    "JoinGroup": _top_level(_cls(_C, "JoinGroupResponse"), generation_id=-1, member_id=""),
    "Heartbeat": _top_level(_cls(_C, "HeartbeatResponse")),
    "SyncGroup": _top_level(_cls(_C, "SyncGroupResponse")),
    "LeaveGroup": _top_level(_cls(_C, "LeaveGroupResponse")),
}


# -- the engine ------------------------------------------------------------------------------------
class FaultEngine:
    """The rules and the fired log of one broker; used on the event loop only."""

    def __init__(self, state: "BrokerState | None" = None) -> None:
        self.state = state
        self.rules: list[Rule] = []
        self.fired: list[dict[str, Any]] = []
        self._next_id = 1
        self._apis: set[str] = set()  # APIs with live rules: the cheap first test

    def inject(self, spec: dict[str, Any]) -> Rule:
        if sum(1 for r in self.rules if r.remaining > 0) >= MAX_RULES:
            raise FaultRuleError(f"at most {MAX_RULES} live rules")
        rule = parse_rule(spec, self._next_id)
        self._next_id += 1
        self.rules.append(rule)
        self._apis.add(rule.api)
        log.info("fault injected: %s", rule.to_json())
        return rule

    def clear(self) -> None:
        self.rules.clear()
        self.fired.clear()
        self._apis.clear()

    def take(self, api: str, request: Any, client_id: str | None = None) -> Rule | None:
        """The first live rule matching this request, counted as fired; None if none matches."""
        if api not in self._apis:
            return None
        for rule in self.rules:
            if rule.api == api and rule.remaining > 0 and _matches(rule, request, self.state):
                rule.fired += 1
                if not any(r.api == api and r.remaining > 0 for r in self.rules):
                    self._apis.discard(api)
                action = (f"error {rule.error}" if rule.error else
                          f"disconnect {rule.disconnect}" if rule.disconnect else "delay")
                if len(self.fired) >= FIRED_MAX:
                    del self.fired[0]
                self.fired.append({"rule": rule.id, "api": api, "action": action, "delay_ms": rule.delay_ms,
                                   "client_id": client_id, "time": time.time()})
                log.info("fault fired: rule %d, %s %s (client %s)", rule.id, api, action, client_id)
                return rule
        return None

    async def before(self, rule: Rule, request: Any, version: int) -> Any:
        """Run a fired rule's part before the handler: the delay, then an error response (returned;
        the handler must not run), a before_apply disconnect (raised), or None (handle normally)."""
        from minikafka.broker.network.connection import InjectedDisconnect as FaultDisconnect
        if rule.delay_ms:
            await asyncio.sleep(rule.delay_ms / 1000)
        if rule.disconnect == "before_apply":
            raise FaultDisconnect(f"injected disconnect before_apply (rule {rule.id})")
        if rule.error is not None:
            if rule.api == "Produce" and request.acks == 0:  # no answer is due: Kafka closes the connection
                raise FaultDisconnect(f"injected {rule.error} on an acks=0 produce (rule {rule.id})")
            return ERROR_BUILDERS[rule.api](request, version, rule.error_code, self.state)
        return None

    def snapshot(self) -> dict[str, Any]:
        return {"rules": [r.to_json() for r in self.rules], "fired": list(self.fired)}


def enabled(config: Any) -> bool:
    return config.get("minikafka.faults.enable").strip().lower() == "true"


# -- admin HTTP routes --------------------------------------------------------------------------------
_DISABLED = "fault injection is disabled: start the broker with minikafka.faults.enable=true\n"


def _engine(ctx: AdminContext) -> FaultEngine | None:
    return getattr(ctx.state, "faults", None) if ctx.state is not None else None


async def _post(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
    engine = _engine(ctx)
    if engine is None:
        return HttpResponse.text(403, _DISABLED)
    try:
        spec = json.loads(req.body or b"null")
    except ValueError as exc:
        return HttpResponse.json(400, {"error": f"body is not JSON: {exc}"})
    try:
        rule = engine.inject(spec)
    except FaultRuleError as exc:
        return HttpResponse.json(400, {"error": str(exc)})
    return HttpResponse.json(200, {"id": rule.id, "rule": rule.to_json()})


async def _get(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
    engine = _engine(ctx)
    if engine is None:
        return HttpResponse.text(403, _DISABLED)
    return HttpResponse.json(200, engine.snapshot())


async def _delete(req: HttpRequest, ctx: AdminContext) -> HttpResponse:
    engine = _engine(ctx)
    if engine is None:
        return HttpResponse.text(403, _DISABLED)
    engine.clear()
    return HttpResponse.json(200, {"cleared": True})


admin_http.add_route("POST", "/faults", _post)
admin_http.add_route("GET", "/faults", _get)
admin_http.add_route("DELETE", "/faults", _delete)
