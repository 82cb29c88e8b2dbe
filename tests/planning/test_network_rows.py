"""The planners' network helpers: ``greedy_action`` is ``argmax`` (ties and all),
and ``apply_by_rows`` gives ``module.apply``'s numbers bit for bit under nested
vmaps, with shared and with per-entry weights, for both network kinds, and its
matrix products see the rows of each cell, not every vmapped axis."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.bench.compute import _equations
from mopa.errors import InvalidParameterError
from mopa.policy import PolicySpec, apply_by_rows, greedy_action, init_params


def spec(kind, hidden=(32, 32)):
    return PolicySpec(
        kind=kind,
        num_agents=3,
        obs_size=7,
        num_actions=5,
        hidden=hidden,
        num_opponents=1 if kind == "q" else 0,
        opponent_actions=5 if kind == "q" else 0,
    )


def test_greedy_action_is_argmax_with_ties_to_the_lowest_index():
    values = jax.random.normal(jax.random.key(0), (4000, 5)) * 1e3
    values = values.at[:100, 3].set(values[:100].max(-1))  # ties: 3 and another
    values = values.at[100:200].set(7.0)  # all equal: index 0
    values = values.at[200:300, 4].set(1e30)  # a huge maximum
    values = values.at[300:400].set(jnp.float32(1e-38) * jnp.arange(5))  # subnormal
    expected = np.argmax(np.asarray(values), -1)
    got = greedy_action(values)
    assert got.dtype == jnp.int32
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got[100:200], 0)


@pytest.mark.parametrize("kind", ["actor", "q"])
def test_apply_by_rows_equals_apply_bit_for_bit_under_nested_vmaps(kind):
    s = spec(kind)
    module = s.module()
    cells = 3
    params = jax.vmap(lambda k: init_params(s, k))(
        jax.random.split(jax.random.key(1), cells)
    )
    x = jax.random.normal(jax.random.key(2), (cells, 4, 6, 5, 3, s.input_size))

    def nested(apply):
        # weights per cell (the outer axis), shared by the inner three axes
        inner = jax.vmap(jax.vmap(jax.vmap(apply, (None, 0)), (None, 0)), (None, 0))
        return jax.jit(jax.vmap(inner))(params, x)

    want = nested(module.apply)
    got = nested(lambda p, x: apply_by_rows(module, p, x))
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    # unbatched, and with only the inputs batched
    one = jax.tree.map(lambda p: p[0], params)
    for a, b in zip(
        jax.tree.leaves(module.apply(one, x[0, 0, 0, 0])),
        jax.tree.leaves(apply_by_rows(module, one, x[0, 0, 0, 0])),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    # weights batched, inputs shared
    shared = jax.vmap(lambda p: apply_by_rows(module, p, x[0]), (0,))(params)
    plain = jax.vmap(lambda p: module.apply(p, x[0]), (0,))(params)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(shared), strict=True):
        np.testing.assert_array_equal(a, b)


def _dot_input_ranks(apply):
    """The ranks of the inputs of every matrix product in the program of an actor
    over ``[cells, games, candidates, agents, D]``, weights per cell."""
    s = spec("actor")
    module = s.module()
    params = jax.vmap(lambda k: init_params(s, k))(
        jax.random.split(jax.random.key(3), 2)
    )
    x = jnp.zeros((2, 4, 25, 3, s.input_size))
    inner = jax.vmap(jax.vmap(lambda p, x: apply(module, p, x), (None, 0)), (None, 0))
    jaxpr = jax.make_jaxpr(jax.vmap(inner))(params, x).jaxpr
    return {
        eqn.invars[0].aval.ndim
        for eqn in _equations(jaxpr)
        if eqn.primitive.name == "dot_general"
    }


def test_the_network_sees_rows_per_cell_not_every_vmapped_axis():
    # [rows, D] per cell against [cells, games, candidates, agents, D]: XLA's CPU
    # backend runs a layer's bias and activation about 3x faster on the first
    assert _dot_input_ranks(lambda m, p, x: apply_by_rows(m, p, x)) == {2}
    assert _dot_input_ranks(lambda m, p, x: m.apply(p, x)) == {5}


def test_apply_by_rows_takes_several_inputs_some_shared_and_a_method():
    from mopa.worldmodel.networks import LatentWorldModel

    net = LatentWorldModel((16,), 8, (16,), 6)
    one = net.init(jax.random.key(4), jnp.zeros((1, 6)), jnp.zeros((1, 5)))
    params = jax.tree.map(lambda w: jnp.stack([w, 0.9 * w]), one)  # 2 cells
    z = jax.random.normal(jax.random.key(5), (2, 4, 3, 8))
    action = jax.nn.one_hot(jnp.arange(3) % 5, 5)  # [3, 5], shared by all

    def nested(apply):
        # per cell weights, then 4 games sharing them and the actions
        inner = jax.vmap(lambda p, z: apply(p, z, action), (None, 0))
        return jax.jit(jax.vmap(inner))(params, z)

    def step(p, z, a):
        return net.apply(p, z, a, method=LatentWorldModel.step)

    want = nested(step)
    got = nested(
        lambda p, z, a: apply_by_rows(net, p, z, a, method=LatentWorldModel.step)
    )
    assert got.shape == (2, 4, 3, 8)
    np.testing.assert_array_equal(got, want)
    # the actions batched with the games and the weights shared
    actions = jnp.broadcast_to(action, (4, 3, 5))
    got = jax.vmap(
        lambda z, a: apply_by_rows(net, one, z, a, method=LatentWorldModel.step)
    )(z[0], actions)
    np.testing.assert_array_equal(got, jax.vmap(step, (None, 0, 0))(one, z[0], actions))
    for bad in ((), (z[0], action)):  # no input; leading axes [4, 3] and [3]
        with pytest.raises(InvalidParameterError, match="same leading axes"):
            apply_by_rows(net, one, *bad, method=LatentWorldModel.step)
