"""The secured variant of the Jepsen-style run (bench/jepsen.py --secured): the cluster has Kafka's
StandardAuthorizer, a SASL_PLAINTEXT client listener and a SASL_PLAINTEXT controller listener; an intruder,
User:mallory (a valid login, no ACL), keeps attempting what Kafka would refuse it on every node while the
workload writes and the nemesis kills and pauses nodes:

- Produce to `__consumer_offsets` / `__transaction_state` and to the workload's topics;
- DeleteRecords on the internal topics and on the workload's topics;
- CreateAcls granting itself ALL on the cluster, on a broker listener (forwarded) and directly on every
  controller listener;
- an Envelope, sent directly to a controller listener, that claims to carry a super user's request;
- DeleteTopics, AlterConfigs and IncrementalAlterConfigs (the broker default), AlterUserScramCredentials.

An attempt answered with success is a breach; a refusal with Kafka's authorization error is expected; a node
down or paused leaves the attempt without an answer (not counted). After the run the ACLs, SCRAM users and
topic configs are checked to be what the harness made (nothing the intruder asked for).

The trusted side (harness, workload, checker) uses the PLAINTEXT listener as User:ANONYMOUS, a super user;
the nodes log in to each other as User:broker, also a super user.
"""
from __future__ import annotations

import random
import socket
import threading
import uuid
from typing import Callable

from kafka.protocol.admin import (AlterConfigsRequest, CreateAclsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
                                  IncrementalAlterConfigsRequest)
from kafka.protocol.admin.users import AlterUserScramCredentialsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kafka.record.memory_records import MemoryRecordsBuilder

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
INTRUDER, INTRUDER_SECRET = "mallory", "mallory-secret"
NODE_USER, NODE_SECRET = "broker", "broker-secret"
INTERNAL = ("__consumer_offsets", "__transaction_state")
REFUSALS = frozenset({29, 30, 31, 17, 41})  # authorization errors; 17 internal topic; 41 not the controller


def secured_config() -> dict[str, str]:
    """Cluster-wide config of the secured run (the SECURE listener is added per node)."""
    users = f'user_{NODE_USER}="{NODE_SECRET}" user_{INTRUDER}="{INTRUDER_SECRET}"'
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{NODE_USER}" '
            f'password="{NODE_SECRET}" {users};')
    return {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.secure.plain.sasl.jaas.config": jaas,
            "listener.name.controller.plain.sasl.jaas.config": jaas,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": f"User:ANONYMOUS;User:{NODE_USER}", "allow.everyone.if.no.acl.found": "false"}


class _Client:
    """One blocking connection logged in with SASL PLAIN."""

    def __init__(self, address: str, user: str, password: str, timeout: float = 3.0) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.corr = 0
        assert self.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        auth = self.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), 2)
        if auth.error_code:
            raise ConnectionError(f"login refused: {auth.error_code}")

    def request(self, req, version: int):
        """Send `req`; its answer decoded with the Response class beside the Request class."""
        import importlib
        resp_cls = getattr(importlib.import_module(type(req).__module__),
                           type(req).__name__.replace("Request", "Response"))
        self.corr += 1
        req.with_header(correlation_id=self.corr, client_id="intruder")
        self.sock.sendall(bytes(req.encode(version=version, header=True, framed=True)))
        size = int.from_bytes(self._exactly(4), "big")
        return resp_cls.decode(self._exactly(size), version=version, header=True)

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def _batch() -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    b.append(timestamp=0, key=b"forged", value=b"forged", headers=[])
    b.close()
    return bytes(b.buffer())


