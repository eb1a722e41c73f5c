"""listeners / advertised.listeners: each listener advertises its own address, as in Kafka."""
from __future__ import annotations

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.metadata import MetadataRequest

from tests.conftest import BrokerProcess, free_port
from tests.support.helpers import RawClient


def test_each_listener_advertises_its_own_address(tmp_path):
    internal, external = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{internal},EXTERNAL://kafka.example.com:19093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
    }, port=internal)
    (tmp_path / "data").mkdir()
    b.start()
    try:
        with RawClient(f"127.0.0.1:{internal}") as c:
            md = c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False), 12)
            assert [(x.host, x.port) for x in md.brokers] == [("127.0.0.1", internal)]
        with RawClient(f"127.0.0.1:{external}") as c:
            md = c.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False), 12)
            assert [(x.host, x.port) for x in md.brokers] == [("kafka.example.com", 19093)]
            dc = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False), 0, DescribeClusterResponse)
            assert [(x.host, x.port) for x in dc.brokers] == [("kafka.example.com", 19093)]
            assert dc.cluster_id == md.cluster_id
    finally:
        assert b.stop() == 0


def test_meta_address_cannot_be_advertised(tmp_path):
    port = free_port()
    b = BrokerProcess(tmp_path / "data", {"listeners": f"PLAINTEXT://0.0.0.0:{port}"}, port=port)
    (tmp_path / "data").mkdir()
    try:
        b.start(timeout=10)
        raise AssertionError("broker started while advertising 0.0.0.0")
    except RuntimeError as exc:
        assert "meta-address" in str(exc)
