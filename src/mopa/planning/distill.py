"""Distilling a planner into a policy by DAgger (dataset aggregation).

A planner (a lookahead or a tree search, :mod:`mopa.planning`) is too slow to be
trained against, and imitating its moves on its own states loses much of its play:
a student that agrees with the planner on most of the planner's states still drifts
into states the planner never visits, where it has learned nothing (compounding
error; Ross, Gordon and Bagnell, "A Reduction of Imitation Learning and Structured
Prediction to No-Regret Online Learning", AISTATS 2011). DAgger rolls out the
*student*, asks the planner (the teacher) what it would do in every state the
student reaches, adds those labels to everything gathered so far and refits:

* round 0: the teacher plays (``beta = 1``); its episodes give the first labels
  and the teacher's own score, the target;
* round ``r >= 1``: the student of the previous fit plays (``beta = 0``), the
  teacher labels its states; the round's episodes also score that student;
  stop once it keeps ``keep`` of the teacher's score, else aggregate and refit.

The student is an actor network (:func:`mopa.policy.fit_actor`, cross-entropy on
the teacher's moves), refitted from its last weights each round. Every round plays
fresh episodes (its own keys): a student scored on the episodes whose states it
was fitted to can replay the teacher's moves there and flatter itself, so each
round's score is of a student that has never seen those episodes' states, beside
the teacher's score on episodes of the same draw.

:func:`relabel_episodes` plays one round (every step: the teacher's move as the
label, the student's or, with probability ``teacher_share``, the teacher's move
played); :func:`dagger` runs the rounds.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checks import check_fields
from mopa.envs.base import Env, episode_sum_keys
from mopa.errors import InvalidParameterError
from mopa.eval.evaluate import episode_horizon
from mopa.players import Player, PolicyPlayer, initial_player_carry
from mopa.policy import PolicySpec, agent_inputs, fit_actor


@dataclasses.dataclass(frozen=True, kw_only=True)
class DaggerConfig:
    """Rounds, episodes and fits of :func:`dagger`."""

    max_rounds: int = 4
    """Student rounds at most after the teacher's round 0."""
    keep: float = 0.9
    """Stop once the student's score is at least this share of the teacher's."""
    episodes: int = 4
    """Episodes per opponent member per round."""
    num_updates: int = 1500
    """Adam updates of each (re)fit."""
    batch_size: int = 256
    """Examples per update."""
    lr: float = 1e-3
    """Adam's learning rate."""

    def __post_init__(self):
        check_fields(self)
        for name in ("max_rounds", "episodes", "num_updates", "batch_size"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if not 0.0 < self.keep <= 1.0:
            raise InvalidParameterError(f"keep must be in (0, 1], got {self.keep}")
        if not self.lr > 0:
            raise InvalidParameterError(f"lr must be > 0, got {self.lr}")


class Relabelled(NamedTuple):
    """One round's episodes: the team's states and the teacher's moves in them."""

    obs: np.ndarray  # [C, T, A, D] the team's observations
    labels: np.ndarray  # [C, T, A] int32 the teacher's moves
    valid: np.ndarray  # [C, T] bool: the step was played (before the episode ended)
    score: np.ndarray  # [C] the episode's total of the scoring key


def relabel_episodes(
    env: Env,
    params: Any,
    team: int,
    student: Player,
    student_params: Any,
    teacher: Player,
    teacher_params: Any,
    opponent: Player,
    opponent_params: Any,
    key: jax.Array,
    *,
    episodes: int,
    teacher_share: float,
    score_key: str,
    horizon: int | None = None,
) -> Relabelled:
    """Episodes of ``team`` played by a mixture of the student and the teacher,
    every state labelled with the teacher's move.

    Each step the teacher and the student both act on the state (each keeps its
    own carry), the label is the teacher's move, and the team plays the teacher's
    move with probability ``teacher_share`` (per step), else the student's.

    Args:
        env, params: a two-team game; ``team`` the student's team.
        student, teacher: players of ``team`` (one seed: no seed axis on their
            params).
        opponent: the other team's player; ``opponent_params`` its members'
            params stacked ``[P, ...]``: chain ``c`` plays member ``c mod P``,
            ``episodes`` chains per member.
        key: the round's key; chain ``c`` plays ``split(key, C)[c]``.
        teacher_share: ``beta`` in ``[0, 1]``.
        score_key: the game's per-episode total that scores the team (e.g.
            ``captures``).
        horizon: steps per episode (default ``params.max_steps``).

    Returns:
        :class:`Relabelled` with ``C = P x episodes`` chains.
    """
    if env.num_teams != 2 or team not in (0, 1):
        raise InvalidParameterError(
            f"relabel_episodes needs a two-team game and team 0 or 1, got "
            f"{env.num_teams} teams and team {team}"
        )
    totals = episode_sum_keys(env, params)
    if score_key not in totals:
        raise InvalidParameterError(
            f"score_key must be one of {env.name}'s episode totals {totals}, got "
            f"{score_key!r}"
        )
    if not 0.0 <= teacher_share <= 1.0:
        raise InvalidParameterError(
            f"teacher_share must be in [0, 1], got {teacher_share}"
        )
    members = int(jax.tree.leaves(opponent_params)[0].shape[0])
    chains = members * int(episodes)
    member = jnp.arange(chains) % members
    record = _relabel_chains(
        env,
        (student, teacher, opponent),
        team,
        episode_horizon(params, horizon),
        score_key,
        params,
        (student_params, teacher_params, opponent_params),
        member,
        jax.random.split(key, chains),
        jnp.float32(teacher_share),
    )
    return Relabelled(*(np.asarray(x) for x in jax.device_get(record)))


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3, 4))
def _relabel_chains(
    env, players, team, horizon, score_key, params, player_params, member, keys, share
):
    student_params, teacher_params, opponent_params = player_params

    def one(member, key):
        chosen = jax.tree.map(lambda x: x[member], opponent_params)
        return _relabel_episode(
            env,
            players,
            team,
            horizon,
            score_key,
            params,
            (student_params, teacher_params, chosen),
            key,
            share,
        )

    return jax.vmap(one)(member, keys)


