"""Sampled opponent shaping on ``ipd`` and ``coin_game``: LOLA-DiCE, POLA-DiCE and
POLA-OM (Zhao et al. 2022, Algorithms 2-3), pure and jitted.

One update of agent ``i`` (both agents compute theirs from the same joint
parameters; the updates are then applied together, so the agents are symmetric by
construction: one function serves both seats):

* ``outer_steps`` times: build the opponent's lookahead from its parameters at the
  start of the update, ``inner_steps`` SGD steps (``lr_in``) on the opponent's
  loaded-DiCE loss plus ``inner_beta`` x KL(opponent at the start of the lookahead
  || opponent now), each on a fresh rollout against agent ``i``'s current,
  differentiable parameters; then roll out against the looked-ahead opponent and
  take one Adam step (``lr_out``) on agent ``i``'s loaded-DiCE loss plus
  ``outer_beta`` x KL(own policy at the start of the update || own policy now),
  differentiating through the opponent's steps. The critic takes one Adam step
  (``lr_v``) on the same rollout. KL terms are averaged over the states of the
  rollout just drawn.
* LOLA-DiCE is the special case ``outer_steps = inner_steps = 1``, betas 0.
* POLA-OM (``opp_model``): agent ``i`` never reads the opponent's parameters. Before
  its update it fits a GRU opponent model (policy by behaviour cloning on the
  opponent's actions given the opponent's observations; value on the opponent's
  rewards, bootstrapped from the model's own values) on ``opp_model_data_batches``
  fresh rollouts with ``opp_model_steps`` Adam steps each (``om_lr_p``,
  ``om_lr_v``), warm-started from the previous update, and the lookahead runs on
  the model.

Each update also evaluates both agents against each other and against the scripted
ALLD, ALLC and TFT players, on fresh rollouts. :func:`train_seeds` trains several
seeds in one program and :func:`summarise_seeds` reads its last update's
evaluation with intervals over the seeds.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from mopa.algos.pola.dice import (
    categorical_kl,
    loaded_dice_objective,
    value_loss,
)
from mopa.algos.pola.networks import GRUNetwork, TabularIPDPolicy, unroll
from mopa.core.checks import check_count, check_discount, check_fields, check_unit
from mopa.envs import coin_game, ipd
from mopa.envs.registry import make
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import half_width

ENVS = {"ipd": "ipd", "coin": "coin_game"}
"""``--env`` values and the registered games they play."""

OPPONENTS = ("alld", "allc", "tft")
"""Scripted evaluation opponents."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SampledConfig:
    """A LOLA-DiCE / POLA-DiCE / POLA-OM run (the reference's flags, same names)."""

    env: str = "ipd"
    """Game: ``ipd`` or ``coin``."""
    n_update: int = 101
    """Joint updates."""
    inner_steps: int = 2
    """Opponent SGD steps in each lookahead."""
    outer_steps: int = 200
    """Own Adam steps per update (1 for LOLA-DiCE)."""
    lr_in: float = 0.005
    """Step size of the opponent's lookahead steps."""
    lr_out: float = 0.003
    """Adam step size of the own policy."""
    lr_v: float = 0.0005
    """Adam step size of the critic."""
    inner_beta: float = 10.0
    """Weight of the KL penalty in the lookahead."""
    outer_beta: float = 100.0
    """Weight of the KL penalty in the own update."""
    batch_size: int = 2000
    """Games per rollout."""
    rollout_len: int = 50
    """Steps per rollout (one episode)."""
    contrib_factor: float = 1.33
    """IPD contribution factor."""
    gamma: float = 0.96
    """Discount factor."""
    gae_lambda: float = 1.0
    """GAE lambda of the loaded-DiCE advantages and the critic targets."""
    hidden_size: int = 64
    """Width of the GRU policies and critics."""
    layers_before_gru: int = 1
    """Dense + ReLU layers before the GRU."""
    opp_model: bool = False
    """POLA-OM: learn an opponent model instead of reading the opponent's params."""
    opp_model_steps: int = 1
    """Adam steps of the opponent model per data batch."""
    opp_model_data_batches: int = 200
    """Fresh rollouts the opponent model is fitted on per update."""
    om_lr_p: float = 0.005
    """Adam step size of the opponent model's policy."""
    om_lr_v: float = 0.0005
    """Adam step size of the opponent model's value head."""
    tabular: bool = False
    """IPD only: tabular memory-one policies instead of GRUs (for exact checks)."""
    use_baseline: bool = True
    """Use the learned critic as the DiCE baseline (else zero values)."""

    def __post_init__(self):
        check_fields(self)
        if self.env not in ENVS:
            raise InvalidParameterError(
                f"env must be one of {', '.join(ENVS)}, got {self.env!r}"
            )
        for field in (
            "n_update",
            "inner_steps",
            "outer_steps",
            "batch_size",
            "rollout_len",
            "hidden_size",
            "opp_model_steps",
            "opp_model_data_batches",
        ):
            check_count(field, getattr(self, field))
        for field in (
            "lr_in",
            "lr_out",
            "lr_v",
            "inner_beta",
            "outer_beta",
            "om_lr_p",
            "om_lr_v",
            "layers_before_gru",
        ):
            if getattr(self, field) < 0:
                raise InvalidParameterError(
                    f"{field} must be >= 0, got {getattr(self, field)}"
                )
        check_discount("gamma", self.gamma)
        check_unit("gae_lambda", self.gae_lambda)
        if self.tabular and self.env != "ipd":
            raise InvalidParameterError("tabular policies exist only for env ipd")

    @property
    def env_id(self) -> str:
        return ENVS[self.env]


