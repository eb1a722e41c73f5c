"""coordinator/group/consumer/assignors.py: uniform and range give every subscribed partition to exactly
one subscribed member; uniform balances and is sticky; range gives contiguous ranges."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.coordinator.group.consumer.assignors import ASSIGNORS, range_, resolve_names, uniform

T1, T2, T3 = (uuid.UUID(int=i) for i in (1, 2, 3))


def owners(result):
    out = {}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} assigned twice"
                out[(t, p)] = m
    return out


def check_valid(result, subs, parts):
    own = owners(result)
    expected = {(t, p) for t, n in parts.items() if any(t in s for s in subs.values()) for p in range(n)}
    assert set(own) == expected
    for (t, p), m in own.items():
        assert t in subs[m]


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_one_member_gets_everything(name):
    subs = {"a": {T1, T2}}
    result = ASSIGNORS[name](subs, {T1: 3, T2: 2}, {})
    assert result == {"a": {T1: {0, 1, 2}, T2: {0, 1}}}


def test_uniform_balances_and_sticks():
    subs = {"a": {T1}, "b": {T1}, "c": {T1}}
    first = uniform(subs, {T1: 7}, {})
    check_valid(first, subs, {T1: 7})
    counts = sorted(len(a.get(T1, ())) for a in first.values())
    assert counts == [2, 2, 3]
    # a fourth member: everyone keeps what fits, the newcomer only takes
    subs["d"] = {T1}
    second = uniform(subs, {T1: 7}, first)
    check_valid(second, subs, {T1: 7})
    assert sorted(len(a.get(T1, ())) for a in second.values()) == [1, 2, 2, 2]
    for m in "abc":
        assert second[m].get(T1, set()) <= first[m][T1]
    # a member leaves: its partitions spread, the others keep theirs
    del subs["a"]
    third = uniform(subs, {T1: 7}, {m: second[m] for m in subs})
    check_valid(third, subs, {T1: 7})
    for m in subs:
        assert second[m].get(T1, set()) <= third[m].get(T1, set())


def test_range_contiguous():
    subs = {"b": {T1, T2}, "a": {T1, T2}, "c": {T1}}
    result = range_(subs, {T1: 5, T2: 3}, {})
    assert result["a"][T1] == {0, 1} and result["b"][T1] == {2, 3} and result["c"][T1] == {4}
    assert result["a"][T2] == {0, 1} and result["b"][T2] == {2}
    assert T2 not in result["c"]


def test_resolve_names():
    assert resolve_names("org.apache.kafka.coordinator.group.assignor.UniformAssignor, range") == ["uniform", "range"]
    with pytest.raises(ValueError):
        resolve_names("sticky")


members = st.dictionaries(st.sampled_from("abcdef"), st.sets(st.sampled_from([T1, T2, T3]), min_size=1),
                          min_size=1)


@settings(max_examples=150, deadline=None)
@given(subs=members, n1=st.integers(0, 9), n2=st.integers(0, 9), n3=st.integers(0, 9), data=st.data())
def test_assignments_are_valid(subs, n1, n2, n3, data):
    parts = {T1: n1, T2: n2, T3: n3}
    for name, fn in ASSIGNORS.items():
        first = fn(subs, parts, {})
        check_valid(first, subs, parts)
        # stickiness input may be stale (members gone, partitions gone): still valid
        keep = data.draw(st.sets(st.sampled_from(sorted(subs))))
        second = fn({m: subs[m] for m in keep} or subs, parts, first)
        check_valid(second, {m: subs[m] for m in keep} or subs, parts)
    if len({frozenset(s) for s in subs.values()}) == 1:
        counts = [sum(len(ps) for ps in a.values()) for a in uniform(subs, parts, {}).values()]
        assert max(counts) - min(counts) <= 1