def _relabel_episode(
    env, players, team, horizon, score_key, params, player_params, key, share
):
    """One episode (see :func:`relabel_episodes`): ``(obs [T, A, D], labels [T,
    A], valid [T], score [])``."""
    student, teacher, opponent = players
    p_student, p_teacher, p_opponent = player_params
    key_reset, key_run = jax.random.split(key)
    obs, state = env.reset(key_reset, params)
    carries = tuple(initial_player_carry(p) for p in players)

    def step(carry, key):
        obs, state, (c_student, c_teacher, c_opponent), alive, first, score = carry
        key_env, key_student, key_teacher, key_opponent, key_mix = jax.random.split(
            key, 5
        )
        mine, theirs = obs[team], obs[1 - team]
        reset = jnp.full((student.num_agents,), first)
        label, c_teacher = teacher.act(
            p_teacher, key_teacher, state, mine, c_teacher, reset
        )
        own, c_student = student.act(
            p_student, key_student, state, mine, c_student, reset
        )
        other, c_opponent = opponent.act(
            p_opponent,
            key_opponent,
            state,
            theirs,
            c_opponent,
            jnp.full((opponent.num_agents,), first),
        )
        played = jnp.where(jax.random.bernoulli(key_mix, share), label, own)
        actions = (played, other) if team == 0 else (other, played)
        obs_next, state, _, terminated, truncated, info = env.step(
            key_env, state, actions, params
        )
        score = score + alive * jnp.asarray(info[score_key], jnp.float32)
        out = (mine, label.astype(jnp.int32), alive)
        alive = alive & ~(terminated | truncated)
        carries = (c_student, c_teacher, c_opponent)
        return (obs_next, state, carries, alive, jnp.zeros((), bool), score), out

    init = (obs, state, carries, jnp.ones((), bool), jnp.ones((), bool), 0.0)
    (*_, score), (seen, labels, valid) = jax.lax.scan(
        step, init, jax.random.split(key_run, horizon)
    )
    return seen, labels, valid, jnp.asarray(score, jnp.float32)


