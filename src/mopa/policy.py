"""Team policies as data: a small spec that rebuilds the network, pure act
functions, and :func:`load_policy` for trained checkpoints.

A team policy maps the observations of every agent of one team, ``[A, D]``, to one
action per agent, ``[A]``. Recurrent policies carry a hidden state ``[A, H]``
(``H = 0`` for feed-forward ones, so every caller treats them alike). Nothing here
imports training code: a checkpoint is loaded from its spec and parameters alone.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.batching import map_batched
from mopa.core.checkpoint import POLICY_FILE, POLICY_FORMAT, read_msgpack
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.models import Actor, QNetwork, RecurrentQNetwork

POLICY_KINDS = ("q", "rnn_q", "actor", "random")

ActFn = Callable[..., tuple[jax.Array, jax.Array]]
"""``act(params, key, obs [A, D], carry [A, H], reset [A], greedy) -> (actions [A],
carry [A, H])``."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PolicySpec:
    """How to rebuild and run one team's acting network."""

    kind: str
    """``"q"`` (argmax Q), ``"rnn_q"`` (GRU Q-network), ``"actor"`` (categorical
    policy) or ``"random"`` (uniform, no parameters)."""
    num_agents: int
    """Agents in the team (``A``)."""
    obs_size: int
    """Size of one agent's observation (``D``), before the agent one-hot."""
    num_actions: int
    """Discrete actions per agent."""
    hidden: tuple[int, ...] = (128, 128)
    """Widths of the network's hidden layers."""
    activation: str = "relu"
    """Hidden activation."""
    agent_id: bool = True
    """Append a one-hot of the agent's index in its team to its observation."""
    num_opponents: int = 0
    """Opponent-action head size (OA-IQL); 0 for none."""
    opponent_actions: int = 0
    """Actions per opponent in the opponent head."""

    def __post_init__(self):
        if self.kind not in POLICY_KINDS:
            raise InvalidParameterError(
                f"policy kind must be one of {POLICY_KINDS}, got {self.kind!r}"
            )
        for name in ("num_agents", "obs_size", "num_actions"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"policy {name} must be >= 1, got {getattr(self, name)}"
                )
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))

    @property
    def input_size(self) -> int:
        return self.obs_size + (self.num_agents if self.agent_id else 0)

    @property
    def carry_size(self) -> int:
        return self.hidden[-1] if self.kind == "rnn_q" else 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicySpec:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise InvalidParameterError(f"unknown policy spec field {unknown[0]!r}")
        return cls(**data)

    def module(self):
        """The Flax module of this policy (``None`` for ``random``)."""
        common = dict(
            num_actions=self.num_actions,
            hidden=self.hidden,
            activation=self.activation,
        )
        if self.kind == "q":
            return QNetwork(
                **common,
                num_opponents=self.num_opponents,
                opponent_actions=self.opponent_actions,
            )
        if self.kind == "rnn_q":
            return RecurrentQNetwork(
                **common,
                num_opponents=self.num_opponents,
                opponent_actions=self.opponent_actions,
            )
        if self.kind == "actor":
            return Actor(**common)
        return None


def agent_inputs(spec: PolicySpec, obs: jax.Array) -> jax.Array:
    """Network inputs ``[..., A, input_size]`` from observations ``[..., A, D]``."""
    if not spec.agent_id:
        return obs
    eye = jnp.broadcast_to(
        jnp.eye(spec.num_agents, dtype=obs.dtype), (*obs.shape[:-1], spec.num_agents)
    )
    return jnp.concatenate([obs, eye], -1)


def init_params(spec: PolicySpec, key: jax.Array) -> Any:
    """Fresh parameters for ``spec`` (an empty dict for ``random``)."""
    module = spec.module()
    if module is None:
        return {}
    x = jnp.zeros((spec.num_agents, spec.input_size))
    if spec.kind == "rnn_q":
        carry = jnp.zeros((spec.num_agents, spec.carry_size))
        reset = jnp.zeros((spec.num_agents,), bool)
        return module.init(key, carry, x, reset)
    return module.init(key, x)


