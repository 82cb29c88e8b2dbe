"""``map_batched`` and ``one_after_another``: the numbers of ``vmap``, computed one
batch entry after another, with the unbatched leaves shared rather than copied."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.core.batching import map_batched, one_after_another


def fn(tree, scale):
    """A function of a pytree and a shared array, with a reduction per entry."""
    a, (b, c) = tree["a"], tree["bc"]
    return {"sum": jnp.sum(a * scale) + b, "prod": c @ scale, "b": b}


def args(key):
    k = jax.random.split(key, 4)
    tree = {
        "a": jax.random.normal(k[0], (5, 3)),
        "bc": (jax.random.normal(k[1], (5,)), jax.random.normal(k[2], (5, 4, 3))),
    }
    return tree, jax.random.normal(k[3], (3,))


def _scans(jaxpr):
    return [e for e in jaxpr.eqns if e.primitive.name == "scan"]


def test_map_batched_gives_vmaps_numbers_and_shares_the_unbatched_leaves():
    tree, scale = args(jax.random.key(0))
    flags = ({"a": True, "bc": (True, True)}, False)
    got = jax.jit(lambda t, s: map_batched(fn, flags, t, s))(tree, scale)
    want = jax.vmap(fn, (0, None))(tree, scale)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # One scan over the 3 batched leaves; the shared ``scale`` is a constant of
    # the loop, not a scanned (per-entry) input.
    jaxpr = jax.make_jaxpr(lambda t, s: map_batched(fn, flags, t, s))(tree, scale)
    (scan,) = _scans(jaxpr.jaxpr)
    xs = scan.invars[scan.params["num_consts"] + scan.params["num_carry"] :]
    assert scan.params["length"] == 5
    assert sorted(v.aval.shape for v in xs) == [(5,), (5, 3), (5, 4, 3)]


@pytest.mark.parametrize(
    "flags, message",
    [
        (({"a": True, "bc": (True, True)},), "3 flags for 4 leaves"),
        (({"a": False, "bc": (False, False)}, False), "0 batched"),
    ],
)
def test_map_batched_refuses_flags_that_do_not_fit(flags, message):
    tree, scale = args(jax.random.key(1))
    with pytest.raises(ValueError, match=message):
        map_batched(fn, flags, tree, scale)


def test_one_after_another_is_fn_alone_and_maps_under_nested_vmaps():
    tree, scale = args(jax.random.key(2))
    mapped = one_after_another(fn)
    one = jax.tree.map(lambda x: x[0], tree)
    for a, b in zip(
        jax.tree.leaves(mapped(one, scale)),
        jax.tree.leaves(fn(one, scale)),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    # [2, 5] entries: an outer vmap over a batched ``scale`` too
    trees = jax.tree.map(lambda x: jnp.stack([x, 2 * x]), tree)
    scales = jnp.stack([scale, -scale])
    nested = jax.vmap(jax.vmap(mapped, (0, None)), (0, 0))
    got = jax.jit(nested)(trees, scales)
    want = jax.vmap(jax.vmap(fn, (0, None)), (0, 0))(trees, scales)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # each level is a sequential map: the inner vmap's map of 5 is batched by the
    # outer vmap, whose rule then maps its 2 entries inside that loop's body
    (outer,) = _scans(jax.make_jaxpr(nested)(trees, scales).jaxpr)
    (inner,) = _scans(outer.params["jaxpr"].jaxpr)
    assert (outer.params["length"], inner.params["length"]) == (5, 2)
