"""Dynamic broker configs (BROKER resources: "" = cluster default, "1" = this broker) and group
configs (GROUP resources) through confluent-kafka's AdminClient and raw DescribeConfigs: sources and
synonyms, refusals with Kafka's errors, the runtime effect, and (minikafka only) persistence across
restart and kill -9. Black-box tests also run against Apache Kafka (--broker=kafka); every test
undoes its changes, since the oracle is shared by the whole run.
"""
from __future__ import annotations

import time
import uuid
from typing import NamedTuple

import kafka.errors as ke
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from tests.support.helpers import (
    RawClient,
    build_batch,
    list_offset,
    produce_raw,
    wait_broker_connections_closed,
    wait_topic_ready,
    wait_until,
)

TIMEOUT = 30
BROKER = ConfigResource.Type.BROKER
NODE = "1"
DYN_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYN_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
TOPIC_RES, BROKER_RES, GROUP_RES = 2, 4, 32
GROUP_SOURCE = 8
SET, DELETE = 0, 1


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Described(NamedTuple):
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, int]]


def _src(x) -> int:
    return getattr(x, "value", x)


def describe(bootstrap: str, name: str) -> dict[str, Described]:
    """BROKER `name`'s configs with synonyms, by raw DescribeConfigs v4 (confluent-kafka keys the
    synonyms by name, which folds the same name from two layers into one)."""
    res = raw_describe(bootstrap, BROKER_RES, name)
    assert res.error_code == 0, res
    return {c.name: Described(c.value, c.config_source, c.read_only, c.is_sensitive,
                              [(s.name, s.value, s.source) for s in c.synonyms]) for c in res.configs}


def confluent_describe(bootstrap: str, rtype, name: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(timeout=TIMEOUT)


def alter(bootstrap: str, name: str, **ops) -> None:
    """Incremental SET (a str) / DELETE (None) on BROKER `name`; raises KafkaException on refusal
    (confluent-kafka for a broker id, raw IncrementalAlterConfigs for the cluster default)."""
    if name == "":
        code, msg = raw_incremental(bootstrap, BROKER_RES, "", [(k, SET if v is not None else DELETE, v)
                                                                for k, v in ops.items()])
        if code:
            raise KafkaException(KafkaError(code, msg))
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in ops.items()]
    res = ConfigResource(BROKER, name, incremental_configs=entries)
    admin.incremental_alter_configs([res])[res].result(timeout=TIMEOUT)


def refusal(bootstrap: str, name: str, **ops) -> tuple[int, str]:
    try:
        alter(bootstrap, name, **ops)
    except KafkaException as exc:
        return exc.args[0].code(), exc.args[0].str()
    return 0, ""


def raw_describe(bootstrap: str, rtype: int, name: str, keys=None, synonyms: bool = True, docs: bool = False):
    req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=keys)], include_synonyms=synonyms,
        include_documentation=docs)
    with RawClient(bootstrap) as c:
        (res,) = c.request(req, 4, DescribeConfigsResponse).results
    return res


def raw_incremental(bootstrap: str, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                    validate_only: bool = False):
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[R(
        resource_type=rtype, resource_name=name,
        configs=[R.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops])])
    with RawClient(bootstrap) as c:
        (res,) = c.request(req, 1, IncrementalAlterConfigsResponse).responses
    return res.error_code, res.error_message


def raw_alter(bootstrap: str, rtype: int, name: str, props: dict[str, str]) -> tuple[int, str | None]:
    """Legacy AlterConfigs (v2): `props` becomes the resource's whole set."""
    R = AlterConfigsRequest.AlterConfigsResource
    req = AlterConfigsRequest(validate_only=False, resources=[R(
        resource_type=rtype, resource_name=name, configs=[R.AlterableConfig(name=k, value=v) for k, v in props.items()])])
    with RawClient(bootstrap) as c:
        (res,) = c.request(req, 2, AlterConfigsResponse).responses
    return res.error_code, res.error_message


def settle(predicate, what: str):
    """Kafka applies a config change when its metadata record reaches the broker (asynchronously)."""
    return wait_until(predicate, timeout=TIMEOUT, interval=0.1, what=what)


@pytest.fixture
def cleanup(shared_broker):
    """Keys to DELETE afterwards at the default and the per-broker resource."""
    keys: set[str] = set()
    yield keys
    if keys:
        for name in ("", NODE):
            alter(shared_broker.bootstrap, name, **{k: None for k in keys})


