"""SCRAM credentials: AlterUserScramCredentials / DescribeUserScramCredentials with Kafka's per-user
errors (raw protocol), Kafka's `kafka-configs` adding and removing users who then log in, the Java
client (Kafka's console tools, kafka-clients 4.3) over SASL_PLAINTEXT with SCRAM, and (minikafka only)
durability across restart and kill -9 and `minikafka storage format --add-scram`. The broker:
tests/support/sasl_helpers.py, also against Apache Kafka (`--broker=kafka`).
"""
from __future__ import annotations

import uuid

import pytest

from tests.support.helpers import wait_until
from tests.support.sasl_helpers import (BOOTSTRAP_USERS, SCRAM_FAILED, Deletion, alter, auth_error, client_properties,
                                create_topic, describe, format_scram, lab, produce_consume, sasl_broker_fixture,
                                start_minikafka, upsertion)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def sasl_broker(request, tmp_path_factory):
    yield from sasl_broker_fixture(request, tmp_path_factory)


def test_alter_and_describe_user_scram_credentials(sasl_broker):
    u = f"carol-{uuid.uuid4().hex[:6]}"
    assert alter(sasl_broker.plain, [upsertion(u, 1, "carol-secret", 8192)]) == {u: (0, None)}
    assert alter(sasl_broker.plain, [upsertion(u, 2, "carol-secret")]) == {u: (0, None)}
    resp = describe(sasl_broker.plain, [u])
    assert (resp.error_code, resp.error_message) == (0, "")
    [result] = resp.results
    assert (result.user, result.error_code, result.error_message) == (u, 0, "")
    assert sorted((i.mechanism, i.iterations) for i in result.credential_infos) == [(1, 8192), (2, 4096)]
    all_users = {r.user for r in describe(sasl_broker.plain, None).results}
    assert {"admin", u} <= all_users
    produce_consume(sasl_broker, "SCRAM-SHA-256", u, "carol-secret", n=3)
    assert alter(sasl_broker.plain, deletions=[Deletion(name=u, mechanism=1)]) == {u: (0, None)}
    # Apache Kafka applies the deletion to its login cache from the metadata log, asynchronously: under
    # load a login right after the ack may still pass, so each try is a new client's first login
    err = wait_until(lambda: auth_error(sasl_broker, "SCRAM-SHA-256", u, "carol-secret", timeout=3), timeout=30,
                     interval=0.2, what="a login with the deleted SCRAM-SHA-256 credential refused")
    assert SCRAM_FAILED.format("SCRAM-SHA-256") in err.str()
    assert alter(sasl_broker.plain, deletions=[Deletion(name=u, mechanism=2)]) == {u: (0, None)}
    [gone] = describe(sasl_broker.plain, [u]).results
    assert (gone.error_code, gone.error_message) == (
        91, f"Attempt to describe a user credential that does not exist: {u}")


def test_alter_user_scram_credentials_errors(sasl_broker):
    tag = uuid.uuid4().hex[:6]
    got = alter(sasl_broker.plain,
                upsertions=[upsertion(f"few-{tag}", 1, "pw", 4095), upsertion(f"many-{tag}", 2, "pw", 16385),
                            upsertion(f"mech-{tag}", 3, "pw"), upsertion("", 1, "pw"),
                            upsertion(f"twice-{tag}", 1, "pw"), upsertion(f"twice-{tag}", 2, "pw"),
                            upsertion(f"both-{tag}", 1, "pw")],
                deletions=[Deletion(name=f"missing-{tag}", mechanism=1), Deletion(name=f"both-{tag}", mechanism=1)])
    assert got == {
        f"few-{tag}": (93, "Too few iterations"),
        f"many-{tag}": (93, "Too many iterations"),
        f"mech-{tag}": (33, "Unknown SCRAM mechanism"),
        "": (93, "Username must not be empty"),
        f"twice-{tag}": (92, "A user credential cannot be altered twice in the same request"),
        f"missing-{tag}": (91, "Attempt to delete a user credential that does not exist"),
        f"both-{tag}": (91, "Attempt to delete a user credential that does not exist"),
    }
    resp = describe(sasl_broker.plain, [f"twice-{tag}", f"twice-{tag}", f"few-{tag}"])
    by_user = {r.user: (r.error_code, r.error_message) for r in resp.results}
    assert by_user == {
        f"twice-{tag}": (92, f"Cannot describe SCRAM credentials for the same user twice in a single request: twice-{tag}"),
        f"few-{tag}": (91, f"Attempt to describe a user credential that does not exist: few-{tag}")}