# -- actors and rollouts -----------------------------------------------------------
class Actor(NamedTuple):
    """How one seat acts over a batch: ``init(B) -> carry``,
    ``act(carry, obs [B, D], key) -> (carry, actions [B])`` and
    ``after(carry, rewards [B]) -> carry``."""

    init: Callable
    act: Callable
    after: Callable


def network_actor(network: Any, params: Any) -> Actor:
    """An actor sampling from ``network``'s logits (no gradients flow)."""
    params = jax.lax.stop_gradient(params)

    def act(carry, obs, key):
        carry, logits = network.step(params, carry, obs)
        return carry, jax.random.categorical(key, logits).astype(jnp.int32)

    return Actor(network.initial_carry, act, lambda carry, _: carry)


def scripted_actor(env_name: str, name: str, seat: int) -> Actor:
    """A scripted ALLD / ALLC / TFT player in ``seat`` of ``ipd`` or ``coin``."""
    if env_name == "ipd":

        def act(carry, obs, key):
            action = jax.vmap(lambda o: ipd.scripted_action(name, o, seat))(obs)
            return carry, action

        return Actor(lambda b: jnp.zeros((b,)), act, lambda carry, _: carry)

    def act_coin(carry, obs, key):
        action = jax.vmap(lambda o, d: coin_game.scripted_action(name, o, seat, d))(
            obs, carry
        )
        return carry, action

    return Actor(lambda b: jnp.zeros((b,), bool), act_coin, coin_game.update_tft_mode)


class Batch(NamedTuple):
    """A batch of rollouts, time first."""

    obs: jax.Array  # [T + 1, B, 2, D] each seat's observations, incl. the last
    actions: jax.Array  # [T, B, 2] int32
    rewards: jax.Array  # [T, B, 2]
    captures: jax.Array  # [T, B, 2] coins picked up (0 on the IPD)
    own_coin: jax.Array  # [T, B, 2] own-colour coins picked up (0 on the IPD)


def rollout(
    key: jax.Array,
    env: Any,
    env_params: Any,
    actors: tuple[Actor, Actor],
    batch_size: int,
    length: int,
) -> Batch:
    """Play ``batch_size`` games of ``length`` steps from fresh resets."""
    key_reset, key_steps = jax.random.split(key)
    obs, states = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(key_reset, batch_size), env_params
    )
    joint = lambda obs: jnp.stack([obs[0][:, 0], obs[1][:, 0]], 1)  # noqa: E731
    carries = (actors[0].init(batch_size), actors[1].init(batch_size))

    def body(carry, key):
        states, obs, carries = carry
        key_0, key_1, key_env = jax.random.split(key, 3)
        c0, a0 = actors[0].act(carries[0], obs[:, 0], key_0)
        c1, a1 = actors[1].act(carries[1], obs[:, 1], key_1)
        next_obs, states, rewards, _, _, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None)
        )(
            jax.random.split(key_env, batch_size),
            states,
            (a0[:, None], a1[:, None]),
            env_params,
        )
        r = jnp.stack([rewards[0][:, 0], rewards[1][:, 0]], -1)
        carries = (actors[0].after(c0, r[:, 0]), actors[1].after(c1, r[:, 1]))
        zeros = jnp.zeros((batch_size, 2), jnp.int32)
        out = (
            obs,
            jnp.stack([a0, a1], -1),
            r,
            info.get("captures", zeros),
            info.get("own_coin", zeros),
        )
        return (states, joint(next_obs), carries), out

    (_, last_obs, _), (obs_seq, actions, rewards, captures, own) = jax.lax.scan(
        body, (states, joint(obs), carries), jax.random.split(key_steps, length)
    )
    obs_seq = jnp.concatenate([obs_seq, last_obs[None]])
    return Batch(obs_seq, actions, rewards, captures, own)


