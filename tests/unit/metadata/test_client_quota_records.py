"""ClientQuota records (Kafka's ClientQuotaRecord) in the metadata image: set, replace, remove (the
entity goes with its last key), the security version moves, and a snapshot round trip keeps them."""
from __future__ import annotations

from minikafka.metadata import records as r
from minikafka.metadata.image import MetadataImage


def test_client_quota_records_apply_and_survive_a_snapshot():
    img = MetadataImage()
    uc = [("user", "alice"), ("client-id", None)]
    img.apply(r.client_quota(uc, "producer_byte_rate", 1024.0), 0)
    img.apply(r.client_quota([("user", None)], "request_percentage", 12.5), 1)
    img.apply(r.client_quota(uc, "producer_byte_rate", 2048.0), 2)
    img.apply(r.client_quota(uc, "consumer_byte_rate", 10.0), 3)
    entity = (("client-id", None), ("user", "alice"))
    assert img.client_quotas == {entity: {"producer_byte_rate": 2048.0, "consumer_byte_rate": 10.0},
                                 (("user", None),): {"request_percentage": 12.5}}
    version = img.security_version
    img.apply(r.client_quota(uc, "producer_byte_rate", None), 4)
    img.apply(r.client_quota(uc, "consumer_byte_rate", None), 5)
    img.apply(r.client_quota(uc, "never_set", None), 6)  # removing an absent key changes nothing
    assert img.client_quotas == {(("user", None),): {"request_percentage": 12.5}}
    assert img.security_version > version
    back = MetadataImage.from_json(img.to_json())
    assert back.client_quotas == img.client_quotas
    assert img.copy().client_quotas == img.client_quotas
