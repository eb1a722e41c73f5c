"""What each config key means: the text DescribeConfigs returns as `documentation` (v3+, when asked) and the
source of the configuration reference in the docs (scripts/gen_config_docs.py writes docs/reference/*.md).

Invariant (tests/unit/broker/test_config_reference.py): every broker key minikafka has a default for
(config/core.py DEFAULTS), every topic key (storage/log_config.py) and every group key has exactly one
entry here, and the generated pages match this table.
"""
from __future__ import annotations

# (section, [(keys, meaning)]): keys are the names one row documents; a row may name several keys that
# share a meaning (their defaults come from the code, in order)
BROKER_SECTIONS: tuple[tuple[str, tuple[tuple[tuple[str, ...], str], ...]], ...] = (
    ("Node and listeners", (
        (("node.id",), "The node id reported in metadata (and the quorum's voter id on a cluster)."),
        (("cluster.id",), "The cluster id; empty: generated on first start and kept in `meta.properties`."),
        (("listeners",), "Addresses to bind, `NAME://host:port,...`."),
        (("advertised.listeners",), "The addresses clients are told to connect to; empty: `listeners`."),
        (("listener.security.protocol.map",),
         "`NAME:PROTOCOL,...`; empty: each security protocol names itself. A listener whose name is not a "
         "security protocol must be mapped, as in Kafka."),
        (("log.dirs",), "The data directories (`<dir>/<topic>-<partition>/`)."),
    )),
    ("Connections and requests", (
        (("message.max.bytes",), "The largest record batch accepted (topic: `max.message.bytes`)."),
        (("socket.request.max.bytes",), "A larger request frame closes the connection."),
        (("fetch.max.bytes",),
         "The most record bytes in one Fetch response: min(this, the request's `max_bytes`); the first batch "
         "still goes out whole (KIP-74)."),
        (("queued.max.request.bytes",),
         "Request memory: a frame being read or handled holds its size until its response is handed over; "
         "when full, sockets stop being read (backpressure, not errors). Kafka's -1 (unbounded) means this "
         "default. A quarter (at most 4 MiB) is kept for frames of at most 64 KiB."),
        (("telemetry.max.bytes",),
         "KIP-714: the largest metrics payload a client may push (TELEMETRY_TOO_LARGE past it); told to "
         "clients in GetTelemetrySubscriptions."),
        (("max.connections",),
         "Open connections; one over the limit is closed at once. Capped at 3/4 of the open-files limit."),
        (("max.connections.per.ip",), "The same, per client address."),
        (("max.connection.creation.rate",),
         "KIP-612: new connections a second, broker-wide (not on the inter-broker listener when there are "
         "others, nor the controller listener); `listener.name.<l>.max.connection.creation.rate` per listener. "
         "A connection past the rate is served late (by at most one quota window), not refused."),
        (("max.connections.per.ip.overrides",),
         "`host:count,...`: per-address (or host name, resolved when set) exceptions to "
         "`max.connections.per.ip`."),
        (("connections.max.idle.ms",),
         "A connection with nothing in flight and no bytes for this long is closed (also one whose response "
         "is not read for this long); -1: never."),
        (("minikafka.request.read.timeout.ms",),
         "A request frame must be complete this long after its first byte (waiting for request memory "
         "excluded), else the connection is closed; 0: no limit."),
        (("minikafka.max.uncompressed.batch.bytes",),
         "A compressed batch that inflates past this is refused with INVALID_RECORD (decompression is "
         "bounded; a limit Kafka does not have)."),
    )),
    ("TLS", (
        (("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password"),
         "The TLS listeners' certificate and key: `PEM` (one file with the private key and the chain; an "
         "encrypted PKCS#8 key needs `ssl.key.password`) or `PKCS12`. Kafka's default `JKS` is read when the "
         "file is PKCS12, as Java does; a real JKS file is refused with the keytool line that converts it."),
        (("ssl.keystore.key", "ssl.keystore.certificate.chain"), "The same inline, as PEM text (`ssl.keystore.type=PEM`)."),
        (("ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates"),
         "The CAs client certificates must chain to (PEM file, inline PEM, or PKCS12); none: the system's CAs."),
        (("ssl.client.auth",),
         "`none`, `requested` or `required` (mTLS); on SASL_SSL listeners only the listener-prefixed key "
         "counts (KIP-684)."),
        (("ssl.principal.mapping.rules",),
         "Kafka's `RULE:pattern/replacement/[LU]` list mapping a client certificate's subject (RFC 2253) to "
         "the `User:` name."),
        (("ssl.enabled.protocols",), "The TLS versions offered."),
        (("ssl.protocol",), "Validated only (Java's SSLContext protocol)."),
        (("ssl.cipher.suites",),
         "TLS 1.2 suites by IANA (Java) or OpenSSL names; TLS 1.3 suites cannot be narrowed, and a list "
         "without any TLS 1.3 suite turns TLS 1.3 off, as in Java."),
        (("ssl.provider", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
          "ssl.engine.factory.class"),
         "Java security-provider settings: accepted and shown; OpenSSL does the work."),
        (("ssl.endpoint.identification.algorithm",),
         "Host name checking of the peer's certificate when this node connects to another (cluster)."),
        (("ssl.allow.dn.changes", "ssl.allow.san.changes"),
         "Kafka's checks for a keystore updated at run time; minikafka builds TLS contexts at start only."),
        (("minikafka.ssl.handshake.timeout.ms",),
         "A TLS handshake not done this long after the TCP accept is closed (one INFO line)."),
    )),
    ("SASL", (
        (("sasl.enabled.mechanisms",),
         "The SASL mechanisms of SASL listeners (per listener: `listener.name.<l>.sasl.enabled.mechanisms`). "
         "minikafka serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER and refuses to start with another one "
         "enabled on a SASL listener, so set it."),
        (("sasl.jaas.config",),
         "Ignored with a warning, as on a Kafka broker: a mechanism's JAAS entry is given per listener, "
         "`listener.name.<l>.<mechanism>.sasl.jaas.config` (PLAIN's users are the `user_<name>=\"<password>\"` "
         "options of `PlainLoginModule`; SCRAM's entry is `ScramLoginModule required;`)."),
        (("connections.max.reauth.ms",),
         "KIP-368: the SASL session lifetime sent to clients (0: never expires); a request after expiry "
         "closes the connection. Per listener and mechanism: `listener.name.<l>.<mechanism>.connections.max.reauth.ms`."),
        (("connection.failed.authentication.delay.ms",),
         "A failed authentication is answered and the connection closed after this delay."),
        (("sasl.server.max.receive.size",), "The largest frame accepted before a SASL client has authenticated."),
        (("sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
          "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"),
         "OAUTHBEARER's JWKS validator (KIP-768), used when `listener.name.<l>.oauthbearer.sasl.server.callback."
         "handler.class` is `org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler`: "
         "the key set (https/http URL or `file:` URL) verifying token signatures, fetched off the event loop, "
         "refreshed every refresh.ms (a file when it changes) and, for an unknown key id, at most once per "
         "retry.backoff.max.ms. Without that handler class OAUTHBEARER uses Kafka's unsecured validator (development only)."),
        (("sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.clock.skew.seconds",
          "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name"),
         "OAUTHBEARER's JWKS validator: the `aud` (one of a list) and `iss` a token must carry when set, the leeway "
         "for `exp`/`nbf`, and the claims holding the principal (User:<sub>) and the scope. Each may carry the "
         "listener prefix `listener.name.<l>.oauthbearer.`."),
        (("delegation.token.secret.key",),
         "Delegation tokens (KIP-48): the secret that signs every token's HMAC; empty disables the token APIs "
         "(DELEGATION_TOKEN_AUTH_DISABLED). Every node of a cluster needs the same value."),
        (("delegation.token.max.lifetime.ms", "delegation.token.expiry.time.ms",
          "delegation.token.expiry.check.interval.ms"),
         "Delegation tokens: the longest a token can live however often it is renewed, how far each create or renew "
         "moves its expiry (the default when a request asks for none or more), and how often expired tokens are "
         "removed (until then an expired token still logs in, as in Kafka)."),
    )),
    ("Authorization", (
        (("authorizer.class.name",),
         "Empty: no authorizer, every request allowed (Kafka's default). "
         "`org.apache.kafka.metadata.authorizer.StandardAuthorizer`: ACLs. Any other class is refused at start."),
        (("super.users",), "Principals allowed everything, `;`-separated (e.g. `User:admin;User:CN=ops`)."),
        (("allow.everyone.if.no.acl.found",), "With the authorizer: allow a request when no ACL matches the resource."),
    )),
    ("Topics", (
        (("num.partitions",), "Partitions of auto-created topics and of CreateTopics with -1."),
        (("default.replication.factor",), "The replication factor of auto-created topics and of CreateTopics with -1."),
        (("auto.create.topics.enable",),
         "Create unknown topics when a Metadata request allows it (Produce never creates topics, as in Kafka)."),
        (("delete.topic.enable",), "Allow DeleteTopics."),
        (("min.insync.replicas",),
         "Topic default: with acks=all, the in-sync replicas a write needs (NOT_ENOUGH_REPLICAS below it); "
         "acts on a cluster."),
        (("unclean.leader.election.enable",),
         "Topic default: a partition with no in-sync replica left may elect an out-of-sync one (losing what "
         "it lacks); acts on a cluster."),
        (("minikafka.max.partitions.per.request",),
         "The most partitions one CreateTopics or CreatePartitions may create; Kafka 4.3's controller has "
         "this bound without a key and answers POLICY_VIOLATION, as minikafka does."),
        (("minikafka.max.partitions",),
         "The most partitions this broker holds (empty: (open-files limit - 1024) / 4); a creation past it "
         "gets POLICY_VIOLATION."),
    )),
    ("Log segments, retention and flushing", (
        (("log.segment.bytes",), "Segment roll size (topic: `segment.bytes`)."),
        (("log.roll.ms", "log.roll.hours"), "Segment roll age (topic: `segment.ms`); `.ms` wins when set."),
        (("log.roll.jitter.ms", "log.roll.jitter.hours"),
         "The most a segment's roll age is shortened at random (topic: `segment.jitter.ms`)."),
        (("log.index.size.max.bytes",),
         "A segment rolls once its offset index (8-byte entries) or time index (12-byte entries) holds this "
         "much (topic: `segment.index.bytes`)."),
        (("log.index.interval.bytes",), "Offset-index density (topic: `index.interval.bytes`)."),
        (("log.preallocate",), "Only false (topic: `preallocate`): segment files are not preallocated."),
        (("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
         "Whole segments older than this are deleted (topic: `retention.ms`; -1: forever); the first one set wins."),
        (("log.retention.bytes",), "Size-based retention per partition (topic: `retention.bytes`; -1: none)."),
        (("log.retention.check.interval.ms",), "How often retention runs."),
        (("log.cleanup.policy",), "`delete`, `compact` or both (topic: `cleanup.policy`)."),
        (("log.segment.delete.delay.ms",),
         "A deleted segment's files stay open this long for reads in flight (topic: `file.delete.delay.ms`)."),
        (("log.flush.interval.messages", "log.flush.interval.ms"),
         "fsync policy (topic: `flush.messages`, `flush.ms`); like Kafka, the default relies on the page cache."),
        (("log.message.timestamp.type",), "`CreateTime` or `LogAppendTime` (topic: `message.timestamp.type`)."),
        (("log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms"),
         "CreateTime records older / newer than now by more than this get INVALID_TIMESTAMP (topic: "
         "`message.timestamp.before.max.ms` / `.after.max.ms`; Kafka 4's defaults)."),
        (("compression.type",),
         "The codec batches are stored in (topic: `compression.type`): `producer` keeps the producer's; "
         "`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd` re-code every batch, as Kafka does (in a worker "
         "thread; producer ids, sequences and transactions kept)."),
        (("compression.gzip.level", "compression.lz4.level", "compression.zstd.level"),
         "The level of that re-coding (topic configs of the same names; Kafka's ranges)."),
        (("minikafka.log.open.background",),
         "Partition logs open on first use; with this, the others are opened in the background after start, "
         "a few at a time (so that retention and compaction reach them without a client)."),
        (("minikafka.log.recovery.progress.interval.ms",),
         "At most one progress line per this interval while partition logs are opened after start."),
    )),
    ("Compaction", (
        (("log.cleaner.enable",), "Run the log cleaner for `cleanup.policy=compact` topics."),
        (("log.cleaner.threads",), "Accepted; minikafka's cleaner is one pass at a time, off the event loop."),
        (("log.cleaner.backoff.ms",), "The pause between cleaner passes with nothing to clean."),
        (("log.cleaner.min.cleanable.ratio",), "The dirty share of a log that makes it cleanable (topic: `min.cleanable.dirty.ratio`)."),
        (("log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
         "A record stays uncompacted at least / at most this long (topic: `min.compaction.lag.ms` / `max.compaction.lag.ms`)."),
        (("log.cleaner.delete.retention.ms",),
         "How long tombstones and transaction markers survive compaction (topic: `delete.retention.ms`)."),
    )),
    ("Transactions and producers", (
        (("transaction.state.log.num.partitions",), "Partitions of `__transaction_state` (transactional ids are sharded over them)."),
        (("transaction.state.log.replication.factor", "transaction.state.log.min.isr", "transaction.state.log.segment.bytes"),
         "`__transaction_state`'s replication factor, min.insync.replicas and segment size."),
        (("transaction.max.timeout.ms",), "The largest `transaction.timeout.ms` a producer may ask for (INVALID_TRANSACTION_TIMEOUT past it)."),
        (("transactional.id.expiration.ms",), "A transactional id idle this long is forgotten."),
        (("transaction.abort.timed.out.transaction.cleanup.interval.ms",), "How often transactions past their timeout are aborted."),
        (("transaction.remove.expired.transaction.cleanup.interval.ms",), "How often expired transactional ids are removed."),
        (("transaction.partition.verification.enable",),
         "KIP-890: a transactional produce to a partition not yet added to the transaction is refused."),
        (("producer.id.expiration.ms",), "A producer id with no write for this long loses its idempotence state."),
        (("minikafka.test.crash.point",),
         "Tests only: the broker exits (137) at this step of EndTxn (`after_prepare_commit`, "
         "`after_prepare_abort`, `after_markers`, `after_first_marker`). Never in production."),
    )),
    ("Groups and offsets", (
        (("offsets.topic.num.partitions",), "Partitions of `__consumer_offsets` (groups are sharded over them)."),
        (("offsets.topic.replication.factor", "offsets.topic.segment.bytes"), "`__consumer_offsets`'s replication factor and segment size."),
        (("offsets.retention.minutes",), "Committed offsets of a group that is empty this long are deleted."),
        (("offsets.retention.check.interval.ms",), "How often expired offsets are looked for."),
        (("offset.metadata.max.bytes",), "The longest metadata string of an offset commit (OFFSET_METADATA_TOO_LARGE past it)."),
        (("offsets.commit.timeout.ms",),
         "Cluster: how long a group or transaction coordinator waits for its write to reach the ISR before "
         "answering COORDINATOR_NOT_AVAILABLE."),
        (("share.coordinator.state.topic.num.partitions",),
         "Partitions of `__share_group_state` (share-partitions, `group:topicId:partition`, are sharded over them)."),
        (("share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
          "share.coordinator.state.topic.segment.bytes"),
         "`__share_group_state`'s replication factor, min.insync.replicas and segment size (a cluster: 3 and 2 "
         "unless configured)."),
        (("share.coordinator.snapshot.update.records.per.snapshot",),
         "Share coordinator: ShareUpdate records written per share-partition between two ShareSnapshot records (0-500)."),
        (("share.coordinator.write.timeout.ms",),
         "Cluster: how long the share coordinator waits for its write to reach the ISR before answering "
         "COORDINATOR_NOT_AVAILABLE."),
        (("group.initial.rebalance.delay.ms",), "Classic groups: how long the first rebalance of an empty group waits for more members."),
        (("group.min.session.timeout.ms", "group.max.session.timeout.ms"),
         "Classic groups: the session timeouts members may ask for (INVALID_SESSION_TIMEOUT outside)."),
        (("group.max.size",), "Members of one classic group (GROUP_MAX_SIZE_REACHED past it)."),
        (("group.coordinator.rebalance.protocols",),
         "The group protocols served: `classic`, `consumer` (KIP-848) and `streams` (KIP-1071, with "
         "`streams.version`); share groups follow `share.version` alone, as in Kafka 4.3."),
        (("group.consumer.heartbeat.interval.ms", "group.consumer.session.timeout.ms"),
         "KIP-848 consumer groups: the heartbeat interval given to members, and the session timeout after "
         "which a silent member is fenced (group configs may override both)."),
        (("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
          "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
         "The bounds of those two, for the broker's and for group configs."),
        (("group.consumer.assignors",),
         "Server-side assignors (`uniform`, `range`, or Kafka's class names); the first is used when no "
         "member names one."),
        (("group.consumer.assignment.interval.ms",),
         "A consumer group gets a new target assignment at most this often (KIP-1263); 0: at every change."),
        (("group.consumer.max.size",), "Members of one consumer group (GROUP_MAX_SIZE_REACHED past it)."),
        (("group.consumer.migration.policy",),
         "`bidirectional`, `upgrade`, `downgrade` or `disabled`: whether a group converts between the classic "
         "and consumer protocols when its members do."),
        (("group.consumer.regex.refresh.interval.ms",), "How often a consumer group's subscribed regular expressions are re-resolved."),
        (("group.share.heartbeat.interval.ms", "group.share.session.timeout.ms"),
         "KIP-932 share groups: the heartbeat interval given to members, and the session timeout after which a "
         "silent member is removed and the records it holds are released (group configs may override both)."),
        (("group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
          "group.share.partition.max.record.locks"),
         "How long a delivered record stays acquired by its consumer, how often a record is delivered before it is "
         "archived, and how many records of a share-partition may be in flight (group configs may override them)."),
        (("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
          "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
          "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
          "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit",
          "group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks",
          "group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"),
         "The bounds of those, for the broker's values and for group configs."),
        (("group.share.assignment.interval.ms",), "Share groups: accepted with Kafka's bounds; minikafka assigns at "
         "every change."),
        (("group.share.max.size",), "Members of one share group (GROUP_MAX_SIZE_REACHED past it)."),
        (("group.share.max.share.sessions",),
         "Share sessions one broker keeps (SHARE_SESSION_LIMIT_REACHED past it)."),
        (("group.streams.heartbeat.interval.ms", "group.streams.session.timeout.ms"),
         "KIP-1071 streams groups: the heartbeat interval given to members, and the session timeout after "
         "which a silent member is fenced (group configs may override both)."),
        (("group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms",
          "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
         "The bounds of those two, for the broker's and for group configs."),
        (("group.streams.max.size",), "Members of one streams group (GROUP_MAX_SIZE_REACHED past it)."),
        (("group.streams.num.standby.replicas", "group.streams.max.standby.replicas"),
         "Standby replicas of each stateful task of a streams group, and the most a group config may ask for."),
        (("group.streams.initial.rebalance.delay.ms",),
         "How long a new streams group waits for more members before its first task assignment."),
        (("group.streams.assignment.interval.ms", "group.streams.min.assignment.interval.ms",
          "group.streams.max.assignment.interval.ms"),
         "A streams group gets a new target assignment at most this often, and the bounds of group configs."),
    )),
    ("Cluster (KRaft)", (
        (("process.roles",), "`broker,controller`, `broker` or `controller` for a node of a multi-node cluster."),
        (("controller.quorum.voters",),
         "`id@host:port,...` of the quorum's voters (their controller listeners); naming only this node, or "
         "empty: a single node."),
        (("controller.quorum.bootstrap.servers",),
         "`host:port,...` of controllers to find the quorum through; without `controller.quorum.voters`: a "
         "dynamic quorum (KIP-853) whose voters are in the metadata log (`storage format --standalone`)."),
        (("controller.listener.names",), "The listener(s) the quorum's RPCs are served on (the first is the one voters call)."),
        (("controller.quorum.fetch.timeout.ms", "controller.quorum.election.timeout.ms",
          "controller.quorum.election.backoff.max.ms", "controller.quorum.request.timeout.ms",
          "controller.quorum.retry.backoff.ms"), "Kafka's quorum timeouts."),
        (("metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms"),
         "Each node snapshots its committed metadata after this many log bytes or this long, and drops the "
         "log prefix (KIP-630)."),
        (("broker.session.timeout.ms",),
         "The active controller fences a broker whose last heartbeat is older (it leaves every ISR, its "
         "leaderships move)."),
        (("broker.heartbeat.interval.ms",), "How often brokers heartbeat to the active controller."),
        (("replica.lag.time.max.ms",),
         "A follower not caught up with the leader for this long leaves the ISR."),
        (("replica.fetch.wait.max.ms", "replica.fetch.max.bytes", "replica.fetch.response.max.bytes"),
         "A follower's Fetch to the leader: long-poll wait, per-partition and total bytes."),
        (("replica.fetch.backoff.ms", "replica.socket.timeout.ms"),
         "A follower's wait after a failed fetch, and its request timeout."),
        (("replica.high.watermark.checkpoint.interval.ms",), "How often high watermarks are written to `replication-offset-checkpoint`."),
    )),
    ("Operations", (
        (("minikafka.metrics.listener",),
         "The HTTP admin listener (`/metrics`, `/health/live`, `/health/ready`), e.g. `http://127.0.0.1:9644`; "
         "empty: off."),
        (("schema.registry.listener",),
         "The built-in Confluent-compatible Schema Registry's REST listener, e.g. `http://127.0.0.1:8081`, or "
         "`https://…` with the `ssl.*` keys of a listener named `schema_registry` "
         "(`listener.name.schema_registry.ssl.keystore.location`, …; else the broker-wide `ssl.*`); its state is "
         "the compacted `_schemas` topic (on a cluster every node with it serves the registry; writes go to the "
         "leader of `_schemas` partition 0); empty: off."),
        (("schema.registry.authentication.method",),
         "The Schema Registry listener's authentication: `BASIC` (HTTP Basic credentials of the broker's SASL "
         "users: the PLAIN users of the SASL listeners' JAAS configs and the SCRAM credentials; principal "
         "`User:<name>`) or `NONE` (every request is `User:ANONYMOUS`); empty: `BASIC` when a broker listener "
         "uses SASL, else `NONE`. With `authorizer.class.name` set, requests are authorized by TOPIC ACLs (see "
         "the Schema Registry page)."),
        (("minikafka.log.format",), "`text` or `json` (one object per line)."),
        (("minikafka.faults.enable",),
         "Fault injection for client tests (`/faults` on the admin listener). Never in production."),
        (("minikafka.test.log.open.delay.ms",), "Tests only: a pause before each background batch of partition logs (slow recovery)."),
    )),
)

# Kafka keys minikafka accepts without a default of its own (config/core.py IGNORED_KAFKA_KEYS and
# listener-prefixed forms): documented rows without a default column value.
OTHER_BROKER_KEYS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("inter.broker.listener.name", "security.inter.broker.protocol"),
     "Cluster: the listener (or, by protocol, the listener) nodes use to reach each other; default "
     "PLAINTEXT, else the first non-controller listener. Only one of the two, as Kafka."),
    (("sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol"),
     "Cluster: the mechanism a node logs in with on a SASL inter-broker resp. controller listener "
     "(credentials: `username`/`password` of that listener's JAAS entry). Kafka's default, GSSAPI, is not "
     "served: set PLAIN or SCRAM."),
    (("broker.rack",), "Cluster: the rack a broker registers with; replica placement spreads each partition over racks."),
    (("leader.replication.throttled.rate", "follower.replication.throttled.rate"),
     "Dynamic, per broker: bytes/s for throttled replicas (`kafka-reassign-partitions --throttle`)."),
    (("listener.name.<listener>.<key>",),
     "Any `ssl.*` or SASL key for one listener (lower-case name); wins over the plain key, as in Kafka."),
)

TOPIC_KEYS: dict[str, str] = {
    "cleanup.policy": "`delete`, `compact` or `compact,delete`.",
    "compression.type": "The codec batches are stored in; `producer` keeps the producer's.",
    "compression.gzip.level": "gzip level of the re-coding (1-9, -1: the codec's default).",
    "compression.lz4.level": "lz4 level of the re-coding (1-17).",
    "compression.zstd.level": "zstd level of the re-coding (-131072-22).",
    "delete.retention.ms": "How long tombstones and transaction markers survive compaction.",
    "file.delete.delay.ms": "A deleted segment's files stay open this long for reads in flight.",
    "flush.messages": "fsync after this many records.",
    "flush.ms": "fsync after this long.",
    "follower.replication.throttled.replicas": "`partition:broker,...` or `*`: follower replicas under the throttle.",
    "index.interval.bytes": "Bytes between offset-index entries.",
    "leader.replication.throttled.replicas": "`partition:broker,...` or `*`: leader replicas under the throttle.",
    "max.compaction.lag.ms": "A record is compacted at most this long after it was written.",
    "max.message.bytes": "The largest record batch accepted (RECORD_TOO_LARGE past it).",
    "message.timestamp.after.max.ms": "CreateTime records newer than now by more than this are refused.",
    "message.timestamp.before.max.ms": "CreateTime records older than now by more than this are refused.",
    "message.timestamp.type": "`CreateTime` or `LogAppendTime` (the broker stamps every batch).",
    "min.cleanable.dirty.ratio": "The dirty share of the log that makes it cleanable.",
    "min.compaction.lag.ms": "A record stays uncompacted at least this long.",
    "min.insync.replicas": "With acks=all, the in-sync replicas a write needs (cluster).",
    "preallocate": "Only false.",
    "retention.bytes": "Size-based retention per partition (-1: none).",
    "retention.ms": "Whole segments older than this are deleted (-1: forever).",
    "segment.bytes": "Segment roll size.",
    "segment.index.bytes": "A segment rolls once its offset or time index holds this much.",
    "segment.jitter.ms": "The most the roll age is shortened at random.",
    "segment.ms": "Segment roll age.",
    "unclean.leader.election.enable": "With no in-sync replica left, elect an out-of-sync one (cluster).",
}

GROUP_KEYS: dict[str, str] = {
    "consumer.session.timeout.ms": "This consumer group's session timeout.",
    "consumer.heartbeat.interval.ms": "This consumer group's heartbeat interval.",
    "consumer.assignment.interval.ms": "This consumer group's least time between target assignments.",
    "share.session.timeout.ms": "Share groups (not served yet): accepted and stored.",
    "share.heartbeat.interval.ms": "Share groups (not served yet): accepted and stored.",
    "share.record.lock.duration.ms": "Share groups (not served yet): accepted and stored.",
    "share.delivery.count.limit": "Share groups (not served yet): accepted and stored.",
    "share.partition.max.record.locks": "Share groups (not served yet): accepted and stored.",
    "share.auto.offset.reset": "Share groups (not served yet): accepted and stored.",
    "share.assignment.interval.ms": "Share groups (not served yet): accepted and stored.",
    "share.isolation.level": "Share groups (not served yet): accepted and stored.",
    "share.renew.acknowledge.enable": "Share groups (not served yet): accepted and stored.",
    "streams.session.timeout.ms": "Streams groups (not served yet): accepted and stored.",
    "streams.heartbeat.interval.ms": "Streams groups (not served yet): accepted and stored.",
    "streams.num.standby.replicas": "Streams groups (not served yet): accepted and stored.",
    "streams.initial.rebalance.delay.ms": "Streams groups (not served yet): accepted and stored.",
    "streams.assignment.interval.ms": "Streams groups (not served yet): accepted and stored.",
}


def _broker_docs() -> dict[str, str]:
    out: dict[str, str] = {}
    for _title, rows in BROKER_SECTIONS:
        for keys, meaning in rows:
            out.update(dict.fromkeys(keys, meaning))
    for keys, meaning in OTHER_BROKER_KEYS:
        out.update(dict.fromkeys(keys, meaning))
    return out


BROKER_KEYS: dict[str, str] = _broker_docs()


def documentation(resource: str, name: str) -> str | None:
    """DescribeConfigs' `documentation` of config `name` of a "broker", "topic" or "group" resource (None:
    none; a listener-prefixed broker key gets its unprefixed key's)."""
    table = {"broker": BROKER_KEYS, "topic": TOPIC_KEYS, "group": GROUP_KEYS}[resource]
    found = table.get(name)
    if found is None and resource == "broker" and name.startswith("listener.name."):
        found = table.get(name.split(".", 3)[-1]) if name.count(".") >= 3 else None
    return found
