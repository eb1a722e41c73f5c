"""Kafka's random Uuids: 22-char url-safe text that never starts with "-", never a reserved id."""
import uuid

from minikafka.protocol.uuids import random_uuid, uuid_text
from minikafka.raft.config import new_cluster_id


def test_random_uuids_never_start_with_a_dash_nor_are_reserved():
    # about 1 in 64 uuid4s start with "-": 5000 draws would meet ~78 of them if they were not redrawn
    for _ in range(5000):
        value = random_uuid()
        assert value not in (uuid.UUID(int=0), uuid.UUID(int=1))
        text = uuid_text(value)
        assert len(text) == 22 and not text.startswith("-")
    assert all(not new_cluster_id().startswith("-") for _ in range(2000))


def test_uuid_text_is_kafka_base64():
    assert uuid_text(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert uuid_text(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
