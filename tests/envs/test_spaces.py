"""Spaces: sampling stays inside, ``contains`` rejects what does not belong."""

import jax
import numpy as np

from mopa.envs import Box, Discrete


def test_discrete_sample_and_contains():
    space = Discrete(5)
    sample = space.sample(jax.random.key(0), (1000,))
    assert sample.dtype == np.int32 and space.contains(sample)
    assert set(np.unique(np.asarray(sample))) == {0, 1, 2, 3, 4}
    assert not space.contains(np.array([0, 5]))
    assert not space.contains(np.array([-1]))
    assert not space.contains(np.array([0.0, 1.0]))


def test_box_sample_and_contains():
    bounded = Box(-1.0, 2.0, (3,))
    sample = bounded.sample(jax.random.key(0), (100,))
    assert sample.shape == (100, 3) and bounded.contains(sample)
    assert float(sample.min()) >= -1.0 and float(sample.max()) <= 2.0
    assert not bounded.contains(np.array([0.0, 0.0, 2.5], np.float32))
    assert not bounded.contains(np.zeros(4, np.float32))  # wrong shape
    assert not bounded.contains(np.zeros(3, np.int32))  # wrong dtype
    assert not bounded.contains(np.float32(0.0))  # too few dimensions
    unbounded = Box(-np.inf, np.inf, (2,))
    assert unbounded.contains(unbounded.sample(jax.random.key(1), (10,)))
