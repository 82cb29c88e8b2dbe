"""Monte-Carlo lookahead: a planner that scores candidate root actions by short
rollouts through the true simulator, as a :class:`~mopa.players.Player`.

For every candidate root action of the planning team (Exp 3's OA-plan, Exp 6's
belief planner)::

    score(a) = 1/K sum_k [ sum_{t<H} gamma^t r_t  +  gamma^H w V(s_H) ]

over ``K`` rollouts of ``H`` steps from the current state: the team plays ``a`` at
the root and its own greedy policy after it; the opponents' actions are sampled at
every step from an opponent model (:mod:`mopa.planning.opponents`) under a latent
drawn once per rollout. ``r_t`` is the team's reward (the mean over its agents, or
``reward_fn``); ``V`` the leaf value (by default the mean over the team's agents of
``max_a Q``), counted only if the episode is still running at the horizon. Rewards
stop accumulating when the episode ends inside a rollout; nothing resets.

Candidates (``mode``):

* ``"per_agent"``: coordinate descent, ``A x n`` candidates. For agent ``i`` the
  candidates are its ``n`` actions while its teammates play their greedy actions at
  the root; each agent takes its own best candidate. Scores are ``[A, n]``.
* ``"joint"``: all ``n^A`` joint actions (:func:`joint_actions`, first agent most
  significant); the team takes the best. Scores are ``[n^A]``.

``H = 0`` is the greedy policy: :meth:`LookaheadPlayer.act` returns exactly what
``PolicyPlayer(own_spec).act`` returns, and the scores are the policy's own values
(Q-values or actor logits) of the candidates (per agent; the team mean for joint).

Keys (so a plain loop can replay a rollout): ``rollout_keys = split(key, K)`` when
``common_random_numbers`` (every candidate shares them, and so shares the opponent
latents and samples), else candidate ``c`` uses ``split(fold_in(key, c), K)``. A
rollout key splits into ``(key_latent, key_steps)``; ``split(key_steps, H)`` gives
one key per step, which splits into ``(key_opponent, key_env)``: the opponents'
sample and the simulator's step.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.core.checks import check_fields, check_unit
from mopa.envs.base import Env, TeamArrays
from mopa.envs.spaces import Discrete
from mopa.errors import InvalidParameterError, MopaError
from mopa.planning.opponents import OpponentHeadModel, OpponentModel
from mopa.policy import (
    PolicySpec,
    agent_inputs,
    apply_by_rows,
    greedy_action,
    make_act_fn,
)

MODES = ("per_agent", "joint")

RewardFn = Callable[[Any, TeamArrays, dict], jax.Array]
"""``(state after the step, rewards per team, info) -> []`` the team's reward."""
LeafFn = Callable[[Any, Any, jax.Array], jax.Array]
"""``(LookaheadParams, state, team obs [A, D]) -> []`` the value of a leaf state."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LookaheadConfig:
    """Shape and scoring of the Monte-Carlo lookahead (all static)."""

    num_rollouts: int = 5
    """``K``: rollouts per candidate root action."""
    horizon: int = 3
    """``H``: simulated steps per rollout; 0 acts greedily with the own network."""
    gamma: float = 0.95
    """Discount of rewards inside a rollout and of the leaf value."""
    mode: str = "per_agent"
    """``"per_agent"`` (coordinate descent, ``A x n`` candidates) or ``"joint"``
    (all ``n^A`` joint actions)."""
    leaf_weight: float = 1.0
    """Weight ``w`` of the leaf value ``gamma^H w V(s_H)``; 0 skips the leaf."""
    common_random_numbers: bool = True
    """Score every candidate on the same ``K`` rollout keys (the same opponent
    latents and samples), which lowers the variance of their comparison."""

    def __post_init__(self):
        check_fields(self)
        if not isinstance(self.num_rollouts, int | np.integer) or self.num_rollouts < 1:
            raise InvalidParameterError(
                f"num_rollouts must be an integer >= 1, got {self.num_rollouts!r}"
            )
        if not isinstance(self.horizon, int | np.integer) or self.horizon < 0:
            raise InvalidParameterError(
                f"horizon must be an integer >= 0, got {self.horizon!r}"
            )
        check_unit("gamma", self.gamma)
        if self.mode not in MODES:
            raise InvalidParameterError(
                f"mode must be one of {MODES}, got {self.mode!r}"
            )
        if not math.isfinite(self.leaf_weight):
            raise InvalidParameterError(
                f"leaf_weight must be finite, got {self.leaf_weight!r}"
            )


@struct.dataclass
class LookaheadParams:
    """Every number a :class:`LookaheadPlayer` uses (a pytree; may be vmapped)."""

    env_params: Any
    """The game's parameters the rollouts simulate with."""
    own_params: Any
    """The planning team's network weights (its policy after the root, its Q leaf)."""
    opponent_params: Any
    """The opponent model's numbers (weights, and a belief where it has one)."""
    leaf_params: Any = ()
    """Extra numbers for a ``leaf_fn`` (a critic's weights, say)."""


