"""The topology of a streams group and its configuration against the topics that exist (Kafka's
StreamsTopology and topics/InternalTopicManager, RepartitionTopics, CopartitionedTopicsEnforcer,
ChangelogTopics).

A topology is what the first member sends: subtopologies with their source topics, the repartition
topics they write to (sinks) and read from (sources, created by the broker) and their state changelog
topics (created by the broker). `configure_topics` decides the partition count of every internal
topic (a repartition topic takes the largest source partition count of the subtopologies writing to
it unless the topology fixes it; copartitioned topics must agree; a changelog topic has one partition
per task), the number of tasks of each subtopology, and which internal topics are missing; a failure
is a status the heartbeat reports (MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS,
MISSING_INTERNAL_TOPICS), not an error. Pure: the topics are given as name -> partition count.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from minikafka.coordinator.partitioning import java_string_hash

# StreamsGroupHeartbeatResponse.Status codes (Kafka 4.3.1)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: decided by the broker
    replication_factor: int = 0  # 0: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CopartitionGroup:
    source_topics: tuple[int, ...] = ()  # indexes into the subtopology's source_topics
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()  # indexes into repartition_source_topics


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()

    def copartition_topic_sets(self) -> list[set[str]]:
        out = []
        for g in self.copartition_groups:
            names = {self.source_topics[i] for i in g.source_topics if 0 <= i < len(self.source_topics)}
            names |= {self.repartition_source_topics[i].name for i in g.repartition_source_topics
                      if 0 <= i < len(self.repartition_source_topics)}
            out.append(names)
        return out


@dataclass(frozen=True)
class StreamsTopology:
    """Kafka's StreamsTopology: an epoch and the subtopologies by id (compared by value)."""
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def by_id(self) -> dict[str, Subtopology]:
        return {s.subtopology_id: s for s in self.subtopologies}

    def required_topics(self) -> set[str]:
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out

    def source_topic_map(self) -> dict[str, str]:
        """Source and repartition source topic -> the subtopology reading it."""
        out: dict[str, str] = {}
        for s in self.subtopologies:
            for t in s.source_topics:
                out[t] = s.subtopology_id
            for t in s.repartition_source_topics:
                out[t.name] = s.subtopology_id
        return out

    def is_stateful(self, subtopology_id: str) -> bool:
        s = self.by_id().get(subtopology_id)
        return bool(s and s.state_changelog_topics)


@dataclass(frozen=True)
class InternalTopic:
    """A topic the broker creates for the group (Kafka's ConfiguredInternalTopic)."""
    name: str
    partitions: int
    replication_factor: int  # -1: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ConfiguredSubtopology:
    number_of_tasks: int
    source_topics: frozenset[str]
    repartition_source_topics: Mapping[str, InternalTopic]
    repartition_sink_topics: frozenset[str]
    state_changelog_topics: Mapping[str, InternalTopic]


@dataclass(frozen=True)
class ConfiguredTopology:
    """The topology configured against the existing topics (Kafka's ConfiguredTopology)."""
    topology_epoch: int
    metadata_hash: int
    subtopologies: Mapping[str, ConfiguredSubtopology] | None
    internal_topics_to_create: Mapping[str, InternalTopic] = field(default_factory=dict)
    status: tuple[int, str] | None = None  # (status code, detail) of a configuration problem

    @property
    def is_ready(self) -> bool:
        return self.subtopologies is not None and self.status is None


class InvalidTopology(Exception):
    """Kafka's StreamsInvalidTopologyException: the heartbeat fails with STREAMS_INVALID_TOPOLOGY."""


class TopicConfigurationError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def java_hash_map_order(names: Iterable[str]) -> list[str]:
    """The iteration order of a java.util.HashMap<String, _> filled with `names` in this order (Kafka
    lists missing internal topics from one): by bucket of the spread hash code, then by insertion."""
    names = list(dict.fromkeys(names))
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(names, key=bucket)  # stable: insertion order within a bucket


def summarize_topics(names, ordered: bool = False) -> str:
    """Kafka's InternalTopicManager.summarizeTopics: at most three names, then a count (names sorted
    unless `ordered`)."""
    names = list(names) if ordered else sorted(names)
    if not names:
        return "<none>"
    head = ", ".join(names[:3])
    return head + (f" and {len(names) - 3} additional topics" if len(names) > 3 else "")


PartitionCount = Callable[[str], "int | None"]  # partitions of an existing topic, None if it does not exist


