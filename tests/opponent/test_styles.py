"""Styles found without labels: episode features, VAE + k-means, one clone per
style, and the online belief over them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.opponent.bc import BCConfig
from mopa.opponent.data import concatenate, generate
from mopa.opponent.population import (
    init_population_belief,
    member_belief,
    observe_opponent,
)
from mopa.opponent.styles import (
    StyleConfig,
    discover_styles,
    episode_features,
    fit_style_population,
    style_purity,
)
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, init_params

PREY = PolicySpec(kind="actor", num_agents=1, obs_size=14, num_actions=5, hidden=(8,))
PREDATORS = PolicySpec(kind="random", num_agents=3, obs_size=16, num_actions=5)
CONFIG = StyleConfig(
    vae_updates=300,
    clone=BCConfig(num_actions=5, hidden=(16,), num_epochs=40, batch_size=64, lr=3e-3),
)


def _leaning_prey(action: int):
    """An actor that takes ``action`` about 70% of the time, else another."""
    params = jax.tree.map(jnp.zeros_like, init_params(PREY, jax.random.key(0)))
    params["params"]["Dense_0"]["bias"] = jnp.zeros((5,)).at[action].set(2.3)
    return params


@pytest.fixture(scope="module")
def two_prey():
    """12 episodes of each of two prey (leaning to actions 1 and 3), pooled, with
    their true identities per episode."""
    env, params = make("tag")
    datasets = [
        generate(
            env,
            params,
            (PolicyPlayer(PREDATORS), PolicyPlayer(PREY, greedy=False)),
            ({}, _leaning_prey(action)),
            jax.random.key(i),
            num_chains=12,
        )
        for i, action in enumerate((1, 3))
    ]
    return concatenate(datasets, policy_names=["left", "right"])


def test_features_are_per_episode_mean_obs_and_action_frequencies(two_prey):
    features, where = episode_features(two_prey, "prey", 5)
    assert features.shape == (24, 14 + 5)
    np.testing.assert_allclose(features[:, 14:].sum(1), 1.0, rtol=1e-6)
    obs = two_prey["obs.prey"][where.chain[0], :, 0]
    np.testing.assert_allclose(features[0, :14], obs.mean(0), rtol=1e-5, atol=1e-6)
    # The two prey lean to their own action.
    assert features[:12, 14 + 1].mean() > 0.5 > features[12:, 14 + 1].mean()
    with pytest.raises(InvalidParameterError, match=r"actions must be in \[0, 3\)"):
        episode_features(two_prey, "prey", 3)


def test_two_prey_give_two_styles_and_the_belief_finds_each(two_prey):
    truth = np.asarray(two_prey["policy_id"])  # one episode per chain
    population, clones, styles = fit_style_population(
        jax.random.key(0), two_prey, "prey", CONFIG
    )
    assert styles.num_styles == 2  # the silhouette's choice among 2..6
    assert set(styles.silhouette) == {2, 3, 4, 5, 6}
    assert style_purity(styles.labels, truth) == {"ari": 1.0, "purity": 1.0}
    assert jax.tree.leaves(clones)[0].shape[0] == 3  # two styles and the pooled
    # Ten moves of the prey leaning right: the belief goes to its style.
    right = int(styles.labels[truth == 1][0])
    state = init_population_belief(1, 3)
    obs = jnp.asarray(two_prey["obs.prey"][12, :10])  # [10, 1, 14]
    actions = jnp.asarray(two_prey["actions.prey"][12, :10])
    for t in range(10):
        state = observe_opponent(population, clones, state, obs[t], actions[t])
    assert int(jnp.argmax(member_belief(state))) == right


def test_a_given_count_is_used_and_bad_inputs_are_named(two_prey):
    features, _ = episode_features(two_prey, "prey", 5)
    config = StyleConfig(num_styles=3, vae_updates=50)
    styles = discover_styles(jax.random.key(1), features, config)
    assert styles.num_styles == 3 and set(styles.labels.tolist()) == {0, 1, 2}
    with pytest.raises(InvalidParameterError, match="too few"):
        discover_styles(jax.random.key(1), features[:3], config)
    with pytest.raises(InvalidParameterError, match="finite"):
        discover_styles(jax.random.key(1), features * np.nan, config)
    with pytest.raises(InvalidParameterError, match="max_styles"):
        StyleConfig(max_styles=1)
    with pytest.raises(InvalidParameterError, match="one shape"):
        style_purity(np.zeros(3), np.zeros(4))