class Plan(NamedTuple):
    """One decision of the planner."""

    actions: jax.Array
    """``[A]`` int32 actions of the planning team."""
    scores: jax.Array
    """``[A, n]`` (``per_agent``) or ``[n^A]`` (``joint``) candidate scores."""
    carry: jax.Array
    """``[A, H]`` the own policy's carry after this step's observation."""


def joint_actions(num_agents: int, num_actions: int) -> np.ndarray:
    """``[num_actions ** num_agents, num_agents]`` int32: every joint action, in the
    order of the ``joint`` mode's scores (first agent most significant)."""
    return np.array(
        list(itertools.product(range(num_actions), repeat=num_agents)), np.int32
    ).reshape(num_actions**num_agents, num_agents)


@dataclasses.dataclass(frozen=True)
class LookaheadPlayer:
    """Monte-Carlo lookahead for team ``team`` of ``env``; see the module docstring.

    ``params`` is a :class:`LookaheadParams`. ``env`` must be the bare game whose
    ``state`` the caller passes (no auto-reset wrapper): rollouts step it directly.
    ``act`` is written for one game; ``vmap`` it over games.
    """

    env: Env
    """The game simulated (its structure; numbers come from ``params``)."""
    team: int | str
    """The planning team (index or name)."""
    config: LookaheadConfig
    """Rollout count, horizon, discount, mode, leaf weight."""
    opponent_model: OpponentModel
    """Distribution of every opponent's next action (agents of all other teams)."""
    own_spec: PolicySpec
    """The planning team's policy (``q``, ``rnn_q`` or ``actor``), played greedily
    at the root's teammates and after the root."""
    reward_fn: RewardFn | None = None
    """The team's reward per step; ``None``: the mean of its agents' rewards."""
    leaf_fn: LeafFn | None = None
    """The leaf value; ``None``: the mean over agents of ``max_a Q`` of the own
    network (a critic is a ``leaf_fn`` reading ``params.leaf_params``)."""

    def __post_init__(self):
        env = self.env
        if isinstance(self.team, str):
            try:
                object.__setattr__(self, "team", env.team_index(self.team))
            except MopaError:
                raise InvalidParameterError(
                    f"team: unknown team {self.team!r} for {env.name}; teams are "
                    f"{env.team_names}"
                ) from None
        if not 0 <= self.team < env.num_teams:
            raise InvalidParameterError(
                f"team must be in [0, {env.num_teams}), got {self.team}"
            )
        for t in range(env.num_teams):
            if not isinstance(env.action_space(t), Discrete):
                raise InvalidParameterError(
                    f"env: team {env.team_names[t]!r} of {env.name} has continuous "
                    "actions; the lookahead planner needs discrete actions"
                )
        spec = self.own_spec
        expected = {
            "num_agents": env.team_sizes[self.team],
            "obs_size": int(env.observation_space(self.team).shape[0]),
            "num_actions": env.action_space(self.team).n,
        }
        for name, value in expected.items():
            if getattr(spec, name) != value:
                raise InvalidParameterError(
                    f"own_spec: {name} is {getattr(spec, name)} but team "
                    f"{env.team_names[self.team]!r} of {env.name} has {value}"
                )
        if spec.kind == "random":
            raise InvalidParameterError(
                "own_spec: a 'random' policy has no greedy action to plan around"
            )
        uses_q_leaf = (
            self.leaf_fn is None
            and self.config.leaf_weight != 0
            and self.config.horizon > 0
        )
        if uses_q_leaf and spec.kind == "actor":
            raise InvalidParameterError(
                "leaf_fn: the own policy is an actor (no Q-values for the default "
                "leaf); give a leaf_fn (a critic) or set leaf_weight=0"
            )
        num_opponents = self.env.num_agents - self.num_agents
        if self.opponent_model.num_opponents != num_opponents:
            raise InvalidParameterError(
                f"opponent_model: predicts {self.opponent_model.num_opponents} "
                f"opponents but {env.name} has {num_opponents} outside team "
                f"{env.team_names[self.team]!r}"
            )

    # -- Player ------------------------------------------------------------------
    @property
    def num_agents(self) -> int:
        return self.env.team_sizes[self.team]

    @property
    def carry_size(self) -> int:
        return self.own_spec.carry_size

    @property
    def num_candidates(self) -> int:
        """Candidate root actions scored per decision (``A x n`` or ``n^A``)."""
        n = self.own_spec.num_actions
        if self.config.mode == "joint":
            return n**self.num_agents
        return self.num_agents * n

    def act(
        self,
        params: LookaheadParams,
        key: jax.Array,
        state: Any,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
    ) -> tuple[jax.Array, jax.Array]:
        """``(params, key, state, obs [A, D], carry [A, H], reset [A]) ->
        (actions [A] int32, carry [A, H])``; see :class:`~mopa.players.Player`."""
        if self.config.horizon == 0:
            return make_act_fn(self.own_spec)(
                params.own_params, key, obs, carry, reset, True
            )
        plan = self.plan(params, key, state, obs, carry, reset)
        return plan.actions, plan.carry

    def plan_scores(
        self,
        params: LookaheadParams,
        key: jax.Array,
        state: Any,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
    ) -> jax.Array:
        """The candidate scores of :meth:`plan`: ``[A, n]`` or ``[n^A]``."""
        return self.plan(params, key, state, obs, carry, reset).scores

    def plan(
        self,
        params: LookaheadParams,
        key: jax.Array,
        state: Any,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
    ) -> Plan:
        """Score every candidate and choose the team's actions.

        Args:
            params: a :class:`LookaheadParams`.
            key: the decision's key (see the module docstring for its use).
            state: the game's true state, simulated from.
            obs: ``[A, D]`` the team's observations of ``state``.
            carry: ``[A, H]`` the own policy's carry.
            reset: ``[A]`` bool, true on an episode's first step.

        Returns:
            A :class:`Plan`.
        """
        A, n = self.num_agents, self.own_spec.num_actions
        values, carry = self._own_values(params.own_params, obs, carry, reset)
        greedy = greedy_action(values)  # [A]
        candidates = self._candidates(greedy)  # [C, A]

        if self.config.horizon == 0:
            if self.config.mode == "per_agent":
                return self._choose(values, candidates, carry)
            # The team mean of each candidate's own values.
            taken = jnp.take_along_axis(values[None], candidates[..., None], -1)
            return self._choose(jnp.mean(taken[..., 0], -1), candidates, carry)

        K = self.config.num_rollouts
        root_obs = tuple(
            obs if u == self.team else o
            for u, o in enumerate(self.env.observe(state, params.env_params))
        )

        def score(root_actions, rollout_keys):
            returns = jax.vmap(
                lambda k: self._rollout(params, state, root_obs, carry, root_actions, k)
            )(rollout_keys)
            return jnp.mean(returns)

        if self.config.common_random_numbers:
            scores = jax.vmap(score, in_axes=(0, None))(
                candidates, jax.random.split(key, K)
            )
        else:
            candidate_keys = jax.vmap(
                lambda c: jax.random.split(jax.random.fold_in(key, c), K)
            )(jnp.arange(len(candidates)))
            scores = jax.vmap(score)(candidates, candidate_keys)
        if self.config.mode == "per_agent":
            scores = scores.reshape(A, n)
        return self._choose(scores, candidates, carry)

    # -- pieces ------------------------------------------------------------------
    def _candidates(self, greedy: jax.Array) -> jax.Array:
        """``[C, A]`` int32 root joint actions around the greedy ones ``[A]``."""
        A, n = self.num_agents, self.own_spec.num_actions
        if self.config.mode == "joint":
            return jnp.asarray(joint_actions(A, n))
        # Candidate (i, a): agent i plays a, its teammates their greedy actions.
        own = jnp.eye(A, dtype=bool)[:, None, :]  # [A, 1, A]
        action = jnp.arange(n, dtype=jnp.int32)[None, :, None]  # [1, n, 1]
        return jnp.where(own, action, greedy[None, None, :]).reshape(A * n, A)

    def _choose(self, scores: jax.Array, candidates: jax.Array, carry) -> Plan:
        if self.config.mode == "per_agent":
            actions = jnp.argmax(scores, -1)
        else:
            actions = candidates[jnp.argmax(scores)]
        return Plan(actions.astype(jnp.int32), scores, carry)

    def _own_values(self, own_params, obs, carry, reset):
        """The own policy's ``[A, n]`` Q-values (or actor logits) and next carry."""
        spec = self.own_spec
        module = spec.module()
        x = agent_inputs(spec, obs)
        if spec.kind == "rnn_q":
            carry, (q, _) = module.apply(own_params, carry, x, reset)
            return q, carry
        if spec.kind == "q":
            return apply_by_rows(module, own_params, x)[0], carry
        return apply_by_rows(module, own_params, x), carry

    def _reads_own_head(self, params: LookaheadParams) -> bool:
        """Whether the opponent model is the own network's opponent head, read from
        ``params.own_params`` in the same forward pass as the Q-values (static)."""
        model = self.opponent_model
        return (
            isinstance(model, OpponentHeadModel)
            and model.spec == self.own_spec
            and model.team == self.team
            and isinstance(params.opponent_params, tuple)
            and not params.opponent_params
        )

    def opponent_mask(self) -> np.ndarray:
        """``[O, width]`` bool: actions that exist for each opponent agent."""
        width = self.opponent_model.num_actions
        rows = [
            np.arange(width) < self.env.action_space(u).n
            for u in range(self.env.num_teams)
            if u != self.team
            for _ in range(self.env.team_sizes[u])
        ]
        return np.stack(rows)

    def _team_actions(self, own: jax.Array, opponents: jax.Array) -> TeamArrays:
        """Split the opponents' ``[O]`` actions by team and insert the own ``[A]``."""
        actions, start = [], 0
        for u, size in enumerate(self.env.team_sizes):
            if u == self.team:
                actions.append(own)
            else:
                actions.append(opponents[start : start + size])
                start += size
        return tuple(actions)

    def _team_reward(self, state, rewards: TeamArrays, info: dict) -> jax.Array:
        if self.reward_fn is not None:
            return jnp.asarray(self.reward_fn(state, rewards, info), jnp.float32)
        return jnp.mean(rewards[self.team])

    def leaf_value(self, params: LookaheadParams, state, obs, carry) -> jax.Array:
        """``[]`` the value of a rollout's last state for the own team: the
        ``leaf_fn`` if given, else the own policy's mean greedy action value."""
        if self.leaf_fn is not None:
            return jnp.asarray(self.leaf_fn(params, state, obs[self.team]), jnp.float32)
        no_reset = jnp.zeros((self.num_agents,), bool)
        q, _ = self._own_values(params.own_params, obs[self.team], carry, no_reset)
        return jnp.mean(jnp.max(q, -1))

    def _rollout(
        self,
        params: LookaheadParams,
        state: Any,
        root_obs: TeamArrays,
        carry: jax.Array,
        root_actions: jax.Array,
        key: jax.Array,
    ) -> jax.Array:
        """One rollout's discounted return plus discounted leaf value ``[]``."""
        config, model = self.config, self.opponent_model
        mask = jnp.asarray(self.opponent_mask())
        own_head = self._reads_own_head(params)
        opponent_params = params.own_params if own_head else params.opponent_params
        key_latent, key_steps = jax.random.split(key)
        latent = model.sample_latent(opponent_params, key_latent)
        step_keys = jax.random.split(key_steps, config.horizon)

        def simulate(state, obs, own_actions, key_step, logits=None):
            key_opponent, key_env = jax.random.split(key_step)
            if logits is None:
                logits = model.logits(opponent_params, latent, obs)
            if logits.shape != mask.shape:
                raise InvalidParameterError(
                    f"opponent_model: logits have shape {logits.shape}, expected "
                    f"{mask.shape} (num_opponents, num_actions)"
                )
            logits = jnp.where(mask, logits, -jnp.inf)
            opponents = jax.random.categorical(key_opponent, logits).astype(jnp.int32)
            actions = self._team_actions(own_actions, opponents)
            obs, state, rewards, terminated, truncated, info = self.env.step(
                key_env, state, actions, params.env_params
            )
            reward = self._team_reward(state, rewards, info)
            return state, obs, reward, terminated | truncated

        def policy(obs, carry):
            """The own greedy actions, the next carry and, when the opponent model
            is the own network's head, the opponents' logits (else ``None``)."""
            if own_head:
                x = agent_inputs(self.own_spec, obs[self.team])
                values, head = apply_by_rows(
                    self.own_spec.module(), params.own_params, x
                )
                logits = model.head_logits(head)
            else:
                no_reset = jnp.zeros((self.num_agents,), bool)
                values, carry = self._own_values(
                    params.own_params, obs[self.team], carry, no_reset
                )
                logits = None
            return greedy_action(values), carry, logits

        def step(rollout, inputs):
            state, obs, carry, alive, total = rollout
            key_step, discount = inputs
            own_actions, carry_next, logits = policy(obs, carry)
            state, obs, reward, done = simulate(
                state, obs, own_actions, key_step, logits
            )
            total = total + jnp.where(alive, discount * reward, 0.0)
            return (state, obs, carry_next, alive & ~done, total), None

        # The root step plays the candidate and is taken outside the scan: nothing
        # in it depends on the own policy, and the opponents' move there depends
        # only on the root state and the rollout's key, so with common random
        # numbers it is computed once per rollout for every candidate. The carry
        # already holds the root observation; it advances from the second step on.
        discounts = config.gamma ** jnp.arange(config.horizon).astype(jnp.float32)
        state, obs, reward, done = simulate(
            state, root_obs, root_actions, step_keys[0], policy(root_obs, carry)[2]
        )
        total = discounts[0] * reward
        # One scan over the other steps keeps one copy of their step.
        rollout = (state, obs, carry, ~done, total)
        (state, obs, carry, alive, total), _ = jax.lax.scan(
            step, rollout, (step_keys[1:], discounts[1:])
        )
        if config.leaf_weight == 0:
            return total
        leaf = self.leaf_value(params, state, obs, carry)
        weight = config.gamma**config.horizon * config.leaf_weight
        return total + jnp.where(alive, weight * leaf, 0.0)
