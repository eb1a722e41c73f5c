"""Spark Structured Streaming on minikafka with Spark's own (JVM) Kafka connector, unmodified.

The reference pipeline (minikafka.pipelines.orders): transactional producers commit most transactions
and abort >= 20 % on purpose; a streaming query reads with kafka.isolation.level=read_committed and
aggregates per customer; its output (parquet + a results topic written by Spark's Kafka sink) must equal
the oracle computed from the committed events only. Plus: restart from the checkpoint mid-stream, kill -9
of the broker under a running query, a read_uncommitted control run, batch reads with explicit
offsets / assign / subscribePattern, and failOnDataLoss after retention deleted unread segments.

One SparkSession (local[2,4]) for the module; each test gets its own broker and topic. Needs the `spark`
extra (pyspark) and the connector jars (`make spark-jars`); `-m "not spark"` deselects the file.
"""
from __future__ import annotations

import json
import time

import pytest

from minikafka.pipelines import orders
from tests.support.helpers import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.minikafka_only, pytest.mark.timeout(420), pytest.mark.serial]

# 3 producers x 40 transactions x 25 events = 3000 events, 25 % of the transactions aborted
GEN = dict(producers=3, txns_per_producer=40, events_per_txn=25, abort_ratio=0.25)


@pytest.fixture(scope="module")
def spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.fail("pyspark is not installed: pip install -e '.[test,spark]' (make test does it)")
    session = orders.spark_session("minikafka-spark-tests")
    yield session
    orders.stop_spark(session)


def _progress_batches(q) -> list[dict]:
    return [p for p in q.recentProgress if p["numInputRows"] > 0]


def _wait_batches(q, n: int, timeout: float = 120.0) -> None:
    def enough() -> bool:
        if q.exception() is not None:
            raise AssertionError(f"query failed: {q.exception()}")
        return len(_progress_batches(q)) >= n
    wait_until(enough, timeout=timeout, interval=0.1, what=f"{n} micro-batches with input")
    assert q.isActive, "the query finished before it could be interrupted: lower maxOffsetsPerTrigger"


def _assert_ok(rep: dict) -> None:
    assert rep["ok"], json.dumps(rep, indent=1, default=str)


def test_end_to_end_exactly_once(spark, broker, tmp_path):
    oracle = orders.generate(broker.bootstrap, "orders-e2e", **GEN)
    assert oracle["aborted_txns"] / (oracle["aborted_txns"] + oracle["committed_txns"]) >= 0.2
    assert oracle["committed"] != oracle["all"]
    orders.run(spark, broker.bootstrap, "orders-e2e", tmp_path / "out")
    rep = orders.check(spark, broker.bootstrap, tmp_path / "out", oracle)
    _assert_ok(rep)
    # every committed event counted exactly once, no aborted one (the doomed flag is set only in them)
    assert rep["events_counted"] == oracle["committed_events"]
    assert rep["doomed_counted"] == 0


def test_restart_from_checkpoint_mid_stream(spark, broker, tmp_path):
    topic = "orders-restart"
    oracle = orders.generate(broker.bootstrap, topic, **GEN)
    out = tmp_path / "out"
    q = orders.start_query(spark, broker.bootstrap, topic, out, max_offsets_per_trigger=300)
    try:
        _wait_batches(q, 2)
    finally:
        q.stop()
    first_run = [p["batchId"] for p in q.recentProgress]
    partial = orders.check(spark, broker.bootstrap, out, oracle)
    assert not partial["ok"] and partial["events_counted"] < oracle["committed_events"], partial

    q2 = orders.start_query(spark, broker.bootstrap, topic, out, max_offsets_per_trigger=300)
    q2.awaitTermination(300)
    assert q2.exception() is None, q2.exception()
    resumed = [p["batchId"] for p in q2.recentProgress]
    assert resumed and min(resumed) >= max(first_run), (first_run, resumed)  # continued, not restarted
    rep = orders.check(spark, broker.bootstrap, out, oracle)
    _assert_ok(rep)
    assert rep["events_counted"] == oracle["committed_events"]


def test_read_uncommitted_counts_aborted_events(spark, broker, tmp_path):
    topic = "orders-uncommitted"
    oracle = orders.generate(broker.bootstrap, topic, **dict(GEN, txns_per_producer=16))
    orders.run(spark, broker.bootstrap, topic, tmp_path / "out", isolation="read_uncommitted")
    rep = orders.check(spark, broker.bootstrap, tmp_path / "out", oracle, expect="all")
    _assert_ok(rep)
    assert rep["doomed_counted"] == oracle["aborted_events"] > 0
    assert not orders.check(spark, broker.bootstrap, tmp_path / "out", oracle)["ok"]


