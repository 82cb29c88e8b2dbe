"""A population opponent model and the joint online belief over (intent, style).

Fitted to the opponents of one family (the fitting set: ``M`` opponent policies of
one game, e.g. prey trained under different conditions), and used against an
opponent that may be one of them, a new one of the family, or outside it. The
pieces, all game-agnostic (observations are vectors, actions discrete):

**The model: a clone library.** Member ``m`` is a behaviour clone of fitting-set
opponent ``m`` (:mod:`mopa.opponent.bc`'s network and trainer), conditioned on the
opponent's intent ``g`` as ``z = onehot(g)``::

    p(a | o, g, m) = softmax(clone_m([o, onehot(g)]))_a

``K = 1`` is an intent-free family. The ``M`` clones share one architecture; their
weights are stacked on a leading ``[M]`` axis, so :func:`population_logits` gives
every ``(intent, member)`` in one vmapped call, ``[..., K, M, A]``.

**The family's average member** (``pooled_member``): one more clone, last in the
library, fitted on every member's examples pooled. A member clone describes its
own opponent closely and a new opponent of the same family poorly (each policy
has its own habits); the pooled clone describes what the family's policies share,
so it predicts a new one's moves better than any single member does and gives the
belief a hypothesis that fits an unseen member of the family.
:func:`fit_population` trains them from one :class:`MemberData` per opponent
(:func:`member_data` reads it from a :class:`~mopa.opponent.data.TrajectoryDataset`).

**The belief: Bayes over K x M, plus "none fits".** The hypotheses are every
``(g, m)`` and one more, ``F``: the opponent is outside the family and plays an
action model the family does not describe, taken to be the uniform one,
``U(a) = 1 / A`` per agent (the broad fallback). With the floored likelihood of
:func:`mopa.opponent.beliefs.floored_log_likelihood`,
``p_eps = (1 - eps) p + eps / A``, and the predictive of the family at step ``t``,
``q_t(a) = sum_{g, m} b_{t-1}(g, m) p_eps(a | o_t, g, m)``, one step is exact
Bayes::

    b_t(g, m)          = b_{t-1}(g, m) p_eps(a_t | o_t, g, m) / q_t(a_t)
    surprise_t         = log U(a_t) - log q_t(a_t)
    log_odds_F(t)      = log_odds_F(t - 1) + surprise_t
    none_fits(t)       = sigmoid(log_odds_F(t))

``b`` is the posterior *given* the family; ``log_odds_F`` starts at
``logit(fallback_prior)`` and accumulates the log-likelihood ratio of ``F`` against
the family's predictive (a sequential likelihood-ratio test). The per-step
``surprise_t`` is the evidence that step gives for "none fits". For one opponent
agent it reads as observed against expected::

    surprise_t = [-log q_t(a_t) - H(q_t)] - KL(q_t || U)

the move's surprisal beyond the predictive's own expected surprisal (its entropy),
less how much the predictive claims to know (its divergence from uniform). On
moves drawn from the family its expectation is ``-KL(q_t || U) <= 0``; on moves
the family thinks unlikely it is positive.

The belief a user reads, and a planner samples, mixes the posterior with the
fallback by the none-fits probability ``w``::

    joint_belief = w * prior(g) prior(m) + (1 - w) * b(g, m)

so a move sequence no member explains (``w -> 1``) gives the prior (flat, by
default) belief over members, not a confident wrong one; a planner then imagines
opponents drawn from the whole population (the conservative fallback).

*Defaults and the threshold's meaning.* Under the family the likelihood ratio
``U(a_{1:t}) / q(a_{1:t})`` is a non-negative martingale of mean 1, so by Ville's
inequality the chance that it *ever* reaches ``c`` is at most ``1 / c``, however
long the match. :func:`none_fits` flags when ``none_fits >= threshold`` (0.5: "none
fits" is the more probable hypothesis), which needs a ratio of at least
``c = odds(threshold) / odds(fallback_prior)``: with the default
``fallback_prior = 0.01``, ``c = 99``, so an opponent the (floored) model describes
raises the flag with probability at most ``1 / 99``, about 1%, over a whole match,
while ``log 99 = 4.6`` nats of evidence raise it (about 2 moves to which the
family gives a tenth of the uniform probability). The default floor
``epsilon = 0.05`` (as the intent experiment's ``bayes_epsilon``) keeps one odd
move of an imperfect clone from ruling a member out for good and bounds a step's
evidence for ``F`` by ``log(1 / epsilon) = 3`` nats.

The bound is for an opponent drawn from the family as the prior weighs it; for one
given member ``m`` it is ``1 / (c prior(m))`` (the mixture's likelihood is at
least ``prior(m)`` times the member's).

A diagnostic beside the test: ``log_likelihood`` (``sum_t log q_t(a_t)``, observed)
and ``expected_log_likelihood`` (``-sum_t sum_{g, m} b_{t-1}(g, m) H_t(g, m)``, what
the members expect of their own moves, ``H_t`` the entropy of the floored member
policy summed over agents). Their difference, :func:`excess_surprisal`, is in
expectation, for an opponent of the family, the information the moves gave about
what the belief infers (at most ``log(K M)`` for one episode, plus ``log K`` for
each further episode of a match), and grows with every step for one outside it.

**The planner's prior.** The flag answers "is this opponent outside the
family?" and should rarely say so of a member: hence a small ``fallback_prior``.
A planner asks something else: which model to imagine the opponent with while
the question is open. Imagining a member the opponent is not is the costly
error (the rollouts predict moves it will not make), and the fallback is the
conservative model, so a planner may act on the same evidence under a prior of
its own, ``planning_prior``::

    logit(w_plan(t)) = log_odds_F(t) - logit(fallback_prior) + logit(planning_prior)

(:func:`planner_belief`). :func:`recognition_prior` gives the symmetric rule,
``planning_prior = 1 - fallback_prior``: the planner imagines the family
(``w_plan < 0.5``) only once the family's likelihood ratio over ``F`` reaches
the ``c`` that the flag needs for the opposite call (99 by default), so by the
same Ville bound an opponent playing ``F`` is taken for a member by the planner
with probability at most ``1 / c``; until the opponent is recognised, the
planner plays against the conservative fallback (as GSCU plays its conservative
policy). The belief, its flag and what a user reads are unchanged.

**Intents found without labels** (:func:`infer_intents`). An opponent's intent
is private: the modelling side sees its moves, never its intent. Each episode's
intent is then a latent variable, found by hard expectation-maximisation from a
first guess that names the intents (a rule on public behaviour, such as the corner
the opponent heads for): fit the clones on the current labels, relabel each episode
by the intent under which its own member's clone gives its moves the highest
likelihood, ``argmax_g sum_t log p(a_t | o_t, g, m)``, and repeat. The first
guess anchors each intent's meaning (EM alone would find the intents up to a
permutation per member).

**Across episodes** (a match: one opponent, intents redrawn each episode):
:func:`reset_intent` keeps the style marginal ``sum_g b(g, m)`` and the none-fits
odds and resets the intent marginal to its prior, ``b(g, m) = prior(g) sum_g'
b(g', m)``; exact Bayes when the intents of successive episodes are independent.

Typical use, on ``tag_intent``'s prey (who see their intent, a 4-entry one-hot at
the end of their observation; one dataset per fitting-set prey in ``fits``)::

    config = PopulationConfig(
        clone=BCConfig(num_actions=5), num_intents=4, drop_obs_tail=4
    )
    clones, _ = fit_population(key, config, [member_data(d, "prey") for d in fits])
    state = init_population_belief(config.num_intents, num_members(clones))
    # the planner (mopa.planning), given the belief at every decision:
    model = PopulationOpponentModel(config, team=PREY)
    opponent_params = PopulationModelParams(clones, joint_belief(state))
    # after every step, inside the game's lax.scan:
    state = observe_opponent(config, clones, state, obs[PREY], actions[PREY])
    # between episodes of a match:
    state = reset_intent(state)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.core.checkpoint import read_msgpack, write_msgpack
from mopa.core.checks import (
    check_count,
    check_fields,
    check_fraction,
    check_probability,
)
from mopa.errors import InvalidParameterError
from mopa.opponent.bc import BCConfig, BCMetrics, bc_logits, make_train
from mopa.opponent.beliefs import beliefs_acted_on, floored_log_likelihood
from mopa.opponent.calibration import accuracy_by_step, ece_by_step
from mopa.opponent.data import TrajectoryDataset

DEFAULT_EPSILON = 0.05
"""Default likelihood floor: each member is mixed with a uniform policy at 5%."""
DEFAULT_FALLBACK_PRIOR = 0.01
"""Default prior probability that the opponent is outside the family (a false
"none fits" at most 1/99 of the time under the model; see the module docstring)."""
NONE_FITS_THRESHOLD = 0.5
"""Default flag threshold on the none-fits probability (the more probable)."""


# -- the model ------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class PopulationConfig:
    """A library of intent-conditioned behaviour clones, one per fitted opponent."""

    clone: BCConfig
    """Network and training of every member's clone (shared by all members)."""
    num_intents: int = 1
    """``K``: intents the clones are conditioned on (1: an intent-free family)."""
    drop_obs_tail: int = 0
    """Trailing observation entries the clones never read (the ``tag_intent``
    prey's intent one-hot: the model must not read the answer off its input)."""
    pooled_member: bool = False
    """Add the family's average member: one more clone, last in the library,
    fitted on every member's examples pooled (``M`` opponents give ``M + 1``
    members)."""

    def __post_init__(self):
        check_fields(self)  # also builds ``clone`` from a mapping (JSON)
        check_count("num_intents", self.num_intents)
        check_count("drop_obs_tail", self.drop_obs_tail, low=0)

    @property
    def num_actions(self) -> int:
        """``A``: the opponent's discrete actions."""
        return self.clone.num_actions


