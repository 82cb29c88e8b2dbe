"""DAgger: a student actor learns a teacher's moves on the states it reaches
itself, round by round, until it keeps the teacher's score."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.pursuit import ACTION_DIRECTIONS
from mopa.errors import InvalidParameterError
from mopa.planning.distill import DaggerConfig, dagger, relabel_episodes
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, init_params

PREY_REL = slice(12, 14)
"""Where ``tag``'s predator observation holds the prey's relative position."""


@dataclasses.dataclass(frozen=True)
class Chaser:
    """A teacher: every predator moves towards the prey (no params)."""

    @property
    def num_agents(self) -> int:
        return 3

    @property
    def carry_size(self) -> int:
        return 0

    def act(self, params, key, state, obs, carry, reset):
        del params, key, state, reset
        return chase(obs), carry


def chase(obs):
    """``[..., A]`` the chaser's moves for predator observations ``[..., A, 16]``."""
    scores = obs[..., PREY_REL] @ jnp.asarray(ACTION_DIRECTIONS).T
    return jnp.argmax(scores, -1).astype(jnp.int32)


PREY = PolicySpec(kind="actor", num_agents=1, obs_size=14, num_actions=5, hidden=(4,))
STUDENT = PolicySpec(
    kind="actor", num_agents=3, obs_size=16, num_actions=5, hidden=(32,)
)


def _prey_members(actions):
    """Prey actors that each take one fixed action, stacked ``[P, ...]``."""

    def one(action):
        params = jax.tree.map(jnp.zeros_like, init_params(PREY, jax.random.key(0)))
        params["params"]["Dense_0"]["bias"] = jnp.zeros((5,)).at[action].set(30.0)
        return params

    return jax.tree.map(lambda *x: jnp.stack(x), *[one(a) for a in actions])


@pytest.fixture(scope="module")
def game():
    return make("tag")


def _relabel(game, share, student_params, episodes=3, key=None):
    env, params = game
    return relabel_episodes(
        env,
        params,
        0,
        PolicyPlayer(STUDENT),
        student_params,
        Chaser(),
        {},
        PolicyPlayer(PREY),
        _prey_members([0, 0]),
        jax.random.key(4) if key is None else key,
        episodes=episodes,
        teacher_share=share,
        score_key="captures",
    )


def test_every_state_is_labelled_with_the_teachers_move(game):
    still = init_params(STUDENT, jax.random.key(1))
    played = _relabel(game, 1.0, still)
    chains, horizon = 2 * 3, int(game[1].max_steps)
    assert played.obs.shape == (chains, horizon, 3, 16)
    assert played.labels.shape == (chains, horizon, 3)
    assert played.valid.all()  # tag runs its whole horizon
    np.testing.assert_array_equal(played.labels, chase(jnp.asarray(played.obs)))
    # The student plays (share 0): other states, still the teacher's labels.
    own = _relabel(game, 0.0, still)
    np.testing.assert_array_equal(own.labels, chase(jnp.asarray(own.obs)))
    assert not np.allclose(own.obs[:, 1:], played.obs[:, 1:])
    # The same keys start every chain alike whoever plays.
    np.testing.assert_array_equal(own.obs[:, 0], played.obs[:, 0])
    assert played.score.mean() > own.score.mean()  # the chaser catches more


def test_dagger_brings_the_student_to_the_teachers_score(game):
    env, params = game
    config = DaggerConfig(max_rounds=4, keep=0.9, episodes=8, num_updates=400)
    student, rounds = dagger(
        env,
        params,
        0,
        STUDENT,
        init_params(STUDENT, jax.random.key(2)),
        Chaser(),
        {},
        PolicyPlayer(PREY),
        _prey_members([0, 0]),
        jax.random.key(3),
        config,
        score_key="captures",
    )
    target = rounds[0].score
    assert rounds[0].teacher_share == 1.0 and target > 1.0
    assert [r.round for r in rounds] == list(range(len(rounds)))
    assert all(r.teacher_share == 0.0 for r in rounds[1:])
    samples = [r.samples for r in rounds]
    assert samples == sorted(samples) and samples[0] == 16 * 25 * 3
    last = rounds[-1]
    assert last.score >= config.keep * target, rounds
    assert np.isnan(last.agreement)  # it stopped: no fit after it
    assert rounds[-2].agreement > 0.8
    # The returned student is the one that met the target: on its round's keys it
    # plays that score. Every round plays fresh episodes: the students' rounds
    # start from other states than the teacher's.
    key_play, _ = jax.random.split(jax.random.key(3))
    again = _relabel(
        game, 0.0, student, episodes=8, key=jax.random.fold_in(key_play, last.round)
    )
    np.testing.assert_allclose(again.score.mean(), last.score)
    first = _relabel(
        game, 0.0, student, episodes=8, key=jax.random.fold_in(key_play, 0)
    )
    assert not np.allclose(first.obs[:, 0], again.obs[:, 0])


def test_bad_rounds_are_named(game):
    env, params = game
    with pytest.raises(InvalidParameterError, match="keep must be in"):
        DaggerConfig(keep=1.5)
    with pytest.raises(InvalidParameterError, match="max_rounds must be >= 1"):
        DaggerConfig(max_rounds=0)
    still = init_params(STUDENT, jax.random.key(1))
    with pytest.raises(InvalidParameterError, match="teacher_share must be"):
        _relabel(game, 2.0, still)
    with pytest.raises(InvalidParameterError, match="score_key must be one of"):
        relabel_episodes(
            env, params, 0, PolicyPlayer(STUDENT), still, Chaser(), {},
            PolicyPlayer(PREY), _prey_members([1]), jax.random.key(0),
            episodes=1, teacher_share=1.0, score_key="goals",
        )  # fmt: skip
