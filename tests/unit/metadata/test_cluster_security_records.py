"""ACL, SCRAM credential and BROKER config records in the metadata image and the controller's
decisions about them (metadata/), pure; and a node's stores following the image."""
from __future__ import annotations

import json
import random

from minikafka.metadata import records as r
from minikafka.metadata.controller import Controller
from minikafka.metadata.image import MetadataImage
from minikafka.broker.security.delegation_tokens import DelegationTokenStore, TokenInfo, TokenSettings

READ_ALLOW = (2, "orders", 3, "User:alice", "*", 3, 3)  # TOPIC orders LITERAL, READ ALLOW
WRITE_DENY = (2, "orders", 3, "User:bob", "*", 4, 2)


class Log:
    def __init__(self) -> None:
        self.entries: list[dict] = []

    def propose(self, record: dict) -> int:
        self.entries.append(json.loads(json.dumps(record)))  # as it travels: JSON
        return len(self.entries) - 1

    def replay(self) -> MetadataImage:
        image = MetadataImage()
        for offset, rec in enumerate(self.entries):
            image.apply(rec, offset)
        return image


def controller() -> tuple[Controller, Log]:
    log = Log()
    return Controller(MetadataImage(), log.propose, rng=random.Random(7)), log


def test_acl_records_create_is_idempotent_and_delete_removes_once():
    c, log = controller()
    c.create_acls([READ_ALLOW, WRITE_DENY, READ_ALLOW])
    assert [e["type"] for e in log.entries] == [r.ACCESS_CONTROL_ENTRY] * 2
    c.create_acls([READ_ALLOW])  # already there: no record, a success
    assert len(log.entries) == 2
    image = log.replay()
    assert sorted(image.acls.values()) == sorted([READ_ALLOW, WRITE_DENY]) == sorted(c.image.acls.values())
    v = image.security_version
    # two filters matching the same binding: both list it, one removal record
    matched = c.delete_acls([lambda row: row[3] == "User:alice", lambda row: row[1] == "orders"])
    assert matched == [[READ_ALLOW], sorted([READ_ALLOW, WRITE_DENY])]
    assert [e["type"] for e in log.entries[2:]] == [r.REMOVE_ACCESS_CONTROL_ENTRY] * 2
    image = log.replay()
    assert image.acls == {} and image.security_version == v + 2
    image.apply(r.remove_access_control_entry("no-such-id"), 99)  # absent: nothing changes
    assert image.security_version == v + 2