def fit_actor(
    spec: PolicySpec,
    obs: Any,
    actions: Any,
    key: jax.Array,
    *,
    num_updates: int,
    batch_size: int,
    lr: float,
    label_smoothing: float = 0.0,
    params: Any = None,
) -> tuple[Any, np.ndarray]:
    """Fit a fresh actor of ``spec`` to a teacher's actions by cross-entropy
    (Adam, uniform minibatches of examples drawn with replacement, one jitted
    scan), optionally with label smoothing (so that the actor still explores
    when a trainer takes over).

    Args:
        spec: an ``actor`` spec.
        obs: ``[N, A, D]`` the team's observations, one example per row.
        actions: ``[N, A]`` the teacher's action of every agent.
        params: the actor's weights to start from (a warm start, e.g. the
            previous round of :func:`mopa.planning.distill.dagger`); ``None``
            for a fresh actor (``key``'s initialisation).

    Returns:
        ``(params, losses [num_updates])``.

    Raises:
        InvalidParameterError: another kind of spec, or shapes that do not fit.
    """
    import optax

    if spec.kind != "actor":
        raise InvalidParameterError(f"fit_actor fits an actor spec, got {spec.kind!r}")
    obs, actions = jnp.asarray(obs, jnp.float32), jnp.asarray(actions)
    shape = (spec.num_agents, spec.obs_size)
    if obs.ndim != 3 or obs.shape[1:] != shape or actions.shape != obs.shape[:2]:
        raise InvalidParameterError(
            f"obs must be [N, {shape[0]}, {shape[1]}] and actions [N, "
            f"{shape[0]}], got {tuple(obs.shape)} and {tuple(actions.shape)}"
        )
    if len(obs) == 0:
        raise InvalidParameterError("fit_actor needs at least one example")
    for name, value in (("num_updates", num_updates), ("batch_size", batch_size)):
        if value < 1:
            raise InvalidParameterError(f"{name} must be >= 1, got {value}")
    key_init, key_batches = jax.random.split(key)
    module = spec.module()
    optimiser = optax.adam(lr)
    inputs = agent_inputs(spec, obs)
    targets = optax.smooth_labels(
        jax.nn.one_hot(actions, spec.num_actions), label_smoothing
    )

    def loss_fn(params, batch):
        logits = module.apply(params, inputs[batch])
        return optax.softmax_cross_entropy(logits, targets[batch]).mean()

    def update(carry, key_batch):
        params, opt_state = carry
        batch = jax.random.randint(key_batch, (batch_size,), 0, len(actions))
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = optimiser.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    @jax.jit
    def fit(params, keys):
        (params, _), losses = jax.lax.scan(
            update, (params, optimiser.init(params)), keys
        )
        return params, losses

    if params is None:
        params = init_params(spec, key_init)
    params, losses = fit(params, jax.random.split(key_batches, num_updates))
    return jax.tree.map(np.asarray, params), np.asarray(losses)


def initial_carry(spec: PolicySpec) -> jax.Array:
    """Zero carry ``[A, H]`` (``H = 0`` for feed-forward policies)."""
    return jnp.zeros((spec.num_agents, spec.carry_size), jnp.float32)


def sample_categorical(key: jax.Array, logits: jax.Array) -> jax.Array:
    """One draw per row of ``logits [..., n]`` by inverting the CDF with a single
    uniform per row (cheaper than Gumbel-max, which needs ``n`` draws per row).

    Returns:
        ``[...]`` int32 actions.
    """
    cdf = jnp.cumsum(jax.nn.softmax(logits, -1), -1)
    u = jax.random.uniform(key, (*logits.shape[:-1], 1))
    index = jnp.sum(cdf < u, -1)
    return jnp.minimum(index, logits.shape[-1] - 1).astype(jnp.int32)


def greedy_action(values: jax.Array) -> jax.Array:
    """``[..., n] -> [...]`` int32: the index of the largest value (ties to the
    lowest index), as ``jnp.argmax``.

    It is the argmax of ``values`` minus their maximum. For finite values that is
    the same index: the maximum maps to exactly 0 and every other entry to a
    negative number (the difference of two distinct floats is never 0). The
    subtraction ends the network that produced ``values`` with a plain reduction,
    so XLA's CPU backend runs the whole network as one fused kernel; a bare argmax
    (a reduction over pairs) stops that fusion. See :func:`apply_by_rows`.
    """
    shifted = values - jnp.max(values, -1, keepdims=True)
    return jnp.argmax(shifted, -1).astype(jnp.int32)