class MemberData(NamedTuple):
    """One fitting-set opponent's examples."""

    obs: Any  # [N, D] float: the opponent's observations
    actions: Any  # [N] int: its actions
    intents: Any  # [N] int in [0, K): its intent at each example


def member_data(
    dataset: TrajectoryDataset, team: str, *, intent_field: str | None = "intent"
) -> MemberData:
    """Every valid step of ``team``'s agents in ``dataset`` as one member's examples.

    Agents of a team are pooled (one clone plays each of them); steps past a
    chain's last whole episode (``valid`` false) are left out.

    Args:
        dataset: trajectories of one opponent (one fitting-set policy).
        team: the opponent team's name (``obs.<team>`` ``[C, S, A_t, D]`` and
            ``actions.<team>`` ``[C, S, A_t]``).
        intent_field: the per-episode array ``[C, E]`` holding each episode's
            intent; ``None`` for an intent-free family (every intent 0).

    Returns:
        :class:`MemberData` with ``N`` examples (NumPy arrays).
    """
    obs = dataset[f"obs.{team}"]  # [C, S, A_t, D]
    actions = dataset[f"actions.{team}"]  # [C, S, A_t]
    valid = dataset["valid"]  # [C, S]
    if intent_field is None:
        intents = np.zeros(valid.shape, np.int32)
    else:
        if intent_field not in dataset.header["episode_fields"]:
            raise InvalidParameterError(
                f"intent_field: {intent_field!r} is not a per-episode array of the "
                f"dataset; per-episode arrays are {dataset.header['episode_fields']}"
            )
        per_episode = dataset[intent_field]  # [C, E]
        episode = np.minimum(dataset["episode"], per_episode.shape[1] - 1)
        intents = np.take_along_axis(per_episode, episode, axis=1)  # [C, S]
    mask = np.broadcast_to(valid[..., None], actions.shape)
    intents = np.broadcast_to(intents[..., None], actions.shape)
    return MemberData(
        obs=obs[mask].astype(np.float32),
        actions=actions[mask].astype(np.int32),
        intents=intents[mask].astype(np.int32),
    )


