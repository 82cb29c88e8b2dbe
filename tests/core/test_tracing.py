"""``batched_like``: the same values, batched as the key is under ``vmap``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.core.tracing import batched_like


def test_values_are_unchanged_signed_zeros_and_nan_included():
    tree = {
        "x": jnp.array([-0.0, 0.0, 1.5, -2.0, jnp.nan, jnp.inf]),
        "count": jnp.array([0, -3, 7], jnp.int32),
        "alive": jnp.array([True, False]),
        "key": jax.random.key(3),
    }
    out = batched_like(tree, jax.random.key(0))
    np.testing.assert_array_equal(out["x"], tree["x"])
    np.testing.assert_array_equal(np.signbit(out["x"]), np.signbit(tree["x"]))
    np.testing.assert_array_equal(out["count"], tree["count"])
    assert out["count"].dtype == jnp.int32 and out["alive"].dtype == jnp.bool_
    np.testing.assert_array_equal(out["alive"], tree["alive"])
    np.testing.assert_array_equal(
        jax.random.key_data(out["key"]), jax.random.key_data(tree["key"])
    )


def test_under_vmap_the_carry_is_batched_as_the_key_is():
    keys = jax.random.split(jax.random.key(0), 4)
    # An unbatched zero can leave vmap unbatched (out_axes=None) ...
    plain = jax.vmap(lambda key: jnp.zeros(()), out_axes=None)(keys)
    assert plain.shape == ()
    # ... the same zero through batched_like is batched like the key: it cannot.
    with pytest.raises(ValueError):
        jax.vmap(lambda key: batched_like(jnp.zeros(()), key), out_axes=None)(keys)
    # A raw (uint32) key works the same way, and the values stay zero.
    raw = jax.vmap(jax.random.key_data)(keys)
    out = jax.vmap(lambda key: batched_like(jnp.zeros(2), key))(raw)
    np.testing.assert_array_equal(out, np.zeros((4, 2)))