# --- BROKER resources ---------------------------------------------------------------------------
def test_cluster_default_set_describe_delete(shared_broker, cleanup):
    bs = shared_broker.bootstrap
    cleanup.add("log.retention.ms")
    alter(bs, "", **{"log.retention.ms": "7200000"})
    settle(lambda: "log.retention.ms" in describe(bs, ""), "default visible")
    e = describe(bs, "")["log.retention.ms"]
    assert (e.value, e.source, e.read_only, e.synonyms) == (
        "7200000", DYN_DEFAULT, False, [("log.retention.ms", "7200000", DYN_DEFAULT)])
    settle(lambda: describe(bs, NODE)["log.retention.ms"].value == "7200000", "broker sees the default")
    e = describe(bs, NODE)["log.retention.ms"]
    assert e.source == DYN_DEFAULT
    assert e.synonyms[0] == ("log.retention.ms", "7200000", DYN_DEFAULT)
    assert ("log.retention.hours", "168") in [(n, v) for n, v, _s in e.synonyms[1:]]  # lower layers follow
    alter(bs, "", **{"log.retention.ms": None})
    settle(lambda: "log.retention.ms" not in describe(bs, ""), "default deleted")
    settle(lambda: describe(bs, NODE)["log.retention.ms"].value is None, "broker back to its static value")
    e = describe(bs, NODE)["log.retention.ms"]
    # log.retention.hours (168) is not a synonym shown for log.retention.ms: Kafka drops the
    # synonyms ranked before the described name itself
    assert (e.source, e.read_only, e.synonyms) == (DEFAULT, False, [])
    assert describe(bs, NODE)["log.retention.hours"].read_only is True


def test_per_broker_overrides_default_and_topic_sees_it(shared_broker, cleanup):
    bs = shared_broker.bootstrap
    cleanup.add("log.retention.ms")
    alter(bs, "", **{"log.retention.ms": "7200000"})
    alter(bs, NODE, **{"log.retention.ms": "3600000"})
    settle(lambda: describe(bs, NODE)["log.retention.ms"].value == "3600000", "per-broker value")
    e = confluent_describe(bs, BROKER, NODE)["log.retention.ms"]
    assert (e.value, _src(e.source), e.is_read_only) == ("3600000", DYN_BROKER, False)
    e = describe(bs, NODE)["log.retention.ms"]
    assert e.source == DYN_BROKER
    assert e.synonyms[:2] == [("log.retention.ms", "3600000", DYN_BROKER), ("log.retention.ms", "7200000", DYN_DEFAULT)]
    # a topic without its own retention.ms inherits the broker's value, with the broker's source
    admin = AdminClient({"bootstrap.servers": bs})
    topic = unique("dyn-topic")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=TIMEOUT)

    def topic_retention():
        try:
            return confluent_describe(bs, ConfigResource.Type.TOPIC, topic)["retention.ms"]
        except KafkaException:
            return None
    settle(lambda: (e := topic_retention()) is not None and e.value == "3600000", "topic inherits")
    assert _src(topic_retention().source) == DYN_BROKER


def test_documentation_only_when_asked(shared_broker):
    """DescribeConfigs v3+ include_documentation: every known key of a broker and a topic gets its text, and
    none is sent unless asked (as Kafka; the texts themselves are each broker's own)."""
    bs = shared_broker.bootstrap
    topic = unique("documented")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=TIMEOUT)
    keys = ["log.retention.ms", "message.max.bytes", "log.dirs"]
    for rtype, name, asked in ((4, NODE, keys), (2, topic, ["retention.ms", "cleanup.policy"])):
        documented = settle(lambda: (r := raw_describe(bs, rtype, name, asked, docs=True)).error_code == 0 and r,
                            f"{name} described")
        assert sorted(c.name for c in documented.configs) == sorted(asked)
        assert all(c.documentation for c in documented.configs), documented.configs
        plain = raw_describe(bs, rtype, name, asked)
        assert [c.documentation for c in plain.configs] == [None] * len(asked)


def test_read_only_config_refused(shared_broker):
    code, msg = refusal(shared_broker.bootstrap, NODE, **{"log.dirs": "/tmp/elsewhere"})
    assert (code, msg) == (ke.InvalidRequestError.errno, "Cannot update these configs dynamically: [log.dirs]")
    # in Kafka 4.3 only the first name of a synonym group is dynamic
    code, msg = refusal(shared_broker.bootstrap, "", **{"log.retention.hours": "3"})
    assert (code, msg) == (ke.InvalidRequestError.errno,
                           "Cannot update these configs dynamically: [log.retention.hours]")