# -- Kafka's tools and the Java client -----------------------------------------------------------------

def test_kafka_configs_adds_a_scram_user_who_then_logs_in(sasl_broker, tmp_path):
    """One mechanism per kafka-configs call: two of one user in one request are refused with
    DUPLICATE_RESOURCE by Kafka 4.3 and minikafka alike (test_alter_user_scram_credentials_errors)."""
    kafka_lab = lab()
    admin = client_properties(tmp_path, "SCRAM-SHA-256", "admin", "admin-secret")
    bob = f"bob-{uuid.uuid4().hex[:6]}"
    base = ["--bootstrap-server", sasl_broker.sasl, "--command-config", str(admin), "--entity-type", "users"]
    for mechanism in ("SCRAM-SHA-256=[iterations=8192,password=bob-secret]", "SCRAM-SHA-512=[password=bob-secret]"):
        done = kafka_lab.run_tool("kafka-configs", [*base, "--alter", "--entity-name", bob, "--add-config", mechanism],
                                  timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"Completed updating config for user {bob}." in done.stdout
    listed = kafka_lab.run_tool("kafka-configs", [*base, "--describe"], timeout=120)  # every user
    assert listed.returncode == 0, listed.stdout + listed.stderr
    # Kafka lists a user's mechanisms in no fixed order (a HashMap keyed by enum)
    [line] = [x for x in listed.stdout.splitlines() if f"user-principal '{bob}' are " in x]
    assert sorted(line.split(" are ", 1)[1].split(", ")) == ["SCRAM-SHA-256=iterations=8192",
                                                               "SCRAM-SHA-512=iterations=4096"], line
    assert "user-principal 'admin'" in listed.stdout, listed.stdout
    produce_consume(sasl_broker, "SCRAM-SHA-512", bob, "bob-secret", n=3)
    done = kafka_lab.run_tool("kafka-configs", [*base, "--alter", "--entity-name", bob, "--delete-config",
                                                "SCRAM-SHA-512"], timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert auth_error(sasl_broker, "SCRAM-SHA-512", bob, "bob-secret") is not None
    produce_consume(sasl_broker, "SCRAM-SHA-256", bob, "bob-secret", n=1)


def test_java_client_produces_and_consumes_with_scram(sasl_broker, tmp_path):
    kafka_lab = lab()
    topic = f"java-sasl-{uuid.uuid4().hex[:6]}"
    create_topic(sasl_broker, topic)
    props = client_properties(tmp_path, "SCRAM-SHA-512", "admin", "admin-secret")
    lines = "".join(f"java-{i}\n" for i in range(10))
    produced = kafka_lab.run_tool("kafka-console-producer", ["--bootstrap-server", sasl_broker.sasl, "--topic", topic,
                                                       "--command-config", str(props)], input=lines, timeout=120)
    assert produced.returncode == 0, produced.stdout + produced.stderr
    consumed = kafka_lab.run_tool("kafka-console-consumer", [
        "--bootstrap-server", sasl_broker.sasl, "--topic", topic, "--partition", "0", "--offset", "earliest",
        "--max-messages", "10",
        "--timeout-ms", "30000", "--command-config", str(props)], timeout=120)
    assert consumed.stdout.split() == [f"java-{i}" for i in range(10)], consumed.stdout + consumed.stderr
    wrong = client_properties(tmp_path, "SCRAM-SHA-512", "admin", "wrong")
    failed = kafka_lab.run_tool("kafka-console-producer", ["--bootstrap-server", sasl_broker.sasl, "--topic", topic,
                                                     "--command-config", str(wrong)], input="x\n", timeout=120)
    assert "SaslAuthenticationException" in failed.stderr + failed.stdout
    assert SCRAM_FAILED.format("SCRAM-SHA-512") in failed.stderr + failed.stdout


# -- durability and bootstrap (minikafka only) ------------------------------------------------------

@pytest.mark.minikafka_only
def test_credentials_survive_restart_and_kill_9(tmp_path):
    data_dir = tmp_path / "data"
    assert format_scram(data_dir, BOOTSTRAP_USERS).returncode == 0
    broker = start_minikafka(data_dir)
    assert broker.mk is not None
    try:
        assert alter(broker.plain, [upsertion("dave", 1, "dave-secret")]) == {"dave": (0, None)}
        broker.mk.kill()  # kill -9 right after the acknowledged change
        broker.mk.start()
        produce_consume(broker, "SCRAM-SHA-256", "dave", "dave-secret", n=2)
        assert alter(broker.plain, deletions=[Deletion(name="dave", mechanism=1)]) == {"dave": (0, None)}
        broker.mk.restart()
        assert auth_error(broker, "SCRAM-SHA-256", "dave", "dave-secret") is not None
        produce_consume(broker, "SCRAM-SHA-256", "admin", "admin-secret", n=2)
        assert not list(data_dir.glob("*.tmp"))
        text = (data_dir / "scram-credentials.json").read_text()
        assert "admin-secret" not in text and "dave" not in text
    finally:
        log = broker.mk.log_text(20000)
        broker.mk.close()
    assert "Traceback" not in log, log


@pytest.mark.minikafka_only
def test_storage_format_refuses_bad_specs_and_a_corrupt_store_refuses_start(tmp_path):
    data_dir = tmp_path / "data"
    for spec in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=[password=b]",
                 "SCRAM-SHA-256=[name=a,password=b,iterations=100]", "SCRAM-SHA-256=name=a,password=b"):
        done = format_scram(data_dir, [spec])
        assert done.returncode == 1 and "minikafka storage format:" in done.stderr, (spec, done.stderr)
    assert not (data_dir / "scram-credentials.json").exists()
    done = format_scram(data_dir, ['SCRAM-SHA-256=[name=erin,password="with,comma]"]'])
    assert done.returncode == 0 and "Added SCRAM-SHA-256 credential for user erin" in done.stdout, done.stderr
    (data_dir / "scram-credentials.json").write_text("{not json")
    with pytest.raises(Exception, match="malformed SCRAM credentials file"):
        start_minikafka(data_dir)



@pytest.mark.minikafka_only
def test_minikafka_sasl_users_for_client_tests():
    """MiniKafka(sasl_users=...): a SASL_PLAINTEXT listener where the users log in with every mechanism."""
    from minikafka.testing import MiniKafka
    from tests.support.sasl_helpers import SaslBroker
    with MiniKafka(sasl_users={"alice": "alice-secret", "bob.b": "p=w,]"}) as kafka:
        broker = SaslBroker(kafka.bootstrap_servers, kafka.sasl_bootstrap_servers, kafka)
        produce_consume(broker, "PLAIN", "alice", "alice-secret", n=1)
        produce_consume(broker, "SCRAM-SHA-512", "bob.b", "p=w,]", n=1)
        assert auth_error(broker, "SCRAM-SHA-256", "alice", "wrong") is not None
        kafka.restart()  # the credentials were written once, into the data dir
        produce_consume(broker, "SCRAM-SHA-256", "alice", "alice-secret", n=1)
    with pytest.raises(ValueError):
        MiniKafka(sasl_users={"a b": "x"}, start=False)
