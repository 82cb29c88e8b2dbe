"""MAPPO and IPPO: one shared categorical actor per team, PPO updates.

Each update plays ``num_steps`` steps in ``num_envs`` games, sampling every
learning team's actions from its actor (frozen teams act with their fixed policy).
Values are computed once per rollout, batched, from the true next state, so
episodes cut by the step limit are bootstrapped. Advantages come from GAE per
agent; ``update_epochs`` passes of ``num_minibatches`` minibatches then optimise the
clipped surrogate, a clipped value loss and an entropy bonus (Yu et al. 2022,
"The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games").

Critic inputs: ``mappo``'s critic reads the game's global state
(``env.global_state``; all observations concatenated when the game has none) and
its own team's observations, once per game, and outputs one value per agent;
``ippo``'s reads each agent's own observation and index. A team's critic never
sees the other team's observations, so private inputs (such as the prey's hidden
intent) stay private to their team; unless ``critic_input="all_obs"``, where
``mappo``'s critic reads every agent's observation concatenated (the research's
world state, which shows the prey's intent to the predators' critic).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from mopa.algos.common import (
    EnvCarry,
    TeamInfo,
    env_step,
    episode_metrics,
    reset_envs,
    setup_run,
)
from mopa.algos.mappo.config import MAPPOConfig
from mopa.algos.trainer import Trainer, scan_train
from mopa.core.returns import compute_gae
from mopa.models import Actor, Critic
from mopa.models.networks import ACTIVATIONS
from mopa.policy import PolicySpec, agent_inputs, init_params, sample_categorical


def _transpose_rows(x: jax.Array) -> jax.Array:
    """``x.T`` for ``x [N, O]``, through blocks of 16 rows. XLA's CPU transpose of
    a tall matrix was the largest single cost of the minibatch update; by blocks,
    a hidden layer's backward pass runs about 1.7x faster. The barriers keep
    XLA's simplifier from turning the steps back into one plain transpose."""
    n, o = x.shape
    if n % 16:
        return x.T
    blocks = jax.lax.optimization_barrier(x.reshape(n // 16, 16, o).transpose(0, 2, 1))
    return jax.lax.optimization_barrier(blocks.transpose(1, 0, 2).reshape(o, n))


@jax.custom_vjp
def _dense(x: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
    """Flax's ``Dense``: ``x [..., I] @ kernel [I, O] + bias [O]``."""
    y = jax.lax.dot_general(x, kernel, (((x.ndim - 1,), (0,)), ((), ())))
    return y + bias.reshape((1,) * (y.ndim - 1) + (-1,))


def _dense_fwd(x, kernel, bias):
    return _dense(x, kernel, bias), (x, kernel)


def _dense_bwd(residuals, grad):
    """The gradients autodiff gives, computed by the same matmul and reductions
    (so bit for bit the same when vmapped over seeds, as every training run is),
    with the transpose of the output gradient done by :func:`_transpose_rows`."""
    x, kernel = residuals
    rows, grad_rows = x.reshape(-1, x.shape[-1]), grad.reshape(-1, grad.shape[-1])
    grad_kernel = jax.lax.dot_general(
        _transpose_rows(grad_rows), rows, (((1,), (0,)), ((), ()))
    ).T
    grad_bias = grad.sum(tuple(range(grad.ndim - 1)))
    grad_x = jax.lax.dot_general(grad, kernel, (((grad.ndim - 1,), (1,)), ((), ())))
    return grad_x, grad_kernel, grad_bias


_dense.defvjp(_dense_fwd, _dense_bwd)


def _stable_argsort(keys: jax.Array) -> jax.Array:
    """Stable argsort of ``keys [n]`` uint32 (``n <= 2**16``), as two passes of a
    least-significant-digit radix sort whose digits carry the index in their low
    bits: XLA sorts a lone uint32 array several times faster than a key-value
    pair."""
    bits = max(1, (keys.shape[0] - 1).bit_length())
    mask = (1 << bits) - 1
    index = jnp.arange(keys.shape[0], dtype=jnp.uint32)
    by_low = jax.lax.sort(((keys & mask) << bits) | index) & mask
    by_high = jax.lax.sort(((keys[by_low] >> bits) << bits) | index) & mask
    return by_low[by_high].astype(jnp.int32)


def permutation(key: jax.Array, n: int) -> jax.Array:
    """``jax.random.permutation(key, n)``, the same numbers, about twice as fast
    for minibatch sizes: the same rounds of random 32-bit sort keys, each sorted
    by :func:`_stable_argsort` instead of a key-value sort."""
    if (n - 1).bit_length() > 16:
        return jax.random.permutation(key, n)
    # As jax.random's shuffle: enough rounds that keys rarely collide in all.
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    order = jnp.arange(n)
    for _ in range(rounds):
        key, key_sort = jax.random.split(key)
        order = order[_stable_argsort(jax.random.bits(key_sort, (n,), jnp.uint32))]
    return order


def actor_logits(params: Any, x: jax.Array, activation: str) -> jax.Array:
    """:class:`~mopa.models.Actor`'s logits ``[..., num_actions]`` from its
    parameters, for inputs ``[..., A, I]`` in the PPO loss: the same forward pass
    as ``Actor.apply``, with a faster backward pass (:func:`_dense_bwd`)."""
    layers = params["params"]
    act = ACTIVATIONS[activation]
    trunk = layers["Trunk_0"]
    for i in range(len(trunk)):
        layer = trunk[f"Dense_{i}"]
        x = act(_dense(x, layer["kernel"], layer["bias"]))
    return _dense(x, layers["Dense_0"]["kernel"], layers["Dense_0"]["bias"])


def plain_actor_logits(params: Any, x: jax.Array, activation: str) -> jax.Array:
    """:func:`actor_logits` the plain way: ``Actor.apply`` differentiated by
    autodiff (the reference the fast path is tested and measured against)."""
    layers = params["params"]
    trunk = layers["Trunk_0"]
    hidden = tuple(trunk[f"Dense_{i}"]["kernel"].shape[1] for i in range(len(trunk)))
    num_actions = layers["Dense_0"]["kernel"].shape[1]
    return Actor(num_actions, hidden, activation).apply(params, x)


def all_observations(obs: tuple) -> jax.Array:
    """Every agent's observation in one row per game: ``[..., sum_t A_t D_t]`` from
    per-team ``[..., A_t, D_t]``, teams and agents in order."""
    return jnp.concatenate([o.reshape(*o.shape[:-2], -1) for o in obs], -1)


def make_critic_inputs(
    config: MAPPOConfig, env: Any, env_params: Any, specs: dict[int, PolicySpec]
):
    """``critic_inputs(t, state, obs)``: what team ``t``'s critic reads, from game
    states ``[...]`` and per-team observations ``[..., A_t, D_t]``.

    Returns rows ``[..., C]`` (one per game; a value per agent) for ``mappo``:
    ``critic_input="state"`` gives the game's global state (every observation when
    the game has none) and the team's own observations, ``"all_obs"`` every agent's
    observation. ``ippo`` gives rows ``[..., A, C]``: each agent's observation and
    index.
    """
    has_global_state = hasattr(env, "global_state")

    def global_state(state, obs):  # [..., G] for leading axes [...]
        if has_global_state:
            fn = lambda s: env.global_state(s, env_params)  # noqa: E731
            for _ in range(obs[0].ndim - 2):
                fn = jax.vmap(fn)
            return fn(state)
        return all_observations(obs)

    def critic_inputs(t, state, obs):
        own = obs[t]  # [..., A, D]
        if config.critic_input == "all_obs":
            return all_observations(obs)
        if config.centralised:
            return jnp.concatenate(
                [global_state(state, obs), own.reshape(*own.shape[:-2], -1)], -1
            )
        return agent_inputs(specs[t], own)

    return critic_inputs


class PPOLearner(NamedTuple):
    actor_params: Any
    critic_params: Any
    actor_opt: Any
    critic_opt: Any


class PPOCarry(NamedTuple):
    learners: dict  # team index (str) -> PPOLearner
    env: EnvCarry
    update: jax.Array  # [] int32
    key: jax.Array


class Batch(NamedTuple):
    """One team's rollout, flattened to samples ``[S, A, ...]``."""

    obs: jax.Array  # [S, A, D]
    critic_in: jax.Array  # [S, C] (mappo) or [S, A, C] (ippo)
    actions: jax.Array  # [S, A]
    log_probs: jax.Array  # [S, A]
    values: jax.Array  # [S, A]
    advantages: jax.Array  # [S, A]
    targets: jax.Array  # [S, A]


def actor_spec(config: MAPPOConfig, info: TeamInfo) -> PolicySpec:
    """The actor a MAPPO run of ``config`` trains for the team ``info``."""
    return PolicySpec(
        kind="actor",
        num_agents=info.num_agents,
        obs_size=info.obs_size,
        num_actions=info.num_actions,
        hidden=config.hidden,
        activation=config.activation,
        agent_id=config.agent_id,
    )


def make_trainer(
    config: MAPPOConfig, game: tuple[Any, Any] | None = None, fast_paths: bool = True
) -> Trainer:
    """MAPPO / IPPO for ``config``; see the module docstring.

    Args:
        game: ``(env, params)`` to train on instead of ``config.env``.
        fast_paths: the actor's hand-written backward pass (:func:`actor_logits`)
            and the faster minibatch shuffle (:func:`permutation`); ``False``
            takes the plain paths (:func:`plain_actor_logits`,
            ``jax.random.permutation``), which give the same numbers bit for bit.
    """
    logits_fn = actor_logits if fast_paths else plain_actor_logits
    shuffle = permutation if fast_paths else jax.random.permutation
    run = setup_run(config, game)
    base_env, env, env_params, infos = run[:4]
    num_teams = len(infos)
    specs = {
        t: actor_spec(config, info)
        for t, info in enumerate(infos)
        if info.name not in config.frozen_teams
    }
    frozen_fns = run.frozen_fns
    hidden_sizes = run.hidden_sizes(specs)
    actors = {t: spec.module() for t, spec in specs.items()}
    critics = {
        t: Critic(
            config.hidden,
            config.activation,
            num_values=infos[t].num_agents if config.centralised else 1,
        )
        for t in specs
    }
    critic_inputs = make_critic_inputs(config, base_env, env_params, specs)

    def value(t, params, inputs):  # [..., A]
        values = critics[t].apply(params, inputs)
        return values if config.centralised else values[..., 0]

    def make_optimiser(num_updates):
        if config.anneal_lr:
            total = num_updates * config.update_epochs * config.num_minibatches
            lr = optax.linear_schedule(config.lr, 0.0, max(total, 1))
        else:
            lr = config.lr
        return optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm),
            optax.adam(lr, eps=1e-5),
        )

    optimiser = make_optimiser(config.num_updates)

    def behaviour(t, params):
        spec, actor = specs[t], actors[t]

        def act(key, obs, first, hidden):
            logits = actor.apply(params, agent_inputs(spec, obs))
            actions = sample_categorical(key, logits)
            log_probs = jnp.take_along_axis(
                jax.nn.log_softmax(logits), actions[..., None], -1
            )[..., 0]
            return actions, hidden, log_probs

        return act

    def init(key):
        key_env, key_params, key_run = jax.random.split(key, 3)
        env_carry = reset_envs(env, env_params, key_env, config.num_envs, hidden_sizes)
        learners = {}
        keys = jax.random.split(key_params, 2 * len(specs)).reshape(len(specs), 2)
        for t, (key_actor, key_critic) in zip(specs, keys, strict=True):
            actor_params = init_params(specs[t], key_actor)
            example_obs = tuple(o[0] for o in env_carry.obs)
            example_state = jax.tree.map(lambda x: x[0], env_carry.state.env_state)
            critic_params = critics[t].init(
                key_critic, critic_inputs(t, example_state, example_obs)
            )
            learners[str(t)] = PPOLearner(
                actor_params,
                critic_params,
                optimiser.init(actor_params),
                optimiser.init(critic_params),
            )
        return PPOCarry(learners, env_carry, jnp.zeros((), jnp.int32), key_run)

    def loss_fn(t, actor_params, critic_params, batch: Batch):
        logits = logits_fn(
            actor_params, agent_inputs(specs[t], batch.obs), config.activation
        )
        log_softmax = jax.nn.log_softmax(logits)
        log_probs = jnp.take_along_axis(log_softmax, batch.actions[..., None], -1)[
            ..., 0
        ]
        ratio = jnp.exp(log_probs - batch.log_probs)
        advantages = (batch.advantages - batch.advantages.mean()) / (
            batch.advantages.std() + 1e-8
        )
        surrogate = jnp.minimum(
            ratio * advantages,
            jnp.clip(ratio, 1 - config.clip_eps, 1 + config.clip_eps) * advantages,
        )
        entropy = -jnp.sum(jnp.exp(log_softmax) * log_softmax, -1).mean()
        actor_loss = -surrogate.mean() - config.ent_coef * entropy
        values = value(t, critic_params, batch.critic_in)
        clipped = batch.values + jnp.clip(
            values - batch.values, -config.clip_eps, config.clip_eps
        )
        value_loss = (
            0.5
            * jnp.maximum(
                (values - batch.targets) ** 2, (clipped - batch.targets) ** 2
            ).mean()
        )
        stats = {
            "actor_loss": actor_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "approx_kl": jnp.mean(batch.log_probs - log_probs),
        }
        return actor_loss + config.vf_coef * value_loss, stats

    def team_batch(t, learner, steps) -> Batch:
        critic_in = critic_inputs(t, steps.state, steps.obs)  # [T, E, A, C]
        next_in = critic_inputs(t, steps.next_state, steps.next_obs)
        values = value(t, learner.critic_params, critic_in)  # [T, E, A]
        next_values = value(t, learner.critic_params, next_in)
        terminated = steps.terminated
        if not config.bootstrap_truncation:
            terminated = steps.done
        expand = lambda x: jnp.broadcast_to(x[..., None], values.shape)  # noqa: E731
        advantages, targets = compute_gae(
            steps.rewards[t],
            values,
            next_values,
            expand(terminated),
            expand(steps.done),
            config.gamma,
            config.gae_lambda,
        )
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        return Batch(
            obs=flat(steps.obs[t]),
            critic_in=flat(critic_in),
            actions=flat(steps.actions[t]),
            log_probs=flat(steps.extras[t]),
            values=flat(values),
            advantages=flat(advantages),
            targets=flat(targets),
        )

    def learn_team(t, learner: PPOLearner, batch: Batch, key):
        def minibatch_step(learner, minibatch):
            grad_fn = jax.value_and_grad(
                lambda a, c: loss_fn(t, a, c, minibatch), argnums=(0, 1), has_aux=True
            )
            (_, stats), (actor_grads, critic_grads) = grad_fn(
                learner.actor_params, learner.critic_params
            )
            actor_updates, actor_opt = optimiser.update(
                actor_grads, learner.actor_opt, learner.actor_params
            )
            critic_updates, critic_opt = optimiser.update(
                critic_grads, learner.critic_opt, learner.critic_params
            )
            learner = PPOLearner(
                optax.apply_updates(learner.actor_params, actor_updates),
                optax.apply_updates(learner.critic_params, critic_updates),
                actor_opt,
                critic_opt,
            )
            return learner, stats

        def epoch(learner, key):
            order = shuffle(key, config.steps_per_update)
            minibatches = jax.tree.map(
                lambda x: x[order].reshape(
                    config.num_minibatches, config.minibatch_size, *x.shape[1:]
                ),
                batch,
            )
            return jax.lax.scan(minibatch_step, learner, minibatches)

        learner, stats = jax.lax.scan(
            epoch, learner, jax.random.split(key, config.update_epochs)
        )
        return learner, jax.tree.map(jnp.mean, stats)

    def update(carry: PPOCarry):
        key, key_collect, key_learn = jax.random.split(carry.key, 3)
        act_fns = tuple(
            behaviour(t, carry.learners[str(t)].actor_params)
            if t in specs
            else frozen_fns[t]
            for t in range(num_teams)
        )
        env_carry, steps = jax.lax.scan(
            lambda c, k: env_step(env, env_params, act_fns, k, c),
            carry.env,
            jax.random.split(key_collect, config.num_steps),
        )
        learners = {}
        metrics = episode_metrics(steps.metrics, base_env.team_names)
        for t, k in zip(specs, jax.random.split(key_learn, len(specs)), strict=True):
            learner = carry.learners[str(t)]
            learners[str(t)], stats = learn_team(
                t, learner, team_batch(t, learner, steps), k
            )
            for name, value in stats.items():
                metrics[f"{name}/{infos[t].name}"] = value
        return PPOCarry(learners, env_carry, carry.update + 1, key), metrics

    def policies(carry: PPOCarry):
        return {
            infos[t].name: (specs[t], carry.learners[str(t)].actor_params)
            for t in specs
        }

    def learners(carry: PPOCarry):
        return {
            infos[t].name: {
                "actor": carry.learners[str(t)].actor_params,
                "critic": carry.learners[str(t)].critic_params,
            }
            for t in specs
        }

    def warm_start(carry: PPOCarry, weights: dict[str, Any]) -> PPOCarry:
        learners = dict(carry.learners)
        for t in specs:
            if infos[t].name in weights:
                actor = weights[infos[t].name]["actor"]
                critic = weights[infos[t].name]["critic"]
                learners[str(t)] = PPOLearner(
                    actor, critic, optimiser.init(actor), optimiser.init(critic)
                )
        return carry._replace(learners=learners)

    return Trainer(
        config,
        init,
        update,
        policies,
        base_env.team_names,
        learners=learners,
        warm_start=warm_start,
    )


def make_train(
    config: MAPPOConfig, game: tuple[Any, Any] | None = None, fast_paths: bool = True
):
    """``train(key) -> TrainOutput`` for the whole run (jit and vmap it);
    ``fast_paths`` as in :func:`make_trainer`."""
    return scan_train(make_trainer(config, game, fast_paths))
