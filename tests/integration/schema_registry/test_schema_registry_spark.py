"""docs/schema-registry.md's pipeline, run as the docs show it (examples/schema_registry_spark.py, which the
page includes): confluent-kafka's AvroSerializer writes to `minikafka serve` with the registry on, and Spark
Structured Streaming (Kafka source, spark-avro's from_avro with the schema fetched from the registry)
reads every record's fields back exactly. One local[1] session; the jars come from `make spark-jars`."""
from __future__ import annotations

import importlib.util
import json
import urllib.request

import avro.schema
import pytest

from minikafka.pipelines import orders
from minikafka.testing import MiniKafka
from tests.conftest import ROOT

pytest.importorskip("confluent_kafka.schema_registry.avro")

pytestmark = [pytest.mark.spark, pytest.mark.minikafka_only, pytest.mark.timeout(300), pytest.mark.serial]

N = 40


def _example():
    spec = importlib.util.spec_from_file_location("schema_registry_spark", ROOT / "examples" / "schema_registry_spark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def spark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.fail("pyspark is not installed: pip install -e '.[test,spark]' (make test does it)")
    session = orders.spark_session("minikafka-schema-registry-spark", master="local[1]")
    yield session
    orders.stop_spark(session)


def test_avro_records_through_spark_with_the_registry_schema(spark, tmp_path):
    example = _example()
    topic = "payments"
    payments = example.sample_payments(N)
    with MiniKafka(schema_registry=True) as kafka:
        url = kafka.schema_registry_url
        example.produce(kafka.bootstrap_servers, url, topic, payments)
        with urllib.request.urlopen(f"{url}/subjects", timeout=10) as resp:
            assert json.load(resp) == [f"{topic}-value"]  # TopicNameStrategy, registered by the serializer
        schema_id, schema = example.latest_schema(url, f"{topic}-value")
        assert avro.schema.parse(schema) == avro.schema.parse(example.PAYMENT)  # the text, as the registry keeps it

        stream = example.payments_stream(spark, kafka.bootstrap_servers, url, topic)
        example.write_parquet(stream, str(tmp_path / "out"))
        rows = spark.read.parquet(str(tmp_path / "out" / "data")).collect()
        assert sorted((r.asDict(recursive=True) for r in rows), key=lambda r: r["id"]) == payments
        assert spark.read.parquet(str(tmp_path / "out" / "data")).columns == [
            f["name"] for f in json.loads(example.PAYMENT)["fields"]]

        # a second version of the subject: records of the first no longer match the latest schema id,
        # and the query fails on them rather than misreading them
        v2 = json.loads(example.PAYMENT)
        v2["fields"].append({"name": "channel", "type": "string", "default": "web"})
        example.PAYMENT = json.dumps(v2)
        example.produce(kafka.bootstrap_servers, url, topic, [dict(payments[0], id="pay-v2", channel="app")])
        new_id, _ = example.latest_schema(url, f"{topic}-value")
        assert new_id != schema_id
        stream = example.payments_stream(spark, kafka.bootstrap_servers, url, topic)
        with pytest.raises(Exception, match=f"not Avro of schema id {new_id}: header 00{schema_id:08X}"):
            example.write_parquet(stream, str(tmp_path / "out2"))