def test_per_broker_only_config_refused_at_default(shared_broker):
    code, msg = refusal(shared_broker.bootstrap, "", **{"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"})
    assert (code, msg) == (ke.InvalidRequestError.errno, "Cannot update these configs at default cluster level, "
                                                         "broker id must be specified: [ssl.cipher.suites]")


def test_other_broker_id_and_bad_value_refused(shared_broker):
    bs = shared_broker.bootstrap
    invalid = ke.InvalidRequestError.errno
    assert raw_incremental(bs, BROKER_RES, "2", [("log.retention.ms", SET, "1")]) == (
        invalid, "Unexpected broker id, expected 1, but received 2")
    assert raw_incremental(bs, BROKER_RES, "x", [("log.retention.ms", SET, "1")]) == (
        invalid, "Node id must be an integer, but it is: x")
    assert refusal(bs, "", **{"log.retention.ms": "abc"}) == (
        invalid, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG")
    assert refusal(bs, "", **{"max.connections": "-5"}) == (
        invalid, "Invalid value -5 for configuration max.connections: Value must be at least 0")
    assert raw_incremental(bs, BROKER_RES, "", [("log.retention.ms", SET, None)]) == (
        invalid, "Null value not supported for : log.retention.ms")
    assert raw_incremental(bs, BROKER_RES, "", [("log.retention.ms", 2, "1")]) == (
        ke.InvalidConfigurationError.errno, "Config value append is not allowed for config key: log.retention.ms")
    res = raw_describe(bs, BROKER_RES, "2")
    assert (res.error_code, res.error_message, res.configs) == (
        invalid, "Unexpected broker id, expected 1 or empty string, but received 2", [])
    res = raw_describe(bs, BROKER_RES, "x")
    assert (res.error_code, res.error_message) == (invalid, "Broker id must be an integer, but it is: x")


def test_unknown_config_is_a_custom_config(shared_broker, cleanup):
    """Kafka accepts names it does not know as custom broker configs (read-only, type UNKNOWN)."""
    bs = shared_broker.bootstrap
    cleanup.add("custom.minikafka.test")
    alter(bs, "", **{"custom.minikafka.test": "x"})
    settle(lambda: "custom.minikafka.test" in describe(bs, ""), "custom config visible")
    e = describe(bs, "")["custom.minikafka.test"]
    # a name Kafka has no type for counts as sensitive: its value is not shown
    assert (e.value, e.source, e.read_only, e.sensitive) == (None, DYN_DEFAULT, True, True)


def test_legacy_alter_configs_replaces_the_layer(shared_broker, cleanup):
    bs = shared_broker.bootstrap
    cleanup.update({"log.retention.ms", "log.cleaner.backoff.ms"})

    def per_broker() -> dict[str, str | None]:
        return {k: e.value for k, e in describe(bs, NODE).items() if e.source == DYN_BROKER}
    alter(bs, NODE, **{"log.retention.ms": "3600000"})
    settle(lambda: per_broker() == {"log.retention.ms": "3600000"}, "incremental set")
    assert raw_alter(bs, BROKER_RES, NODE, {"log.cleaner.backoff.ms": "16000"}) == (0, None)
    settle(lambda: per_broker() == {"log.cleaner.backoff.ms": "16000"}, "whole layer replaced")
    assert raw_alter(bs, BROKER_RES, NODE, {}) == (0, None)
    settle(lambda: per_broker() == {}, "layer emptied")
    assert raw_alter(bs, BROKER_RES, "", {"log.retention.hours": "5"}) == (
        ke.InvalidRequestError.errno, "Cannot update these configs dynamically: [log.retention.hours]")


def test_validate_only_changes_nothing(shared_broker):
    bs = shared_broker.bootstrap
    assert raw_incremental(bs, BROKER_RES, "", [("log.retention.ms", SET, "1234567")], validate_only=True) == (0, None)
    assert "log.retention.ms" not in describe(bs, "")
    code, _ = raw_incremental(bs, BROKER_RES, NODE, [("log.dirs", SET, "/x")], validate_only=True)
    assert code == ke.InvalidRequestError.errno


def test_message_max_bytes_default_applies_at_once(shared_broker, cleanup):
    """The runtime effect: a smaller message.max.bytes default refuses a record the old one took."""
    bs = shared_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    topic = unique("dyn-mmb")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=TIMEOUT)
    cleanup.add("message.max.bytes")

    def produce(size: int) -> int:
        p = Producer({"bootstrap.servers": bs, "message.max.bytes": 10_000_000, "linger.ms": 0,
                      "enable.idempotence": False, "retries": 0})
        errors = []
        p.produce(topic, b"x" * size, on_delivery=lambda err, _m: errors.append(err))
        p.flush(TIMEOUT)
        err = errors[0]
        return 0 if err is None else err.code()

    settle(lambda: produce(20_000) == 0, "topic writable")
    alter(bs, "", **{"message.max.bytes": "10000"})
    settle(lambda: produce(20_000) == KafkaError.MSG_SIZE_TOO_LARGE, "smaller limit applies")
    assert produce(1000) == 0
    alter(bs, "", **{"message.max.bytes": None})
    settle(lambda: produce(20_000) == 0, "limit restored")