def fit_population(
    key: jax.Array, config: PopulationConfig, members: Sequence[MemberData]
) -> tuple[Any, tuple[BCMetrics, ...]]:
    """Clone every fitting-set opponent and stack the clones' weights.

    Member ``m`` is :func:`mopa.opponent.bc.make_train`'s ``train(split(key, M)[m],
    obs, actions, onehot(intents))`` on its own data (observations without the
    ``drop_obs_tail`` entries). Members with equally many examples train in one
    vmapped call; otherwise one after the other (one compilation per size). With
    ``config.pooled_member`` the library's last member is ``train(fold_in(key, M),
    ...)`` on every member's examples concatenated (the first ``M`` are unchanged).

    Args:
        key: PRNG key.
        config: the population.
        members: ``M >= 1`` opponents' examples, each ``obs [N_m, D]``, ``actions
            [N_m]``, ``intents [N_m]`` (``D`` shared).

    Returns:
        ``(params, metrics)``: the clones' weights with leaves ``[M, ...]`` (``[M +
        1, ...]`` with the pooled member) and each member's
        :class:`~mopa.opponent.bc.BCMetrics`.
    """
    if len(members) == 0:
        raise InvalidParameterError(
            "members must hold at least one opponent's data, got none"
        )
    inputs = [_member_inputs(config, m, data) for m, data in enumerate(members)]
    widths = {obs.shape[1] for obs, _, _ in inputs}
    if len(widths) != 1:
        raise InvalidParameterError(
            f"members: observations must share one width, got {sorted(widths)}"
        )
    train, train_many = _train_fns(config.clone)
    keys = jax.random.split(key, len(inputs))
    if len({obs.shape[0] for obs, _, _ in inputs}) == 1:
        stacked = [jnp.stack(column) for column in zip(*inputs, strict=True)]
        params, metrics = train_many(keys, *stacked)
        fits = [
            jax.tree.map(lambda x, m=m: x[m], (params, metrics))
            for m in range(len(inputs))
        ]
    else:
        fits = [train(k, *arrays) for k, arrays in zip(keys, inputs, strict=True)]
    if config.pooled_member:
        pooled = [np.concatenate(column) for column in zip(*inputs, strict=True)]
        fits.append(train(jax.random.fold_in(key, len(inputs)), *pooled))
    params = jax.tree.map(lambda *xs: jnp.stack(xs), *[p for p, _ in fits])
    return params, tuple(metrics for _, metrics in fits)


class MemberEpisodes(NamedTuple):
    """One opponent's episodes (``A`` agents), each on ``T`` steps: an episode that
    ended early is padded, its steps past the end not ``valid``."""

    obs: Any  # [E, T, A, D] float
    actions: Any  # [E, T, A] int
    valid: Any  # [E, T] bool: the step was played


def member_episodes(dataset: TrajectoryDataset, team: str) -> MemberEpisodes:
    """``team``'s episodes in ``dataset``, padded where an episode ended early
    (:meth:`TrajectoryDataset.episode_steps`)."""
    obs, played = dataset.episode_steps(f"obs.{team}")
    actions, _ = dataset.episode_steps(f"actions.{team}")
    return MemberEpisodes(obs=obs, actions=actions, valid=played)


def episodes_data(episodes: MemberEpisodes, intents: Any) -> MemberData:
    """Every valid step of ``episodes`` as :class:`MemberData`, each step labelled
    with its episode's intent (``intents [E]``); agents pooled."""
    obs, actions, valid = (np.asarray(x) for x in episodes)
    intents = np.asarray(intents)
    if intents.shape != valid.shape[:1]:
        raise InvalidParameterError(
            f"intents must be [{valid.shape[0]}] (one per episode), got {intents.shape}"
        )
    mask = np.broadcast_to(valid.astype(bool)[..., None], actions.shape)
    labels = np.broadcast_to(intents[:, None, None], actions.shape)
    return MemberData(
        obs=obs[mask].astype(np.float32),
        actions=actions[mask].astype(np.int32),
        intents=labels[mask].astype(np.int32),
    )