class Intruder:
    """Attempts refused operations on every node until stopped; `breaches` lists what was let through."""

    def __init__(self, secure: dict[int, str], controllers: dict[int, str], topics: list[str],
                 rng: random.Random, log: Callable[[str], None]) -> None:
        self.secure, self.controllers, self.topics = secure, controllers, topics
        self.rng, self.log = rng, log
        self.stop = threading.Event()
        self.attempts = 0
        self.refused = 0
        self.breaches: list[str] = []
        self.unexpected: list[str] = []

    def _attacks(self) -> list[tuple[str, bool, Callable[[_Client], list[int]]]]:
        """(name, on the controller listener?, attempt -> error codes)."""
        def produce(topic: str):
            def go(c: _Client) -> list[int]:
                req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                    ProduceRequest.TopicProduceData(name=topic, partition_data=[
                        ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=_batch())])])
                return [p.error_code for t in c.request(req, 9).responses for p in t.partition_responses]
            return go

        def delete_records(topic: str):
            def go(c: _Client) -> list[int]:
                T = DeleteRecordsRequest.DeleteRecordsTopic
                resp = c.request(DeleteRecordsRequest(topics=[T(name=topic, partitions=[
                    T.DeleteRecordsPartition(partition_index=0, offset=-1)])], timeout_ms=5000), 2)
                return [p.error_code for t in resp.topics for p in t.partitions]
            return go

        def grant_self(c: _Client) -> list[int]:
            req = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3,
                principal=f"User:{INTRUDER}", host="*", operation=2, permission_type=3)])
            return [r.error_code for r in c.request(req, 2).results]

        def forged_envelope(c: _Client) -> list[int]:
            from minikafka.protocol.envelope import inner_request_bytes, principal_bytes
            from minikafka.protocol.messages import EnvelopeRequest
            inner = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
                resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3,
                principal=f"User:{INTRUDER}", host="*", operation=2, permission_type=3)])
            env = EnvelopeRequest(request_data=inner_request_bytes(inner, 2, "intruder"),
                                  request_principal=principal_bytes(f"User:{NODE_USER}"),
                                  client_host_address=socket.inet_aton("127.0.0.1"))
            return [c.request(env, 0).error_code]

        def delete_topic(c: _Client) -> list[int]:
            req = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(
                name=self.rng.choice(self.topics), topic_id=uuid.UUID(int=0))], timeout_ms=5000)
            return [r.error_code for r in c.request(req, 6).responses]

        def alter_topic(c: _Client) -> list[int]:
            R = AlterConfigsRequest.AlterConfigsResource
            req = AlterConfigsRequest(resources=[R(resource_type=2, resource_name=self.rng.choice(self.topics),
                                                   configs=[R.AlterableConfig(name="retention.ms", value="1")])],
                                      validate_only=False)
            return [r.error_code for r in c.request(req, 2).responses]

        def alter_broker_default(c: _Client) -> list[int]:
            R = IncrementalAlterConfigsRequest.AlterConfigsResource
            req = IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
                resource_type=4, resource_name="", configs=[R.AlterableConfig(
                    name="log.retention.ms", config_operation=0, value="1")])])
            return [r.error_code for r in c.request(req, 1).responses]

        def add_scram_user(c: _Client) -> list[int]:
            U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
            req = AlterUserScramCredentialsRequest(deletions=[], upsertions=[U(
                name=INTRUDER, mechanism=1, iterations=4096, salt=b"s" * 16, salted_password=b"p" * 32)])
            return [r.error_code for r in c.request(req, 0).results]

        out = [(f"produce {t}", False, produce(t)) for t in (*INTERNAL, *self.topics)]
        out += [(f"delete-records {t}", False, delete_records(t)) for t in (*INTERNAL, *self.topics)]
        out += [("create-acls (broker)", False, grant_self), ("create-acls (controller)", True, grant_self),
                ("forged envelope", True, forged_envelope), ("delete-topics", False, delete_topic),
                ("delete-topics (controller)", True, delete_topic), ("alter-configs", False, alter_topic),
                ("alter-configs (controller)", True, alter_topic), ("broker default", False, alter_broker_default),
                ("scram (controller)", True, add_scram_user), ("scram", False, add_scram_user)]
        return out

    def run(self) -> None:
        attacks = self._attacks()
        while not self.stop.wait(0.05):
            name, controller, attempt = self.rng.choice(attacks)
            node = self.rng.choice(sorted(self.secure))
            address = (self.controllers if controller else self.secure)[node]
            try:
                c = _Client(address, INTRUDER, INTRUDER_SECRET)
            except (OSError, ConnectionError, AssertionError):
                continue  # the node is down or paused
            try:
                codes = attempt(c)
            except (OSError, ConnectionError, ValueError):
                continue
            finally:
                c.close()
            self.attempts += 1
            if any(code == 0 for code in codes):
                self.breaches.append(f"{name} on node {node}: {codes}")
                self.log(f"intruder: BREACH {name} on node {node}: {codes}")
            elif all(code in REFUSALS for code in codes):
                self.refused += 1
            else:  # e.g. a timeout while the controller moved: refused or not, nothing was done
                self.unexpected.append(f"{name} on node {node}: {codes}")


def secured_cluster(config: dict[str, str], data_dir=None, startup_timeout: float = 60.0):
    """A three-node MiniKafkaCluster with `secured_config()` over `config`; each node also listens on a
    SECURE (SASL_PLAINTEXT) listener. Adds `secure_addresses` and `controller_addresses` (node -> host:port)."""
    from minikafka.testing import MiniKafka, MiniKafkaCluster, free_port
    secure: dict[int, str] = {}

    def node(data, cfg, port):
        n = int(cfg["node.id"])
        sport = free_port()
        secure[n] = f"127.0.0.1:{sport}"
        cfg = {**cfg, "listeners": cfg["listeners"] + f",SECURE://127.0.0.1:{sport}"}
        return MiniKafka(config=cfg, data_dir=data, port=port, start=False, startup_timeout=startup_timeout)
    cluster = MiniKafkaCluster(3, config={**secured_config(), **config}, data_dir=data_dir,
                               startup_timeout=startup_timeout, node_factory=node)
    cluster.secure_addresses = secure
    cluster.controller_addresses = {n: f"127.0.0.1:{p}" for n, p in cluster.controller_ports.items()}
    return cluster


def intruder_left_no_trace(bootstrap: str, topics: list[str]) -> list[str]:
    """What the intruder may have changed, as the harness (a super user on PLAINTEXT) reads it: ACLs naming
    it, its SCRAM credentials, the workload topics' retention.ms, the broker default log.retention.ms."""
    from kafka.protocol.admin import DescribeAclsRequest, DescribeConfigsRequest
    from kafka.protocol.admin.users import DescribeUserScramCredentialsRequest
    c = _Client.__new__(_Client)  # no login: PLAINTEXT
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    c.sock = socket.create_connection((host, int(port)), timeout=10)
    c.corr = 0
    problems = []
    try:
        acls = c.request(DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                             principal_filter=f"User:{INTRUDER}", host_filter=None, operation=1,
                                             permission_type=1), 2)
        problems += [f"ACL on {r.resource_name}" for r in acls.resources]
        scram = c.request(DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName(name=INTRUDER)]), 0)
        problems += [f"SCRAM credentials of {r.user}" for r in scram.results if r.credential_infos]
        R = DescribeConfigsRequest.DescribeConfigsResource
        configs = c.request(DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=t,
                                                                configuration_keys=["retention.ms"]) for t in topics]
                                                   + [R(resource_type=4, resource_name="",
                                                        configuration_keys=["log.retention.ms"])],
                                                   include_synonyms=False, include_documentation=False), 4)
        problems += [f"{e.name} of {r.resource_name or 'the broker default'}" for r in configs.results
                     for e in r.configs if e.value == "1"]
    finally:
        c.close()
    return problems
