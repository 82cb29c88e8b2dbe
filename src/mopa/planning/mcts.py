"""Monte-Carlo tree search over the team's joint actions (Gumbel MuZero, through
``mctx``) in the true simulator, against a latent-conditioned opponent model, as a
:class:`~mopa.players.Player`: the tree-search alternative to
:class:`~mopa.planning.LookaheadPlayer`, with the same parameters
(:class:`~mopa.planning.LookaheadParams`).

The search (Danihelka et al. 2022, "Policy improvement by planning with Gumbel":
Sequential Halving with Gumbel at the root, the deterministic Full Gumbel MuZero
selection below it) runs over the ``n^A`` joint actions of the planning team
(:func:`~mopa.planning.joint_actions` order). Its model is the game itself:

* **Belief over the opponent's latent.** ``P`` latents (particles) are drawn once
  per decision from the opponent model (``sample_latent``; Exp 6: intents drawn
  from the belief). Every tree node carries log-weights over them: the posterior
  of the latent given the opponents' moves imagined on the path from the root.
* **Expanding a node** with joint action ``a`` steps the true simulator once
  (``env.step``): the opponents' move is sampled from the particles' mixture
  ``sum_p w_p pi(. | s, z_p)``, and each weight is multiplied by the likelihood
  of that move (``w_p <- w_p pi(o | s, z_p)``, normalised). The edge's reward is
  ``reward_fn``; its discount is ``gamma`` while the episode runs and 0 once it
  has ended (terminated or truncated). As in any MuZero tree, the sampled
  outcome is stored in the child: later visits through the edge reuse it.
* **The new node's value** is the weighted mean over particles of one rollout per
  particle: ``L`` steps with the team's own greedy policy and the opponents
  sampled under that particle's latent, ``sum_{t<L} gamma^t r_t + gamma^L w
  V(s_L)`` (``V``: ``leaf_fn``, or the team mean of ``max_a Q``; counted only
  while the episode runs), exactly as the lookahead's rollouts score a leaf.
* **Prior logits** of a node: the own policy's factorised joint distribution,
  ``sum_i log softmax(values_i / T)[a_i]`` (Q-values or actor logits), or uniform.
* **The root's value** (which completes the Q-values of unvisited root actions)
  is the weighted leaf value ``w V(s)`` of the root state alone: Sequential
  Halving visits every considered root action (given at least as many
  simulations), so it barely moves the choice, and a rollout there would cost
  ``P L`` steps and a second copy of the rollout in the compiled program.

Keys (common random numbers, as the lookahead's rollouts share theirs): the
decision key splits into ``(key_latent, key_tree, key_gumbel)``.
Particle ``p``'s latent is drawn with ``split(key_latent, P)[p]``. Expanding a
node at depth ``d`` (the root is at 0) uses ``fold_in(key_tree, d)``, split into
``(key_opponent, key_env, key_rollouts)``: every node at one depth samples with
the same random numbers, so siblings are compared under the same noise.
``key_rollouts`` splits into one key per particle, each into one per step, each
into ``(key_opponent, key_env)``. ``key_gumbel`` draws the root's Gumbel noise.

``plan`` is written for one game; under ``vmap`` (a tournament's games) it searches
the games one after another (see :meth:`MCTSPlayer.plan`), so any number of nested
``vmap``-s give the numbers of the unbatched search.

Simulator budget (:func:`simulator_steps_per_decision`): ``1 + P L`` steps per
simulation; :meth:`MCTSConfig.for_budget` sizes ``num_simulations`` to a budget,
e.g. the joint lookahead's ``n^A K H`` (5000 for 125 joint actions x 8 rollouts x
5 steps: 151 simulations of ``1 + 8 x 4`` steps).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from mopa.core.batching import one_after_another
from mopa.core.checks import check_fields, check_unit
from mopa.envs.base import Env
from mopa.errors import InvalidParameterError
from mopa.planning.lookahead import (
    LeafFn,
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    RewardFn,
    joint_actions,
)
from mopa.planning.opponents import OpponentModel
from mopa.policy import PolicySpec, greedy_action

PRIORS = ("policy", "uniform")
"""Prior logits of the search: the own policy's joint distribution, or uniform."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MCTSConfig:
    """Shape and scoring of the tree search (all static)."""

    num_simulations: int = 150
    """Simulations per decision (one node expanded, one simulator step, each)."""
    num_particles: int = 8
    """``P``: opponent latents drawn per decision; each leaf is scored by one
    rollout per particle, weighted by the node's posterior."""
    leaf_horizon: int = 4
    """``L``: steps of each leaf rollout; 0 scores a leaf by its value alone."""
    gamma: float = 0.95
    """Discount of rewards in the tree and in the rollouts, and of the leaf value."""
    leaf_weight: float = 1.0
    """Weight ``w`` of the value at a rollout's end, ``gamma^L w V(s_L)``; 0 skips
    it."""
    max_depth: int | None = None
    """Deepest node a simulation may expand (``None``: no limit)."""
    max_num_considered_actions: int = 16
    """Root joint actions Sequential Halving considers (the top ones by prior
    logits plus Gumbel noise)."""
    gumbel_scale: float = 1.0
    """Scale of the root's Gumbel noise (0: the top actions by prior, no noise)."""
    prior: str = "policy"
    """``"policy"`` (the own policy's joint distribution) or ``"uniform"``."""
    prior_temperature: float = 1.0
    """Divides the own policy's values before the softmax of the prior."""

    def __post_init__(self):
        check_fields(self)
        for name, low in (
            ("num_simulations", 1),
            ("num_particles", 1),
            ("leaf_horizon", 0),
            ("max_num_considered_actions", 1),
        ):
            value = getattr(self, name)
            if not _is_int(value) or value < low:
                raise InvalidParameterError(
                    f"{name} must be an integer >= {low}, got {value!r}"
                )
        if self.max_depth is not None and (
            not _is_int(self.max_depth) or self.max_depth < 1
        ):
            raise InvalidParameterError(
                f"max_depth must be None or an integer >= 1, got {self.max_depth!r}"
            )
        check_unit("gamma", self.gamma)
        if not math.isfinite(self.leaf_weight):
            raise InvalidParameterError(
                f"leaf_weight must be finite, got {self.leaf_weight!r}"
            )
        if not (math.isfinite(self.gumbel_scale) and self.gumbel_scale >= 0):
            raise InvalidParameterError(
                f"gumbel_scale must be finite and >= 0, got {self.gumbel_scale!r}"
            )
        if self.prior not in PRIORS:
            raise InvalidParameterError(
                f"prior must be one of {PRIORS}, got {self.prior!r}"
            )
        if not self.prior_temperature > 0:
            raise InvalidParameterError(
                f"prior_temperature must be > 0, got {self.prior_temperature!r}"
            )

    @property
    def steps_per_simulation(self) -> int:
        """Simulator steps of one simulation: the expansion and ``P`` rollouts."""
        return 1 + self.num_particles * self.leaf_horizon

    @property
    def simulator_steps(self) -> int:
        """Simulator steps of one decision."""
        return self.num_simulations * self.steps_per_simulation

    @classmethod
    def for_budget(cls, budget: int, **fields: Any) -> MCTSConfig:
        """The config with ``fields`` and the most simulations whose decision
        takes at most ``budget`` simulator steps (:attr:`simulator_steps`).

        Raises:
            InvalidParameterError: not even one simulation fits in ``budget``.
        """
        if "num_simulations" in fields:
            raise InvalidParameterError(
                "num_simulations: for_budget chooses it; leave it out"
            )
        shape = cls(**fields)
        num_simulations = budget // shape.steps_per_simulation
        if num_simulations < 1:
            raise InvalidParameterError(
                f"budget: {budget} simulator steps do not fit one simulation "
                f"({shape.steps_per_simulation} steps)"
            )
        return dataclasses.replace(shape, num_simulations=int(num_simulations))