def episode_log_likelihoods(
    config: PopulationConfig, params: Any, member: int, episodes: MemberEpisodes
) -> np.ndarray:
    """``[E, K]``: the log-likelihood of each episode's moves under member
    ``member``'s clone and each intent (valid steps, every agent)."""
    obs, actions, valid = (jnp.asarray(x) for x in episodes)
    one = jax.tree.map(lambda x: x[member : member + 1], params)
    log_probs = population_log_probs(config, one, obs)[..., 0, :]  # [E, T, A, K, n]
    taken = jnp.take_along_axis(
        log_probs, actions[..., None, None].astype(jnp.int32), -1
    )[..., 0]  # [E, T, A, K]
    return np.asarray(jnp.einsum("etak,et->ek", taken, valid.astype(jnp.float32)))


def infer_intents(
    key: jax.Array,
    config: PopulationConfig,
    members: Sequence[MemberEpisodes],
    first_guess: Sequence[Any],
    *,
    rounds: int,
) -> tuple[list[np.ndarray], list[float]]:
    """Each episode's intent, without intent labels (module docstring: hard EM).

    Args:
        key: PRNG key (round ``r`` fits with ``fold_in(key, r)``).
        config: the population (its clones are refitted every round; its pooled
            member is left out of the rounds).
        members: each opponent's episodes.
        first_guess: each opponent's first labels ``[E]``, in ``[0, K)``.
        rounds: EM rounds (0 returns the first guess).

    Returns:
        ``(labels, changed)``: each opponent's labels ``[E]`` and the share of
        all episodes each round relabelled.
    """
    if len(members) != len(first_guess) or not members:
        raise InvalidParameterError(
            f"give one first guess per member, got {len(first_guess)} for "
            f"{len(members)} members"
        )
    check_count("rounds", rounds, low=0)
    labels = [np.asarray(g, np.int32) for g in first_guess]
    rounds_config = dataclasses.replace(config, pooled_member=False)
    changed = []
    for r in range(rounds):
        data = [episodes_data(e, g) for e, g in zip(members, labels, strict=True)]
        clones, _ = fit_population(jax.random.fold_in(key, r), rounds_config, data)
        new = [
            np.argmax(episode_log_likelihoods(rounds_config, clones, m, e), 1)
            for m, e in enumerate(members)
        ]
        moved = sum(int(np.sum(a != b)) for a, b in zip(new, labels, strict=True))
        changed.append(moved / sum(len(g) for g in labels))
        labels = [g.astype(np.int32) for g in new]
    return labels, changed


CLONES_FORMAT = "mopa-population-clones"
"""The format name of a clone library's file (:func:`save_clones`)."""


def save_clones(path: str | Path, clones: Any) -> Path:
    """Write a clone library's weights (leaves ``[M, ...]``, as
    :func:`fit_population` returns them) as msgpack; no code is stored."""
    data = {"format": CLONES_FORMAT, "version": 1, "params": jax.device_get(clones)}
    return write_msgpack(path, data)


def load_clones(path: str | Path) -> Any:
    """The clone library's weights :func:`save_clones` wrote."""
    data = read_msgpack(Path(path), CLONES_FORMAT, noun="clones")
    return jax.tree.map(jnp.asarray, data["params"])


@functools.cache
def _train_fns(clone: BCConfig):
    """The jitted cloning run for one member and for a stack of members."""
    train = make_train(clone)
    return jax.jit(train), jax.jit(jax.vmap(train))


def _member_inputs(config: PopulationConfig, index: int, data: MemberData):
    """``(obs [N, D'], actions [N], z [N, K])`` of member ``index``, checked."""
    obs, actions, intents = (np.asarray(x) for x in data)
    name = f"members[{index}]"
    if (
        obs.ndim != 2
        or actions.shape != obs.shape[:1]
        or intents.shape != actions.shape
    ):
        raise InvalidParameterError(
            f"{name}: obs must be [N, D], actions and intents [N], got shapes "
            f"{obs.shape}, {actions.shape} and {intents.shape}"
        )
    if obs.shape[1] <= config.drop_obs_tail:
        raise InvalidParameterError(
            f"{name}: obs has {obs.shape[1]} entries, drop_obs_tail is "
            f"{config.drop_obs_tail}"
        )
    if not np.all(np.isfinite(obs)):
        raise InvalidParameterError(f"{name}: obs must be finite")
    for field, values, high in (
        ("actions", actions, config.num_actions),
        ("intents", intents, config.num_intents),
    ):
        if not np.issubdtype(values.dtype, np.integer) or (
            values.size and (values.min() < 0 or values.max() >= high)
        ):
            raise InvalidParameterError(
                f"{name}: {field} must be integers in [0, {high})"
            )
    visible = obs[:, : obs.shape[1] - config.drop_obs_tail].astype(np.float32)
    z = np.eye(config.num_intents, dtype=np.float32)[intents]
    return jnp.asarray(visible), jnp.asarray(actions, jnp.int32), jnp.asarray(z)


def num_members(params: Any) -> int:
    """``M``: the clones stacked in ``params`` (the leading axis of its leaves)."""
    leaves = jax.tree.leaves(params)
    if not leaves or np.ndim(leaves[0]) == 0:
        raise InvalidParameterError("params must be clone weights stacked on [M]")
    return int(np.shape(leaves[0])[0])


