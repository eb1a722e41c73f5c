"""AlterClientQuotas (49) and DescribeClientQuotas (48) answers, compared by running against both
brokers (black-box: also runs with --broker=kafka): stored quotas, Kafka's filter semantics (exact,
default, any; strict), validation errors with Kafka's messages, validate_only, removal. Entity names
are unique per test, and every quota set is removed again."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import (CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
                                  CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse)
from kafka.protocol.admin.client_quotas import (AlterClientQuotasRequest, AlterClientQuotasResponse,
                                                DescribeClientQuotasRequest, DescribeClientQuotasResponse)

from tests.support.helpers import RawClient

INVALID_REQUEST, UNSUPPORTED_VERSION = 42, 35
ZERO_UUID = uuid.UUID(int=0)
Entry = AlterClientQuotasRequest.EntryData
Entity = Entry.EntityData
Op = Entry.OpData
Component = DescribeClientQuotasRequest.ComponentData
EXACT, DEFAULT, ANY = 0, 1, 2


def alter(client: RawClient, entries: list[tuple[dict, dict]], validate_only: bool = False, version: int = 1):
    """entries: (entity {type: name}, ops {key: value, None = remove}); -> {entity pairs: (code, message)}."""
    req = AlterClientQuotasRequest(entries=[
        Entry(entity=[Entity(entity_type=t, entity_name=n) for t, n in entity.items()],
              ops=[Op(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])
        for entity, ops in entries], validate_only=validate_only)
    resp = client.request(req, version, AlterClientQuotasResponse)
    out = {tuple(sorted((e.entity_type, e.entity_name) for e in x.entity)): (x.error_code, x.error_message)
           for x in resp.entries}
    if not validate_only:  # Kafka's brokers apply the committed records a moment after the answer
        for entity, ops in entries:
            if out.get(key(entity), (1,))[0] == 0:
                _settle(client, entity, ops)
    return out


def _settle(client: RawClient, entity: dict, ops: dict, timeout: float = 10.0) -> None:
    import time
    components = [(t, EXACT, n) if n is not None else (t, DEFAULT, None) for t, n in entity.items()]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = describe(client, components, strict=True)
        values = got.get(key(entity), {}) if isinstance(got, dict) else {}
        if all(values.get(k) == (None if v is None else float(v)) for k, v in ops.items()):
            return
        time.sleep(0.05)


def describe(client: RawClient, components: list[tuple[str, int, str | None]], strict: bool = False,
             version: int = 1):
    req = DescribeClientQuotasRequest(components=[Component(entity_type=t, match_type=mt, match=m)
                                                  for t, mt, m in components], strict=strict)
    resp = client.request(req, version, DescribeClientQuotasResponse)
    if resp.error_code:
        return resp.error_code, resp.error_message, resp.entries
    return {tuple(sorted((e.entity_type, e.entity_name) for e in x.entity)): {v.key: v.value for v in x.values}
            for x in resp.entries}


def key(entity: dict) -> tuple:
    return tuple(sorted(entity.items()))


@pytest.fixture
def names():
    tag = uuid.uuid4().hex[:8]
    return f"qu-{tag}", f"qc-{tag}"


def test_alter_then_describe_with_filters(broker, names):
    user, client = names
    u, uc, c = {"user": user}, {"user": user, "client-id": client}, {"client-id": client}
    with RawClient(broker.bootstrap) as cl:
        try:
            got = alter(cl, [(u, {"producer_byte_rate": 1048576, "request_percentage": 12.5}),
                             (uc, {"consumer_byte_rate": 2048}), (c, {"controller_mutation_rate": 3.5})])
            assert got == {key(u): (0, None), key(uc): (0, None), key(c): (0, None)}
            assert describe(cl, [("user", EXACT, user)]) == {
                key(u): {"producer_byte_rate": 1048576.0, "request_percentage": 12.5},
                key(uc): {"consumer_byte_rate": 2048.0}}
            assert describe(cl, [("user", EXACT, user)], strict=True) == {
                key(u): {"producer_byte_rate": 1048576.0, "request_percentage": 12.5}}
            assert describe(cl, [("user", EXACT, user), ("client-id", EXACT, client)], version=0) == {
                key(uc): {"consumer_byte_rate": 2048.0}}
            assert describe(cl, [("user", EXACT, user), ("client-id", ANY, None)]) == {
                key(uc): {"consumer_byte_rate": 2048.0}}
            assert describe(cl, [("client-id", EXACT, client)]) == {key(uc): {"consumer_byte_rate": 2048.0},
                                                                    key(c): {"controller_mutation_rate": 3.5}}
            assert describe(cl, [("client-id", EXACT, client)], strict=True) == {
                key(c): {"controller_mutation_rate": 3.5}}
            assert describe(cl, [("user", EXACT, user + "-none")]) == {}
            # an unchanged value and the removal of an absent key are successes that change nothing
            assert alter(cl, [(u, {"producer_byte_rate": 1048576, "consumer_byte_rate": None})]) == {key(u): (0, None)}
            # validate_only stores nothing
            assert alter(cl, [(u, {"producer_byte_rate": 5})], validate_only=True) == {key(u): (0, None)}
            assert describe(cl, [("user", EXACT, user)], strict=True)[key(u)]["producer_byte_rate"] == 1048576.0
            # removing every key removes the entity
            assert alter(cl, [(u, {"producer_byte_rate": None, "request_percentage": None})]) == {key(u): (0, None)}
            assert describe(cl, [("user", EXACT, user)], strict=True) == {}
        finally:
            alter(cl, [(u, {"producer_byte_rate": None, "request_percentage": None}),
                       (uc, {"consumer_byte_rate": None}), (c, {"controller_mutation_rate": None})])
        assert describe(cl, [("user", EXACT, user)]) == {} and describe(cl, [("client-id", EXACT, client)]) == {}


def test_default_entities(broker, names):
    user, _client = names
    du_c = {"user": None, "client-id": names[1]}
    u_dc = {"user": user, "client-id": None}
    with RawClient(broker.bootstrap) as cl:
        try:
            assert alter(cl, [(du_c, {"producer_byte_rate": 100}), (u_dc, {"producer_byte_rate": 200})]) == {
                key(du_c): (0, None), key(u_dc): (0, None)}
            assert describe(cl, [("user", DEFAULT, None), ("client-id", EXACT, names[1])]) == {
                key(du_c): {"producer_byte_rate": 100.0}}
            assert describe(cl, [("user", EXACT, user), ("client-id", DEFAULT, None)]) == {
                key(u_dc): {"producer_byte_rate": 200.0}}
            # "any" matches the default entity too (Kafka's image)
            assert describe(cl, [("user", ANY, None), ("client-id", EXACT, names[1])]) == {
                key(du_c): {"producer_byte_rate": 100.0}}
        finally:
            alter(cl, [(du_c, {"producer_byte_rate": None}), (u_dc, {"producer_byte_rate": None})])


@pytest.mark.parametrize("entity, ops, message", [
    ({"user": "x"}, {"bogus_rate": 1}, "Invalid configuration key bogus_rate"),
    ({"user": "x"}, {"producer_byte_rate": -5}, "Quota producer_byte_rate must be greater than 0"),
    ({"user": "x"}, {"consumer_byte_rate": 0}, "Quota consumer_byte_rate must be greater than 0"),
    ({"user": "x"}, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
    ({"user": "x", "ip": "127.0.0.1"}, {"producer_byte_rate": 1},
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ({"group": "g"}, {"producer_byte_rate": 1}, "Unhandled client quota entity type: group"),
    ({"user": ""}, {"producer_byte_rate": 1}, "Empty user not supported"),
    ({}, {"producer_byte_rate": 1}, "Invalid empty client quota entity"),
    ({"ip": "127.0.0.1"}, {"producer_byte_rate": 1}, "Invalid configuration key producer_byte_rate"),
    ({"ip": "127.0.0.1"}, {"connection_creation_rate": 2.0 ** 31},
     "Proposed value for connection_creation_rate is too large for an INT."),
    ({"ip": "no-such-host.invalid"}, {"connection_creation_rate": 5},
     "no-such-host.invalid is not a valid IP or resolvable host."),
])
def test_invalid_alterations(broker, entity, ops, message):
    with RawClient(broker.bootstrap) as cl:
        assert alter(cl, [(entity, ops)]) == {key(entity): (INVALID_REQUEST, message)}


def test_one_bad_entity_leaves_the_others(broker, names):
    user, client = names
    good, bad = {"user": user}, {"client-id": client}
    with RawClient(broker.bootstrap) as cl:
        try:
            got = alter(cl, [(good, {"producer_byte_rate": 1000}),
                             (bad, {"producer_byte_rate": 1000, "consumer_byte_rate": -1})])
            assert got == {key(good): (0, None),
                           key(bad): (INVALID_REQUEST, "Quota consumer_byte_rate must be greater than 0")}
            assert describe(cl, [("user", EXACT, user)]) == {key(good): {"producer_byte_rate": 1000.0}}
            assert describe(cl, [("client-id", EXACT, client)]) == {}
        finally:
            alter(cl, [(good, {"producer_byte_rate": None})])


@pytest.mark.parametrize("components, code, message", [
    ([("", EXACT, "x")], INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", EXACT, "a"), ("user", ANY, None)], INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("user", EXACT, None)], INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", DEFAULT, "a")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", ANY, "a")], INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 9, None)], INVALID_REQUEST, "Unknown match type 9"),
    ([("ip", ANY, None), ("client-id", ANY, None)], INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used with user or "
     "clientId filter component."),
    ([("group", ANY, None)], UNSUPPORTED_VERSION, "Unsupported entity type group"),
])
def test_describe_filter_errors(broker, components, code, message):
    with RawClient(broker.bootstrap) as cl:
        assert describe(cl, components) == (code, message, None)


def _create(cl: RawClient, names: list[str], partitions: int, version: int):
    T = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[T(name=n, num_partitions=partitions, replication_factor=1, assignments=[],
                                        configs=[]) for n in names], timeout_ms=10000, validate_only=False)
    return cl.request(req, version, CreateTopicsResponse)


def test_controller_mutation_rate(broker):
    """KIP-599: a token bucket of rate x 11 windows x 1 s partitions; strict from CreateTopics v6."""
    tag = uuid.uuid4().hex[:6]
    admin_id = f"admin-q-{tag}"
    b = broker
    with RawClient(b.bootstrap, client_id=admin_id) as cl:
        assert alter(cl, [({"client-id": admin_id}, {"controller_mutation_rate": 1})]) == {
            key({"client-id": admin_id}): (0, None)}
        # 11 tokens (1/s x 11 windows of 1 s): the first topic may take the bucket below zero, the next is refused
        resp = _create(cl, [f"m1-{tag}", f"m2-{tag}"], 15, 6)
        codes = {t.name: (t.error_code, t.error_message) for t in resp.topics}
        assert codes[f"m1-{tag}"] == (0, None)
        assert codes[f"m2-{tag}"] == (89, None)
        assert 3000 <= resp.throttle_time_ms <= 5000
    with RawClient(b.bootstrap, client_id=admin_id) as cl:  # strict too: CreatePartitions v3, DeleteTopics v5
        P = CreatePartitionsRequest.CreatePartitionsTopic
        resp = cl.request(CreatePartitionsRequest(topics=[P(name=f"m1-{tag}", count=20, assignments=None)],
                                                  timeout_ms=10000, validate_only=False), 3, CreatePartitionsResponse)
        assert [(r.error_code, r.error_message) for r in resp.results] == [(89, None)] and resp.throttle_time_ms > 0
    with RawClient(b.bootstrap, client_id=admin_id) as cl:
        resp = cl.request(DeleteTopicsRequest(topic_names=[f"m1-{tag}"], timeout_ms=10000), 5, DeleteTopicsResponse)
        assert [(r.error_code, r.error_message) for r in resp.responses] == [(89, None)] and resp.throttle_time_ms > 0
    with RawClient(b.bootstrap, client_id=admin_id) as cl:
        started = time.monotonic()
        # an old version (< 6) is not refused, only throttled
        resp = _create(cl, [f"m3-{tag}"], 1, 5)
        assert resp.topics[0].error_code == 0 and resp.throttle_time_ms > 0
        # the connection is muted for the throttle time: the next answer comes after it
        _create(cl, [f"m4-{tag}"], 1, 5)
        assert time.monotonic() - started >= resp.throttle_time_ms / 1000 * 0.8
    with RawClient(b.bootstrap, client_id=f"other-{tag}") as cl:  # no quota for another client id
        assert _create(cl, [f"m5-{tag}"], 20, 7).topics[0].error_code == 0
        alter(cl, [({"client-id": admin_id}, {"controller_mutation_rate": None})])
        D = DeleteTopicsRequest.DeleteTopicState
        cl.request(DeleteTopicsRequest(topics=[D(name=f"m{i}-{tag}", topic_id=ZERO_UUID) for i in (1, 3, 4, 5)],
                                       timeout_ms=10000), 6, DeleteTopicsResponse)


def test_fetch_over_consumer_byte_rate_is_answered_empty_and_throttled(broker):
    """Kafka's throttled fetch: the answer has no partitions (what was read is not counted) and a
    throttle time; the producer's bytes are not limited by a consumer quota."""
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    from tests.support.helpers import build_batch, produce_raw, wait_topic_ready
    tag = uuid.uuid4().hex[:6]
    topic, reader = f"qf-{tag}", f"reader-{tag}"
    with RawClient(broker.bootstrap, client_id=reader) as cl:
        resp = _create(cl, [topic], 1, 7)
        assert resp.topics[0].error_code == 0
        wait_topic_ready(broker.bootstrap, topic, 1)
        assert produce_raw(cl, topic, build_batch([b"v" * 1000] * 60)).error_code == 0
        assert alter(cl, [({"client-id": reader}, {"consumer_byte_rate": 1024})]) == {
            key({"client-id": reader}): (0, None)}
    try:
        F = FetchRequest.FetchTopic
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[F(topic=topic, partitions=[F.FetchPartition(
                               partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                               partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
        with RawClient(broker.bootstrap, client_id=reader) as cl:
            resp = cl.request(req, 11, FetchResponse)
            assert resp.error_code == 0 and resp.responses == [] and resp.throttle_time_ms > 0, resp
        with RawClient(broker.bootstrap, client_id=f"free-{tag}") as cl:  # another client id is not limited
            resp = cl.request(req, 11, FetchResponse)
            assert resp.throttle_time_ms == 0 and len(resp.responses[0].partitions[0].records) > 50_000
    finally:
        with RawClient(broker.bootstrap, client_id=f"free-{tag}") as cl:
            alter(cl, [({"client-id": reader}, {"consumer_byte_rate": None})])
            cl.request(DeleteTopicsRequest(topic_names=[topic], timeout_ms=10000), 5, DeleteTopicsResponse)


def test_request_percentage_throttles_request_time(broker):
    """request_percentage: handler time (as a percentage of one thread over the window) past the quota
    gives a throttle time in any API's response (here Metadata)."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    tag = uuid.uuid4().hex[:6]
    busy = f"busy-{tag}"
    with RawClient(broker.bootstrap, client_id=f"setter-{tag}") as cl:
        assert alter(cl, [({"client-id": busy}, {"request_percentage": 0.0001})]) == {key({"client-id": busy}): (0, None)}
    try:
        throttles = []
        for _ in range(5):  # a new connection each time: a throttled one is muted for the throttle time
            with RawClient(broker.bootstrap, client_id=busy) as cl:
                resp = cl.request(MetadataRequest(topics=[], allow_auto_topic_creation=False,
                                                  include_cluster_authorized_operations=False,
                                                  include_topic_authorized_operations=False), 12, MetadataResponse)
                throttles.append(resp.throttle_time_ms)
            if throttles[-1] > 0:
                break
        assert throttles[-1] > 0, throttles
    finally:
        with RawClient(broker.bootstrap, client_id=f"setter-{tag}") as cl:
            alter(cl, [({"client-id": busy}, {"request_percentage": None})])


def test_ip_entities(broker):
    """connection_creation_rate for an address, a resolvable host name and the default ip."""
    tag = uuid.uuid4().int % 250 + 2
    ip, default = {"ip": f"10.255.{tag}.7"}, {"ip": None}
    with RawClient(broker.bootstrap) as cl:
        try:
            assert alter(cl, [(ip, {"connection_creation_rate": 30}), ({"ip": "localhost"}, {})]) == {
                key(ip): (0, None), key({"ip": "localhost"}): (0, None)}
            assert describe(cl, [("ip", EXACT, ip["ip"])]) == {key(ip): {"connection_creation_rate": 30.0}}
            assert alter(cl, [(default, {"connection_creation_rate": 1000})], validate_only=True) == {
                key(default): (0, None)}
            assert describe(cl, [("ip", DEFAULT, None)]) == {}
        finally:
            alter(cl, [(ip, {"connection_creation_rate": None})])
