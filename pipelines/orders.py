"""Orders: exactly-once counts from transactional producers through Spark Structured Streaming.

    python -m minikafka.pipelines.orders generate --bootstrap HOST:PORT --topic orders --oracle oracle.json
    python -m minikafka.pipelines.orders run      --bootstrap HOST:PORT --topic orders --out DIR
    python -m minikafka.pipelines.orders check    --bootstrap HOST:PORT --out DIR --oracle oracle.json

generate: several confluent-kafka transactional producers (one thread each) write order events
    (key = customer, value = JSON {order_id, customer, amount_cents, event_time, doomed}) in transactions;
    a fixed share of the transactions (default 25 %) is aborted on purpose. `doomed` is true exactly in the
    events of the transactions that get aborted. The oracle file holds per-customer count and sum of the
    committed events ("committed") and of all events ("all", what read_uncommitted sees).
run: a Spark Structured Streaming query: Kafka source (`kafka.isolation.level=read_committed`,
    `startingOffsets=earliest`), JSON parsing, a stateful aggregation per customer (count, sum, doomed
    count, min/max event time) in complete mode, trigger(availableNow=True) so that it stops at the end of
    the input, checkpoint in DIR/checkpoint. Each micro-batch (foreachBatch) writes (a) the full result to
    DIR/results/batch=<id> (parquet; a replayed batch overwrites its own directory, so it is idempotent) and
    (b) one record per customer to the results topic through Spark's Kafka sink (Java producer,
    idempotence on; at least once across restarts: read it as a changelog, last value per key wins).
check: latest complete parquet batch and the results topic (last value per key) against the oracle.

The connector jars come from `make spark-jars` (scripts/spark_jars.py) or MINIKAFKA_SPARK_JARS (comma list).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

RESULTS_SUFFIX = "-totals"

# ------------------------------------------------------------------------------------- generator --


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        try:
            fut.result(30)
        except KafkaException as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


def _empty_totals() -> dict[str, list[int]]:
    return {}


def _add(tot: dict[str, list[int]], customer: str, amount: int) -> None:
    t = tot.setdefault(customer, [0, 0])
    t[0] += 1
    t[1] += amount


def generate(bootstrap: str, topic: str, *, producers: int = 3, txns_per_producer: int = 40,
             events_per_txn: int = 25, abort_ratio: float = 0.25, customers: int = 20, partitions: int = 3,
             seed: int = 7, oracle_path: str | os.PathLike | None = None) -> dict:
    """Write the events; returns (and optionally saves) the oracle:
    {"committed": {customer: [count, sum]}, "all": {...}, "committed_events", "aborted_events",
     "committed_txns", "aborted_txns"}."""
    from confluent_kafka import Producer

    create_topic(bootstrap, topic, partitions)
    rng = random.Random(seed)
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    total_txns = producers * txns_per_producer
    n_abort = max(1, round(total_txns * abort_ratio))
    doomed_ids = set(rng.sample(range(total_txns), n_abort))
    # every event decided up front (deterministic for a seed), then written by the producer threads
    plans: list[list[tuple[bool, list[dict]]]] = []
    for p in range(producers):
        txns = []
        for t in range(txns_per_producer):
            doomed = (p * txns_per_producer + t) in doomed_ids
            events = []
            for e in range(events_per_txn):
                events.append({
                    "order_id": f"p{p}-t{t}-e{e}",
                    "customer": f"c{rng.randrange(customers):03d}",
                    "amount_cents": rng.randrange(100, 100_000),
                    "event_time": (base + timedelta(seconds=rng.randrange(6 * 3600))).strftime(
                        "%Y-%m-%dT%H:%M:%S.000Z"),
                    "doomed": doomed,
                })
            txns.append((doomed, events))
        plans.append(txns)

    errors: list[BaseException] = []

    def produce(p: int) -> None:
        try:
            prod = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"orders-gen-{topic}-{p}",
                             "linger.ms": 5, "enable.idempotence": True})
            prod.init_transactions(30)
            for doomed, events in plans[p]:
                prod.begin_transaction()
                for ev in events:
                    prod.produce(topic, key=ev["customer"].encode(), value=json.dumps(ev).encode())
                    prod.poll(0)
                if doomed:
                    prod.flush(30)  # the records really reach the log before the abort marker
                    prod.abort_transaction(30)
                else:
                    prod.commit_transaction(30)
            prod.flush(30)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(p,), name=f"orders-gen-{p}") for p in range(producers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]

    committed: dict[str, list[int]] = {}
    every: dict[str, list[int]] = {}
    n_committed = n_aborted = 0
    for txns in plans:
        for doomed, events in txns:
            for ev in events:
                _add(every, ev["customer"], ev["amount_cents"])
                if doomed:
                    n_aborted += 1
                else:
                    _add(committed, ev["customer"], ev["amount_cents"])
                    n_committed += 1
    oracle = {"topic": topic, "committed": committed, "all": every, "committed_events": n_committed,
              "aborted_events": n_aborted, "committed_txns": total_txns - n_abort, "aborted_txns": n_abort}
    if oracle_path is not None:
        Path(oracle_path).write_text(json.dumps(oracle, indent=1, sort_keys=True))
    return oracle


# ---------------------------------------------------------------------------------------- spark --


def connector_jars() -> list[str]:
    """The spark-sql-kafka-0-10 jars: MINIKAFKA_SPARK_JARS, else the cache of scripts/spark_jars.py
    (fetched there on demand when this runs from a source checkout)."""
    env = os.environ.get("MINIKAFKA_SPARK_JARS")
    if env:
        return [j for j in env.split(",") if j]
    import pyspark

    repo = Path(__file__).resolve().parent.parent
    if (repo / "scripts" / "spark_jars.py").is_file():
        sys.path.insert(0, str(repo))
        try:
            from scripts import spark_jars
        finally:
            sys.path.remove(str(repo))
        if spark_jars.version() != pyspark.__version__:
            raise RuntimeError(f"pyspark {pyspark.__version__} but scripts/spark_jars.py pins connector "
                               f"{spark_jars.version()}: keep pyproject's `spark` extra and SPARK_VERSION equal")
        return spark_jars.jar_list()
    base = Path(os.environ.get("MINIKAFKA_KAFKA_CACHE") or
                Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minikafka")
    jars = sorted(str(p) for p in (base / f"spark-kafka-{pyspark.__version__}" / "jars").glob("*.jar"))
    if not jars:
        raise RuntimeError("Spark Kafka connector jars not found: run `make spark-jars` or set MINIKAFKA_SPARK_JARS")
    return jars


def spark_session(app: str = "minikafka-orders", master: str = "local[2,4]", conf: dict | None = None):
    """A SparkSession with the Kafka connector on its classpath. `local[2,4]`: 2 threads, and a failed
    task is retried (up to 4 attempts) as on a cluster, instead of failing the job at once."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # read by the JVM at launch (else: a warning)
    b = (SparkSession.builder.appName(app).master(master)
         .config("spark.jars", ",".join(connector_jars()))
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.streaming.stateStore.maintenanceInterval", "600s"))
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_spark(spark) -> None:
    """Stop the session and end its JVM too (pyspark keeps the gateway JVM alive until the Python
    process exits); a later spark_session() starts a fresh one."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
        if proc is not None:
            try:
                proc.stdin.close()  # the launcher JVM exits when its stdin closes
            except Exception:
                pass
            try:
                proc.wait(20)
            except Exception:
                proc.kill()
                proc.wait(10)


def event_schema():
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

    return StructType([
        StructField("order_id", StringType()), StructField("customer", StringType()),
        StructField("amount_cents", LongType()), StructField("event_time", TimestampType()),
        StructField("doomed", BooleanType()),
    ])


def kafka_options(bootstrap: str, isolation: str = "read_committed") -> dict[str, str]:
    """The Kafka-source options the pipeline uses (see docs/spark.md)."""
    return {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.isolation.level": isolation,
        "startingOffsets": "earliest",
        "failOnDataLoss": "true",
        # minikafka restarts in ~1 s; give the driver's offset lookups room to ride over it
        "fetchOffset.numRetries": "30",
        "fetchOffset.retryIntervalMs": "1000",
        "kafka.request.timeout.ms": "10000",
        "kafka.default.api.timeout.ms": "60000",
    }


def start_query(spark, bootstrap: str, topic: str, out_dir: str | os.PathLike, *,
                results_topic: str | None = None, isolation: str = "read_committed",
                max_offsets_per_trigger: int | None = None, available_now: bool = True):
    """Start the streaming query (returns the StreamingQuery; `.awaitTermination()` to wait for it).

    out_dir/checkpoint is the query checkpoint, out_dir/results/batch=<id> the parquet output."""
    from pyspark.sql import functions as F

    out = Path(out_dir)
    results_topic = results_topic or topic + RESULTS_SUFFIX
    reader = spark.readStream.format("kafka").option("subscribe", topic)
    for k, v in kafka_options(bootstrap, isolation).items():
        reader = reader.option(k, v)
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    events = (reader.load()
              .select(F.from_json(F.col("value").cast("string"), event_schema()).alias("e"))
              .select("e.*"))
    totals = (events.groupBy("customer")
              .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount_cents").alias("amount_cents"),
                   F.sum(F.col("doomed").cast("long")).alias("doomed"),
                   F.min("event_time").alias("first_event"), F.max("event_time").alias("last_event")))

    def write_batch(df, batch_id: int) -> None:
        df = df.persist()
        try:
            # (a) parquet: the complete result as of this batch; a replay overwrites the same directory
            df.coalesce(1).write.mode("overwrite").parquet(str(out / "results" / f"batch={batch_id:06d}"))
            # (b) back to Kafka through Spark's Kafka sink (a changelog: last value per customer wins)
            (df.select(F.col("customer").alias("key"),
                       F.to_json(F.struct(F.col("customer"), F.col("orders"), F.col("amount_cents"),
                                          F.col("doomed"), F.lit(batch_id).alias("batch"))).alias("value"))
             .write.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("kafka.enable.idempotence", "true")
             .option("kafka.acks", "all")
             .option("topic", results_topic)
             .save())
        finally:
            df.unpersist()

    writer = (totals.writeStream.outputMode("complete")
              .option("checkpointLocation", str(out / "checkpoint"))
              .queryName(f"orders_{topic.replace('-', '_')}")
              .foreachBatch(write_batch))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="1 second")
    return writer.start()


def run(spark, bootstrap: str, topic: str, out_dir, **kw) -> None:
    q = start_query(spark, bootstrap, topic, out_dir, **kw)
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(f"query failed: {q.exception()}")


# -------------------------------------------------------------------------------------- checker --


def parquet_totals(spark, out_dir) -> tuple[int, dict[str, list[int]], int]:
    """(batch id, {customer: [orders, amount_cents]}, doomed events) of the latest complete parquet batch."""
    root = Path(out_dir) / "results"
    done = sorted(d for d in root.glob("batch=*") if (d / "_SUCCESS").is_file()) if root.is_dir() else []
    if not done:
        return -1, {}, 0
    latest = done[-1]
    rows = spark.read.parquet(str(latest)).collect()
    return (int(latest.name.split("=")[1]), {r["customer"]: [r["orders"], r["amount_cents"]] for r in rows},
            sum(r["doomed"] for r in rows))


def topic_totals(bootstrap: str, topic: str, timeout: float = 30.0) -> tuple[dict[str, list[int]], int]:
    """Last value per customer in the results topic (read_committed), and the number of records read."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "orders-check-unused", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    latest: dict[str, list[int]] = {}
    n = 0
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        if md.error is not None:
            return {}, 0
        parts = list(md.partitions)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: no end of partitions {set(parts) - eof} within {timeout}s")
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise RuntimeError(f"consume error: {m.error()}")
                eof.discard(m.partition())
                v = json.loads(m.value())
                latest[v["customer"]] = [v["orders"], v["amount_cents"]]
                n += 1
    finally:
        c.close()
    return latest, n


def diff(got: dict[str, list[int]], want: dict[str, list[int]]) -> dict[str, tuple]:
    return {k: (got.get(k), want.get(k)) for k in sorted(set(got) | set(want))
            if list(got.get(k) or []) != list(want.get(k) or [])}


def check(spark, bootstrap: str, out_dir, oracle: dict, *, expect: str = "committed",
          results_topic: str | None = None) -> dict:
    """Compare the parquet output and the results topic with oracle[expect]; returns a report with
    "ok" (bool) and the differences (customer -> (got, want))."""
    want = oracle[expect]
    batch, pq, doomed = parquet_totals(spark, out_dir)
    kt, n_records = topic_totals(bootstrap, results_topic or oracle["topic"] + RESULTS_SUFFIX)
    want_doomed = 0 if expect == "committed" else oracle["aborted_events"]
    rep = {"expect": expect, "batch": batch, "parquet_diff": diff(pq, want), "topic_diff": diff(kt, want),
           "doomed_counted": doomed, "doomed_expected": want_doomed, "results_records": n_records,
           "events_counted": sum(v[0] for v in pq.values())}
    rep["ok"] = not rep["parquet_diff"] and not rep["topic_diff"] and doomed == want_doomed
    return rep


# ------------------------------------------------------------------------------------------ CLI --


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m minikafka.pipelines.orders", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    r = sub.add_parser("run")
    c = sub.add_parser("check")
    for p in (g, r, c):
        p.add_argument("--bootstrap", default="127.0.0.1:9092")
        p.add_argument("--topic", default="orders")
    g.add_argument("--oracle", default="orders-oracle.json")
    g.add_argument("--producers", type=int, default=3)
    g.add_argument("--txns", type=int, default=40, help="transactions per producer")
    g.add_argument("--events", type=int, default=25, help="events per transaction")
    g.add_argument("--abort-ratio", type=float, default=0.25)
    g.add_argument("--seed", type=int, default=7)
    for p in (r, c):
        p.add_argument("--out", default="orders-out")
        p.add_argument("--results-topic", default=None)
    r.add_argument("--isolation", choices=["read_committed", "read_uncommitted"], default="read_committed")
    r.add_argument("--max-offsets-per-trigger", type=int, default=None)
    c.add_argument("--oracle", default="orders-oracle.json")
    c.add_argument("--expect", choices=["committed", "all"], default="committed")
    a = ap.parse_args(argv)

    if a.cmd == "generate":
        o = generate(a.bootstrap, a.topic, producers=a.producers, txns_per_producer=a.txns,
                     events_per_txn=a.events, abort_ratio=a.abort_ratio, seed=a.seed, oracle_path=a.oracle)
        print(json.dumps({k: o[k] for k in ("committed_events", "aborted_events", "committed_txns",
                                            "aborted_txns")}))
        return 0
    spark = spark_session()
    try:
        if a.cmd == "run":
            run(spark, a.bootstrap, a.topic, a.out, results_topic=a.results_topic, isolation=a.isolation,
                max_offsets_per_trigger=a.max_offsets_per_trigger)
            print(json.dumps({"out": a.out}))
            return 0
        oracle = json.loads(Path(a.oracle).read_text())
        rep = check(spark, a.bootstrap, a.out, oracle, expect=a.expect, results_topic=a.results_topic)
        print(json.dumps(rep, indent=1, default=str))
        return 0 if rep["ok"] else 1
    finally:
        stop_spark(spark)


if __name__ == "__main__":
    sys.exit(main())