def population_logits(
    config: PopulationConfig, params: Any, obs: jax.Array
) -> jax.Array:
    """Every member's action logits under every intent, one vmapped call.

    Args:
        config: the population.
        params: the clones' weights, leaves ``[M, ...]``.
        obs: ``[..., D]`` observations (with the ``drop_obs_tail`` entries).

    Returns:
        ``[..., K, M, A]`` logits of ``p(a | obs, g, m)``.
    """
    visible = _visible(config, obs)  # [..., D']
    K = config.num_intents
    lead, width = visible.shape[:-1], visible.shape[-1]
    x = jnp.broadcast_to(visible[..., None, :], (*lead, K, width))
    z = jnp.broadcast_to(jnp.eye(K, dtype=visible.dtype), (*lead, K, K))
    per_member = jax.vmap(lambda p: bc_logits(config.clone, p, x, z))(params)
    return jnp.moveaxis(per_member, 0, -2)  # [M, ..., K, A] -> [..., K, M, A]


def population_log_probs(
    config: PopulationConfig, params: Any, obs: jax.Array
) -> jax.Array:
    """:func:`population_logits` normalised: ``[..., K, M, A]`` log-probabilities."""
    return jax.nn.log_softmax(population_logits(config, params, obs), -1)


def member_logits(
    config: PopulationConfig,
    params: Any,
    member: jax.Array,
    intent: jax.Array,
    obs: jax.Array,
) -> jax.Array:
    """One member's logits under one intent (what a planner's rollout asks).

    Args:
        config: the population.
        params: the clones' weights, leaves ``[M, ...]``.
        member: ``[]`` int, the member ``m``.
        intent: ``[]`` int, the intent ``g``.
        obs: ``[..., D]`` observations (with the ``drop_obs_tail`` entries).

    Returns:
        ``[..., A]`` logits of ``p(a | obs, g, m)``.
    """
    member_params = jax.tree.map(lambda x: x[member], params)
    visible = _visible(config, obs)
    K = config.num_intents
    z = jax.nn.one_hot(intent, K, dtype=visible.dtype)
    z = jnp.broadcast_to(z, (*visible.shape[:-1], K))
    return bc_logits(config.clone, member_params, visible, z)


def _visible(config: PopulationConfig, obs: jax.Array) -> jax.Array:
    obs = jnp.asarray(obs, jnp.float32)
    if obs.ndim < 1 or obs.shape[-1] <= config.drop_obs_tail:
        raise InvalidParameterError(
            f"obs must be [..., D] with D > drop_obs_tail ({config.drop_obs_tail}), "
            f"got shape {tuple(obs.shape)}"
        )
    return obs[..., : obs.shape[-1] - config.drop_obs_tail]


# -- the belief -----------------------------------------------------------------------
@struct.dataclass
class PopulationBeliefState:
    """The joint belief over (intent, member) and the none-fits test, carried from
    step to step and (through :func:`reset_intent`) from episode to episode."""

    log_posterior: jax.Array  # [K, M] log b(g, m) given the family, normalised
    log_odds_none_fits: jax.Array  # [] log P(F | moves) - log P(family | moves)
    log_odds_prior: jax.Array  # [] logit(fallback_prior): the odds before any move
    log_intent_prior: jax.Array  # [K] normalised
    log_member_prior: jax.Array  # [M] normalised
    surprise: jax.Array  # [] the last step's log U(a) - log q(a)
    log_likelihood: jax.Array  # [] sum over steps of log q_t(a_t)
    expected_log_likelihood: jax.Array  # [] sum of the members' own expectation
    episode_steps: jax.Array  # [] int32: steps observed in this episode
    steps: jax.Array  # [] int32: steps observed in the match

    @property
    def posterior(self) -> jax.Array:
        """``[K, M]`` the posterior given that a member plays (no fallback)."""
        return jnp.exp(self.log_posterior)


class PopulationLatent(NamedTuple):
    """An imagined opponent: an intent and a member."""

    intent: jax.Array  # [] int32
    member: jax.Array  # [] int32


def init_population_belief(
    num_intents: int,
    num_members: int,
    *,
    intent_prior: Any = None,
    member_prior: Any = None,
    fallback_prior: float = DEFAULT_FALLBACK_PRIOR,
) -> PopulationBeliefState:
    """The belief before any move of a match is seen.

    Args:
        num_intents: ``K >= 1``.
        num_members: ``M >= 1``.
        intent_prior: ``[K]`` non-negative weights of the intents, normalised here
            (uniform by default); every episode starts from it.
        member_prior: ``[M]`` non-negative weights of the members (uniform by
            default).
        fallback_prior: prior probability in ``(0, 1)`` that the opponent is outside
            the family (see the module docstring for its meaning).

    Returns:
        A :class:`PopulationBeliefState`; ``b = prior(g) prior(m)``.
    """
    check_count("num_intents", num_intents)
    check_count("num_members", num_members)
    log_intent = _log_prior("intent_prior", intent_prior, num_intents)
    log_member = _log_prior("member_prior", member_prior, num_members)
    _check_probability("fallback_prior", fallback_prior)
    fallback = jnp.asarray(fallback_prior, jnp.float32)
    log_odds = jnp.log(fallback) - jnp.log1p(-fallback)
    zero = jnp.zeros((), jnp.float32)
    return PopulationBeliefState(
        log_posterior=log_intent[:, None] + log_member[None, :],
        log_odds_none_fits=log_odds,
        log_odds_prior=log_odds,
        log_intent_prior=log_intent,
        log_member_prior=log_member,
        surprise=zero,
        log_likelihood=zero,
        expected_log_likelihood=zero,
        episode_steps=jnp.zeros((), jnp.int32),
        steps=jnp.zeros((), jnp.int32),
    )


