"""Latent-conditioned behaviour cloning ``pi(a | s, z)`` and the steering test.

One policy is cloned from (observation, action, z) triples of several specialists,
``z`` naming the specialist (a one-hot, or an encoder's latent of the specialist's
trajectory): with ``z`` the clone can reproduce every specialist; without it (the
"vanilla" clone, ``z`` absent) it can only average them. Pieces:

* :class:`BCConfig` and :func:`make_train`: ``train(key, obs, actions, z) ->
  (params, metrics)``, cross-entropy with optax over shuffled minibatches, one
  jittable ``lax.scan`` (epochs) of ``lax.scan`` (minibatches);
* :func:`bc_logits`, :func:`action_match` (greedy accuracy against the
  specialists' actions) and :func:`majority_match` (the baseline of always playing
  the most common action);
* :func:`rollout_latent_policy` and :func:`steering_rate`: hold the game, the start
  states and the other teams fixed, swap ``z`` alone, and measure whether the route
  moves towards the specialist ``z`` names (the research's Exp 5 steering test);
  :func:`steering_sweep` runs it across games, opponent seeds and route lengths;
  :func:`route_separability` applies the same criterion to the specialists' own
  routes (how well it can tell them apart at all, at a given route length);
* :func:`bc_log_probs_fn`: the clone as an opponent model ``p(a | obs, z = k)`` for
  the exact Bayes belief of :mod:`mopa.opponent.beliefs` (the ``bc_belief_planner``
  of Exp 6, which never sees the true opponent policy).

The network is :class:`mopa.models.Actor` on the concatenation ``[obs, z]``, so a
clone is also an ordinary mopa actor policy (:func:`bc_policy_spec`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from mopa.core.checks import check_fields
from mopa.envs.base import Env
from mopa.envs.rollout import PolicyFn, Trajectory
from mopa.errors import InvalidParameterError
from mopa.models import Actor
from mopa.policy import PolicySpec, make_act_fn, sample_categorical

ACTIVATIONS = ("relu", "tanh", "gelu")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BCConfig:
    """Behaviour cloning of ``pi(a | obs, z)``."""

    num_actions: int
    """Discrete actions of the cloned agent."""
    hidden: tuple[int, ...] = (128, 128)
    """Widths of the policy's hidden layers."""
    activation: str = "relu"
    """Hidden activation: ``relu``, ``tanh`` or ``gelu``."""
    lr: float = 1e-3
    """Adam learning rate."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW); 0 for plain Adam."""
    num_epochs: int = 20
    """Passes over the dataset."""
    batch_size: int = 256
    """Examples per minibatch (a partial last minibatch is dropped each epoch)."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if not self.hidden or min(self.hidden) < 1:
            raise InvalidParameterError(
                f"hidden must be positive widths, got {self.hidden}"
            )
        if self.activation not in ACTIVATIONS:
            raise InvalidParameterError(
                f"activation must be one of {ACTIVATIONS}, got {self.activation!r}"
            )
        for name in ("num_actions", "num_epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        for name in ("lr", "max_grad_norm"):
            if getattr(self, name) <= 0:
                raise InvalidParameterError(
                    f"{name} must be > 0, got {getattr(self, name)}"
                )
        if self.weight_decay < 0:
            raise InvalidParameterError(
                f"weight_decay must be >= 0, got {self.weight_decay}"
            )

    def module(self) -> Actor:
        """The policy network (on inputs ``[obs, z]``)."""
        return Actor(
            num_actions=self.num_actions,
            hidden=self.hidden,
            activation=self.activation,
        )


class BCMetrics(NamedTuple):
    """Per-minibatch training curves, ``[num_updates]`` each."""

    loss: jax.Array  # cross-entropy
    accuracy: jax.Array  # greedy action match on the minibatch


def bc_policy_spec(config: BCConfig, obs_size: int, latent_size: int) -> PolicySpec:
    """The clone as a mopa actor policy on observations ``[obs, z]`` (no agent
    one-hot): ``make_act_fn(bc_policy_spec(...))`` runs it with the trained
    params."""
    return PolicySpec(
        kind="actor",
        num_agents=1,
        obs_size=obs_size + latent_size,
        num_actions=config.num_actions,
        hidden=config.hidden,
        activation=config.activation,
        agent_id=False,
    )


def init_bc_params(
    config: BCConfig, key: jax.Array, obs_size: int, latent_size: int = 0
) -> Any:
    """Fresh parameters for observations of ``obs_size`` and latents of
    ``latent_size`` (0 for the vanilla clone)."""
    return config.module().init(key, jnp.zeros((1, obs_size + latent_size)))


def bc_logits(
    config: BCConfig, params: Any, obs: jax.Array, z: jax.Array | None = None
) -> jax.Array:
    """Action logits ``[..., A]`` of ``pi(. | obs [..., D], z [..., Z])``; ``z``
    ``None`` for the vanilla clone."""
    return config.module().apply(params, _inputs(obs, z))


def make_train(config: BCConfig) -> Callable[..., tuple[Any, BCMetrics]]:
    """The whole cloning run as one pure function.

    Returns:
        ``train(key, obs [N, D], actions [N], z [N, Z] | None) -> (params,
        BCMetrics)``, jittable (shapes fix the number of updates:
        ``num_epochs * (N // batch_size)``); ``z = None`` trains the vanilla
        clone. ``vmap`` it over keys for seeds.
    """
    optimizer = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adamw(config.lr, weight_decay=config.weight_decay),
    )
    module = config.module()

    def loss_fn(params, inputs, actions):
        logits = module.apply(params, inputs)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, actions)
        match = jnp.argmax(logits, -1) == actions
        return jnp.mean(loss), jnp.mean(match)

    def train(key, obs, actions, z=None):
        inputs = _inputs(obs, z)
        if inputs.ndim != 2 or actions.shape != inputs.shape[:1]:
            raise InvalidParameterError(
                f"obs must be [N, D], z [N, Z] and actions [N], got shapes "
                f"{tuple(obs.shape)}, {None if z is None else tuple(z.shape)} and "
                f"{tuple(actions.shape)}"
            )
        num_examples = inputs.shape[0]
        num_batches = num_examples // config.batch_size
        if num_batches == 0:
            raise InvalidParameterError(
                f"batch_size ({config.batch_size}) exceeds the {num_examples} examples"
            )
        key_init, key_epochs = jax.random.split(key)
        params = module.init(key_init, inputs[:1])
        opt_state = optimizer.init(params)

        def minibatch_step(carry, batch):
            params, opt_state = carry
            (loss, match), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                params, inputs[batch], actions[batch]
            )
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            return (params, opt_state), BCMetrics(loss, match)

        def epoch(carry, key_shuffle):
            order = jax.random.permutation(key_shuffle, num_examples)
            batches = order[: num_batches * config.batch_size].reshape(
                num_batches, config.batch_size
            )
            return jax.lax.scan(minibatch_step, carry, batches)

        (params, _), metrics = jax.lax.scan(
            epoch,
            (params, opt_state),
            jax.random.split(key_epochs, config.num_epochs),
        )
        return params, jax.tree.map(lambda m: m.reshape(-1), metrics)

    return train


def action_match(
    config: BCConfig,
    params: Any,
    obs: jax.Array,
    actions: jax.Array,
    z: jax.Array | None = None,
) -> jax.Array:
    """Fraction ``[]`` of examples where the clone's greedy action equals the
    specialist's.

    Args:
        config, params: the clone.
        obs: ``[N, D]`` observations.
        actions: ``[N]`` the specialists' actions.
        z: ``[N, Z]`` latents (``None`` for the vanilla clone).
    """
    logits = bc_logits(config, params, obs, z)
    return jnp.mean(jnp.argmax(logits, -1) == actions)


def majority_match(actions: jax.Array, num_actions: int) -> jax.Array:
    """Fraction ``[]`` of ``actions [N]`` equal to the most common one (the
    baseline a clone must beat)."""
    counts = jnp.bincount(actions, length=num_actions)
    return jnp.max(counts) / actions.shape[0]


def bc_log_probs_fn(
    config: BCConfig, params: Any, num_strategies: int, strip_strategy: bool = True
) -> Callable[[jax.Array], jax.Array]:
    """The clone as an opponent model ``obs [D] -> log pi(a | obs, z = e_k) [K, A]``
    for :func:`mopa.opponent.beliefs.bayes_beliefs` /
    :func:`~mopa.opponent.beliefs.update_bayes_belief`.

    The clone must have been trained with ``z`` the strategy one-hot (``K``
    entries). ``strip_strategy`` drops the observation's trailing ``K`` entries
    first (the ``tag_intent`` prey sees its intent one-hot there; the clone is
    trained without it, so the model never reads the answer off the input).
    """
    if num_strategies < 1:
        raise InvalidParameterError(
            f"num_strategies must be >= 1, got {num_strategies}"
        )
    K = num_strategies

    def log_probs_fn(obs: jax.Array) -> jax.Array:
        if obs.ndim != 1:
            raise InvalidParameterError(
                f"obs must be [D], got shape {tuple(obs.shape)}"
            )
        visible = obs[:-K] if strip_strategy else obs
        logits = bc_logits(
            config, params, jnp.broadcast_to(visible, (K, visible.shape[0])), jnp.eye(K)
        )
        return jax.nn.log_softmax(logits, -1)

    return log_probs_fn


# -- steering ---------------------------------------------------------------------
class SteeringResult(NamedTuple):
    """Per-episode outcomes of :func:`steering_rate`."""

    rate: jax.Array  # [] mean of toward_a and toward_b (chance 0.5)
    toward_a: jax.Array  # [N] 1, 0.5 (tie) or 0
    toward_b: jax.Array  # [N]


def rollout_latent_policy(
    key: jax.Array,
    env: Env,
    env_params: Any,
    config: BCConfig,
    params: Any,
    z: jax.Array,
    team: int,
    others_fn: PolicyFn,
    num_steps: int,
    obs_fn: Callable[[jax.Array], jax.Array] | None = None,
    greedy: bool = True,
) -> Trajectory:
    """One game of ``num_steps`` steps from a reset, the clone playing ``team``.

    Every agent of ``team`` acts with ``pi(. | obs_fn(obs), z)``; the other teams
    act as ``others_fn(key, obs, state)`` says (its entry for ``team`` is
    ignored). The game is not reset here: choose ``num_steps`` within one episode,
    or pass ``env`` wrapped in :class:`mopa.envs.wrappers.AutoReset` to play a
    chain of consecutive episodes (as :func:`mopa.opponent.data.generate` does).
    The same ``key`` gives the same start state and the same keys to
    ``others_fn`` and to the game (resets included), whatever ``z`` is.

    Args:
        key: PRNG key.
        env, env_params: the game.
        config, params: the clone.
        z: ``[Z]`` the latent (``[0]``-sized for the vanilla clone).
        team: the index of the team the clone plays.
        others_fn: a :data:`mopa.envs.rollout.PolicyFn` for every team.
        num_steps: steps to play (static).
        obs_fn: maps the team's observations ``[A, D]`` to the clone's inputs
            ``[A, D']`` (e.g. drop the ``tag_intent`` prey's intent entries);
            identity by default.
        greedy: play the clone's mode instead of sampling it.

    Returns:
        A :class:`~mopa.envs.rollout.Trajectory` with leaves ``[T, ...]``.
    """
    key_reset, key_steps = jax.random.split(key)
    obs, state = env.reset(key_reset, env_params)

    def body(carry, key_t):
        obs, state = carry
        key_others, key_act, key_step = jax.random.split(key_t, 3)
        actions = list(others_fn(key_others, obs, state))
        own = obs[team] if obs_fn is None else obs_fn(obs[team])
        logits = bc_logits(
            config, params, own, jnp.broadcast_to(z, (own.shape[0], z.shape[-1]))
        )
        if greedy:
            actions[team] = jnp.argmax(logits, -1).astype(jnp.int32)
        else:
            actions[team] = sample_categorical(key_act, logits)
        next_obs, next_state, rewards, terminated, truncated, info = env.step(
            key_step, state, tuple(actions), env_params
        )
        step = Trajectory(
            state, obs, tuple(actions), rewards, terminated, truncated, info
        )
        return (next_obs, next_state), step

    _, trajectory = jax.lax.scan(
        body, (obs, state), jax.random.split(key_steps, num_steps)
    )
    return trajectory


def fixed_team_fn(spec: PolicySpec, params: Any) -> PolicyFn:
    """A :func:`steering_rate` ``others_fn`` for a two-team game: the first team
    plays ``spec``'s policy with ``params`` (greedy, no carry), the second team's
    actions are zeros (the clone's team, whose actions the test sets)."""

    def others_fn(key, obs, state):
        del state
        carry = jnp.zeros((spec.num_agents, spec.carry_size))
        reset = jnp.zeros((spec.num_agents,), bool)
        act = make_act_fn(spec)(params, key, obs[0], carry, reset, True)[0]
        return (act, jnp.zeros(obs[1].shape[:-1], jnp.int32))

    return others_fn


def steering_rate(
    key: jax.Array,
    env: Env,
    env_params: Any,
    config: BCConfig,
    params: Any,
    z_a: jax.Array,
    z_b: jax.Array,
    route_a: jax.Array,
    route_b: jax.Array,
    route_fn: Callable[[Trajectory], jax.Array],
    team: int,
    others_fn: PolicyFn,
    num_episodes: int,
    num_steps: int,
    obs_fn: Callable[[jax.Array], jax.Array] | None = None,
    greedy: bool = True,
) -> SteeringResult:
    """How often swapping ``z`` alone steers the clone's route to the specialist it
    names.

    For each episode ``i`` (its own key: start state, other teams' keys and the
    game's keys all fixed) the clone plays once with ``z_a`` and once with ``z_b``,
    giving route features ``f_i^A = route_fn(trajectory)`` and ``f_i^B``. With
    ``d`` the Euclidean distance and ``m_A = route_a``, ``m_B = route_b`` the
    specialists' mean route features (e.g. their mean occupancy histograms)::

        toward_a_i = 1[d(f_i^A, m_A) < d(f_i^B, m_A)] + 0.5 * 1[equal]
        toward_b_i = 1[d(f_i^B, m_B) < d(f_i^A, m_B)] + 0.5 * 1[equal]
        rate = mean over i of (toward_a_i + toward_b_i) / 2

    "The route under ``z_A`` is closer to A's usual route than the route under
    ``z_B`` is", and the same for B. A clone that ignores ``z`` plays the same
    game both times, every comparison ties, and the rate is exactly 0.5 (chance);
    1 means ``z`` always steers the route the right way.

    Args:
        key: PRNG key (split into one key per episode).
        env, env_params: the game.
        config, params: the clone.
        z_a, z_b: ``[Z]`` the latents of specialists A and B.
        route_a, route_b: ``[F]`` the specialists' mean route features.
        route_fn: ``Trajectory (leaves [T, ...]) -> [F]`` route features of one
            game (e.g. the occupancy histogram of the cloned agent's positions).
        team, others_fn, num_steps, obs_fn, greedy: as in
            :func:`rollout_latent_policy`.
        num_episodes: ``N``, games per latent.

    Returns:
        :class:`SteeringResult`.
    """
    z_a, z_b = jnp.asarray(z_a), jnp.asarray(z_b)
    if z_a.ndim != 1 or z_a.shape != z_b.shape:
        raise InvalidParameterError(
            f"z_a and z_b must be [Z] of equal shape, got {tuple(z_a.shape)} and "
            f"{tuple(z_b.shape)}"
        )
    if num_episodes < 1 or num_steps < 1:
        raise InvalidParameterError(
            f"num_episodes and num_steps must be >= 1, got {num_episodes} and "
            f"{num_steps}"
        )
    routes = _steering_routes(
        env, config, team, others_fn, route_fn, num_steps, num_episodes, obs_fn,
        greedy, key, env_params, params, jnp.stack([z_a, z_b]),
    )  # fmt: skip
    f_a, f_b = routes[0], routes[1]  # [N, F] each

    toward_a = _closer(f_a, f_b, jnp.asarray(route_a))
    toward_b = _closer(f_b, f_a, jnp.asarray(route_b))
    rate = (jnp.mean(toward_a) + jnp.mean(toward_b)) / 2
    return SteeringResult(rate=rate, toward_a=toward_a, toward_b=toward_b)


def route_separability(
    features_a: jax.Array,
    features_b: jax.Array,
    route_a: jax.Array,
    route_b: jax.Array,
) -> jax.Array:
    """The :func:`steering_rate` criterion applied to the specialists' own routes.

    Every pair ``(i, j)`` of a route ``f_i^A`` of specialist A and a route
    ``f_j^B`` of specialist B is judged as a steered pair would be::

        rate = mean over (i, j) of (toward_a_ij + toward_b_ij) / 2
        toward_a_ij = 1[d(f_i^A, m_A) < d(f_j^B, m_A)] + 0.5 * 1[equal]

    (``toward_b_ij`` likewise with ``m_B``). It says how well the criterion tells
    the two specialists' routes apart at all, at the length their features were
    taken over: a clone that reproduced each specialist exactly, in unpaired
    games, would score this (paired games share their start states and can do
    better). 0.5 when the two sets of routes are indistinguishable.

    Args:
        features_a: ``[Na, F]`` route features of specialist A's games.
        features_b: ``[Nb, F]`` route features of specialist B's games.
        route_a, route_b: ``[F]`` the specialists' mean route features.

    Returns:
        ``[]`` the rate.
    """
    features_a, features_b = jnp.asarray(features_a), jnp.asarray(features_b)
    if features_a.ndim != 2 or features_a.shape[1:] != features_b.shape[1:]:
        raise InvalidParameterError(
            f"features_a and features_b must be [N, F] with equal F, got "
            f"{tuple(features_a.shape)} and {tuple(features_b.shape)}"
        )
    own_a, other_a = features_a[:, None], features_b[None]  # pairs [Na, Nb, F]
    toward_a = _closer(own_a, other_a, jnp.asarray(route_a))
    toward_b = _closer(other_a, own_a, jnp.asarray(route_b))
    return (jnp.mean(toward_a) + jnp.mean(toward_b)) / 2


class SteeringSweep(NamedTuple):
    """What :func:`steering_sweep` measured, for every route length ``L``, game
    ``G`` and opponent seed ``S``."""

    rates: np.ndarray  # [L, G, S] the steering rate of each cell
    scores: np.ndarray  # [L, G, S, N] every episode's (toward_a + toward_b) / 2


def steering_sweep(
    key: jax.Array,
    games: Sequence[tuple[Env, Any]],
    opponents: Sequence[tuple[PolicySpec, Any]],
    config: BCConfig,
    params: Any,
    z_a: jax.Array,
    z_b: jax.Array,
    route_a: jax.Array,
    route_b: jax.Array,
    route_fn: Callable[[Trajectory], jax.Array],
    num_episodes: int,
    steps: Sequence[int],
    *,
    num_seeds: int | None = None,
    obs_fn: Callable[[jax.Array], jax.Array] | None = None,
) -> SteeringSweep:
    """:func:`steering_rate` of one clone (it plays the second team) in every game
    against every seed of that game's fixed first team, at every route length.

    Game ``g`` (``games[g] = (env, env_params)``; wrap ``env`` in
    :class:`mopa.envs.wrappers.AutoReset` to play past one episode) is played
    against ``opponents[g] = (spec, params [S, ...])``, each seed greedy
    (:func:`fixed_team_fn`); cell ``(g, s)`` plays the key ``fold_in(key, 100 g +
    s)`` at every length, so the lengths differ only in how far the same games go.

    Args:
        num_seeds: how many of the opponents' first seeds play (at most as many
            as every game's opponents have, and 100; default: all of them).
        num_episodes, steps: ``N`` games per latent in each cell, and the route
            lengths ``L`` (steps from a reset).
        The rest: as :func:`steering_rate`'s.
    """
    if len(games) != len(opponents) or not games:
        raise InvalidParameterError(
            f"steering_sweep needs one fixed opponent per game, got {len(games)} "
            f"games and {len(opponents)} opponents"
        )
    available = min(int(jax.tree.leaves(p)[0].shape[0]) for _, p in opponents)
    num_seeds = available if num_seeds is None else min(num_seeds, available)
    if not 1 <= num_seeds <= 100:
        raise InvalidParameterError(f"num_seeds must be in [1, 100], got {num_seeds}")
    G, L = len(games), len(steps)
    rates = np.zeros((L, G, num_seeds))
    scores = np.zeros((L, G, num_seeds, num_episodes))
    for i, num_steps in enumerate(steps):
        for g, ((env, env_params), (spec, stacked)) in enumerate(
            zip(games, opponents, strict=True)
        ):
            for s in range(num_seeds):
                result = steering_rate(
                    jax.random.fold_in(key, 100 * g + s),
                    env,
                    env_params,
                    config,
                    params,
                    z_a,
                    z_b,
                    route_a,
                    route_b,
                    route_fn,
                    1,
                    fixed_team_fn(spec, jax.tree.map(lambda x, s=s: x[s], stacked)),
                    num_episodes,
                    int(num_steps),
                    obs_fn,
                )
                rates[i, g, s] = float(result.rate)
                scores[i, g, s] = (result.toward_a + result.toward_b) / 2
    return SteeringSweep(rates, scores)


def _closer(own: jax.Array, other: jax.Array, target: jax.Array) -> jax.Array:
    """``1[d(own, target) < d(other, target)] + 0.5 * 1[equal]`` over the last
    axis (``d`` Euclidean)."""
    d_own = jnp.sum((own - target) ** 2, -1)
    d_other = jnp.sum((other - target) ** 2, -1)
    return (d_own < d_other) + 0.5 * (d_own == d_other)


@partial(jax.jit, static_argnums=(0, 1, 2, 3, 4, 5, 6, 7, 8))
def _steering_routes(
    env, config, team, others_fn, route_fn, num_steps, num_episodes, obs_fn, greedy,
    key, env_params, params, latents,
) -> jax.Array:  # fmt: skip
    """Route features ``[2, N, F]``: latents on the first axis, episodes second."""
    keys = jax.random.split(key, num_episodes)

    def route(z, key_episode):
        trajectory = rollout_latent_policy(
            key_episode, env, env_params, config, params, z, team, others_fn,
            num_steps, obs_fn, greedy,
        )  # fmt: skip
        return route_fn(trajectory)

    per_episode = jax.vmap(route, in_axes=(None, 0))
    return jax.vmap(per_episode, in_axes=(0, None))(latents, keys)


def _inputs(obs: jax.Array, z: jax.Array | None) -> jax.Array:
    if z is None:
        return obs
    if z.shape[:-1] != obs.shape[:-1]:
        raise InvalidParameterError(
            f"z must share obs's leading axes {tuple(obs.shape[:-1])}, got shape "
            f"{tuple(z.shape)}"
        )
    return jnp.concatenate([obs, z.astype(obs.dtype)], -1)
