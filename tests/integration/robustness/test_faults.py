"""Fault injection (broker/ops/faults.py) seen by real clients: confluent-kafka's idempotent producer through
NOT_LEADER_OR_FOLLOWER and an after_apply disconnect (every record exactly once), a transactional
producer through an EndTxn COORDINATOR_LOAD_IN_PROGRESS, a non-retriable error in the delivery
callback, a Fetch delay, raw before/after_apply disconnects (applied or not), and the refusals (faults
disabled, bad rules). minikafka only: Kafka has no fault injection.
"""
from __future__ import annotations

import subprocess
import time

import pytest
from confluent_kafka import KafkaError, Producer

from minikafka.faults import FaultsClient, FaultsError
from minikafka.testing import MiniKafka, MiniKafkaError, free_port, minikafka_command, subprocess_env
from tests.support.helpers import RawClient, build_batch, confluent_consume, fetch_once, list_offset, produce_raw, produce_request

pytestmark = pytest.mark.minikafka_only


@pytest.fixture(scope="module")
def kafka():
    with MiniKafka(faults=True, config={"group.initial.rebalance.delay.ms": "0"}) as k:
        yield k


@pytest.fixture
def faults(kafka):
    kafka.faults.clear()
    yield kafka.faults
    kafka.faults.clear()


def _values(msgs) -> list[bytes]:
    return [m.value() for m in msgs]


def test_idempotent_producer_exactly_once_through_errors_and_lost_response(kafka, faults):
    topic = "faults-idem"
    kafka.create_topic(topic, partitions=1)
    faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic=topic, times=3)
    faults.inject(api="Produce", disconnect="after_apply", topic=topic, times=1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 5, "retry.backoff.ms": 50})
    errors: list = []
    n = 200
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
        if i == n // 2:
            producer.flush(30)
    assert producer.flush(30) == 0
    assert errors == []
    fired = faults.injected()["fired"]
    assert [f["action"] for f in fired] == ["error NOT_LEADER_OR_FOLLOWER"] * 3 + ["disconnect after_apply"]
    got = _values(confluent_consume(kafka.bootstrap_servers, topic, {0: n})[0])
    assert sorted(got) == sorted(b"v%d" % i for i in range(n))  # each once: no duplicate, none lost
    assert got == [b"v%d" % i for i in range(n)]  # and in order
    assert list_offset(kafka.bootstrap_servers, topic) == (0, n)


def test_transactional_commit_retried_after_end_txn_error(kafka, faults):
    topic = "faults-txn"
    kafka.create_topic(topic, partitions=1)
    faults.inject(api="EndTxn", error="COORDINATOR_LOAD_IN_PROGRESS", transactional_id="faults-tx", times=1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": "faults-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"t%d" % i)
    producer.commit_transaction(30)
    assert [f["action"] for f in faults.injected()["fired"]] == ["error COORDINATOR_LOAD_IN_PROGRESS"]
    got = confluent_consume(kafka.bootstrap_servers, topic, {0: 10}, **{"isolation.level": "read_committed"})[0]
    assert _values(got) == [b"t%d" % i for i in range(10)]
    # committed once: only the 10 records and one commit marker, nothing left open
    assert list_offset(kafka.bootstrap_servers, topic) == (0, 11)


@pytest.mark.parametrize("error, code", [("INVALID_RECORD", KafkaError.INVALID_RECORD),
                                         ("TOPIC_AUTHORIZATION_FAILED", KafkaError.TOPIC_AUTHORIZATION_FAILED)])
def test_non_retriable_error_reaches_delivery_callback(kafka, faults, error, code):
    topic = f"faults-fatal-{error.lower()}"
    kafka.create_topic(topic, partitions=1)
    faults.inject(api="Produce", error=error, topic=topic, times=1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": False,
                         "message.timeout.ms": 10000})
    results: list = []
    producer.produce(topic, value=b"doomed", on_delivery=lambda err, msg: results.append(err))
    producer.flush(20)
    assert len(results) == 1 and results[0] is not None and results[0].code() == code
    assert list_offset(kafka.bootstrap_servers, topic) == (0, 0)  # not applied
    # a new producer: librdkafka remembers an unauthorized topic for the producer's life
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "enable.idempotence": False})
    producer.produce(topic, value=b"fine", on_delivery=lambda err, msg: results.append(err))
    producer.flush(20)
    assert results[1] is None
    assert list_offset(kafka.bootstrap_servers, topic) == (0, 1)


def test_fetch_delay(kafka, faults):
    topic = "faults-fetch-delay"
    kafka.create_topic(topic, partitions=1)
    with RawClient(kafka.bootstrap_servers) as client:
        assert produce_raw(client, topic, build_batch([b"a"])).error_code == 0
        faults.inject(api="Fetch", delay_ms=1500, topic=topic, times=1)
        t0 = time.monotonic()
        p = fetch_once(client, topic, 0, 0)
        slow = time.monotonic() - t0
        t0 = time.monotonic()
        p2 = fetch_once(client, topic, 0, 0)
        fast = time.monotonic() - t0
    assert p.error_code == 0 and p.high_watermark == 1 and p2.high_watermark == 1
    assert slow >= 1.4 and fast < 1.0, (slow, fast)