def update_population_belief(
    state: PopulationBeliefState,
    log_probs: jax.Array,
    actions: jax.Array,
    epsilon: float | jax.Array = DEFAULT_EPSILON,
    valid: bool | jax.Array = True,
) -> PopulationBeliefState:
    """One step: the opponents' moves update the posterior and the none-fits odds.

    The agents of the opponent team act independently given ``(g, m)``, so a
    step's likelihood is the product over agents. If every member gives the moves
    probability 0 (only possible with ``epsilon = 0``) the posterior is left as it
    was and the none-fits probability becomes 1.

    Args:
        state: the belief before the moves.
        log_probs: ``[O, K, M, A]`` normalised log-probabilities of each opponent
            agent's actions under every (intent, member), e.g.
            :func:`population_log_probs` of its observations ``[O, D]``.
        actions: ``[O]`` the actions taken.
        epsilon: the likelihood floor in ``[0, 1)``
            (:func:`~mopa.opponent.beliefs.floored_log_likelihood`).
        valid: ``[]`` bool; false leaves the state unchanged (a padded step, a
            step after the episode ended).

    Returns:
        The new state.
    """
    K, M = state.log_posterior.shape
    log_probs, actions = jnp.asarray(log_probs), jnp.asarray(actions)
    if log_probs.ndim != 4 or log_probs.shape[1:3] != (K, M):
        raise InvalidParameterError(
            f"log_probs must be [O, K, M, A] with K={K}, M={M}, got shape "
            f"{tuple(log_probs.shape)}"
        )
    if actions.shape != log_probs.shape[:1]:
        raise InvalidParameterError(
            f"actions must be [O] with O={log_probs.shape[0]}, got shape "
            f"{tuple(actions.shape)}"
        )
    _check_epsilon(epsilon)
    num_agents, num_actions = log_probs.shape[0], log_probs.shape[-1]
    floored = _floored_log_probs(log_probs, epsilon)  # [O, K, M, A]
    taken = jnp.take_along_axis(floored, actions[:, None, None, None], -1)[..., 0]
    joint = state.log_posterior + jnp.sum(taken, 0)  # [K, M]
    log_q = jax.nn.logsumexp(joint)  # log predictive of the observed moves
    # Entropy of each member's (floored) policy, summed over agents; 0 log 0 = 0.
    plogp = jnp.where(jnp.isfinite(floored), jnp.exp(floored) * floored, 0.0)
    entropy = -jnp.sum(plogp, (0, -1))  # [K, M]
    expected = -jnp.sum(state.posterior * entropy)
    surprise = -num_agents * jnp.log(num_actions) - log_q
    finite = jnp.isfinite(log_q)
    updated = state.replace(
        log_posterior=jnp.where(finite, joint - log_q, state.log_posterior),
        log_odds_none_fits=state.log_odds_none_fits + surprise,
        surprise=surprise,
        log_likelihood=state.log_likelihood + log_q,
        expected_log_likelihood=state.expected_log_likelihood + expected,
        episode_steps=state.episode_steps + 1,
        steps=state.steps + 1,
    )
    return jax.tree.map(lambda new, old: jnp.where(valid, new, old), updated, state)


def observe_opponent(
    config: PopulationConfig,
    params: Any,
    state: PopulationBeliefState,
    obs: jax.Array,
    actions: jax.Array,
    epsilon: float | jax.Array = DEFAULT_EPSILON,
    valid: bool | jax.Array = True,
) -> PopulationBeliefState:
    """:func:`update_population_belief` with the clone library's likelihood.

    Args:
        config, params: the population model (leaves ``[M, ...]``).
        state: the belief before the moves.
        obs: ``[O, D]`` each opponent agent's observation when it moved.
        actions: ``[O]`` their actions.
        epsilon, valid: as in :func:`update_population_belief`.
    """
    log_probs = population_log_probs(config, params, obs)  # [O, K, M, A]
    return update_population_belief(state, log_probs, actions, epsilon, valid)


def population_beliefs(
    state: PopulationBeliefState,
    log_probs: jax.Array,
    actions: jax.Array,
    epsilon: float | jax.Array = DEFAULT_EPSILON,
    valid: jax.Array | None = None,
) -> PopulationBeliefState:
    """The belief after every step of one episode (a ``lax.scan`` of
    :func:`update_population_belief`).

    Args:
        state: the belief before the episode.
        log_probs: ``[T, O, K, M, A]`` the model at each step.
        actions: ``[T, O]`` the moves.
        epsilon: the likelihood floor.
        valid: ``[T]`` bool (all true by default).

    Returns:
        A :class:`PopulationBeliefState` with leaves ``[T, ...]``: row ``t`` after
        step ``t``.
    """
    log_probs, actions = jnp.asarray(log_probs), jnp.asarray(actions)
    if log_probs.ndim != 5 or actions.shape != log_probs.shape[:2]:
        raise InvalidParameterError(
            f"log_probs must be [T, O, K, M, A] and actions [T, O], got shapes "
            f"{tuple(log_probs.shape)} and {tuple(actions.shape)}"
        )
    if valid is None:
        valid = jnp.ones(actions.shape[:1], bool)

    def step(state, inputs):
        state = update_population_belief(state, *inputs[:2], epsilon, inputs[2])
        return state, state

    _, states = jax.lax.scan(step, state, (log_probs, actions, valid))
    return states


def reset_intent(state: PopulationBeliefState) -> PopulationBeliefState:
    """A new episode of the same match: the intent is redrawn, the style kept.

    ``b(g, m) <- prior(g) sum_g' b(g', m)``; the none-fits odds, the likelihood
    sums and the match's step count carry over; the episode's step count restarts.
    """
    log_member = jax.nn.logsumexp(state.log_posterior, 0)  # [M]
    return state.replace(
        log_posterior=state.log_intent_prior[:, None] + log_member[None, :],
        episode_steps=jnp.zeros_like(state.episode_steps),
    )