class MCTSPlan(NamedTuple):
    """One decision of the tree search (root statistics over joint actions)."""

    actions: jax.Array
    """``[A]`` int32 actions of the planning team."""
    joint_action: jax.Array
    """``[]`` int32 index of ``actions`` in :func:`joint_actions` order."""
    visit_counts: jax.Array
    """``[n^A]`` visits of each root joint action (they sum to the simulations)."""
    q_values: jax.Array
    """``[n^A]`` ``r + gamma v`` of each visited root joint action (0 if not
    visited)."""
    action_weights: jax.Array
    """``[n^A]`` the search's improved policy ``softmax(prior + completed Q)``."""
    value: jax.Array
    """``[]`` the root's value after the search."""
    carry: jax.Array
    """``[A, H]`` the own policy's carry after this step's observation."""
    tree: mctx.Tree
    """The search tree (batch of one); ``tree.embeddings`` holds every node's
    :class:`SearchNode`."""


class SearchNode(NamedTuple):
    """The embedding of one tree node."""

    state: Any
    """The game's state at the node."""
    carry: jax.Array
    """``[A, H]`` the own policy's carry after the node's observation."""
    log_weights: jax.Array
    """``[P]`` normalised log posterior of the particles given the path's moves."""
    depth: jax.Array
    """``[]`` int32, 0 at the root."""
    alive: jax.Array
    """``[]`` bool: the episode still runs."""