# -- the learner -------------------------------------------------------------------
@struct.dataclass
class AgentState:
    """One agent's parameters, optimiser states and opponent model."""

    policy: Any
    value: Any
    policy_opt: Any
    value_opt: Any
    model_policy: Any
    model_value: Any
    model_policy_opt: Any
    model_value_opt: Any


def _step(
    optimizer: optax.GradientTransformation, params: Any, state: Any, grads: Any
) -> tuple[Any, Any]:
    """One optimiser step: ``(new params, new optimiser state)``."""
    updates, state = optimizer.update(grads, state)
    return optax.apply_updates(params, updates), state


class Metrics(NamedTuple):
    """Evaluation after an update: average reward per step of each agent."""

    vs_each_other: jax.Array  # [2]
    vs_alld: jax.Array  # [2] each agent against ALLD in the other seat
    vs_allc: jax.Array  # [2]
    vs_tft: jax.Array  # [2]
    own_coin: jax.Array  # [] own-colour pickups / all pickups, playing each other
    model_accuracy: jax.Array  # [2] opponent-model action accuracy (0 without)


class Learner:
    """The pure functions of one :class:`SampledConfig` (hashable by config)."""

    def __init__(self, config: SampledConfig):
        self.config = config
        overrides = {"max_steps": config.rollout_len}
        if config.env == "ipd":
            overrides["contrib_factor"] = config.contrib_factor
        self.env, self.env_params = make(config.env_id, **overrides)
        self.obs_size = self.env.observation_space(0).shape[0]
        self.num_actions = self.env.action_space(0).n
        if config.tabular:
            self.policy_net = TabularIPDPolicy()
        else:
            self.policy_net = GRUNetwork(
                self.num_actions, config.hidden_size, config.layers_before_gru
            )
        self.value_net = GRUNetwork(1, config.hidden_size, config.layers_before_gru)
        self.policy_opt = optax.adam(config.lr_out)
        self.value_opt = optax.adam(config.lr_v)
        self.model_policy_opt = optax.adam(config.om_lr_p)
        self.model_value_opt = optax.adam(config.om_lr_v)

    def __hash__(self) -> int:
        return hash(self.config)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Learner) and other.config == self.config

    # -- pieces --------------------------------------------------------------------
    def play(self, key: jax.Array, policies: tuple[Any, Any]) -> Batch:
        """A training rollout of the two policies (no gradients through sampling)."""
        actors = tuple(network_actor(self.policy_net, p) for p in policies)
        return rollout(
            key,
            self.env,
            self.env_params,
            actors,
            self.config.batch_size,
            self.config.rollout_len,
        )

    def log_probs(self, params: Any, obs: jax.Array, actions: jax.Array) -> jax.Array:
        """``[T, B]`` log-probabilities of ``actions`` under the policy ``params``."""
        logits = unroll(self.policy_net, params, obs)
        logp = jax.nn.log_softmax(logits)
        return jnp.take_along_axis(logp, actions[..., None], -1)[..., 0]

    def values(self, params: Any, obs: jax.Array) -> jax.Array:
        """``[T + 1, B]`` critic values over ``[T + 1, B, D]`` observations."""
        if not self.config.use_baseline:
            return jnp.zeros(obs.shape[:2])
        return unroll(self.value_net, params, obs)[..., 0]

    def dice_loss(
        self, seat: int, policy: Any, value: Any, other_policy: Any, batch: Batch
    ) -> jax.Array:
        """Negative loaded-DiCE objective of the agent in ``seat``."""
        c = self.config
        obs = batch.obs
        logp_self = self.log_probs(policy, obs[:-1, :, seat], batch.actions[..., seat])
        logp_other = self.log_probs(
            other_policy, obs[:-1, :, 1 - seat], batch.actions[..., 1 - seat]
        )
        values = self.values(value, obs[:, :, seat])
        return -loaded_dice_objective(
            logp_self,
            logp_other,
            batch.rewards[..., seat],
            values,
            c.gamma,
            c.gae_lambda,
        )

    def kl_penalty(
        self, seat: int, reference: Any, policy: Any, batch: Batch
    ) -> jax.Array:
        """KL(reference || policy) averaged over the rollout's states of ``seat``."""
        obs = batch.obs[:-1, :, seat]
        ref_logits = jax.lax.stop_gradient(unroll(self.policy_net, reference, obs))
        return categorical_kl(ref_logits, unroll(self.policy_net, policy, obs))

    def critic_loss(self, seat: int, value: Any, batch: Batch) -> jax.Array:
        c = self.config
        return value_loss(
            self.values(value, batch.obs[:, :, seat]),
            batch.rewards[..., seat],
            c.gamma,
            c.gae_lambda,
        )

    @staticmethod
    def _ordered(seat: int, mine: Any, other: Any) -> tuple[Any, Any]:
        return (mine, other) if seat == 0 else (other, mine)

    def lookahead(
        self, key: jax.Array, seat: int, mine: Any, other: Any, other_value: Any
    ) -> Any:
        """The opponent's policy after ``inner_steps`` proximal SGD steps against
        ``mine`` (differentiable in ``mine``)."""
        c = self.config
        start = other

        def step(other, key):
            batch = self.play(key, self._ordered(seat, mine, other))

            def inner_loss(other):
                loss = self.dice_loss(1 - seat, other, other_value, mine, batch)
                return loss + c.inner_beta * self.kl_penalty(
                    1 - seat, start, other, batch
                )

            grads = jax.grad(inner_loss)(other)
            return jax.tree.map(lambda p, g: p - c.lr_in * g, other, grads), None

        other, _ = jax.lax.scan(step, other, jax.random.split(key, c.inner_steps))
        return other

    def outer_gradient(
        self,
        key: jax.Array,
        seat: int,
        policy: Any,
        start: Any,
        value: Any,
        other_policy: Any,
        other_value: Any,
    ) -> tuple[Any, Batch]:
        """Gradient of one outer step's loss: the opponent looks ahead against
        ``policy``, then the own loaded-DiCE loss on a rollout against the
        looked-ahead opponent plus ``outer_beta`` x KL(start || policy), all
        differentiated in ``policy`` (through the lookahead: LOLA's second-order
        term). Returns the gradient and the outer rollout."""
        c = self.config

        def outer_loss(policy):
            key_in, key_out = jax.random.split(key)
            looked = self.lookahead(key_in, seat, policy, other_policy, other_value)
            batch = self.play(key_out, self._ordered(seat, policy, looked))
            loss = self.dice_loss(seat, policy, value, looked, batch)
            loss = loss + c.outer_beta * self.kl_penalty(seat, start, policy, batch)
            return loss, batch

        return jax.grad(outer_loss, has_aux=True)(policy)

    def agent_update(
        self,
        key: jax.Array,
        seat: int,
        me: AgentState,
        other_policy: Any,
        other_value: Any,
    ) -> AgentState:
        """``outer_steps`` proximal outer steps of the agent in ``seat`` against a
        fixed opponent ``(other_policy, other_value)`` at its starting point."""
        c = self.config
        start = me.policy

        def step(me, key):
            grads, batch = self.outer_gradient(
                key, seat, me.policy, start, me.value, other_policy, other_value
            )
            policy, policy_opt = _step(self.policy_opt, me.policy, me.policy_opt, grads)
            value_grads = jax.grad(self.critic_loss, argnums=1)(seat, me.value, batch)
            value, value_opt = _step(
                self.value_opt, me.value, me.value_opt, value_grads
            )
            return me.replace(
                policy=policy, policy_opt=policy_opt, value=value, value_opt=value_opt
            ), None

        me, _ = jax.lax.scan(step, me, jax.random.split(key, c.outer_steps))
        return me

    def fit_opponent_model(
        self, key: jax.Array, seat: int, me: AgentState, true_other: Any
    ) -> tuple[AgentState, jax.Array]:
        """Behaviour-clone the opponent from fresh rollouts (POLA-OM).

        Returns:
            The agent state with the refitted model, and the model's action accuracy
            on the last data batch before its last step.
        """
        c = self.config
        other = 1 - seat

        def bc_loss(model_policy, batch):
            obs = batch.obs[:-1, :, other]
            return -jnp.mean(
                self.log_probs(model_policy, obs, batch.actions[..., other])
            )

        def data_batch(me, key):
            batch = self.play(key, self._ordered(seat, me.policy, true_other))

            def fit(me, _):
                grads = jax.grad(bc_loss)(me.model_policy, batch)
                policy, opt = _step(
                    self.model_policy_opt, me.model_policy, me.model_policy_opt, grads
                )
                v_grads = jax.grad(self.critic_loss, argnums=1)(
                    other, me.model_value, batch
                )
                value, v_opt = _step(
                    self.model_value_opt, me.model_value, me.model_value_opt, v_grads
                )
                return me.replace(
                    model_policy=policy,
                    model_policy_opt=opt,
                    model_value=value,
                    model_value_opt=v_opt,
                ), None

            logits = unroll(self.policy_net, me.model_policy, batch.obs[:-1, :, other])
            accuracy = jnp.mean(jnp.argmax(logits, -1) == batch.actions[..., other])
            me, _ = jax.lax.scan(fit, me, None, length=c.opp_model_steps)
            return me, accuracy

        me, accuracy = jax.lax.scan(
            data_batch, me, jax.random.split(key, c.opp_model_data_batches)
        )
        return me, accuracy[-1]

    # -- training ------------------------------------------------------------------
    def init_agent(self, key: jax.Array) -> AgentState:
        keys = jax.random.split(key, 4)
        policy = self.policy_net.init(keys[0], self.obs_size)
        value = self.value_net.init(keys[1], self.obs_size)
        model_policy = self.policy_net.init(keys[2], self.obs_size)
        model_value = self.value_net.init(keys[3], self.obs_size)
        return AgentState(
            policy,
            value,
            self.policy_opt.init(policy),
            self.value_opt.init(value),
            model_policy,
            model_value,
            self.model_policy_opt.init(model_policy),
            self.model_value_opt.init(model_value),
        )

    def init(self, key: jax.Array) -> tuple[AgentState, AgentState]:
        """Both agents' initial states."""
        key_0, key_1 = jax.random.split(key)
        return (self.init_agent(key_0), self.init_agent(key_1))

    def joint_update(
        self, key: jax.Array, agents: tuple[AgentState, AgentState]
    ) -> tuple[tuple[AgentState, AgentState], jax.Array]:
        """Both agents' updates from the same joint parameters, applied together.

        Returns:
            The new agents and ``[2]`` opponent-model accuracies (0 without models).
        """
        new, accuracy = [], []
        for seat in (0, 1):
            key_model, key_update = jax.random.split(jax.random.fold_in(key, seat))
            me, other = agents[seat], agents[1 - seat]
            if self.config.opp_model:
                me, acc = self.fit_opponent_model(key_model, seat, me, other.policy)
                other_policy, other_value = me.model_policy, me.model_value
            else:
                acc = jnp.zeros(())
                other_policy, other_value = other.policy, other.value
            new.append(
                self.agent_update(key_update, seat, me, other_policy, other_value)
            )
            accuracy.append(acc)
        return (new[0], new[1]), jnp.stack(accuracy)

    def evaluate(
        self, key: jax.Array, agents: tuple[AgentState, AgentState]
    ) -> dict[str, jax.Array]:
        """Average reward per step against each other and each scripted player,
        and the own-coin proportion when playing each other."""
        c = self.config
        keys = jax.random.split(key, 1 + 2 * len(OPPONENTS))
        batch = self.play(keys[0], (agents[0].policy, agents[1].policy))
        out = {
            "vs_each_other": batch.rewards.mean((0, 1)),
            "own_coin": batch.own_coin.sum() / jnp.maximum(batch.captures.sum(), 1),
        }
        for n, name in enumerate(OPPONENTS):
            scores = []
            for seat in (0, 1):
                mine = network_actor(self.policy_net, agents[seat].policy)
                script = scripted_actor(c.env, name, 1 - seat)
                actors = (mine, script) if seat == 0 else (script, mine)
                played = rollout(
                    keys[1 + 2 * n + seat],
                    self.env,
                    self.env_params,
                    actors,
                    c.batch_size,
                    c.rollout_len,
                )
                scores.append(played.rewards[..., seat].mean())
            out[f"vs_{name}"] = jnp.stack(scores)
        return out

    def update(
        self, agents: tuple[AgentState, AgentState], key: jax.Array
    ) -> tuple[tuple[AgentState, AgentState], Metrics]:
        """One joint update followed by an evaluation."""
        key_update, key_eval = jax.random.split(key)
        agents, accuracy = self.joint_update(key_update, agents)
        e = self.evaluate(key_eval, agents)
        return agents, Metrics(
            e["vs_each_other"],
            e["vs_alld"],
            e["vs_allc"],
            e["vs_tft"],
            e["own_coin"],
            accuracy,
        )


