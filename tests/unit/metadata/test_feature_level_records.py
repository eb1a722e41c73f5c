"""Cluster-wide finalized features (Kafka's FeatureLevelRecord): the image's levels and epoch (the offset of
the last FeatureLevel record), snapshots keep them, the controller writes what plan_update decided, and a
cluster node's FeatureState follows the image once it holds a FeatureLevel record."""
from __future__ import annotations

import pytest

from minikafka.broker.config.features import (FEATURES_FILE, SAFE_DOWNGRADE, UPGRADE, FeatureState, FeatureUpdate,
                                              FeatureUpdateError, plan_update)
from minikafka.metadata import records as r
from minikafka.metadata.controller import Controller
from minikafka.metadata.image import MetadataImage

TV = "transaction.version"


def test_feature_level_records_set_and_remove_levels_with_their_offset_as_epoch():
    image = MetadataImage()
    assert (image.features, image.features_epoch) == ({}, -1)
    image.apply(r.feature_level("metadata.version", 30), 3)
    image.apply(r.feature_level(TV, 2), 4)
    image.apply(r.topic("t", "00000000-0000-0000-0000-000000000001"), 5)  # another record: the epoch stays
    assert (image.features, image.features_epoch) == ({"metadata.version": 30, TV: 2}, 4)
    image.apply(r.feature_level(TV, 0), 6)
    assert (image.features, image.features_epoch) == ({"metadata.version": 30}, 6)
    again = MetadataImage.from_json(image.to_json())
    assert (again.features, again.features_epoch) == (image.features, image.features_epoch)
    assert (image.copy().features, image.copy().features_epoch) == (image.features, 6)
    old = image.to_json()
    del old["features"], old["featuresEpoch"]  # a snapshot written before FeatureLevel records
    assert (MetadataImage.from_json(old).features, MetadataImage.from_json(old).features_epoch) == ({}, -1)


def test_controller_appends_feature_level_records():
    log: list = []
    image = MetadataImage()

    def propose(record: dict) -> int:
        log.append(record)
        return len(log) - 1
    c = Controller(image, propose)
    c.set_feature_levels({TV: 1, "share.version": 0})
    assert log == [r.feature_level("share.version", 0), r.feature_level(TV, 1)]
    assert (c.image.features, c.image.features_epoch) == ({TV: 1}, 1)


def test_plan_update_is_all_or_nothing_against_given_levels():
    current = {"metadata.version": 30, TV: 2, "share.version": 1}
    assert plan_update(current, [FeatureUpdate(TV, 1, SAFE_DOWNGRADE), FeatureUpdate("share.version", 0,
                                                                                      SAFE_DOWNGRADE)], 7) == \
        {"metadata.version": 30, TV: 1}
    assert current == {"metadata.version": 30, TV: 2, "share.version": 1}
    with pytest.raises(FeatureUpdateError) as e:
        plan_update(current, [FeatureUpdate(TV, 1, SAFE_DOWNGRADE), FeatureUpdate("x", 1, UPGRADE)], 7)
    assert e.value.message == "Invalid update version 1 for feature x. Local controller 7 does not support this " \
                              "feature."
    with pytest.raises(FeatureUpdateError) as e:
        plan_update(current, [FeatureUpdate(TV, 1, UPGRADE)], 7, elsewhere=lambda f, v: "Controller 9 says no")
    assert e.value.message == f"Invalid update version 1 for feature {TV}. Controller 9 says no"


def test_a_cluster_node_follows_the_image_once_it_has_feature_levels(tmp_path):
    state = FeatureState(tmp_path / FEATURES_FILE, 1)
    image = MetadataImage()
    state.follow(lambda: image)
    own = state.file_levels()
    assert (state.finalized(), state.epoch) == (own, 1)  # no FeatureLevel record yet: this node's file
    for i, (name, level) in enumerate(sorted({**own, TV: 1}.items())):
        image.apply(r.feature_level(name, level), 10 + i)
    assert state.level(TV) == 1 and state.epoch == image.features_epoch
    assert state.file_levels() == own  # the file is this node's own (a single node's) state