# --- GROUP resources ----------------------------------------------------------------------------
GROUP_DEFAULTS = {"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "5000",
                  "consumer.assignment.interval.ms": "1000", "share.auto.offset.reset": "latest",
                  "share.isolation.level": "read_uncommitted", "share.renew.acknowledge.enable": "true"}
# Kafka 4.3's group configs
GROUP_CONFIGS = {
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
    "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
    "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
    "share.assignment.interval.ms", "share.isolation.level", "share.renew.acknowledge.enable",
    "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms"}


def test_group_config_describe_set_delete(shared_broker):
    bs = shared_broker.bootstrap
    group = unique("cfg-group")
    res = raw_describe(bs, GROUP_RES, group)
    assert res.error_code == 0
    described = {c.name: c for c in res.configs}
    assert set(described) == GROUP_CONFIGS
    for name, value in GROUP_DEFAULTS.items():
        assert (described[name].value, described[name].config_source, described[name].read_only) == (
            value, DEFAULT, False)
    # without an override the synonym is the broker config it defaults to
    assert [(s.name, s.value, s.source) for s in described["consumer.session.timeout.ms"].synonyms] == [
        ("group.consumer.session.timeout.ms", "45000", DEFAULT)]
    assert [(s.name, s.source) for s in described["share.auto.offset.reset"].synonyms] == [
        ("share.auto.offset.reset", DEFAULT)]
    assert raw_incremental(bs, GROUP_RES, group, [("consumer.session.timeout.ms", SET, "50000")]) == (0, None)

    def value():
        c = {c.name: c for c in raw_describe(bs, GROUP_RES, group, ["consumer.session.timeout.ms"]).configs}
        return c["consumer.session.timeout.ms"]
    settle(lambda: value().value == "50000", "group config set")
    assert value().config_source == GROUP_SOURCE
    assert [(s.name, s.value, s.source) for s in value().synonyms] == [
        ("consumer.session.timeout.ms", "50000", GROUP_SOURCE), ("group.consumer.session.timeout.ms", "45000", DEFAULT)]
    assert raw_incremental(bs, GROUP_RES, group, [("consumer.session.timeout.ms", DELETE, None)]) == (0, None)
    settle(lambda: value().value == "45000", "group config deleted")
    assert value().config_source == DEFAULT


def test_group_configs_of_several_groups_in_one_request(shared_broker):
    """Each resource gets its own answer; a refused one does not stop the others."""
    bs = shared_broker.bootstrap
    groups = [unique("cfg-many") for _ in range(3)]
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    values = ["50000", "1", "55000"]  # the second is below group.consumer.min.session.timeout.ms
    req = IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
        resource_type=GROUP_RES, resource_name=g, configs=[R.AlterableConfig(
            name="consumer.session.timeout.ms", config_operation=SET, value=v)]) for g, v in zip(groups, values)])
    with RawClient(bs) as c:
        res = c.request(req, 1, IncrementalAlterConfigsResponse).responses
    assert [(r.resource_name, r.error_code) for r in res] == [
        (groups[0], 0), (groups[1], ke.InvalidConfigurationError.errno), (groups[2], 0)]

    def value(group: str) -> str:
        (c,) = raw_describe(bs, GROUP_RES, group, ["consumer.session.timeout.ms"]).configs
        return c.value
    settle(lambda: [value(g) for g in groups] == ["50000", "45000", "55000"], "two groups changed")
    for g in (groups[0], groups[2]):
        assert raw_incremental(bs, GROUP_RES, g, [("consumer.session.timeout.ms", DELETE, None)]) == (0, None)


