"""Beliefs over K strategies: hand-worked posteriors, invariants (rows sum to 1),
the online update scanned equals the whole-trajectory helper, batch independence,
and the opponent model built from a mopa policy."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs.pursuit import INTENT_CORNERS
from mopa.errors import InvalidParameterError
from mopa.opponent import beliefs as B  # noqa: N812
from mopa.policy import PolicySpec, agent_inputs, init_params

# Two biased coins: strategy 0 shows heads (action 0) with p = 0.8, strategy 1 with
# p = 0.3. The observation is ignored.
COIN_PROBS = np.array([[0.8, 0.2], [0.3, 0.7]], np.float32)


def coin_log_probs(obs):
    del obs
    return jnp.log(jnp.asarray(COIN_PROBS))


def scan_bayes(log_probs_fn, obs, actions, num_strategies, epsilon=0.0):
    def step(state, inputs):
        o, a = inputs
        state = B.update_bayes_belief(state, log_probs_fn(o), a, epsilon)
        return state, state.belief

    _, beliefs = jax.lax.scan(step, B.init_bayes_belief(num_strategies), (obs, actions))
    return beliefs


def test_bayes_two_coins_by_hand():
    # Heads, heads, tails from a uniform prior:
    #   after H:     0.8 / (0.8 + 0.3)                  = 0.727273
    #   after HH:    0.64 / (0.64 + 0.09)               = 0.876712
    #   after HHT:   0.128 / (0.8*0.8*0.2 + 0.3*0.3*0.7) = 0.128 / 0.191 = 0.670157
    obs = jnp.zeros((3, 1))
    actions = jnp.array([0, 0, 1])
    beliefs = B.bayes_beliefs(coin_log_probs, obs, actions, 2)
    expected = np.array([0.8 / 1.1, 0.64 / 0.73, 0.128 / 0.191])
    np.testing.assert_allclose(beliefs[:, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(beliefs.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(
        scan_bayes(coin_log_probs, obs, actions, 2), beliefs, rtol=1e-5
    )


def test_bayes_epsilon_floor_by_hand():
    # eps = 0.1, A = 2: p_eps = 0.9 p + 0.05 -> coin 0: H 0.77, T 0.23;
    # coin 1: H 0.32, T 0.68. After HHT: 0.77^2 * 0.23 = 0.136367 and
    # 0.32^2 * 0.68 = 0.069632 -> 0.136367 / 0.205999 = 0.661978.
    beliefs = B.bayes_beliefs(
        coin_log_probs, jnp.zeros((3, 1)), jnp.array([0, 0, 1]), 2, epsilon=0.1
    )
    np.testing.assert_allclose(beliefs[-1, 0], 0.136367 / 0.205999, rtol=1e-4)


def test_bayes_zero_probability_action():
    # Strategy 0 never plays action 1: seeing it rules strategy 0 out exactly
    # (eps = 0) but only down-weights it with a floor (eps = 0.2: 0.1 vs 0.8 ->
    # 0.1 / 0.9 = 0.111111). An action impossible under every strategy leaves the
    # belief as it was (no NaN).
    def log_probs(obs):
        del obs
        return jnp.log(jnp.array([[1.0, 0.0, 0.0], [0.2, 0.8, 0.0]]))

    state = B.init_bayes_belief(2)
    exact = B.update_bayes_belief(state, log_probs(None), jnp.array(1))
    np.testing.assert_allclose(exact.belief, [0.0, 1.0], atol=1e-7)
    # eps = 0.2, A = 3: p_eps(1|0) = 0.8 * 0 + 0.2/3 = 0.066667,
    # p_eps(1|1) = 0.8 * 0.8 + 0.066667 = 0.706667 -> 0.066667 / 0.773333 = 0.086207
    floored = B.update_bayes_belief(state, log_probs(None), jnp.array(1), 0.2)
    np.testing.assert_allclose(floored.belief[0], 0.0666667 / 0.7733333, rtol=1e-4)
    impossible = B.update_bayes_belief(exact, log_probs(None), jnp.array(2))
    np.testing.assert_allclose(impossible.belief, exact.belief)
    assert int(impossible.length) == 2


def test_bayes_scan_equals_helper_and_batches():
    # A random 3-strategy model that depends on the observation.
    rng = np.random.default_rng(0)
    weights = jnp.asarray(rng.standard_normal((4, 3, 5)), jnp.float32)

    def log_probs(obs):
        return jax.nn.log_softmax(jnp.einsum("d,dka->ka", obs, weights), -1)

    obs = jnp.asarray(rng.standard_normal((8, 20, 4)), jnp.float32)
    actions = jnp.asarray(rng.integers(0, 5, (8, 20)))
    batched = jax.jit(jax.vmap(lambda o, a: B.bayes_beliefs(log_probs, o, a, 3, 0.05)))
    beliefs = batched(obs, actions)
    assert beliefs.shape == (8, 20, 3)
    np.testing.assert_allclose(beliefs.sum(-1), 1.0, rtol=1e-5)
    scanned = jax.jit(jax.vmap(lambda o, a: scan_bayes(log_probs, o, a, 3, 0.05)))
    np.testing.assert_allclose(scanned(obs, actions), beliefs, atol=1e-5)
    # Batch independence: one episode alone gives its row of the batch.
    alone = B.bayes_beliefs(log_probs, obs[3], actions[3], 3, 0.05)
    np.testing.assert_allclose(alone, beliefs[3], atol=1e-5)


def toy_logits(prefix, length):
    # Logits = column sums of the observed prefix padded to 3 strategies.
    del length
    total = prefix.sum(0)
    return jnp.array([total[0], total[1], 0.0])


def test_prefix_belief_by_hand():
    # Trajectory rows (1, 0), (0, 1), (1, 1); temperature 0.5, min_steps 2.
    #   step 1: uniform (only 1 step seen)
    #   step 2: sums (1, 1) -> logits (1, 1, 0) / 0.5 -> (e^2, e^2, 1) / (2e^2 + 1)
    #   step 3: sums (2, 2) -> (e^4, e^4, 1) / (2e^4 + 1)
    trajectory = jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    beliefs = B.prefix_beliefs(toy_logits, trajectory, 3, 0.5, min_steps=2)
    e2, e4 = math.exp(2), math.exp(4)
    expected = np.array(
        [
            [1 / 3, 1 / 3, 1 / 3],
            [e2 / (2 * e2 + 1), e2 / (2 * e2 + 1), 1 / (2 * e2 + 1)],
            [e4 / (2 * e4 + 1), e4 / (2 * e4 + 1), 1 / (2 * e4 + 1)],
        ]
    )
    np.testing.assert_allclose(beliefs, expected, rtol=1e-5)


def test_prefix_scan_equals_helper_and_stops_when_full():
    trajectory = jnp.asarray(np.random.default_rng(1).standard_normal((6, 2)))

    def step(state, x):
        state = B.update_prefix_belief(state, x, toy_logits, 0.7, min_steps=3)
        return state, state.belief

    state, scanned = jax.lax.scan(step, B.init_prefix_belief(6, 2, 3), trajectory)
    helper = B.prefix_beliefs(toy_logits, trajectory, 3, 0.7, min_steps=3)
    np.testing.assert_allclose(scanned, helper, rtol=1e-5)
    np.testing.assert_allclose(helper.sum(-1), 1.0, rtol=1e-6)
    # A seventh step does not fit: prefix and belief stay as they are.
    extra = B.update_prefix_belief(state, jnp.ones(2), toy_logits, 0.7, 3)
    np.testing.assert_allclose(extra.prefix, state.prefix)
    np.testing.assert_allclose(extra.belief, state.belief)
    assert int(extra.length) == 6


def test_window_logits_uses_the_largest_window_seen():
    # Window 2 -> logits (0, 1); window 4 -> logits (1, 0), whatever the prefix.
    logits_fn = B.window_logits_fn(
        (2, 4),
        (
            lambda p: jnp.array([0.0, 1.0]) + 0 * p.sum(),
            lambda p: jnp.array([1.0, 0.0]),
        ),
    )
    beliefs = B.prefix_beliefs(logits_fn, jnp.ones((5, 2)), 2, 1.0, min_steps=2)
    s = 1 / (1 + math.e)  # softmax(0, 1)[0]
    expected = [[0.5, 0.5], [s, 1 - s], [s, 1 - s], [1 - s, s], [1 - s, s]]
    np.testing.assert_allclose(beliefs, expected, rtol=1e-5)
    with pytest.raises(InvalidParameterError, match="window_sizes"):
        B.window_logits_fn((4, 2), (lambda p: p, lambda p: p))


def test_readout_belief_by_hand():
    # Predicted position (0.8, 0.8) among the corners (+-0.8, +-0.8), temperature 1:
    # squared distances (0, 1.6^2, 1.6^2 + 1.6^2, 1.6^2) = (0, 2.56, 5.12, 2.56).
    corners = INTENT_CORNERS * 0.8
    logits_fn = B.readout_logits_fn(lambda prefix, length: prefix[length - 1], corners)
    beliefs = B.prefix_beliefs(logits_fn, jnp.array([[0.8, 0.8]]), 4, 1.0)
    weights = np.exp(-np.array([0.0, 2.56, 5.12, 2.56]))
    np.testing.assert_allclose(beliefs[0], weights / weights.sum(), rtol=1e-5)


def test_fit_readout_temperature_recovers_the_bayes_temperature():
    # Positions drawn around the true corner with isotropic noise sigma: the exact
    # posterior is softmax(-|x - c_k|^2 / (2 sigma^2)), so the NLL-optimal
    # temperature is 2 sigma^2 = 2 * 0.5^2 = 0.5.
    rng = np.random.default_rng(0)
    corners = INTENT_CORNERS * 0.8
    labels = rng.integers(0, 4, 4000)
    positions = corners[labels] + 0.5 * rng.standard_normal((4000, 2))
    temperature = B.fit_readout_temperature(positions, corners, labels)
    assert abs(temperature - 0.5) < 0.05


def test_sample_strategy_and_soft_belief():
    belief = jnp.array([0.1, 0.0, 0.6, 0.3])
    draws = jax.jit(
        lambda key: jax.vmap(B.sample_strategy, in_axes=(0, None))(
            jax.random.split(key, 20000), belief
        )
    )(jax.random.key(2))
    frequencies = np.bincount(np.asarray(draws), minlength=4) / 20000
    np.testing.assert_allclose(frequencies, belief, atol=0.015)
    # alpha = 0.6, K = 4, strategy 2: 0.6 * onehot + 0.4 / 4 = (0.1, 0.1, 0.7, 0.1)
    np.testing.assert_allclose(
        B.soft_belief(jnp.array(2), 0.6, 4), [0.1, 0.1, 0.7, 0.1], rtol=1e-6
    )
    soft = jax.jit(
        lambda key: jax.vmap(lambda k: B.random_soft_belief(k, jnp.array(1), 4))(
            jax.random.split(key, 500)
        )
    )(jax.random.key(3))
    np.testing.assert_allclose(soft.sum(-1), 1.0, rtol=1e-6)
    # alpha ~ U[0, 1]: the true entry lies in [1/4, 1], the others are equal.
    assert float(soft[:, 1].min()) >= 0.25 and float(soft[:, 1].max()) <= 1.0
    np.testing.assert_allclose(soft[:, 0], soft[:, 3])
    assert abs(float(soft[:, 1].mean()) - (0.25 + 0.75 * 0.5)) < 0.05


@pytest.fixture(scope="module")
def policies():
    """Two-agent policies whose observation is 3 features then a K = 4 one-hot."""
    specs = {
        kind: PolicySpec(
            kind=kind, num_agents=2, obs_size=7, num_actions=5, hidden=(16,)
        )
        for kind in ("actor", "q")
    }
    return {
        kind: (spec, init_params(spec, jax.random.key(3)))
        for kind, spec in specs.items()
    }


@pytest.mark.parametrize("kind", ["actor", "q"])
def test_policy_log_probs_replaces_the_strategy_onehot(policies, kind):
    spec, params = policies[kind]
    log_probs_fn = B.policy_log_probs_fn(spec, params, 4, agent=1, q_temperature=0.5)
    obs = jnp.array([0.3, -0.2, 0.5, 1.0, 0.0, 0.0, 0.0])  # says strategy 0
    table = jax.jit(log_probs_fn)(obs)
    assert table.shape == (4, 5)
    np.testing.assert_allclose(jnp.exp(table).sum(-1), 1.0, rtol=1e-5)
    # The network run directly on agent 1's row of a team observation, once per k.
    obs_k = jnp.broadcast_to(obs, (4, 7)).at[:, 3:].set(jnp.eye(4))
    team_obs = jnp.stack([jnp.zeros((4, 7)), obs_k], 1)  # [k, agent, D]
    out = spec.module().apply(params, agent_inputs(spec, team_obs))
    logits = out[0][:, 1] / 0.5 if kind == "q" else out[:, 1]
    np.testing.assert_allclose(table, jax.nn.log_softmax(logits), rtol=1e-5, atol=1e-6)


def test_bayes_with_the_true_policy_finds_the_strategy():
    # A Q policy with hand-set random weights (N(0, 1), zero biases) under which
    # behaviour depends clearly on the strategy; actions sampled from its
    # softmax(Q) under strategy 2 for 30 steps: the exact posterior ends on
    # strategy 2 in nearly every episode.
    spec = PolicySpec(kind="q", num_agents=2, obs_size=7, num_actions=5, hidden=(16,))
    weights = np.random.default_rng(6)
    params = {
        "params": {
            "Trunk_0": {
                "Dense_0": {
                    "kernel": weights.standard_normal((9, 16)).astype(np.float32),
                    "bias": np.zeros(16, np.float32),
                }
            },
            "q_head": {
                "kernel": weights.standard_normal((16, 5)).astype(np.float32),
                "bias": np.zeros(5, np.float32),
            },
        }
    }
    log_probs_fn = B.policy_log_probs_fn(spec, params, 4, agent=1, q_temperature=1.0)
    rng = np.random.default_rng(5)
    features = rng.standard_normal((64, 30, 3))
    obs = np.concatenate([features, np.broadcast_to(np.eye(4)[2], (64, 30, 4))], -1)
    obs = jnp.asarray(obs, jnp.float32)
    probs = np.exp(np.asarray(jax.jit(jax.vmap(jax.vmap(log_probs_fn)))(obs)[:, :, 2]))
    cdf = np.cumsum(probs, -1)
    actions = np.minimum((cdf < rng.random((64, 30, 1))).sum(-1), 4)
    beliefs = jax.jit(
        jax.vmap(lambda o, a: B.bayes_beliefs(log_probs_fn, o, a, 4, 0.01))
    )(obs, jnp.asarray(actions))
    assert float(jnp.mean(jnp.argmax(beliefs[:, -1], -1) == 2)) >= 0.9
    # The belief in the truth grows on average from the prior 0.25.
    assert float(beliefs[:, -1, 2].mean()) > float(beliefs[:, 0, 2].mean()) > 0.25


def test_bad_arguments_are_named():
    with pytest.raises(InvalidParameterError, match="prior"):
        B.init_bayes_belief(3, jnp.ones(2) / 2)
    with pytest.raises(InvalidParameterError, match="trajectory"):
        B.prefix_beliefs(toy_logits, jnp.ones(3), 3)
    with pytest.raises(InvalidParameterError, match="num_strategies"):
        B.prefix_beliefs(toy_logits, jnp.ones((3, 2)), 4)
    spec = PolicySpec(kind="rnn_q", num_agents=1, obs_size=7, num_actions=5)
    with pytest.raises(InvalidParameterError, match="rnn_q"):
        B.policy_log_probs_fn(spec, {}, 4)
