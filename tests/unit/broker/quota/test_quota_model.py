"""Client quota rules (broker/quota/model.py) and the sampled rate / token bucket (manager.py):
Kafka's ClientQuotaControlManager validation, ClientQuotasImage.describe filters, and
DefaultQuotaCallback precedence."""
from __future__ import annotations

import pytest

from minikafka.broker.quota import model as m
from minikafka.broker.quota.manager import PRODUCE, ClientQuotaManager, MutationQuota, Rate

U, C = m.USER, m.CLIENT_ID


def plan(*entries, current=None):
    return m.plan_alterations([(pairs, ops) for pairs, ops in entries], current or {})


def test_valid_set_and_remove_unchanged_values_make_no_change():
    results, changes = plan(([(U, "alice")], [(m.PRODUCER_BYTE_RATE, 1024.0, False)]))
    assert results == [(((U, "alice"),), None)]
    assert changes == [(((U, "alice"),), m.PRODUCER_BYTE_RATE, 1024.0)]
    current = {((U, "alice"),): {m.PRODUCER_BYTE_RATE: 1024.0}}
    assert plan(([(U, "alice")], [(m.PRODUCER_BYTE_RATE, 1024.0, False), ("consumer_byte_rate", 0, True)]),
                current=current)[1] == []


@pytest.mark.parametrize("pairs, ops, message", [
    ([], [(m.PRODUCER_BYTE_RATE, 1.0, False)], "Invalid empty client quota entity"),
    ([("group", "g")], [(m.PRODUCER_BYTE_RATE, 1.0, False)], "Unhandled client quota entity type: group"),
    ([(U, "")], [(m.PRODUCER_BYTE_RATE, 1.0, False)], "Empty user not supported"),
    ([(U, "a"), (m.IP, "1.2.3.4")], [(m.PRODUCER_BYTE_RATE, 1.0, False)],
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([(U, "a")], [("bogus", 1.0, False)], "Invalid configuration key bogus"),
    ([(U, "a")], [(m.PRODUCER_BYTE_RATE, -1.0, False)], "Quota producer_byte_rate must be greater than 0"),
    ([(U, "a")], [(m.PRODUCER_BYTE_RATE, 0.0, False)], "Quota producer_byte_rate must be greater than 0"),
    ([(U, "a")], [(m.PRODUCER_BYTE_RATE, 1.5, False)], "producer_byte_rate cannot be a fractional value."),
    ([(m.IP, "1.2.3.4")], [(m.CONNECTION_CREATION_RATE, 2.0**31, False)],
     "Proposed value for connection_creation_rate is too large for an INT."),
    ([(m.IP, "1.2.3.4")], [(m.PRODUCER_BYTE_RATE, 1.0, False)], "Invalid configuration key producer_byte_rate"),
])
def test_invalid_alterations_have_kafkas_messages(pairs, ops, message):
    results, changes = plan((pairs, ops))
    assert results[0][1] == message and changes == []


def test_duplicate_key_and_duplicate_entity():
    results, _ = plan(([(U, "a")], [(m.PRODUCER_BYTE_RATE, 1.0, False), (m.PRODUCER_BYTE_RATE, 2.0, False)]))
    assert results[0][1] == ("Duplicate quota key producer_byte_rate not updating quota for this entity "
                             "ClientQuotaEntity(entries={user=a})")
    results, changes = plan(([(U, "a")], [(m.PRODUCER_BYTE_RATE, 1.0, False)]),
                            ([(U, "a")], [(m.CONSUMER_BYTE_RATE, 1.0, False)]))
    assert results == [(((U, "a"),), "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})")]
    assert changes == []


QUOTAS = {((U, "a"),): {"x": 1.0}, ((U, None),): {"x": 2.0}, ((C, "c"), (U, "a")): {"x": 3.0},
          ((C, "c"),): {"x": 4.0}, ((m.IP, None),): {m.CONNECTION_CREATION_RATE: 5.0}}


def names(found):
    return sorted(tuple(e) for e, _v in found)


def test_describe_filters():
    assert names(m.describe(QUOTAS, [(U, m.MATCH_EXACT, "a")], False)) == [((C, "c"), (U, "a")), ((U, "a"),)]
    assert names(m.describe(QUOTAS, [(U, m.MATCH_EXACT, "a")], True)) == [((U, "a"),)]
    assert names(m.describe(QUOTAS, [(U, m.MATCH_DEFAULT, None)], False)) == [((U, None),)]
    # "specified" matches the default entity too, as Kafka's image does
    assert len(m.describe(QUOTAS, [(U, m.MATCH_SPECIFIED, None)], True)) == 2
    assert len(m.describe(QUOTAS, [], False)) == 5
    assert m.describe(QUOTAS, [], True) == []


@pytest.mark.parametrize("components, message", [
    ([("", 0, "x")], "Invalid empty entity type."),
    ([(U, 0, "a"), (U, 2, None)], "Entity type user cannot appear more than once in the filter."),
    ([(U, 0, None)], "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([(U, 1, "a")], "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([(U, 2, "a")], "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([(U, 7, None)], "Unknown match type 7"),
    ([(m.IP, 2, None), (U, 2, None)], "Invalid entity filter component combination. IP filter component should "
                                      "not be used with user or clientId filter component."),
])
def test_describe_filter_errors(components, message):
    with pytest.raises(m.QuotaError) as e:
        m.describe(QUOTAS, components, False)
    assert e.value.message == message and not e.value.unsupported
    with pytest.raises(m.QuotaError) as e:
        m.describe(QUOTAS, [("group", 2, None)], False)
    assert e.value.unsupported


def test_precedence():
    q = {((U, "a"),): {"k": 1.0}, ((C, "c"), (U, "a")): {"k": 2.0}, ((C, "c"),): {"k": 3.0},
         ((C, None), (U, None)): {"k": 4.0}}
    assert m.resolve(q, "k", "a", "c") == (((C, "c"), (U, "a")), 2.0)
    assert m.resolve(q, "k", "a", "other") == (((U, "a"),), 1.0)
    assert m.resolve(q, "k", "b", "c") == (((C, None), (U, None)), 4.0)
    assert m.resolve({((C, "c"),): {"k": 3.0}}, "k", "b", "c") == (((C, "c"),), 3.0)
    assert m.resolve(q, "other", "a", "c") is None


def test_rate_counts_at_least_num_minus_one_windows():
    r = Rate(11, 1.0)
    r.record(10_000, 0.0)
    assert r.measure(0.5) == (10_000 / 10.5, 10.5)  # Kafka: elapsed + (num - 1 - full windows) windows
    r.record(10_000, 20.0)  # the first sample expired
    assert r.measure(20.0)[0] == 1000.0


def test_throttle_time_and_sensor_keys():
    now = [0.0]
    q = ClientQuotaManager(11, 1.0, clock=lambda: now[0])
    assert not q.active and q.record(PRODUCE, "User:ANONYMOUS", "c", 1e9) == 0
    q.replace({((U, None),): {m.PRODUCER_BYTE_RATE: 1000.0}})
    assert q.active
    assert q.record(PRODUCE, "User:bob", "c1", 5000) == 0
    # 20000 bytes over a 10 s window is 2000 B/s: (2000 - 1000) / 1000 x 10 s
    assert q.record(PRODUCE, "User:bob", "c2", 15000) == 10000
    assert q.throttle_ms_total == {(PRODUCE, "bob", ""): 10000.0}
    assert q.record(PRODUCE, "User:carol", "c1", 5000) == 0  # every user has its own sensor under the default


def test_mutation_token_bucket_strict_and_permissive():
    now = [0.0]
    q = ClientQuotaManager(11, 1.0, clock=lambda: now[0])
    q.replace({((C, "admin"),): {m.CONTROLLER_MUTATION_RATE: 1.0}})
    strict = MutationQuota(q, "User:ANONYMOUS", "admin", strict=True)
    assert not strict.exceeded()
    strict.record(20)  # 11 tokens: goes negative once
    assert strict.exceeded() and strict.throttle_ms() == 9000
    permissive = MutationQuota(q, "User:ANONYMOUS", "admin", strict=False)
    assert not permissive.exceeded()
    assert MutationQuota(q, "User:ANONYMOUS", "other", strict=True).bucket is None


def test_listener_and_broker_wide_connection_rates():
    """Kafka's waitForConnectionSlot: the listener's rate and the broker-wide one (not on a protected
    listener); recorded even when throttled; the wait bounded by one window; a rate of 0 waits a window."""
    now = [100.0]
    q = ClientQuotaManager(2, 1.0, clock=lambda: now[0])
    assert q.record_listener_connection("PLAINTEXT", False) == 0  # nothing configured
    q.set_connection_rates(2, {"EXTERNAL": 1})
    assert [q.record_listener_connection("PLAINTEXT", False) for _ in range(4)] == [0, 0, 500, 1000]
    assert q.record_listener_connection("PLAINTEXT", True) == 0  # protected: only its listener's (none)
    assert [q.record_listener_connection("EXTERNAL", True) for _ in range(2)] == [0, 1000]
    q.set_connection_rates(2**31 - 1, {"EXTERNAL": 0})
    assert q.listener_rates == {"EXTERNAL": 0.0} and q.record_listener_connection("EXTERNAL", False) == 1000
    q.set_connection_rates(2**31 - 1, {})
    assert q.record_listener_connection("EXTERNAL", False) == 0
