"""minikafka: a lightweight single-node broker speaking the Kafka wire protocol."""

__version__ = "0.1.0"