class DaggerRound(NamedTuple):
    """What one round measured."""

    round: int
    teacher_share: float
    samples: int
    """Labelled steps gathered so far (every agent's, all rounds)."""
    score: float
    """Mean score of the round's episodes (round 0: the teacher's; then the
    student's of the previous fit, on episodes it was not fitted to)."""
    agreement: float
    """Share of the aggregated labels the fitted student's greedy move matches
    (after this round's fit; NaN for the round that stopped)."""
    loss: float
    """The fit's last cross-entropy (NaN for the round that stopped)."""


def dagger(
    env: Env,
    params: Any,
    team: int,
    student_spec: PolicySpec,
    student_params: Any,
    teacher: Player,
    teacher_params: Any,
    opponent: Player,
    opponent_params: Any,
    key: jax.Array,
    config: DaggerConfig,
    *,
    score_key: str,
    horizon: int | None = None,
) -> tuple[Any, list[DaggerRound]]:
    """The teacher distilled into an actor of ``student_spec`` by DAgger (see the
    module docstring).

    Args:
        student_params: the actor's weights to start from (a warm start, e.g. the
            policy the teacher rolls out; one seed).
        teacher, teacher_params: the planner and its params (one seed).
        opponent, opponent_params: the other team's player and its members'
            params ``[P, ...]`` (see :func:`relabel_episodes`).
        key: round ``r`` plays the episodes of ``fold_in(split(key)[0], r)``.
        score_key: the game's total that scores the team.

    Returns:
        ``(params, rounds)``: the student that met ``keep`` (else the one with the
        best score among those played) and every round's :class:`DaggerRound`.
    """
    if student_spec.kind != "actor":
        raise InvalidParameterError(
            f"student_spec must be an actor spec, got {student_spec.kind!r}"
        )
    key_play, key_fit = jax.random.split(key)
    student = PolicyPlayer(student_spec, greedy=True)

    def play(weights, share, r):
        return relabel_episodes(
            env,
            params,
            team,
            student,
            weights,
            teacher,
            teacher_params,
            opponent,
            opponent_params,
            jax.random.fold_in(key_play, r),
            episodes=config.episodes,
            teacher_share=share,
            score_key=score_key,
            horizon=horizon,
        )

    obs, labels, rounds = [], [], []
    target, weights = None, student_params
    best = (-np.inf, student_params)
    for r in range(config.max_rounds + 1):
        share = 1.0 if r == 0 else 0.0
        played = play(weights, share, r)
        score = float(played.score.mean())
        if r == 0:
            target = score
        elif score > best[0]:
            best = (score, weights)
        steps = sum(len(o) for o in obs) + int(played.valid.sum())
        samples = steps * student_spec.num_agents
        if r > 0 and score >= config.keep * target:
            rounds.append(DaggerRound(r, share, samples, score, np.nan, np.nan))
            return weights, rounds
        obs.append(played.obs[played.valid])
        labels.append(played.labels[played.valid])
        if r == config.max_rounds:
            rounds.append(DaggerRound(r, share, samples, score, np.nan, np.nan))
            break
        data_obs, data_labels = np.concatenate(obs), np.concatenate(labels)
        weights, losses = fit_actor(
            student_spec,
            data_obs,
            data_labels,
            jax.random.fold_in(key_fit, r),
            num_updates=config.num_updates,
            batch_size=config.batch_size,
            lr=config.lr,
            params=weights,
        )
        logits = student_spec.module().apply(
            weights, agent_inputs(student_spec, jnp.asarray(data_obs))
        )
        agreement = float(np.mean(np.argmax(np.asarray(logits), -1) == data_labels))
        rounds.append(
            DaggerRound(r, share, samples, score, agreement, float(losses[-1]))
        )
    return best[1], rounds