@functools.partial(jax.jit, static_argnums=0)
def jitted_update(
    learner: Learner, agents: tuple[AgentState, AgentState], key: jax.Array
) -> tuple[tuple[AgentState, AgentState], Metrics]:
    """:meth:`Learner.update`, compiled once per config (learners compare by
    config), for host loops that print between updates."""
    return learner.update(agents, key)


def make_train_segments(config: SampledConfig) -> tuple[Callable, Callable]:
    """:func:`make_train` cut so that a host loop can report between chunks.

    Returns:
        ``start(key) -> (agents, update_keys [n_update])``, the run's initial state,
        and ``run(agents, update_keys [K]) -> (agents, Metrics)`` with leaves
        ``[K, ...]``: ``K`` updates. Running ``start`` and then ``run`` over
        consecutive slices of the update keys is :func:`make_train`'s run.
    """
    learner = Learner(config)

    def start(key: jax.Array) -> tuple[tuple[AgentState, AgentState], jax.Array]:
        key_init, key_run = jax.random.split(key)
        return learner.init(key_init), jax.random.split(key_run, config.n_update)

    def run(
        agents: tuple[AgentState, AgentState], keys: jax.Array
    ) -> tuple[tuple[AgentState, AgentState], Metrics]:
        return jax.lax.scan(learner.update, agents, keys)

    return start, run


