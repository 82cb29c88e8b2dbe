"""The predators' planners of the pursuit game: a joint Monte-Carlo lookahead
that scores captures and, at the horizon, the imagined prey's distance to the
nearest predator, and the Gumbel tree search at the same simulator budget.

The prey is imagined by any opponent model (e.g. an
:class:`~mopa.planning.IntentConditionedModel` drawing the prey's intent from a
belief per rollout); a player that keeps the belief
(:class:`~mopa.planning.IntentPredator`,
:class:`~mopa.planning.PopulationPredator`) hands it to the model every step.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from mopa.envs.pursuit import PREDATOR
from mopa.planning.lookahead import LookaheadConfig, LookaheadPlayer
from mopa.planning.mcts import MCTSConfig, MCTSPlayer, simulator_steps_per_decision
from mopa.planning.opponents import OpponentModel
from mopa.policy import PolicySpec


def captures_reward(state: Any, rewards: Any, info: dict) -> jax.Array:
    """The planner's per-step reward ``[]``: captures (predator-prey overlaps)."""
    del state, rewards
    return jnp.asarray(info["captures"], jnp.float32)


def prey_distance_leaf(params: Any, state: Any, obs: Any) -> jax.Array:
    """``[]`` minus the imagined prey's distance to the nearest predator."""
    del params, obs
    P = state.pos.shape[0] - 1
    gap = state.pos[:P] - state.pos[P]
    return -jnp.min(jnp.sqrt(jnp.sum(gap * gap, -1)))


def pursuit_lookahead(
    env: Any,
    own_spec: PolicySpec,
    opponent_model: OpponentModel,
    *,
    num_rollouts: int,
    horizon: int,
    gamma: float,
    distance_weight: float,
) -> LookaheadPlayer:
    """The predators' joint lookahead: ``num_rollouts`` rollouts of ``horizon``
    steps per candidate joint action, discounted by ``gamma``, the predators'
    ``own_spec`` after the root and the prey imagined by ``opponent_model``;
    captures as the reward, and at the leaf minus the prey's distance to the
    nearest predator, weighted ``distance_weight`` (after the horizon's
    discount)."""
    config = LookaheadConfig(
        num_rollouts=num_rollouts,
        horizon=horizon,
        gamma=gamma,
        mode="joint",
        leaf_weight=distance_weight / gamma**horizon,
    )
    return LookaheadPlayer(
        env=env,
        team=PREDATOR,
        config=config,
        opponent_model=opponent_model,
        own_spec=own_spec,
        reward_fn=captures_reward,
        leaf_fn=prey_distance_leaf,
    )


def pursuit_tree_search(lookahead: LookaheadPlayer, num_particles: int) -> MCTSPlayer:
    """The tree search at ``lookahead``'s simulator budget (steps per decision):
    Gumbel MuZero over the same joint actions, ``num_particles`` opponents drawn
    per decision, one tree step and then a rollout of the rest of the horizon,
    the same reward, discount and leaf term."""
    config = lookahead.config
    search = MCTSConfig.for_budget(
        simulator_steps_per_decision(lookahead),
        num_particles=num_particles,
        leaf_horizon=config.horizon - 1,  # one tree step, then the rollout
        gamma=config.gamma,
        leaf_weight=config.leaf_weight,
        gumbel_scale=0.0,
    )
    return MCTSPlayer(
        env=lookahead.env,
        team=PREDATOR,
        config=search,
        opponent_model=lookahead.opponent_model,
        own_spec=lookahead.own_spec,
        reward_fn=captures_reward,
        leaf_fn=prey_distance_leaf,
    )
