"""The battalion Blue's files: a trained Blue and its belief classifier are
written as msgpack (no code), read back to the same numbers, and a file of
another kind is refused."""

import jax
import numpy as np
import pytest

from mopa.core.checkpoint import write_msgpack
from mopa.errors import CheckpointError
from mopa.opponent.battalion_belief import (
    RowClassifier,
    load_row_classifier,
    save_row_classifier,
)
from mopa.planning.battalion_blue import load_blue, save_blue
from mopa.policy import PolicySpec, init_params


def test_a_blue_file_round_trips_its_spec_and_every_seed(tmp_path):
    spec = PolicySpec(
        kind="actor", num_agents=2, obs_size=7, num_actions=4, hidden=(8, 8)
    )
    keys = jax.random.split(jax.random.key(0), 3)
    params = jax.vmap(lambda k: init_params(spec, k))(keys)
    path = save_blue(tmp_path / "blue.msgpack", spec, params)
    read_spec, read_params = load_blue(path)
    assert read_spec == spec
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(read_params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(CheckpointError, match="format"):
        load_row_classifier(path)


def test_a_classifier_file_round_trips_its_weights_and_temperature(tmp_path):
    fitted = RowClassifier(
        params={"w": np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)},
        temperature=1.75,
        episodes={"fit": 3, "validation": 1, "test": 1},
        num_prefixes=9,
        heldout={},
    )
    params, temperature = load_row_classifier(
        save_row_classifier(tmp_path / "classifier.msgpack", fitted)
    )
    np.testing.assert_array_equal(np.asarray(params["w"]), fitted.params["w"])
    assert temperature == 1.75
    write_msgpack(tmp_path / "other.msgpack", {"format": "mopa-policy", "version": 1})
    with pytest.raises(CheckpointError, match="format"):
        load_blue(tmp_path / "other.msgpack")