def test_scram_records_upsert_replace_delete():
    c, log = controller()
    c.alter_scram([("alice", "SCRAM-SHA-256", "c2FsdA==", "c3RvcmVk", "c2VydmVy", 4096)], [])
    c.alter_scram([("alice", "SCRAM-SHA-512", "c2FsdA==", "c3RvcmVk", "c2VydmVy", 8192),
                   ("alice", "SCRAM-SHA-256", "bmV3", "c3RvcmVk", "c2VydmVy", 5000)], [])
    image = log.replay()
    assert image.scram["alice"]["SCRAM-SHA-256"] == {"salt": "bmV3", "storedKey": "c3RvcmVk",
                                                     "serverKey": "c2VydmVy", "iterations": 5000}
    assert set(image.scram["alice"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    c.alter_scram([], [("alice", "SCRAM-SHA-256"), ("alice", "SCRAM-SHA-512")])
    image = log.replay()
    assert image.scram == {}  # a user without credentials is gone
    copy = c.image.copy()
    copy.apply(r.user_scram_credential("bob", "SCRAM-SHA-256", "", "", "", 4096), 100)
    assert "bob" not in c.image.scram  # copies are independent


def test_broker_config_records_per_layer():
    c, log = controller()
    c.set_broker_configs("", {"log.retention.ms": "60000", "message.max.bytes": "2000000"})
    c.set_broker_configs("2", {"log.retention.ms": "1000"})
    c.set_broker_configs("", {"log.retention.ms": "60000"})  # one DELETE record, nothing else
    assert [(e["resourceType"], e["resourceName"], e["name"], e["value"]) for e in log.entries] == [
        (r.BROKER_RESOURCE, "", "log.retention.ms", "60000"), (r.BROKER_RESOURCE, "", "message.max.bytes", "2000000"),
        (r.BROKER_RESOURCE, "2", "log.retention.ms", "1000"), (r.BROKER_RESOURCE, "", "message.max.bytes", None)]
    image = log.replay()
    assert image.broker_configs == {"": {"log.retention.ms": "60000"}, "2": {"log.retention.ms": "1000"}}
    assert image.security_version == 4


def test_node_stores_follow_the_image(tmp_path):
    """SecuritySync: the authorizer's ACLs, the credentials and the broker layers are the image's;
    the ACL store fails closed until the image was first applied; no file is written."""
    from minikafka.broker.security.acl import AclBinding
    from minikafka.broker.security.acl_store import AclStore
    from minikafka.broker.cluster.security_sync import SecuritySync
    from minikafka.broker.security.sasl.credentials import ScramCredentialStore
    from minikafka.broker.security.sasl.scram import ScramCredential
    from minikafka.broker.config.core import BrokerConfig
    from minikafka.broker.config.group_configs import GroupConfigStore

    class Auth:
        store = AclStore(tmp_path, follow_image=True)

    class Dyn:
        layers = None

        def follow(self, default, broker):
            self.layers = (dict(default), dict(broker))

    class Follower:  # stores this test does not look at
        def follow(self, *args) -> None:
            pass

    class State:
        node_id = 2
        authorizer = Auth()
        scram_credentials = ScramCredentialStore(tmp_path)
        dynamic_config = Dyn()
        group_configs = GroupConfigStore(BrokerConfig({"log.dirs": str(tmp_path)}), tmp_path)
        delegation_tokens = DelegationTokenStore(None, TokenSettings("secret"))
        client_metrics_configs = client_quotas = Follower()

    state = State()
    assert not state.authorizer.store.loaded
    c, log = controller()
    cred = ScramCredential.from_password("SCRAM-SHA-256", "secret", 4096)
    import base64
    b = lambda x: base64.b64encode(x).decode()  # noqa: E731
    c.create_acls([READ_ALLOW])
    c.alter_scram([("alice", "SCRAM-SHA-256", b(cred.salt), b(cred.stored_key), b(cred.server_key), 4096)], [])
    c.set_broker_configs("", {"log.retention.ms": "60000"})
    c.set_broker_configs("2", {"message.max.bytes": "2000000"})
    sync = SecuritySync(state)
    sync(log.replay(), [], [])
    assert state.authorizer.store.loaded
    assert state.authorizer.store.current.acls == frozenset({AclBinding(*READ_ALLOW)})
    assert state.scram_credentials.get("alice", "SCRAM-SHA-256") == cred
    assert state.dynamic_config.layers == ({"log.retention.ms": "60000"}, {"message.max.bytes": "2000000"})
    c._emit(r.delegation_token("tok", "User:alice", "User:alice", ["User:bob"], 1, 3, 2))
    sync(log.replay(), [], [])
    assert state.delegation_tokens.get("tok") == TokenInfo("tok", "User:alice", "User:alice", ("User:bob",), 1, 3, 2)
    assert state.delegation_tokens.scram_lookup("tok", "SCRAM-SHA-512")[1:] == ("alice", 2)
    c.delete_acls([lambda row: True])
    c._emit(r.remove_delegation_token("tok"))
    sync(log.replay(), [], [])
    assert state.authorizer.store.current.acls == frozenset()
    assert state.delegation_tokens.get("tok") is None
    assert list(tmp_path.iterdir()) == []


def test_delegation_token_records_in_the_image_and_its_snapshot():
    c, log = controller()
    c._emit(r.delegation_token("tok", "User:alice", "User:carol", [], 1, 3, 2))
    image = log.replay()
    assert image.delegation_tokens["tok"]["requester"] == "User:carol"
    assert MetadataImage.from_json(image.to_json()).delegation_tokens == image.delegation_tokens
    assert image.copy().delegation_tokens == image.delegation_tokens
    c._emit(r.remove_delegation_token("tok"))
    assert log.replay().delegation_tokens == {}


def test_bootstrap_credentials_go_into_the_log_once():
    """The formatted credentials (`storage format --add-scram`): the first active controller puts the
    ones the log lacks there, then BootstrapDone; a later controller (or a restart) adds nothing."""
    c, log = controller()
    c.alter_scram([("alice", "SCRAM-SHA-256", "YQ==", "Yg==", "Yw==", 4096)], [])  # made at run time already
    formatted = [("admin", "SCRAM-SHA-512", "c2FsdA==", "c3Q=", "c2U=", 8192),
                 ("alice", "SCRAM-SHA-256", "eA==", "eQ==", "eg==", 4096)]
    assert c.bootstrap(formatted)
    assert [e["type"] for e in log.entries[1:]] == [r.USER_SCRAM_CREDENTIAL, r.BOOTSTRAP_DONE]
    image = log.replay()
    assert image.bootstrapped and image.scram["alice"]["SCRAM-SHA-256"]["salt"] == "YQ=="
    again = Controller(image, log.propose)
    assert not again.bootstrap(formatted) and len(log.entries) == 3


def test_dynamic_broker_config_follows_the_image_without_a_file(tmp_path):
    """DynamicBrokerConfig.follow: the layers become the image's (entries this broker cannot use are
    dropped, as Kafka drops them), the config is reconfigured and the listeners told; nothing written."""
    from minikafka.broker.config.core import BrokerConfig
    from minikafka.broker.config.dynamic import SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, DynamicBrokerConfig
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": "2"})
    d = DynamicBrokerConfig(config, tmp_path)
    told = []
    d.on_change(told.append)
    d.follow({"log.retention.ms": "60000", "broker.id": "9"}, {"message.max.bytes": "2000000"})
    assert d.cluster_default == {"log.retention.ms": "60000"} and d.per_broker == {"message.max.bytes": "2000000"}
    assert config.log_config.retention_ms == 60000 and config.get("message.max.bytes") == "2000000" and len(told) == 1
    assert d.synonyms("message.max.bytes")[0][2] == SOURCE_DYNAMIC_BROKER
    assert d.synonyms("log.retention.ms")[0][2] == SOURCE_DYNAMIC_DEFAULT
    d.follow({"log.retention.ms": "60000"}, {"message.max.bytes": "2000000"})  # the same: nobody told
    assert len(told) == 1
    d.follow({}, {})
    assert config.log_config.retention_ms != 60000 and len(told) == 2
    assert list(tmp_path.iterdir()) == []