def test_batch_read_explicit_offsets_assign_pattern(spark, broker):
    from confluent_kafka import Producer

    for t in ("batchread-a", "batchread-b"):
        orders.create_topic(broker.bootstrap, t, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    counts = {("batchread-a", 0): 30, ("batchread-a", 1): 20, ("batchread-b", 0): 7, ("batchread-b", 1): 0}
    for (t, part), n in counts.items():
        for i in range(n):
            p.produce(t, value=f"{t}/{part}/{i}".encode(), partition=part)
    assert p.flush(30) == 0

    def read(**opts) -> list[tuple[str, int, int, str]]:
        r = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
        for k, v in opts.items():
            r = r.option(k, v)
        rows = r.load().selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS v").collect()
        return sorted((x["topic"], x["partition"], x["offset"], x["v"]) for x in rows)

    def expected(t: str, part: int, start: int, end: int):
        return [(t, part, o, f"{t}/{part}/{o}") for o in range(start, end)]

    got = read(subscribe="batchread-a",
               startingOffsets=json.dumps({"batchread-a": {"0": 5, "1": -2}}),
               endingOffsets=json.dumps({"batchread-a": {"0": 15, "1": -1}}))
    assert got == expected("batchread-a", 0, 5, 15) + expected("batchread-a", 1, 0, 20)
    got = read(subscribe="batchread-a",
               startingOffsets=json.dumps({"batchread-a": {"0": 29, "1": 19}}),
               endingOffsets=json.dumps({"batchread-a": {"0": 30, "1": 20}}))
    assert got == expected("batchread-a", 0, 29, 30) + expected("batchread-a", 1, 19, 20)
    got = read(assign=json.dumps({"batchread-a": [1], "batchread-b": [0]}))
    assert got == expected("batchread-a", 1, 0, 20) + expected("batchread-b", 0, 0, 7)
    got = read(subscribePattern="batchread-.*")
    assert got == sorted(sum((expected(t, part, 0, n) for (t, part), n in counts.items()), []))


def test_broker_kill9_under_running_query(spark, broker_factory, tmp_path):
    b = broker_factory()
    topic = "orders-kill9"
    oracle = orders.generate(b.bootstrap, topic, **GEN)
    out = tmp_path / "out"
    q = orders.start_query(spark, b.bootstrap, topic, out, max_offsets_per_trigger=300)
    try:
        _wait_batches(q, 1)
        b.kill()
        time.sleep(1.0)
        b.start()
        q.awaitTermination(300)
    finally:
        if q.isActive:
            q.stop()
    assert q.exception() is None, q.exception()
    rep = orders.check(spark, b.bootstrap, out, oracle)
    _assert_ok(rep)
    assert rep["events_counted"] == oracle["committed_events"]


def test_fail_on_data_loss_after_retention_deleted_unread_segments(spark, broker_factory, tmp_path):
    """The query stops at offset 30; retention then deletes segments beyond that. Restarted from its
    checkpoint with failOnDataLoss=true the query fails (data loss reported); with failOnDataLoss=false
    it carries on from the new log start offset and reads exactly what is left."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.helpers import RawClient, build_batch, confluent_watermarks, produce_raw

    b = broker_factory(overrides={"log.retention.check.interval.ms": "200"})
    topic = "retained"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "4000", "retention.bytes": "8000"})]
                        )[topic].result(timeout=20)

    def produce(first: int, n_batches: int) -> None:
        with RawClient(b.bootstrap) as client:
            for i in range(n_batches):
                vals = [f"r{first + i * 10 + j:05d}".encode().ljust(100, b"x") for j in range(10)]
                assert produce_raw(client, topic, build_batch(vals)).error_code == 0

    seen: list[int] = []

    def run(fail_on_data_loss: bool):
        def collect(df, _batch_id):
            seen.extend(r["offset"] for r in df.select("offset").collect())
        q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", b.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("failOnDataLoss", str(fail_on_data_loss).lower()).load()
             .writeStream.option("checkpointLocation", str(tmp_path / "ckpt")).foreachBatch(collect)
             .trigger(availableNow=True).start())
        try:
            q.awaitTermination(120)
        except Exception as e:  # StreamingQueryException: the query failed
            return e
        return q.exception()

    produce(0, 3)
    assert run(True) is None and sorted(seen) == list(range(30))

    produce(30, 30)  # 330 records: retention.bytes keeps only the last few segments
    def settled() -> bool:
        low, high = confluent_watermarks(b.bootstrap, topic, 0)
        return high == 330 and low > 30
    wait_until(settled, timeout=20, what="retention to delete the segments after offset 30")
    time.sleep(0.6)  # nothing more is deletable: the log start stays put
    low, _ = confluent_watermarks(b.bootstrap, topic, 0)

    seen.clear()
    err = run(True)
    assert err is not None and "lost" in str(err).lower(), err
    assert seen == []
    err = run(False)
    assert err is None, err
    assert sorted(seen) == list(range(low, 330)), (low, sorted(seen)[:3])
