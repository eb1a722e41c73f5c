"""Reference data pipelines that run against minikafka (or any Kafka) with stock clients.

`minikafka.pipelines.orders`: transactional producers -> Spark Structured Streaming (read_committed)
-> parquet + a Kafka topic, and a checker against an oracle. Needs the `spark` extra and the connector
jars (`make spark-jars`).
"""