def configure_topics(topology: StreamsTopology, metadata_hash: int, partitions_of: PartitionCount) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics."""
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics if partitions_of(t) is None})
        if missing:
            raise TopicConfigurationError(MISSING_SOURCE_TOPICS, f"Source topics {summarize_topics(missing)} are missing.")
        decided = _decide_partition_counts(topology, partitions_of)

        def count(topic: str) -> int | None:
            n = partitions_of(topic)
            return n if n is not None else decided.get(topic)

        configured: dict[str, ConfiguredSubtopology] = {}
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id):
            counts = [count(t) for t in list(s.source_topics) + [r.name for r in s.repartition_source_topics]]
            if not counts or any(c is None for c in counts):
                raise TopicConfigurationError(MISSING_SOURCE_TOPICS, "Subtopology does not contain any source topics")
            configured[s.subtopology_id] = ConfiguredSubtopology(
                number_of_tasks=max(counts),  # type: ignore[type-var]
                source_topics=frozenset(s.source_topics),
                repartition_source_topics={t.name: _internal(t, decided) for t in s.repartition_source_topics},
                repartition_sink_topics=frozenset(s.repartition_sink_topics),
                state_changelog_topics={t.name: _internal(t, decided) for t in s.state_changelog_topics})
        to_create: dict[str, InternalTopic] = {}
        for c in configured.values():
            to_create.update(c.repartition_source_topics)
            to_create.update(c.state_changelog_topics)
        for name in sorted(topology.required_topics()):
            existing = partitions_of(name)
            expected = to_create.pop(name, None) if existing is not None else None
            if expected is not None and existing != expected.partitions:
                raise TopicConfigurationError(
                    INCORRECTLY_PARTITIONED_TOPICS, f"Existing topic {name} has different number of partitions: "
                                                    f"expected {expected.partitions}, found {existing}")
        status = None
        if to_create:
            status = (MISSING_INTERNAL_TOPICS,
                      f"Internal topics are missing: {summarize_topics(java_hash_map_order(to_create), True)}")
        return ConfiguredTopology(topology.epoch, metadata_hash, configured, to_create, status)
    except TopicConfigurationError as exc:
        return ConfiguredTopology(topology.epoch, metadata_hash, None, {}, (exc.status, str(exc)))


def _internal(info: TopicInfo, decided: Mapping[str, int]) -> InternalTopic:
    partitions = info.partitions if info.partitions != 0 else decided.get(info.name)
    if partitions is None:
        raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS, f"Number of partitions must be set for topic {info.name}")
    return InternalTopic(info.name, partitions, info.replication_factor if info.replication_factor != 0 else -1,
                         info.configs)


def _decide_partition_counts(topology: StreamsTopology, partitions_of: PartitionCount) -> dict[str, int]:
    decided: dict[str, int] = {}

    def count(topic: str) -> int | None:
        n = partitions_of(topic)
        return n if n is not None else decided.get(topic)

    # repartition topics (Kafka's RepartitionTopics): a fixed count, else the largest source count of
    # the subtopologies writing to it, repeated until every count is known
    repartition: dict[str, TopicInfo] = {t.name: t for s in topology.subtopologies for t in s.repartition_source_topics}
    for name, info in repartition.items():
        if info.partitions > 0:
            decided[name] = info.partitions
        elif (existing := partitions_of(name)) is not None:
            decided[name] = existing
    writers: dict[str, list[Subtopology]] = {}
    for s in topology.subtopologies:
        for sink in s.repartition_sink_topics:
            writers.setdefault(sink, []).append(s)
    todo = [n for n in repartition if n not in decided and partitions_of(n) is None]
    for name in todo:
        if name not in writers:
            raise InvalidTopology("Failed to compute number of partitions for all repartition topics, because a "
                                  "repartition source topic is never used as a sink topic.")
    while todo:
        progressed = False
        for name in list(todo):
            best = None
            for writer in writers[name]:
                for source in list(writer.source_topics) + [t.name for t in writer.repartition_source_topics]:
                    n = count(source)
                    if n is not None and (best is None or n > best):
                        best = n
            if best is not None:
                decided[name] = best
                todo.remove(name)
                progressed = True
        if not progressed:
            raise InvalidTopology("Failed to compute number of partitions for all repartition topics. There may be "
                                  "loops in the topology that cannot be resolved.")
    # copartitioning (Kafka's CopartitionedTopicsEnforcer)
    fixed = {n for n, t in repartition.items() if t.partitions != 0}
    flexible = {n for n, t in repartition.items() if t.partitions == 0}
    for s in topology.subtopologies:
        for group in s.copartition_topic_sets():
            if not group:
                continue
            decided.update(_enforce_copartitioning(group, fixed, flexible, count))
    # changelog topics: one partition per task of their subtopology
    for s in topology.subtopologies:
        if not s.state_changelog_topics:
            continue
        counts = [count(t) for t in list(s.source_topics) + [r.name for r in s.repartition_source_topics]]
        tasks = max((c for c in counts if c is not None), default=0)
        for t in s.state_changelog_topics:
            decided[t.name] = t.partitions if t.partitions > 0 else tasks
    return decided


def _enforce_copartitioning(group: set[str], fixed: set[str], flexible: set[str],
                            count: Callable[[str], "int | None"]) -> dict[str, int]:
    out: dict[str, int] = {}
    non_repartition = sorted(t for t in group if t not in fixed and t not in flexible)

    def same(counts: dict[str, "int | None"]) -> "int | None":
        if len(set(counts.values())) > 1:  # Java's TreeMap.toString
            listed = ", ".join(f"{t}={counts[t]}" for t in sorted(counts))
            raise TopicConfigurationError(INCORRECTLY_PARTITIONED_TOPICS,
                                          f"Following topics do not have the same number of partitions: [{{{listed}}}]")
        return next(iter(counts.values()))
    if not non_repartition:  # only repartition topics: the fixed ones agree, else the largest count
        fixed_here = sorted(t for t in group if t in fixed)
        n = same({t: count(t) for t in fixed_here}) if fixed_here else max((count(t) or 0) for t in group)
        return {t: n for t in group if t in flexible}
    n = same({t: count(t) for t in non_repartition})
    for t in sorted(group):
        if t in fixed and count(t) != n:
            raise TopicConfigurationError(
                INCORRECTLY_PARTITIONED_TOPICS, f"Number of partitions [{count(t)}] of repartition topic [{t}] "
                                                f"doesn't match number of partitions [{n}] of the source topic.")
        if t in flexible and n is not None:
            out[t] = n
    return out