def none_fits_probability(state: PopulationBeliefState) -> jax.Array:
    """``[]`` the posterior probability that no member plays the opponent."""
    return jax.nn.sigmoid(state.log_odds_none_fits)


def none_fits(
    state: PopulationBeliefState, threshold: float | jax.Array = NONE_FITS_THRESHOLD
) -> jax.Array:
    """``[]`` bool: the none-fits probability is at least ``threshold``.

    With ``threshold = 0.5`` and ``fallback_prior = p`` an opponent the model
    describes raises it with probability at most ``p / (1 - p)`` over a whole
    match (the module docstring's Ville bound).
    """
    return none_fits_probability(state) >= threshold


def joint_belief(state: PopulationBeliefState) -> jax.Array:
    """``[K, M]`` the belief to act on: ``w prior + (1 - w) posterior``, ``w`` the
    none-fits probability (flat over members when no member fits)."""
    w = none_fits_probability(state)
    prior = jnp.exp(state.log_intent_prior[:, None] + state.log_member_prior[None, :])
    return w * prior + (1.0 - w) * state.posterior


def planner_belief(
    state: PopulationBeliefState, planning_prior: float | jax.Array | None = None
) -> tuple[jax.Array, jax.Array]:
    """``(posterior [K, M], none_fits [])``: what a planner with a fallback model
    for "none fits" samples from (:class:`~mopa.planning.PopulationOpponentModel`'s
    ``fallback``): a member from the posterior given the family, or the fallback
    with the none-fits probability.

    Args:
        state: the belief.
        planning_prior: the prior in ``(0, 1)`` that the planner's none-fits
            probability starts from, in place of the belief's own
            ``fallback_prior``; the evidence is the same (module docstring, "The
            planner's prior"). ``None``: the belief's own probability,
            :func:`none_fits_probability`.
    """
    if planning_prior is None:
        return state.posterior, none_fits_probability(state)
    _check_probability("planning_prior", planning_prior)
    prior = jnp.asarray(planning_prior, jnp.float32)
    evidence = state.log_odds_none_fits - state.log_odds_prior
    outside = jax.nn.sigmoid(evidence + jnp.log(prior) - jnp.log1p(-prior))
    return state.posterior, outside


def recognition_prior(fallback_prior: float) -> float:
    """The planner's prior of the recognition rule: ``1 - fallback_prior``.

    The planner imagines the family only once the evidence for it over "none
    fits" is as strong as the evidence :func:`none_fits` needs for the opposite
    call (module docstring, "The planner's prior")."""
    _check_probability("fallback_prior", fallback_prior)
    return 1.0 - float(fallback_prior)


def intent_belief(state: PopulationBeliefState) -> jax.Array:
    """``[K]`` the intent marginal of :func:`joint_belief`."""
    return jnp.sum(joint_belief(state), 1)


def member_belief(state: PopulationBeliefState) -> jax.Array:
    """``[M]`` the style (member) marginal of :func:`joint_belief`."""
    return jnp.sum(joint_belief(state), 0)


def excess_surprisal(state: PopulationBeliefState) -> jax.Array:
    """``[]`` nats by which the observed moves were less likely than the members
    expect of themselves (``expected_log_likelihood - log_likelihood``): bounded
    in expectation for an opponent of the family (by ``log(K M)`` over one
    episode), growing with every step for one outside it."""
    return state.expected_log_likelihood - state.log_likelihood


def sample_population_latent(key: jax.Array, belief: jax.Array) -> PopulationLatent:
    """An (intent, member) pair drawn from ``belief`` ``[K, M]`` (e.g.
    :func:`joint_belief`)."""
    if belief.ndim != 2:
        raise InvalidParameterError(
            f"belief must be [K, M], got shape {tuple(belief.shape)}"
        )
    flat = jax.random.categorical(key, jnp.log(belief).reshape(-1))
    intent, member = jnp.divmod(flat, belief.shape[1])
    return PopulationLatent(intent.astype(jnp.int32), member.astype(jnp.int32))


@jax.jit
def episode_beliefs(
    log_probs: jax.Array,
    actions: jax.Array,
    epsilon: float | jax.Array,
    fallback_prior: float | jax.Array,
) -> PopulationBeliefState:
    """The joint belief after every step of each episode, from a fresh belief
    (uniform priors).

    Args:
        log_probs: ``[E, T, 1, K, M, A]`` the model's log-probabilities of the
            prey's actions (:func:`~mopa.opponent.population.population_log_probs`
            of its observations; one member's slice ``M = 1`` for a single clone).
        actions: ``[E, T, 1]`` its moves.
        epsilon: the likelihood floor.
        fallback_prior: the prior probability that no member fits.

    Returns:
        Leaves ``[E, T, ...]``: row ``t`` after the moves of steps ``0..t``.
    """
    K, M = log_probs.shape[-3:-1]
    start = init_population_belief(K, M, fallback_prior=fallback_prior)
    return jax.vmap(lambda lp, a: population_beliefs(start, lp, a, epsilon))(
        log_probs, actions
    )


