"""Avro records with their schema in minikafka's Schema Registry, read by Spark Structured Streaming.

A confluent-kafka producer writes payments with AvroSerializer: the subject is `<topic>-value`
(TopicNameStrategy) and the schema is registered on first use. Spark's Kafka source reads the raw values,
each in Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), then the Avro binary.
The query checks those 5 bytes against the subject's latest schema id, strips them and decodes the rest
with spark-avro's `from_avro`, given that schema's text from the registry's REST API.

    minikafka serve --override schema.registry.listener=http://127.0.0.1:8081 &
    python examples/schema_registry_spark.py --bootstrap 127.0.0.1:9092 \\
        --registry http://127.0.0.1:8081 --topic payments --out /tmp/payments

`from_avro` decodes every record with the one schema it is given, so a record written with another schema
(an older version of the subject) fails the query instead of being misread.
tests/integration/schema_registry/test_schema_registry_spark.py runs this pipeline.
"""
from __future__ import annotations

import argparse
import json
import urllib.parse
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

PAYMENT = json.dumps({
    "type": "record", "name": "Payment", "namespace": "example.shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "customer", "type": "string"},
        {"name": "amount_cents", "type": "long"},
        {"name": "rate", "type": "double"},
        {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD", "GBP"]}},
        {"name": "paid", "type": "boolean"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
})
# Spark's Kafka source and spark-avro, at the version of the pyspark that runs them (from Maven Central)
SPARK_PACKAGES = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0,org.apache.spark:spark-avro_2.13:4.0.0"


def sample_payments(n: int) -> list[dict]:
    return [{"id": f"pay-{i:04d}", "customer": f"c{i % 7}", "amount_cents": 100 * i + 37, "rate": i / 8,
             "currency": ("EUR", "USD", "GBP")[i % 3], "paid": i % 2 == 0, "tags": [f"t{j}" for j in range(i % 3)],
             "note": None if i % 4 else f"note {i}"} for i in range(n)]


def produce(bootstrap: str, registry_url: str, topic: str, payments: list[dict]) -> None:
    """Write each payment as Confluent Avro (key: its id); returns once every record is acknowledged."""
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), PAYMENT,
                                conf={"auto.register.schemas": True,
                                      "subject.name.strategy": topic_subject_name_strategy})
    producer = Producer({"bootstrap.servers": bootstrap})
    errors = []
    for payment in payments:
        value = serializer(payment, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, key=payment["id"].encode(), value=value,
                         on_delivery=lambda err, _msg: err and errors.append(err))
    if producer.flush(30) or errors:
        raise RuntimeError(f"not delivered: {errors or 'flush timed out'}")


def latest_schema(registry_url: str, subject: str) -> tuple[int, str]:
    """(schema id, schema text) of the subject's latest version, from the registry's REST API."""
    url = f"{registry_url.rstrip('/')}/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest"
    with urllib.request.urlopen(url, timeout=10) as resp:
        version = json.load(resp)
    return version["id"], version["schema"]


def spark_session(jars: list[str] | None = None):
    """A local session with the Kafka source and spark-avro: given jars, else resolved from Maven Central."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("payments-avro").master("local[1]")
    if jars:
        return builder.config("spark.jars", ",".join(jars)).getOrCreate()
    return builder.config("spark.jars.packages", SPARK_PACKAGES).getOrCreate()


def payments_stream(spark, bootstrap: str, registry_url: str, topic: str):
    """The topic's records as a streaming DataFrame of the schema's fields."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    schema_id, schema = latest_schema(registry_url, f"{topic}-value")
    raw = (spark.readStream.format("kafka")
           .option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic)
           .option("startingOffsets", "earliest")
           .load())
    header = F.hex(F.substring("value", 1, 5))  # magic byte 0, then the schema id
    avro = (F.when(header == f"00{schema_id:08X}", F.expr("substring(value, 6)"))
            .otherwise(F.raise_error(F.concat(F.lit(f"not Avro of schema id {schema_id}: header "), header))))
    return raw.select(from_avro(avro, schema).alias("payment")).select("payment.*")


def write_parquet(stream, out: str) -> None:
    """Everything in the topic now (trigger availableNow) into parquet at out/data; raises if the query fails."""
    query = (stream.writeStream.format("parquet")
             .option("path", f"{out}/data")
             .option("checkpointLocation", f"{out}/checkpoint")
             .trigger(availableNow=True)
             .start())
    query.awaitTermination()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:9092")
    ap.add_argument("--registry", default="http://127.0.0.1:8081")
    ap.add_argument("--topic", default="payments")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=10)
    a = ap.parse_args()
    produce(a.bootstrap, a.registry, a.topic, sample_payments(a.count))
    spark = spark_session()
    write_parquet(payments_stream(spark, a.bootstrap, a.registry, a.topic), a.out)
    spark.read.parquet(f"{a.out}/data").orderBy("id").show(truncate=False)


if __name__ == "__main__":
    main()
