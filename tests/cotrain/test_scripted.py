"""Scripted battalion reds as league members: the recorded moves are the script's,
discretised; the clone learns them; the pieces refuse what they cannot play; and
the fitting of an actor to a teacher (:func:`mopa.policy.fit_actor`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.cotrain import CotrainConfig
from mopa.cotrain.scripted import (
    check_scripted_game,
    clone_scripted,
    clone_scripted_red,
    scripted_episodes,
    scripted_player,
)
from mopa.envs import make
from mopa.envs.battalion_wrappers import BATTALION_ACTIONS, DiscreteActions
from mopa.errors import InvalidParameterError
from mopa.policy import PolicySpec, agent_inputs, fit_actor


@pytest.fixture(scope="module")
def game():
    return make("battalion", discrete=True, max_steps=60)


def _red_spec(env, hidden=(32,)) -> PolicySpec:
    return PolicySpec(
        kind="actor",
        num_agents=1,
        obs_size=env.observation_space(1).shape[0],
        num_actions=18,
        hidden=hidden,
    )


def test_the_two_team_battalion_plays_discrete_actions(game):
    env, params = game
    assert isinstance(env, DiscreteActions)
    assert env.team_names == ("blue", "red")
    assert [env.action_space(t).n for t in (0, 1)] == [18, 18]
    with pytest.raises(InvalidParameterError, match="discrete must be bool"):
        make("battalion", discrete="yes")


def test_hold_is_recorded_as_the_discrete_action_nearest_its_script(game):
    """``hold`` stands in cover and fires at Blue in range: every recorded move is
    one of the 18 rows, and most are the hold (no move) rows."""
    env, params = game
    obs, actions = scripted_episodes(env, params, "hold", jax.random.key(0), 3)
    assert obs.shape == (actions.shape[0], 1, env.observation_space(1).shape[0])
    assert actions.shape[1] == 1 and 0 < actions.shape[0] <= 3 * 60
    assert actions.min() >= 0 and actions.max() < len(BATTALION_ACTIONS)
    moves = BATTALION_ACTIONS[actions[:, 0], 0]
    assert np.mean(moves == 0.0) > 0.5


@pytest.mark.slow
def test_a_clone_learns_the_script(game):
    env, params = game
    spec = _red_spec(env)
    weights, facts = clone_scripted_red(
        env, params, "hold", spec, jax.random.key(1), episodes=8, num_updates=400
    )
    assert facts["samples"] > 100
    assert facts["agreement"] > 0.8  # far above 1 / 18
    logits = spec.module().apply(weights, jnp.zeros((1, spec.input_size)))
    assert logits.shape == (1, 18)


def test_scripted_members_are_refused_where_they_cannot_play(game):
    env, params = game
    tag, _ = make("tag_intent")
    with pytest.raises(InvalidParameterError, match="discrete two-team battalion"):
        check_scripted_game(tag, "tag_intent", "prey", "rush")
    with pytest.raises(InvalidParameterError, match="plays the battalion's team"):
        check_scripted_game(env, "battalion", "blue", "rush")
    with pytest.raises(InvalidParameterError, match="pursuit game of one prey"):
        check_scripted_game(env, "battalion", "red", "evader")
    with pytest.raises(InvalidParameterError, match="team 'prey'"):
        check_scripted_game(tag, "tag_intent", "predator", "wanderer")
    with pytest.raises(InvalidParameterError, match="scripted red type must be"):
        CotrainConfig(family=(("x", (("scripted", "ambush"),)),), held_out_seeds=())
    with pytest.raises(InvalidParameterError, match="takes no other field"):
        CotrainConfig(
            family=(("x", (("scripted", "rush"), ("ent_coef", 0.1))),),
            held_out_seeds=(),
        )
    with pytest.raises(InvalidParameterError, match="not family entries"):
        CotrainConfig(held_out_family=("nobody",))
    with pytest.raises(InvalidParameterError, match="every family seed is held"):
        CotrainConfig(family=(("a", ()),), held_out_seeds=(), held_out_family=("a",))


@pytest.mark.slow
def test_a_clone_learns_a_scripted_prey():
    """The evader runs from the nearest predator by a fixed rule of its
    observation: its clone plays its move on most recorded steps."""
    env, params = make("tag_intent")
    spec = PolicySpec(
        kind="actor",
        num_agents=1,
        obs_size=env.prey_obs_size,
        num_actions=5,
        hidden=(64,),
    )
    weights, facts = clone_scripted(
        env, params, "evader", spec, jax.random.key(0), episodes=64, num_updates=800
    )
    assert facts["samples"] == 64 * int(params.max_steps)
    assert facts["agreement"] > 0.7, facts
    # On fresh starting states, which the recorded episodes visit once each, the
    # clone still plays the script's move far above chance (1 in 5; 0.58 here).
    player = scripted_player(env, "evader")
    obs, state = jax.vmap(env.reset, (0, None))(
        jax.random.split(jax.random.key(9), 300), params
    )
    logits = spec.module().apply(weights, agent_inputs(spec, obs[1]))  # [300, 1, 5]
    moves, _ = jax.vmap(
        lambda s, o: player.act({}, jax.random.key(1), s, o, jnp.zeros((1, 0)), None)
    )(state, obs[1])
    assert np.mean(np.argmax(np.asarray(logits), -1) == np.asarray(moves)) > 0.5


def test_fit_actor_learns_a_teacher_of_two_agents():
    """Agent 0's teacher plays the sign of its first input, agent 1's the
    opposite: the fitted actor (agent one-hots appended) plays both."""
    spec = PolicySpec(
        kind="actor", num_agents=2, obs_size=3, num_actions=2, hidden=(16,)
    )
    obs = np.asarray(jax.random.normal(jax.random.key(0), (512, 2, 3)))
    first = (obs[:, :, 0] > 0).astype(np.int32)
    actions = np.stack([first[:, 0], 1 - first[:, 1]], 1)
    weights, losses = fit_actor(
        spec, obs, actions, jax.random.key(1), num_updates=600, batch_size=64, lr=1e-2
    )
    assert losses[-1] < 0.5 * losses[0]
    logits = spec.module().apply(weights, agent_inputs(spec, jnp.asarray(obs)))
    assert np.mean(np.argmax(np.asarray(logits), -1) == actions) > 0.95


def test_fit_actor_names_what_does_not_fit():
    spec = PolicySpec(kind="actor", num_agents=1, obs_size=3, num_actions=2)
    key = jax.random.key(0)
    sizes = dict(num_updates=1, batch_size=1, lr=1e-3)
    with pytest.raises(InvalidParameterError, match=r"obs must be \[N, 1, 3\]"):
        fit_actor(spec, np.zeros((4, 3)), np.zeros((4, 1)), key, **sizes)
    with pytest.raises(InvalidParameterError, match="fits an actor spec"):
        q = PolicySpec(kind="q", num_agents=1, obs_size=3, num_actions=2)
        fit_actor(q, np.zeros((4, 1, 3)), np.zeros((4, 1)), key, **sizes)
    with pytest.raises(InvalidParameterError, match="at least one example"):
        fit_actor(spec, np.zeros((0, 1, 3)), np.zeros((0, 1)), key, **sizes)
    with pytest.raises(InvalidParameterError, match="batch_size must be >= 1"):
        fit_actor(
            spec,
            np.zeros((4, 1, 3)),
            np.zeros((4, 1)),
            key,
            num_updates=1,
            batch_size=0,
            lr=1e-3,
        )