def held_out_likelihoods(
    config: PopulationConfig,
    clones: Any,
    obs: jax.Array,
    actions: jax.Array,
    epsilon: float,
    fallback_prior: float,
) -> tuple[PopulationBeliefState, float, list[float]]:
    """How well the population explains an opponent's recorded episodes, and how
    well each single clone does alone: the joint belief through every episode
    (:func:`episode_beliefs`), the total log-likelihood of the moves under the
    population's Bayes predictive, and under each member's alone (its slice of
    the model, ``M = 1``; the best single clone is chosen in hindsight).

    Args:
        obs: ``[E, T, 1, D]`` the opponent's observations.
        actions: ``[E, T, 1]`` its moves.

    Returns:
        ``(belief states, leaves [E, T, ...]; the population's total
        log-likelihood; each member's)``.
    """
    M = num_members(clones)
    log_probs = _jitted_log_probs(config)(clones, obs)  # [E, T, 1, K, M, A]
    states = episode_beliefs(log_probs, actions, epsilon, fallback_prior)
    alone = [
        float(
            jnp.sum(
                episode_beliefs(
                    log_probs[..., m : m + 1, :], actions, epsilon, fallback_prior
                ).log_likelihood[:, -1]
            )
        )
        for m in range(M)
    ]
    return states, float(jnp.sum(states.log_likelihood[:, -1])), alone


def held_out_report(
    config: PopulationConfig,
    clones: Any,
    opponents: dict[str, tuple[jax.Array, jax.Array, np.ndarray]],
    member_names: Sequence[str],
    *,
    epsilon: float,
    fallback_prior: float,
    calibration_bins: int,
) -> dict[str, Any]:
    """How the population model reads opponents it was not fitted to: the intent
    belief's accuracy and calibration error (ECE) by step, as a team acts on it
    (the belief before each move), and the moves' log-likelihood per move under
    the population against the best single clone in hindsight
    (:func:`held_out_likelihoods`) and the uniform model.

    Args:
        opponents: ``{name: (obs [E, T, 1, D], actions [E, T, 1], intents [E])}``,
            each opponent's recorded episodes and its true intent in each.
        member_names: the library's members, in order (the best clone's name).
        calibration_bins: the ECE's bins.
    """
    beliefs, labels = [], []
    population_ll, clone_ll, moves = {}, {}, {}
    for name, (obs, actions, intents) in opponents.items():
        states, population_ll[name], clone_ll[name] = held_out_likelihoods(
            config, clones, obs, actions, epsilon, fallback_prior
        )
        beliefs.append(beliefs_acted_on(jax.vmap(jax.vmap(intent_belief))(states)))
        labels.append(intents)
        moves[name] = int(actions.size)
    belief = jnp.concatenate(beliefs)
    label = jnp.asarray(np.concatenate(labels))
    total_moves = sum(moves.values())
    per_clone = np.sum([clone_ll[n] for n in opponents], 0) / total_moves
    best = int(np.argmax(per_clone))
    ece = np.asarray(ece_by_step(belief, label, calibration_bins))
    return {
        "num_episodes": int(label.shape[0]),
        "accuracy_by_step": np.asarray(accuracy_by_step(belief, label)).tolist(),
        "ece_by_step": ece.tolist(),
        "mean_ece": float(ece.mean()),
        "log_likelihood_per_move": {
            "population": sum(population_ll.values()) / total_moves,
            "best_single_clone": float(per_clone[best]),
            "best_clone": member_names[best],
            "per_clone": dict(zip(member_names, per_clone.tolist(), strict=True)),
            "uniform": float(-np.log(config.clone.num_actions)),
            "per_prey": {
                name: {
                    "population": population_ll[name] / moves[name],
                    "best_single_clone": clone_ll[name][best] / moves[name],
                }
                for name in opponents
            },
        },
    }


@functools.cache
def _jitted_log_probs(config: PopulationConfig):
    return jax.jit(lambda clones, obs: population_log_probs(config, clones, obs))


def _floored_log_probs(log_probs: jax.Array, epsilon) -> jax.Array:
    """``[..., A]`` log ``p_eps`` of every action, by the floored likelihood."""
    actions = jnp.arange(log_probs.shape[-1])
    return jax.vmap(
        lambda a: floored_log_likelihood(log_probs, a, epsilon), out_axes=-1
    )(actions)


def _log_prior(name: str, prior: Any, size: int) -> jax.Array:
    """``[size]`` normalised log-probabilities of the weights ``prior``."""
    if prior is None:
        return jnp.full((size,), -np.log(size), jnp.float32)
    if np.shape(prior) != (size,):
        raise InvalidParameterError(
            f"{name} must have shape ({size},), got {np.shape(prior)}"
        )
    if _is_concrete(prior):
        values = np.asarray(prior, np.float64)
        if not np.all(np.isfinite(values)) or np.any(values < 0) or values.sum() <= 0:
            raise InvalidParameterError(
                f"{name} must be finite, non-negative and not all zero, got "
                f"{values.tolist()}"
            )
    prior = jnp.asarray(prior, jnp.float32)
    return jnp.log(prior) - jnp.log(jnp.sum(prior))


def _check_epsilon(epsilon: Any) -> None:
    if _is_concrete(epsilon):
        check_fraction("epsilon", epsilon)


def _check_probability(name: str, value: Any) -> None:
    """Refuse a known ``value`` outside ``(0, 1)`` (a traced one is not known)."""
    if _is_concrete(value):
        check_probability(name, value)


def _is_concrete(value: Any) -> bool:
    """Whether ``value``'s numbers are known now (not a tracer under jit)."""
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(value))
