"""Protobuf subjects of the built-in Schema Registry driven by confluent-kafka-python, unmodified: its
ProtobufSerializer registers the schema (a base64 FileDescriptorProto) with its imported file as a reference,
records go through a real produce/consume, its ProtobufDeserializer reads them back (it asks for the writer's
schema with `?format=serialized`), a compatible evolution registers version 2 and an incompatible one is 409.

The message classes are generated at test time: protoc (grpcio-tools) compiles the .proto files into a
descriptor set, and each schema version gets its own descriptor pool and classes (message_factory)."""
from __future__ import annotations

import base64
import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from minikafka.testing import MiniKafka

pytest.importorskip("confluent_kafka.schema_registry.protobuf")
grpc_protoc = pytest.importorskip("grpc_tools.protoc")

from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryError  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool  # noqa: E402
from google.protobuf.message_factory import GetMessageClass  # noqa: E402

from tests.integration.schema_registry.test_schema_registry import consume_all, produce  # noqa: E402

pytestmark = pytest.mark.minikafka_only

MONEY = '''syntax = "proto3";
package common;
message Money { string currency = 1; int64 units = 2; }
'''
ORDER_V1 = '''syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common/money.proto";
message Order {
  int64 id = 1;
  common.Money total = 2;
  google.protobuf.Timestamp at = 3;
  repeated string items = 4;
}
'''
ORDER_V2 = ORDER_V1.replace("  repeated string items = 4;\n", "  repeated string items = 4;\n  string note = 5;\n")
ORDER_BAD = ORDER_V1.replace("int64 id = 1;", "string id = 1;")  # a scalar's kind changes: incompatible


def message_class(tmp_path: Path, order_text: str, tag: str) -> type:
    """shop.Order of `order_text`, compiled by protoc, in a descriptor pool of its own."""
    root = tmp_path / tag
    (root / "common").mkdir(parents=True)
    (root / "shop").mkdir()
    (root / "common" / "money.proto").write_text(MONEY)
    (root / "shop" / "order.proto").write_text(order_text)
    out = root / "set.pb"
    include = str(Path(grpc_protoc.__file__).parent / "_proto")
    assert grpc_protoc.main(["protoc", f"-I{root}", f"-I{include}", "--include_imports",
                             f"--descriptor_set_out={out}", "shop/order.proto"]) == 0
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def get(url: str, path: str) -> object:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    return json.loads(resp.read())


def order(cls: type, n: int, **extra: object) -> object:
    msg = cls(id=n, items=[f"sku{n}"], **extra)
    msg.total.currency, msg.total.units = "EUR", 100 * n
    msg.at.seconds = 1_700_000_000 + n
    return msg


def test_protobuf_round_trip_evolution_and_incompatible_change(tmp_path: Path) -> None:
    order_v1 = message_class(tmp_path, ORDER_V1, "v1")
    order_v2 = message_class(tmp_path, ORDER_V2, "v2")
    order_bad = message_class(tmp_path, ORDER_BAD, "bad")
    with MiniKafka(schema_registry=True, config={"group.initial.rebalance.delay.ms": "0"}) as kafka:
        url = kafka.schema_registry_url
        client = SchemaRegistryClient({"url": url})
        ctx = SerializationContext("orders", MessageField.VALUE)

        serializer = ProtobufSerializer(order_v1, client)
        produce(kafka.bootstrap_servers, "orders", [serializer(order(order_v1, n), ctx) for n in range(3)])

        # the serializer registered the imported file as a reference subject (named by its path); the
        # well-known timestamp.proto needs none
        assert sorted(client.get_subjects()) == ["common/money.proto", "orders-value"]
        v1 = client.get_latest_version("orders-value")
        assert v1.version == 1 and v1.schema.schema_type == "PROTOBUF"
        assert [(r.name, r.subject, r.version) for r in v1.schema.references] == [
            ("common/money.proto", "common/money.proto", 1)]
        assert 'import "common/money.proto";' in v1.schema.schema_str  # stored as .proto text
        assert ".common.Money total = 2;" in v1.schema.schema_str
        # the same schema sent as text is the same schema: same id
        refs = [SchemaReference("common/money.proto", "common/money.proto", 1)]
        assert client.register_schema("orders-value", Schema(ORDER_V1, "PROTOBUF", refs)) == v1.schema_id
        serialized = get(url, f"/schemas/ids/{v1.schema_id}?format=serialized")
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized["schema"]))
        assert file.package == "shop" and list(file.dependency) == ["google/protobuf/timestamp.proto",
                                                                    "common/money.proto"]

        # a compatible evolution: a field added
        serializer_v2 = ProtobufSerializer(order_v2, client)
        produce(kafka.bootstrap_servers, "orders", [serializer_v2(order(order_v2, 3, note="gift"), ctx)])
        assert client.get_versions("orders-value") == [1, 2]

        # a consumer's own client (the producer's caches schemas by id whatever the format it registered in)
        deserializer = ProtobufDeserializer(order_v2, None, SchemaRegistryClient({"url": url}))
        messages = consume_all(kafka.bootstrap_servers, "orders", 4)
        read = [deserializer(m.value(), ctx) for m in messages]
        assert [(o.id, o.total.units, o.at.seconds, list(o.items), o.note) for o in read] == [
            (n, 100 * n, 1_700_000_000 + n, [f"sku{n}"], "gift" if n == 3 else "") for n in range(4)]

        # an incompatible change is refused (409) and registers nothing
        bad = order_bad(id="nine")
        with pytest.raises(SchemaRegistryError) as info:
            ProtobufSerializer(order_bad, client)(bad, ctx)
        assert info.value.http_status_code == 409
        assert "FIELD_SCALAR_KIND_CHANGED" in info.value.error_message
        assert client.get_versions("orders-value") == [1, 2]

