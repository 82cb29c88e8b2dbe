"""MAPPO's fast paths agree with the plain ones: the minibatch permutation with
``jax.random.permutation``, the actor's custom backward pass with autodiff through
Flax's ``Actor``, bit for bit, and so a short training run with the plain paths."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.algos import make_config
from mopa.algos.mappo import train as mappo_train
from mopa.algos.mappo.train import (
    _stable_argsort,
    _transpose_rows,
    actor_logits,
    permutation,
    plain_actor_logits,
)
from mopa.policy import PolicySpec, agent_inputs, init_params


def _actor(num_agents, hidden, activation, agent_id=True):
    spec = PolicySpec(
        kind="actor",
        num_agents=num_agents,
        obs_size=16,
        num_actions=5,
        hidden=hidden,
        activation=activation,
        agent_id=agent_id,
    )
    params = init_params(spec, jax.random.key(0))
    # Non-zero biases, so that their values and gradients are exercised.
    params = jax.tree.map(
        lambda p: p + 0.1 * jax.random.normal(jax.random.key(p.size), p.shape), params
    )
    return spec, params


def _loss(logits_fn, activation):
    """A PPO-like scalar of the logits, so that every layer gets a gradient."""

    def loss(params, x, actions, weights):
        log_probs = jax.nn.log_softmax(logits_fn(params, x, activation))
        taken = jnp.take_along_axis(log_probs, actions[..., None], -1)[..., 0]
        return jnp.mean(weights * jnp.exp(taken)) - 0.01 * jnp.mean(log_probs)

    return loss


def _bits(tree) -> list[bytes]:
    leaves = jax.tree.leaves(tree)
    return [
        np.asarray(
            jax.random.key_data(x)
            if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
            else x
        ).tobytes()
        for x in leaves
    ]


@pytest.mark.parametrize(
    ("num_agents", "hidden", "activation", "rows", "seeds"),
    [
        (3, (128,), "tanh", 1024, 1),  # tag's predators, one seed per device
        (3, (128,), "tanh", 1024, 3),  # three seeds on one device
        (1, (32, 48), "relu", 100, 1),  # rows not a multiple of 16
        (2, (64, 64), "gelu", 24, 0),  # no seed axis (the league's calls)
    ],
)
@pytest.mark.slow
def test_actor_logits_and_gradients_equal_flax_and_autodiff(
    num_agents, hidden, activation, rows, seeds
):
    spec, params = _actor(num_agents, hidden, activation)
    keys = jax.random.split(jax.random.key(1), 3)
    lead = (seeds,) if seeds else ()
    x = agent_inputs(spec, jax.random.normal(keys[0], (*lead, rows, num_agents, 16)))
    actions = jax.random.randint(keys[1], x.shape[:-1], 0, 5)
    weights = jax.random.normal(keys[2], x.shape[:-1])
    if seeds:
        params = jax.tree.map(lambda p: jnp.stack([p] * seeds), params)

    def batched(fn):
        return jax.jit(jax.vmap(fn) if seeds else fn)

    def logits(fn):
        return batched(lambda p, x: fn(p, x, activation))(params, x)

    fast, plain = logits(actor_logits), logits(plain_actor_logits)
    assert _bits(fast) == _bits(plain)
    grads = [
        batched(jax.grad(_loss(fn, activation)))(params, x, actions, weights)
        for fn in (actor_logits, plain_actor_logits)
    ]
    assert jax.tree.structure(grads[0]) == jax.tree.structure(grads[1])
    for u, v in zip(*map(jax.tree.leaves, grads), strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-7)
    assert _bits(grads[0]) == _bits(grads[1])


@pytest.mark.parametrize("rows", [3072, 1024, 100, 16, 1])
def test_transpose_rows_is_the_transpose(rows):
    x = jax.random.normal(jax.random.key(2), (rows, 5))
    np.testing.assert_array_equal(jax.jit(_transpose_rows)(x), np.asarray(x).T)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 5, 17, 1000, 1024, 4096, 2**16, 2**16 + 1, 70_000])
def test_permutation_equals_jax_random_permutation(n):
    keys = jax.random.split(jax.random.key(3), 20)
    expected = jax.jit(jax.vmap(lambda k: jax.random.permutation(k, n)))(keys)
    ours = jax.jit(jax.vmap(lambda k: permutation(k, n)))(keys)
    assert ours.dtype == expected.dtype
    np.testing.assert_array_equal(ours, expected)
    np.testing.assert_array_equal(np.sort(np.asarray(ours[0])), np.arange(n))


def test_permutation_equals_jax_random_permutation_without_jit_or_vmap():
    for seed in range(5):
        key = jax.random.key(seed)
        np.testing.assert_array_equal(
            permutation(key, 4096), jax.random.permutation(key, 4096)
        )


def test_stable_argsort_keeps_ties_in_index_order():
    keys = jnp.asarray(np.random.default_rng(0).integers(0, 8, 4096), jnp.uint32)
    keys = keys * jnp.uint32(123_457)  # few distinct values, high and low bits set
    np.testing.assert_array_equal(
        jax.jit(_stable_argsort)(keys), np.argsort(np.asarray(keys), kind="stable")
    )


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["mappo", "ippo"])
def test_training_with_fast_paths_equals_training_with_plain_ones(algo):
    config = make_config(
        algo,
        env="tag",
        num_envs=4,
        num_steps=8,
        num_minibatches=2,
        update_epochs=2,
        total_steps=64,
        num_seeds=2,
    )
    keys = jax.random.split(jax.random.key(4), config.num_seeds)

    def run(fast_paths):
        train = mappo_train.make_train(config, fast_paths=fast_paths)
        return jax.jit(jax.vmap(train))(keys)

    fast, plain = run(True), run(False)
    assert _bits(fast) == _bits(plain)
