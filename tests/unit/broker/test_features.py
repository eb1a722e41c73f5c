"""broker/config/features.py: finalized feature levels, their persistence, and UpdateFeatures' rules
(Kafka's FeatureControlManager: upgrade / safe and unsafe downgrade / validate-only, its errors)."""
from __future__ import annotations

import json

import pytest

from minikafka.broker.config.features import (
    FEATURES_FILE,
    INITIAL_EPOCH,
    INVALID_UPDATE_VERSION,
    SAFE_DOWNGRADE,
    SUPPORTED,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureState,
    FeatureUpdate,
    FeatureUpdateError,
)

TV = "transaction.version"


def test_new_data_dir_gets_kafka_defaults_and_keeps_them(tmp_path):
    f = FeatureState(tmp_path / FEATURES_FILE)
    assert f.epoch == INITIAL_EPOCH
    assert f.level(TV) == 2 and f.level("group.version") == 1
    assert json.loads((tmp_path / FEATURES_FILE).read_text())["features"][TV] == 2
    for name, level in f.finalized().items():
        assert SUPPORTED[name].min_version <= level <= SUPPORTED[name].max_version


def test_downgrade_and_upgrade_persist_with_a_growing_epoch(tmp_path):
    path = tmp_path / FEATURES_FILE
    f = FeatureState(path)
    f.update([FeatureUpdate(TV, 1, SAFE_DOWNGRADE)])
    assert (f.level(TV), f.epoch) == (1, INITIAL_EPOCH + 1)
    again = FeatureState(path)  # a restart reads what was written
    assert (again.level(TV), again.epoch) == (1, INITIAL_EPOCH + 1)
    again.update([FeatureUpdate(TV, 2, UPGRADE)])
    again.update([FeatureUpdate(TV, 0, UNSAFE_DOWNGRADE)])  # level 0: no longer finalized
    assert TV not in again.finalized() and again.level(TV) == 0
    assert FeatureState(path).epoch == INITIAL_EPOCH + 3
    assert not path.with_name(path.name + ".tmp").exists()


def test_validate_only_changes_nothing(tmp_path):
    f = FeatureState(tmp_path / FEATURES_FILE)
    f.update([FeatureUpdate(TV, 1, SAFE_DOWNGRADE)], validate_only=True)
    assert (f.level(TV), f.epoch) == (2, INITIAL_EPOCH)


@pytest.mark.parametrize("update, reason", [
    (FeatureUpdate(TV, 1, UPGRADE), "Can't downgrade the version of this feature without setting the upgrade "
                                    "type to either safe or unsafe downgrade."),
    (FeatureUpdate(TV, 3, UPGRADE), "Local controller 1 only supports versions 0-2"),
    (FeatureUpdate(TV, -1, SAFE_DOWNGRADE), "A feature version cannot be less than 0."),
    (FeatureUpdate("no.such.feature", 1, UPGRADE), "Local controller 1 does not support this feature."),
    (FeatureUpdate(TV, 1, 7), "The controller does not support the given upgrade type."),
])
def test_refused_updates_carry_kafkas_message(tmp_path, update, reason):
    f = FeatureState(tmp_path / FEATURES_FILE)
    with pytest.raises(FeatureUpdateError) as err:
        f.update([update])
    assert err.value.errno == INVALID_UPDATE_VERSION
    assert err.value.message == f"Invalid update version {update.level} for feature {update.feature}. {reason}"
    assert (f.level(TV), f.epoch) == (2, INITIAL_EPOCH)


def test_one_bad_update_refuses_the_whole_request(tmp_path):
    f = FeatureState(tmp_path / FEATURES_FILE)
    with pytest.raises(FeatureUpdateError):
        f.update([FeatureUpdate(TV, 1, SAFE_DOWNGRADE), FeatureUpdate("group.version", 5, UPGRADE)])
    assert f.level(TV) == 2


def test_unreadable_file_fails_loudly(tmp_path):
    (tmp_path / FEATURES_FILE).write_text("{not json")
    with pytest.raises(RuntimeError):
        FeatureState(tmp_path / FEATURES_FILE)