def apply_by_rows(
    module: Any, params: Any, *inputs: jax.Array, method: Any = None
) -> Any:
    """``module.apply(params, *inputs, method=method)`` for a feed-forward network
    acting on the last axis of every input ``[..., D_i]`` (all with the same
    leading axes); the same numbers, computed on ``[rows, D_i]`` under vmap.

    Under ``vmap`` a network's layers see every batched axis: a planner's rollouts
    reach it as ``[games, candidates, rollouts, agents, D]``, and XLA's CPU backend
    runs the bias and activation of each layer over that many-axis shape far more
    slowly than over ``[rows, D]`` (about 3x when the layers are fused into one
    kernel). Here each vmap level whose weights are shared folds its axis into the
    rows; a level that maps over weights (a tournament's cells) runs the network
    for one entry after another (:func:`~mopa.core.batching.map_batched`), each on
    its own rows (a product batched over many entries' weights ran slower than the
    layered network). Each row's arithmetic is unchanged, so ``method`` must treat
    rows independently. For inference only (the batching rule has no reverse-mode
    derivative).
    """

    leads = {np.shape(x)[:-1] for x in inputs}
    if len(leads) != 1:
        raise InvalidParameterError(
            f"apply_by_rows: needs one or more inputs with the same leading axes, "
            f"got shapes {[np.shape(x) for x in inputs]}"
        )

    def plain(params, *inputs):
        return module.apply(params, *inputs, method=method)

    apply = jax.custom_batching.custom_vmap(plain)

    def fold(fn, params, *inputs):
        lead = inputs[0].shape[:-1]
        out = fn(params, *(x.reshape(-1, x.shape[-1]) for x in inputs))
        return jax.tree.map(lambda y: y.reshape(*lead, *y.shape[1:]), out)

    @apply.def_vmap
    def rule(axis_size, in_batched, params, *inputs):
        params_batched, *inputs_batched = in_batched
        if any(jax.tree.leaves(params_batched)):
            # Weights that differ along this axis: the plain network per entry, one
            # entry after another (folding again here would call this rule without
            # end).
            out = map_batched(
                lambda p, *xs: fold(plain, p, *xs), in_batched, params, *inputs
            )
        else:  # shared weights: fold the axis into the rows, for outer levels too
            inputs = [
                x if b else jnp.broadcast_to(x, (axis_size, *x.shape))
                for x, b in zip(inputs, inputs_batched, strict=True)
            ]
            out = fold(apply, params, *inputs)
        return out, jax.tree.map(lambda _: True, out)

    return apply(params, *inputs)


def make_act_fn(spec: PolicySpec) -> ActFn:
    """The pure act function of ``spec``; see :data:`ActFn`.

    Q policies act greedily (ties to the lowest index); actors sample from their
    categorical distribution, or take its mode when ``greedy``.
    """
    module = spec.module()

    def act(params, key, obs, carry, reset, greedy: bool = True):
        if spec.kind == "random":
            actions = jax.random.randint(key, obs.shape[:-1], 0, spec.num_actions)
            return actions.astype(jnp.int32), carry
        x = agent_inputs(spec, obs)
        if spec.kind == "rnn_q":
            carry, (q, _) = module.apply(params, carry, x, reset)
            return jnp.argmax(q, -1).astype(jnp.int32), carry
        if spec.kind == "q":
            q, _ = module.apply(params, x)
            return jnp.argmax(q, -1).astype(jnp.int32), carry
        logits = module.apply(params, x)
        if greedy:
            return jnp.argmax(logits, -1).astype(jnp.int32), carry
        return sample_categorical(key, logits), carry

    return act