class _SearchParams(NamedTuple):
    """What every ``recurrent_fn`` call reads (the same for the whole search)."""

    params: LookaheadParams
    opponent_params: Any  # the opponent model's numbers (or the own weights)
    latents: Any  # [P, ...] the particles' latents
    key_tree: jax.Array  # folded with a node's depth when it is expanded


@dataclasses.dataclass(frozen=True)
class MCTSPlayer:
    """Gumbel MuZero tree search for team ``team`` of ``env``; see the module
    docstring.

    The constructor mirrors :class:`~mopa.planning.LookaheadPlayer` (the same
    checks, the same ``params``: a :class:`~mopa.planning.LookaheadParams`), so a
    caller holding a planner can hold either. ``env`` must be the bare game whose
    ``state`` the caller passes (no auto-reset wrapper). ``act`` is written for one
    game; ``vmap`` it over games.
    """

    env: Env
    """The game simulated (its structure; numbers come from ``params``)."""
    team: int | str
    """The planning team (index or name)."""
    config: MCTSConfig
    """Simulations, particles, leaf horizon, discount, root selection, prior."""
    opponent_model: OpponentModel
    """Distribution of every opponent's next action (agents of all other teams)."""
    own_spec: PolicySpec
    """The planning team's policy (``q``, ``rnn_q`` or ``actor``): the prior, and
    the greedy policy of the leaf rollouts."""
    reward_fn: RewardFn | None = None
    """The team's reward per step; ``None``: the mean of its agents' rewards."""
    leaf_fn: LeafFn | None = None
    """The value at a rollout's end; ``None``: the team mean of ``max_a Q`` of the
    own network."""

    def __post_init__(self):
        # The lookahead whose rollouts score this search's leaves checks the game,
        # team, own policy and opponent model with the same messages.
        object.__setattr__(self, "team", self._leaf_scorer.team)

    @functools.cached_property
    def _leaf_scorer(self) -> LookaheadPlayer:
        """The joint lookahead over one step then ``L`` greedy steps with ``P``
        rollouts: its pieces (own values, team reward, leaf value) score the
        tree's leaves, and with one particle and a deterministic opponent its
        scores are the first visit's Q-values of every root joint action."""
        config = self.config
        return LookaheadPlayer(
            env=self.env,
            team=self.team,
            config=LookaheadConfig(
                num_rollouts=config.num_particles,
                horizon=config.leaf_horizon + 1,
                gamma=config.gamma,
                mode="joint",
                leaf_weight=config.leaf_weight,
            ),
            opponent_model=self.opponent_model,
            own_spec=self.own_spec,
            reward_fn=self.reward_fn,
            leaf_fn=self.leaf_fn,
        )

    # -- Player ------------------------------------------------------------------
    @property
    def num_agents(self) -> int:
        return self.env.team_sizes[self.team]

    @property
    def games_in_turn(self) -> bool:
        """True: under ``vmap`` the games are searched one after another (see
        :meth:`plan`; :func:`~mopa.players.plays_games_in_turn`)."""
        return True

    @property
    def carry_size(self) -> int:
        return self.own_spec.carry_size

    @property
    def num_joint_actions(self) -> int:
        """Root joint actions ``n^A`` the search chooses among."""
        return self.own_spec.num_actions**self.num_agents

    def simulator_steps_per_decision(self) -> int:
        """Simulator steps of one decision (:attr:`MCTSConfig.simulator_steps`)."""
        return self.config.simulator_steps

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
        plan = self.plan(params, key, state, obs, carry, reset)
        return plan.actions, plan.carry

    def plan(
        self,
        params: LookaheadParams,
        key: jax.Array,
        state: Any,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
    ) -> MCTSPlan:
        """Search from ``state`` and choose the team's joint action.

        Under ``vmap`` the games are searched one after another (``lax.map``)
        rather than as one batched tree: a batched tree's data-dependent loops
        (descending to a leaf, backing a value up) select over every game's whole
        ``[nodes, n^A]`` arrays at each iteration, which made a decision about 2.4
        times slower at 16 games on CPU.

        Args:
            params: a :class:`~mopa.planning.LookaheadParams`.
            key: the decision's key (see the module docstring for its use).
            state: the game's true state, searched from.
            obs: ``[A, D]`` the team's observations of ``state``.
            carry: ``[A, H]`` the own policy's carry.
            reset: ``[A]`` bool, true on an episode's first step.

        Returns:
            An :class:`MCTSPlan`.
        """
        return one_after_another(self._search)(params, key, state, obs, carry, reset)

    def _search(self, params, key, state, obs, carry, reset) -> MCTSPlan:
        """:meth:`plan` for one game."""
        config, scorer = self.config, self._leaf_scorer
        P = config.num_particles
        key_latent, key_tree, key_gumbel = jax.random.split(key, 3)
        opponent_params = (
            params.own_params
            if scorer._reads_own_head(params)
            else params.opponent_params
        )
        latents = jax.vmap(
            lambda k: self.opponent_model.sample_latent(opponent_params, k)
        )(jax.random.split(key_latent, P))
        search = _SearchParams(params, opponent_params, latents, key_tree)

        values, carry = scorer._own_values(params.own_params, obs, carry, reset)
        root_obs = tuple(
            obs if u == self.team else o
            for u, o in enumerate(self.env.observe(state, params.env_params))
        )
        log_weights = jnp.full((P,), -jnp.log(P))
        root_value = self._scaled_leaf(search, state, root_obs, carry)
        root = mctx.RootFnOutput(
            prior_logits=self._prior_logits(values)[None],
            value=root_value[None],
            embedding=jax.tree.map(
                lambda x: x[None],
                SearchNode(
                    state,
                    carry,
                    log_weights,
                    jnp.zeros((), jnp.int32),
                    jnp.ones((), bool),
                ),
            ),
        )

        def recurrent_fn(search, rng_key, action, node):
            del rng_key  # keys come from the node's depth (common random numbers)
            return jax.vmap(self._expand, in_axes=(None, 0, 0))(search, action, node)

        output = mctx.gumbel_muzero_policy(
            params=search,
            rng_key=key_gumbel,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=config.num_simulations,
            max_depth=config.max_depth,
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_scale=config.gumbel_scale,
        )
        summary = output.search_tree.summary()
        joint = output.action[0].astype(jnp.int32)
        table = jnp.asarray(joint_actions(self.num_agents, self.own_spec.num_actions))
        return MCTSPlan(
            actions=table[joint],
            joint_action=joint,
            visit_counts=summary.visit_counts[0].astype(jnp.int32),
            q_values=jnp.where(summary.visit_counts[0] > 0, summary.qvalues[0], 0.0),
            action_weights=output.action_weights[0],
            value=summary.value[0],
            carry=carry,
            tree=output.search_tree,
        )

    # -- pieces ------------------------------------------------------------------
    def _prior_logits(self, values: jax.Array) -> jax.Array:
        """``[n^A]`` joint prior logits from the own policy's ``[A, n]`` values."""
        A, n = self.num_agents, self.own_spec.num_actions
        if self.config.prior == "uniform":
            return jnp.zeros((n**A,))
        log_probs = jax.nn.log_softmax(values / self.config.prior_temperature, -1)
        table = jnp.asarray(joint_actions(A, n))  # [n^A, A]
        return jnp.sum(log_probs[jnp.arange(A), table], -1)

    def _opponent_log_probs(self, search: _SearchParams, latent, obs) -> jax.Array:
        """``[O, width]`` log-probabilities of the opponents' next actions."""
        mask = jnp.asarray(self._leaf_scorer.opponent_mask())
        logits = self.opponent_model.logits(search.opponent_params, latent, obs)
        if logits.shape != mask.shape:
            raise InvalidParameterError(
                f"opponent_model: logits have shape {logits.shape}, expected "
                f"{mask.shape} (num_opponents, num_actions)"
            )
        return jax.nn.log_softmax(jnp.where(mask, logits, -jnp.inf), -1)

    def _step(self, search: _SearchParams, state, own_actions, opponents, key_env):
        """One simulator step: ``(state, obs, reward [], done [])``."""
        scorer = self._leaf_scorer
        actions = scorer._team_actions(own_actions, opponents)
        obs, state, rewards, terminated, truncated, info = self.env.step(
            key_env, state, actions, search.params.env_params
        )
        reward = scorer._team_reward(state, rewards, info)
        return state, obs, reward, terminated | truncated

    def _expand(self, search: _SearchParams, action: jax.Array, node: SearchNode):
        """Expand ``node`` with joint action ``action`` [] (one tree, unbatched)."""
        scorer, config = self._leaf_scorer, self.config
        table = jnp.asarray(joint_actions(self.num_agents, self.own_spec.num_actions))
        key_opponent, key_env, key_rollouts = jax.random.split(
            jax.random.fold_in(search.key_tree, node.depth), 3
        )
        obs = self.env.observe(node.state, search.params.env_params)
        log_probs = jax.vmap(
            lambda latent: self._opponent_log_probs(search, latent, obs)
        )(search.latents)  # [P, O, width]
        mixture = jax.nn.logsumexp(node.log_weights[:, None, None] + log_probs, 0)
        opponents = jax.random.categorical(key_opponent, mixture).astype(jnp.int32)
        likelihood = jnp.sum(
            jnp.take_along_axis(log_probs, opponents[None, :, None], -1)[..., 0], -1
        )  # [P]
        log_weights = jax.nn.log_softmax(node.log_weights + likelihood)

        state, obs, reward, done = self._step(
            search, node.state, table[action], opponents, key_env
        )
        alive = node.alive & ~done
        no_reset = jnp.zeros((self.num_agents,), bool)
        values, carry = scorer._own_values(
            search.params.own_params, obs[self.team], node.carry, no_reset
        )
        value = self._node_value(
            search, state, obs, carry, values, log_weights, key_rollouts
        )
        output = mctx.RecurrentFnOutput(
            reward=jnp.where(node.alive, reward, 0.0),
            discount=jnp.where(alive, config.gamma, 0.0).astype(jnp.float32),
            prior_logits=self._prior_logits(values),
            value=jnp.where(alive, value, 0.0),
        )
        child = SearchNode(state, carry, log_weights, node.depth + 1, alive)
        return output, child

    def _node_value(
        self, search, state, obs, carry, values, log_weights, key
    ) -> jax.Array:
        """``[]`` the posterior-weighted mean of one rollout per particle."""
        P = self.config.num_particles
        returns = jax.vmap(
            lambda latent, k: self._rollout(
                search, latent, state, obs, carry, values, k
            )
        )(search.latents, jax.random.split(key, P))
        return jnp.sum(jnp.exp(log_weights) * returns)

    def _rollout(self, search, latent, state, obs, carry, values, key) -> jax.Array:
        """``[]`` discounted return of ``L`` greedy steps under ``latent``, plus the
        discounted leaf value (counted while the episode runs)."""
        config, scorer = self.config, self._leaf_scorer
        no_reset = jnp.zeros((self.num_agents,), bool)
        own_params = search.params.own_params

        def simulate(state, obs, values, alive, total, key_step, discount):
            key_opponent, key_env = jax.random.split(key_step)
            log_probs = self._opponent_log_probs(search, latent, obs)
            opponents = jax.random.categorical(key_opponent, log_probs)
            own_actions = greedy_action(values)
            state, obs, reward, done = self._step(
                search, state, own_actions, opponents.astype(jnp.int32), key_env
            )
            total = total + jnp.where(alive, discount * reward, 0.0)
            return state, obs, alive & ~done, total

        def step(rollout, inputs):
            state, obs, carry, values, alive, total = rollout
            state, obs, alive, total = simulate(
                state, obs, values, alive, total, *inputs
            )
            values, carry = scorer._own_values(
                own_params, obs[self.team], carry, no_reset
            )
            return (state, obs, carry, values, alive, total), None

        L = config.leaf_horizon
        alive, total = jnp.ones((), bool), jnp.zeros(())
        if L > 0:
            # The last step is taken outside the scan: its greedy values would
            # choose no action, so only the carry is advanced there (which a
            # feed-forward policy passes through, leaving no work).
            discounts = config.gamma ** jnp.arange(L, dtype=jnp.float32)
            keys = jax.random.split(key, L)
            rollout = (state, obs, carry, values, alive, total)
            (state, obs, carry, values, alive, total), _ = jax.lax.scan(
                step, rollout, (keys[:-1], discounts[:-1])
            )
            state, obs, alive, total = simulate(
                state, obs, values, alive, total, keys[-1], discounts[-1]
            )
            _, carry = scorer._own_values(own_params, obs[self.team], carry, no_reset)
        return total + jnp.where(
            alive, config.gamma**L * self._scaled_leaf(search, state, obs, carry), 0.0
        )

    def _scaled_leaf(self, search, state, obs, carry) -> jax.Array:
        """``[]`` the weighted leaf value ``w V(s)`` (0 when ``w = 0``)."""
        if self.config.leaf_weight == 0:
            return jnp.zeros(())
        leaf = self._leaf_scorer.leaf_value(search.params, state, obs, carry)
        return self.config.leaf_weight * leaf


def simulator_steps_per_decision(player: LookaheadPlayer | MCTSPlayer) -> int:
    """Simulator steps one decision of ``player`` takes: ``C K H`` for the
    lookahead (``C`` candidates, ``K`` rollouts of ``H`` steps; 0 when ``H = 0``),
    :attr:`MCTSConfig.simulator_steps` for the tree search.

    Raises:
        InvalidParameterError: ``player`` is neither planner.
    """
    if isinstance(player, MCTSPlayer):
        return player.simulator_steps_per_decision()
    if isinstance(player, LookaheadPlayer):
        config = player.config
        return player.num_candidates * config.num_rollouts * config.horizon
    raise InvalidParameterError(
        f"player: expected a LookaheadPlayer or an MCTSPlayer, got "
        f"{type(player).__name__}"
    )