def test_group_config_refusals(shared_broker):
    bs = shared_broker.bootstrap
    group = unique("cfg-group-bad")
    invalid_config = ke.InvalidConfigurationError.errno
    code, msg = raw_incremental(bs, GROUP_RES, group, [("consumer.session.timeout.ms", SET, "1000")])
    assert code == invalid_config, msg
    assert "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms" in msg
    assert raw_incremental(bs, GROUP_RES, group, [("consumer.heartbeat.interval.ms", SET, "60000")]) == (
        invalid_config, "consumer.heartbeat.interval.ms must be less than or equal to "
                        "group.consumer.max.heartbeat.interval.ms")
    assert raw_incremental(bs, GROUP_RES, group, [("no.such.group.config", SET, "1")]) == (
        invalid_config, "Unknown group config name: no.such.group.config")
    assert raw_incremental(bs, GROUP_RES, group, [("consumer.session.timeout.ms", SET, "abc")]) == (
        invalid_config, "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT")
    assert raw_incremental(bs, GROUP_RES, group, [("consumer.session.timeout.ms", 2, "1")]) == (
        invalid_config, "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")
    assert raw_incremental(bs, GROUP_RES, "", [("consumer.session.timeout.ms", SET, "50000")]) == (
        ke.InvalidRequestError.errno, "Default group resources are not allowed.")
    res = raw_describe(bs, GROUP_RES, "")
    assert (res.error_code, res.error_message) == (ke.InvalidRequestError.errno, "Group name must not be empty")


# --- persistence (minikafka internals: its restart) ---------------------------------------------
@pytest.mark.minikafka_only
@pytest.mark.parametrize("how", ["restart", "kill"])
def test_dynamic_configs_survive_restart_and_kill(broker_factory, how):
    b = broker_factory()
    alter(b.bootstrap, "", **{"log.retention.ms": "7200000", "message.max.bytes": "20000"})
    alter(b.bootstrap, NODE, **{"log.retention.ms": "3600000"})
    assert raw_incremental(b.bootstrap, GROUP_RES, "g-persist", [("consumer.session.timeout.ms", SET, "55000")]) == (
        0, None)
    if how == "kill":
        b.kill()
        b.start()
    else:
        b.restart()
    assert describe(b.bootstrap, "")["message.max.bytes"].value == "20000"
    e = describe(b.bootstrap, NODE)["log.retention.ms"]
    assert (e.value, e.source) == ("3600000", DYN_BROKER)
    assert describe(b.bootstrap, NODE)["message.max.bytes"].value == "20000"
    group = {c.name: c for c in raw_describe(b.bootstrap, GROUP_RES, "g-persist").configs}
    assert (group["consumer.session.timeout.ms"].value,
            group["consumer.session.timeout.ms"].config_source) == ("55000", GROUP_SOURCE)
    assert "Traceback" not in b.log_text()


@pytest.mark.minikafka_only
def test_retention_default_applies_to_running_topics(broker_factory):
    """A dynamic log.retention.ms default reaches the open logs of topics without an override:
    the next retention pass deletes their old segments; a topic with its own retention.ms keeps them."""
    b = broker_factory({"log.retention.check.interval.ms": "300"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    plain, pinned = unique("ret-plain"), unique("ret-pinned")
    small = {"segment.bytes": "1048576"}
    for f in admin.create_topics([NewTopic(plain, 1, 1, config=small),
                                  NewTopic(pinned, 1, 1, config={**small, "retention.ms": "-1"})]).values():
        f.result(timeout=TIMEOUT)
    for t in (plain, pinned):
        wait_topic_ready(b.bootstrap, t, 1)
        with RawClient(b.bootstrap) as c:
            for _ in range(4):  # a segment each (900 kB batches, 1 MiB segments)
                assert produce_raw(c, t, build_batch([b"x" * 100_000] * 9)).error_code == 0
    assert list_offset(b.bootstrap, plain, timestamp=-2) == (0, 0)
    time.sleep(0.5)
    alter(b.bootstrap, "", **{"log.retention.ms": "100"})
    wait_until(lambda: list_offset(b.bootstrap, plain, timestamp=-2)[1] > 0, timeout=TIMEOUT,
               what="old segments of the topic without an override deleted")
    assert list_offset(b.bootstrap, pinned, timestamp=-2) == (0, 0)