def make_train(config: SampledConfig):
    """``train(key) -> Metrics`` with leaves ``[n_update, ...]``: a whole run, pure
    and jittable; vmap it over keys for seeds."""
    start, run = make_train_segments(config)

    def train(key: jax.Array) -> Metrics:
        return run(*start(key))[1]

    return train


def chunk_length(num_updates: int, num_chunks: int = 10) -> int:
    """The largest divisor of ``num_updates`` that is at most
    ``num_updates / num_chunks`` (at least 1): updates per compiled chunk, so that
    one program covers the run and progress is reported about ``num_chunks``
    times."""
    target = max(1, num_updates // num_chunks)
    return max(d for d in range(1, target + 1) if num_updates % d == 0)


class SeedRun(NamedTuple):
    """Several seeds of one method trained together."""

    metrics: Metrics  # leaves [S, n_update, ...]
    compile_s: float  # wall seconds compiling the chunk program
    wall_s: float  # wall seconds training all seeds (compilation excluded)
    cpu_s: float  # process CPU seconds (user + system) for the same


def train_seeds(
    config: SampledConfig,
    keys: jax.Array,
    on_chunk: Callable[[int, Metrics], None] | None = None,
) -> SeedRun:
    """Train one run per key, all seeds vmapped in one compiled program that
    covers :func:`chunk_length` updates and is called until the run is done.

    Seed ``s`` follows ``make_train(config)(keys[s])`` (same keys, same updates).

    Args:
        config: the run.
        keys: ``[S]`` PRNG keys, one per seed.
        on_chunk: called after each chunk with the number of updates done and
            that chunk's metrics (leaves ``[S, K, ...]``).
    """
    start, run = make_train_segments(config)
    agents, update_keys = jax.jit(jax.vmap(start))(keys)  # keys [S, n_update]
    length = chunk_length(config.n_update)
    time_0 = time.perf_counter()
    run_chunk = jax.jit(jax.vmap(run)).lower(agents, update_keys[:, :length]).compile()
    compile_s = time.perf_counter() - time_0
    cpu_0, wall_0 = time.process_time(), time.perf_counter()
    chunks = []
    for done in range(length, config.n_update + 1, length):
        agents, metrics = run_chunk(agents, update_keys[:, done - length : done])
        chunks.append(jax.tree.map(np.asarray, metrics))
        if on_chunk is not None:
            on_chunk(done, chunks[-1])
    metrics = jax.tree.map(lambda *xs: np.concatenate(xs, 1), *chunks)
    return SeedRun(
        metrics,
        compile_s,
        time.perf_counter() - wall_0,
        time.process_time() - cpu_0,
    )


def env_steps(config: SampledConfig) -> int:
    """Environment steps (both agents' rollouts, lookaheads and opponent-model data;
    evaluation excluded) of one training run."""
    per_update = 2 * config.outer_steps * (config.inner_steps + 1)
    if config.opp_model:
        per_update += 2 * config.opp_model_data_batches
    return config.n_update * per_update * config.batch_size * config.rollout_len


def chunk_line(label: str, config: SampledConfig, done: int, chunk: Metrics) -> str:
    """One progress line of :func:`train_seeds`'s ``on_chunk``: the outer steps
    done and each seed's last evaluation against the other agent and ALLD (and,
    in the coin game, its share of its own coins)."""
    line = (
        f"{label} outer steps {done * config.outer_steps}: vs each other "
        + " ".join(f"{v:.3f}" for v in chunk.vs_each_other[:, -1].mean(-1))
        + ", vs ALLD "
        + " ".join(f"{v:.3f}" for v in chunk.vs_alld[:, -1].mean(-1))
    )
    if config.env == "coin":
        line += ", own coin " + " ".join(f"{v:.3f}" for v in chunk.own_coin[:, -1])
    return line


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% Student-t interval over ``[n]`` seeds."""
    return float(np.mean(values)), float(half_width(values, method="t"))


def summarise_seeds(run: SeedRun, config: SampledConfig) -> dict[str, Any]:
    """The last update's evaluation of :func:`train_seeds`'s seeds, each figure's
    mean with its 95% Student-t half-width over seeds (``ci95``) and every
    seed's value (``per_seed``); the curves over outer steps (seed means and
    half-widths); the run's compile, wall and CPU seconds and its environment
    steps (:func:`env_steps`)."""
    stack = run.metrics  # [S, U, ...]
    num_seeds = int(stack.vs_each_other.shape[0])
    final = {
        name: getattr(stack, name)[:, -1].mean(-1)
        for name in ("vs_each_other", "vs_alld", "vs_allc", "vs_tft")
    }
    entry: dict = {"own_coin_proportion": None, "ci95": {}}
    for name, values in final.items():
        entry[name], entry["ci95"][name] = _mean_ci(values)
    entry["per_seed"] = {name: values.tolist() for name, values in final.items()}
    if config.env == "coin":
        own = stack.own_coin[:, -1]
        entry["own_coin_proportion"], entry["ci95"]["own_coin_proportion"] = _mean_ci(
            own
        )
        entry["per_seed"]["own_coin_proportion"] = own.tolist()
    outer = np.arange(1, config.n_update + 1) * config.outer_steps
    entry["curves"] = {
        "outer_steps": outer.tolist(),
        "vs_each_other": stack.vs_each_other.mean(-1).mean(0).tolist(),
        "vs_each_other_ci95": half_width(
            stack.vs_each_other.mean(-1), method="t"
        ).tolist(),
        "vs_alld": stack.vs_alld.mean(-1).mean(0).tolist(),
        "vs_alld_ci95": half_width(stack.vs_alld.mean(-1), method="t").tolist(),
        "own_coin": stack.own_coin.mean(0).tolist(),
    }
    entry["compile_s"] = run.compile_s
    entry["wall_s"] = run.wall_s
    entry["cpu_s"] = run.cpu_s
    entry["cpu_s_per_outer_step_per_seed"] = run.cpu_s / (
        num_seeds * config.n_update * config.outer_steps
    )
    entry["env_steps_per_run"] = env_steps(config)
    return entry
