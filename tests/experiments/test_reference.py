"""The reference run (:mod:`mopa.experiments.reference`): its digests see every
bit, shape and dtype, and its stages repeat to the bit in one process."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from mopa.experiments import get_experiment
from mopa.experiments.reference import ReferenceConfig, _belief, digest


def test_the_digest_sees_every_bit_shape_and_dtype():
    x = np.linspace(0, 1, 12, dtype=np.float32)
    base = digest({"a": x, "b": [jnp.arange(3)]})
    assert base == digest({"a": x.copy(), "b": [jnp.arange(3)]})
    flipped = x.copy()
    flipped.view(np.uint32)[5] ^= 1  # the last bit of one float
    assert digest({"a": flipped, "b": [jnp.arange(3)]}) != base
    assert digest({"a": x.reshape(3, 4), "b": [jnp.arange(3)]}) != base
    assert digest({"a": x.astype(np.float64), "b": [jnp.arange(3)]}) != base
    assert len(base) == 64


@pytest.mark.slow
def test_the_belief_stage_repeats_and_finds_the_watched_member():
    config = ReferenceConfig()
    first, second = _belief(config), _belief(config)
    assert first == second
    belief = np.asarray(first["member_belief"])
    assert belief.argmax() == 1 and abs(belief.sum() - 1) < 1e-5  # member 1 played
    assert first["none_fits"] < 0.5
    assert all(0 <= move < 5 for move in first["planned_moves"])
    other = _belief(dataclasses.replace(config, seed=1))
    assert other["digest"] != first["digest"]


def test_the_reference_is_registered_with_one_small_profile():
    experiment = get_experiment("reference")
    assert list(experiment.presets) == ["default"]
    assert experiment.presets["default"].train_steps <= 65_536