def test_raw_disconnects_and_produce_error_apply_or_not(kafka, faults):
    topic = "faults-raw"
    kafka.create_topic(topic, partitions=2)
    faults.inject(api="Produce", disconnect="before_apply", topic=topic, partition=0, times=1)
    with RawClient(kafka.bootstrap_servers) as client:
        client.send(produce_request(topic, build_batch([b"x"])), 9)
        assert client.closed_by_peer()
    assert list_offset(kafka.bootstrap_servers, topic) == (0, 0)  # not applied

    faults.inject(api="Produce", disconnect="after_apply", topic=topic, times=1)
    with RawClient(kafka.bootstrap_servers) as client:
        client.send(produce_request(topic, build_batch([b"y"])), 9)
        assert client.closed_by_peer()
    assert list_offset(kafka.bootstrap_servers, topic) == (0, 1)  # applied, answer lost

    faults.inject(api="Produce", error="NOT_ENOUGH_REPLICAS", topic=topic, partition=1, times=1)
    with RawClient(kafka.bootstrap_servers) as client:
        assert produce_raw(client, topic, build_batch([b"z"]), partition=0).error_code == 0  # not matched
        p = produce_raw(client, topic, build_batch([b"z"]), partition=1)
        assert (p.error_code, p.base_offset) == (19, -1)
        assert produce_raw(client, topic, build_batch([b"z"]), partition=1).error_code == 0  # times=1 used up
    assert list_offset(kafka.bootstrap_servers, topic, 1) == (0, 1)
    rules = faults.injected()["rules"]
    assert [r["remaining"] for r in rules] == [0, 0, 0] and [r["fired"] for r in rules] == [1, 1, 1]


def test_bad_rules_refused(kafka, faults):
    with pytest.raises(FaultsError, match="unknown API 'Produze'") as exc:
        faults.inject(api="Produze", error="NOT_LEADER_OR_FOLLOWER")
    assert exc.value.status == 400
    with pytest.raises(FaultsError, match="unknown Kafka error name 'NOT_A_LEADER'"):
        faults.inject(api="Produce", error="NOT_A_LEADER")
    with pytest.raises(FaultsError, match="disconnect must be one of"):
        faults.inject(api="Produce", disconnect="sometimes")
    assert faults.injected()["rules"] == []
    cli = [*minikafka_command(), "faults"]
    bad = subprocess.run(cli + ["inject", "--admin-url", kafka.admin_url, "--api", "Nope", "--error", "X"],
                         capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert bad.returncode == 1 and "unknown API 'Nope'" in bad.stderr
    ok = subprocess.run(cli + ["inject", "--admin-url", kafka.admin_url, "--api", "Fetch", "--delay-ms", "10",
                               "--topic", "nothing-fetches-this"], capture_output=True, text=True, timeout=60,
                        env=subprocess_env())
    assert ok.returncode == 0 and ok.stdout.strip().isdigit()
    listed = subprocess.run(cli + ["list", "--admin-url", kafka.admin_url], capture_output=True, text=True, timeout=60,
                            env=subprocess_env())
    assert listed.returncode == 0 and '"nothing-fetches-this"' in listed.stdout
    cleared = subprocess.run(cli + ["clear", "--admin-url", kafka.admin_url], capture_output=True, text=True, timeout=60,
                             env=subprocess_env())
    assert cleared.returncode == 0 and faults.injected()["rules"] == []


def test_disabled_refuses_inject(minikafka_factory):
    port = free_port()
    k = minikafka_factory(config={"minikafka.metrics.listener": f"http://127.0.0.1:{port}"})
    with pytest.raises(FaultsError, match="disabled.*minikafka.faults.enable=true") as exc:
        k.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER")
    assert exc.value.status == 403
    r = subprocess.run([*minikafka_command(), "faults", "inject", "--admin-url",
                        k.admin_url, "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER"],
                       capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert r.returncode != 0 and "disabled" in r.stderr
    with RawClient(k.bootstrap_servers) as client:  # and the broker works as ever
        assert produce_raw(client, "faults-off", build_batch([b"a"])).error_code in (0, 3)
    with MiniKafka(start=False) as plain:
        with pytest.raises(MiniKafkaError, match="faults=True"):
            plain.faults


def test_factory_with_faults(minikafka_factory):
    k = minikafka_factory(faults=True)
    assert k.config["minikafka.faults.enable"] == "true" and k.admin_url
    rule_id = k.faults.inject(api="Metadata", delay_ms=1, times=2)
    assert k.faults.injected()["rules"][0]["id"] == rule_id


@pytest.mark.parametrize("switch", ["true", True, "TRUE"])
def test_the_documented_config_switch_gives_working_faults(minikafka_factory, switch):
    """`minikafka.faults.enable=true` in `config` alone (no faults=True): the admin listener opens on a free
    port and `kafka.faults` injects."""
    k = minikafka_factory(config={"minikafka.faults.enable": switch})
    assert k.admin_url and k.config["minikafka.metrics.listener"] == k.admin_url
    k.faults.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", topic="switched", times=1)
    with RawClient(k.bootstrap_servers) as client:
        assert produce_raw(client, "switched", build_batch([b"a"])).error_code == 6
    assert [f["api"] for f in k.faults.fired()] == ["Produce"]
    with MiniKafka(config={"minikafka.faults.enable": "false"}, start=False) as off:
        assert off.admin_url is None
