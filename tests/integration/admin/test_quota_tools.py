"""`kafka-configs --entity-type users|clients` (Kafka's own tool, through the lab) sets, describes and
deletes client quotas (AlterClientQuotas / DescribeClientQuotas). Black-box: also runs with
--broker=kafka; every quota set is removed again."""
from __future__ import annotations

import uuid

from tests.integration.admin.test_config_tools import configs, eventually, kafka_tools, tool  # noqa: F401


def test_kafka_configs_user_and_client_quotas(shared_broker):
    bs = shared_broker.bootstrap
    tag = uuid.uuid4().hex[:8]
    user = ("--entity-type", "users", "--entity-name", f"tool-user-{tag}")
    user_client = (*user, "--entity-type", "clients", "--entity-name", f"tool-client-{tag}")
    client_default = ("--entity-type", "clients", "--entity-default")
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *user,
         "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *user_client, "--add-config", "request_percentage=25.5")
    tool("kafka-configs", "--bootstrap-server", bs, "--alter", *client_default,
         "--add-config", "controller_mutation_rate=10")
    try:
        out = configs(bs, *user)
        assert f"Quota configs for user-principal 'tool-user-{tag}' are " in out, out
        assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2097152.0" in out, out
        out = configs(bs, *user_client)
        assert (f"Quota configs for user-principal 'tool-user-{tag}', client-id 'tool-client-{tag}' are "
                "request_percentage=25.5") in out, out
        out = configs(bs, *client_default)
        assert "Quota configs for the default client-id are controller_mutation_rate=10.0" in out, out
        # a key that is no quota is refused by the broker (INVALID_REQUEST)
        bad = tool("kafka-configs", "--bootstrap-server", bs, "--alter", *user, "--add-config", "bogus_rate=1",
                   ok=False)
        assert "Invalid configuration key bogus_rate" in bad or "Invalid config" in bad or "bogus_rate" in bad, bad
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *user, "--delete-config", "consumer_byte_rate")
        out = configs(bs, *user)
        assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate" not in out, out
    finally:
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *user,
             "--delete-config", "producer_byte_rate", ok=False)
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *user_client,
             "--delete-config", "request_percentage", ok=False)
        tool("kafka-configs", "--bootstrap-server", bs, "--alter", *client_default,
             "--delete-config", "controller_mutation_rate", ok=False)
    out = configs(bs, *user)
    assert "producer_byte_rate" not in out, out