@dataclasses.dataclass(frozen=True)
class Policy:
    """A loaded team policy: call it with one team's observations.

    ``policy(obs [A, D], key=None) -> actions [A]`` for feed-forward policies;
    recurrent ones also take and return ``carry`` (see :meth:`step`).
    """

    spec: PolicySpec
    params: Any
    team: str
    env: str
    algo: str

    def step(
        self,
        key: jax.Array,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
        greedy: bool = True,
    ) -> tuple[jax.Array, jax.Array]:
        """``(key, obs [A, D], carry [A, H], reset [A]) -> (actions [A], carry)``."""
        return _jitted_act(self.spec)(self.params, key, obs, carry, reset, greedy)

    def __call__(
        self, obs: jax.Array, key: jax.Array | None = None, greedy: bool = True
    ) -> jax.Array:
        key = jax.random.key(0) if key is None else key
        carry = initial_carry(self.spec)
        reset = jnp.ones((self.spec.num_agents,), bool)
        return self.step(key, jnp.asarray(obs), carry, reset, greedy)[0]


_ACT_CACHE: dict[PolicySpec, Callable] = {}


def _jitted_act(spec: PolicySpec) -> Callable:
    if spec not in _ACT_CACHE:
        _ACT_CACHE[spec] = jax.jit(make_act_fn(spec), static_argnums=5)
    return _ACT_CACHE[spec]


class PolicyFile(NamedTuple):
    """A policy checkpoint as read: every learning team's spec and parameters."""

    algo: str
    env: str
    env_overrides: dict[str, Any]
    teams: dict[str, tuple[Any, Any]]
    """``{team name: (PolicySpec, params with a leading seed axis [S, ...])}``."""
    num_seeds: int


def read_policy_file(path: str | Path) -> PolicyFile:
    """Read a policy checkpoint (or the one in a run folder) whole.

    Raises:
        CheckpointError: the file is missing, corrupt, not a policy checkpoint, or
            holds no team policies.
    """
    path = Path(path)
    if path.is_dir():
        path = path / POLICY_FILE
    data = read_msgpack(path, POLICY_FORMAT)
    entries = data.get("teams") or {}
    if not entries:
        raise CheckpointError(f"{path} holds no team policies")
    teams = {}
    try:
        overrides = json.loads(data["env_overrides"])
        for name, entry in entries.items():
            spec = PolicySpec.from_dict(json.loads(entry["spec"]))
            teams[name] = (spec, jax.tree.map(jnp.asarray, entry["params"]))
        algo, env = str(data["algo"]), str(data["env"])
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: damaged policy entry ({error})") from None
    leaves = jax.tree.leaves(next(iter(teams.values()))[1])
    num_seeds = int(leaves[0].shape[0]) if leaves else 1
    return PolicyFile(algo, env, overrides, teams, num_seeds)


def read_policy_checkpoint(path: str | Path, team: str | None = None, seed: int = 0):
    """Load one team's :class:`~mopa.policy.Policy` (see :func:`load_policy`)."""
    policy_file = read_policy_file(path)
    name = next(iter(policy_file.teams)) if team is None else team
    if name not in policy_file.teams:
        raise InvalidParameterError(
            f"team {name!r} is not in {path}; it holds {sorted(policy_file.teams)}"
        )
    if not 0 <= seed < policy_file.num_seeds:
        raise InvalidParameterError(
            f"seed must be in [0, {policy_file.num_seeds - 1}] for {path}, got {seed}"
        )
    spec, stacked = policy_file.teams[name]
    params = jax.tree.map(lambda x: x[seed], stacked)
    return Policy(
        spec=spec,
        params=params,
        team=name,
        env=policy_file.env,
        algo=policy_file.algo,
    )


def load_policy(path: str | Path, team: str | None = None, seed: int = 0) -> Policy:
    """Load one team's policy from a training checkpoint.

    Args:
        path: a ``checkpoint.msgpack`` written by ``mopa train`` (or its run folder).
        team: which team (default: the checkpoint's first learning team).
        seed: which seed of a multi-seed run.

    Raises:
        CheckpointError: the file is missing, corrupt or not a policy checkpoint.
        InvalidParameterError: unknown team or seed out of range.
    """
    return read_policy_checkpoint(path, team=team, seed=seed)
