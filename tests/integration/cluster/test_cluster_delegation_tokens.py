"""Delegation tokens in a three-node cluster: Create / Renew / Expire go through the active controller
(DelegationToken / RemoveDelegationToken records in the metadata log, as Kafka's
DelegationTokenControlManager), so a token made through one node logs in on every node as its owner,
is renewed through another and removed through a third, and survives a kill -9 of a node.

Each node: PLAINTEXT (inter-broker, User:ANONYMOUS), SASL_PLAINTEXT with SCRAM-SHA-256/512 (alice
formatted into every data dir), CONTROLLER; `delegation.token.secret.key` set on every node.
"""
from __future__ import annotations

import pytest

from minikafka.broker.security.sasl.bootstrap import add_scram_credentials
from tests.conftest import free_port
from tests.integration.security.test_delegation_tokens import create, describe, expire, find, renew, token_login
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, wait_until
from tests.support.sasl_helpers import SaslBroker, scram_login

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial, pytest.mark.timeout(240)]

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
CONFIG = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300",
          "inter.broker.listener.name": "PLAINTEXT", "delegation.token.secret.key": "cluster-secret",
          "listener.name.sasl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
          "listener.name.sasl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
          "listener.name.sasl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, config=CONFIG)
    c.sasl = {}
    for n in c.ids:
        node = c.nodes[n]
        c.sasl[n] = f"127.0.0.1:{free_port()}"
        node.config["listeners"] = (f"PLAINTEXT://127.0.0.1:{node.port},SASL://{c.sasl[n]},"
                                    f"CONTROLLER://127.0.0.1:{c.controller_ports[n]}")
        node.config["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
        add_scram_credentials(node.data_dir, ['SCRAM-SHA-256=[name="alice",password="alice-secret"]'])
    with running(c) as c:
        yield c


def on(c: Cluster, n: int) -> SaslBroker:
    return SaslBroker(c.nodes[n].bootstrap, c.sasl[n])


def alice(c: Cluster, n: int) -> RawClient:
    client = RawClient(c.sasl[n], timeout=30)
    scram_login(client, "SCRAM-SHA-256", "alice", "alice-secret")
    return client


def logs_in(c: Cluster, n: int, made) -> bool:
    client, _error = token_login(on(c, n), made.token_id, made.hmac)
    if client is None:
        return False
    client.close()
    return True


def test_tokens_go_through_the_metadata_log(cluster):
    c = cluster
    wait_until(lambda: logs_in_as_alice(c), timeout=30, what="alice's formatted credential in the log")
    with alice(c, 1) as a1:
        made = create(a1, renewers=[("User", "bob")])
        assert made.error_code == 0, made
        assert find(a1, made.token_id) is not None  # the forwarding node answers once it sees the record
    for n in (2, 3):
        wait_until(lambda n=n: logs_in(c, n, made), timeout=15, what=f"a token login on node {n}")
    with alice(c, 2) as a2:
        renewed = renew(a2, made.hmac, 60_000)
        assert renewed.error_code == 0, renewed
        assert find(a2, made.token_id).expiry_timestamp == renewed.expiry_timestamp_ms
    with alice(c, 3) as a3:
        wait_until(lambda: find(a3, made.token_id).expiry_timestamp == renewed.expiry_timestamp_ms, timeout=15,
                   what="the renewal on node 3")
        kept = create(a3)
        assert kept.error_code == 0
        assert expire(a3, made.hmac, -1).error_code == 0
        assert renew(a3, made.hmac).error_code == 62  # DELEGATION_TOKEN_NOT_FOUND
    wait_until(lambda: not logs_in(c, 1, made), timeout=15, what="the removed token refused on node 1")
    c.kill(2)  # kill -9: node 2 rebuilds its tokens from the metadata log
    c.restart(2)
    wait_until(lambda: logs_in(c, 2, kept), timeout=60, what="the kept token on the restarted node")
    assert not logs_in(c, 2, made)
    with alice(c, 2) as a2:
        assert kept.token_id in {t.token_id for t in describe(a2).tokens}


def logs_in_as_alice(c: Cluster) -> bool:
    try:
        alice(c, 1).close()
        return True
    except (AssertionError, OSError):
        return False
