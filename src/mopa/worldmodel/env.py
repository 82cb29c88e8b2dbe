"""A pursuit game whose physics is a learned model: :class:`LearnedDynamicsEnv`
steps positions and velocities with a :class:`~mopa.worldmodel.dynamics.Dynamics`
and keeps the game's own rules (captures, rewards, step count, observations)
computed from the predicted positions.

Its state is the game's :class:`~mopa.envs.pursuit.PursuitState`, so a planner
built for the game plans through the model unchanged::

    wm_env = LearnedDynamicsEnv(env, dynamics_of(config))
    planner = LookaheadPlayer(env=wm_env, ...)
    LookaheadParams(env_params=LearnedDynamicsParams(game_params, model_params), ...)

The model's weights are part of the game's parameter pytree
(:class:`LearnedDynamicsParams`), so they can carry a seed axis like any other
parameter. Each step re-encodes the state it is given (a latent model decodes
its prediction back into the state, see
:func:`~mopa.worldmodel.dynamics.rollout`'s ``through_state``); ``info`` gains
``"disagreement"``, the ensemble's spread of the predicted positions (0 for
other models), which a planner's ``reward_fn`` may penalise.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from mopa.envs.base import StepOutput, TeamArrays
from mopa.envs.pursuit import PursuitEnv, PursuitState
from mopa.envs.wrappers import Wrapper
from mopa.errors import InvalidParameterError
from mopa.worldmodel.data import split_features, state_features
from mopa.worldmodel.dynamics import Dynamics


@struct.dataclass
class LearnedDynamicsParams:
    """The numbers of a :class:`LearnedDynamicsEnv` (a pytree; may be vmapped)."""

    game: Any
    """The game's :class:`~mopa.envs.pursuit.PursuitParams` (rules, rewards)."""
    model: Any
    """The dynamics model's parameters (for a learned model, its weights)."""


class LearnedDynamicsEnv(Wrapper):
    """The pursuit game ``env`` with its physics replaced by ``dynamics``."""

    def __init__(self, env: PursuitEnv, dynamics: Dynamics):
        if not isinstance(env, PursuitEnv):
            raise InvalidParameterError(
                f"env: a learned-dynamics game wraps a bare pursuit game, got "
                f"{type(env).__name__}"
            )
        super().__init__(env)
        self.dynamics = dynamics
        self.name = f"{env.name}[{type(dynamics).__name__}]"

    def __hash__(self) -> int:
        return hash((type(self), self.env, self.dynamics))

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and self.env == other.env
            and self.dynamics == other.dynamics
        )

    @property
    def default_params(self) -> LearnedDynamicsParams:
        """The game's defaults and the model's fresh (untrained) parameters."""
        return LearnedDynamicsParams(
            self.env.default_params, self.dynamics.init(jax.random.key(0))
        )

    def validate_params(self, params: Any) -> None:
        if not isinstance(params, LearnedDynamicsParams):
            raise InvalidParameterError(
                f"{self.name}: params must be LearnedDynamicsParams, got "
                f"{type(params).__name__}"
            )
        self.env.validate_params(params.game)

    def _reset(self, key: jax.Array, params: Any) -> tuple[TeamArrays, Any]:
        return self.env._reset(key, params.game)

    def _step(
        self,
        key: jax.Array,
        state: PursuitState,
        actions: TeamArrays,
        params: LearnedDynamicsParams,
    ) -> StepOutput:
        action = jnp.concatenate([a.astype(jnp.int32) for a in actions])  # [N]
        model = params.model
        h = self.dynamics.encode(model, state_features(state.pos, state.vel))
        h, disagreement = self.dynamics.advance(model, key, h, action)
        pos, vel = split_features(self.dynamics.decode(model, h))
        obs, state, rewards, terminated, truncated, info = self.env.outcome(
            state, pos, vel, params.game
        )
        info = {**info, "disagreement": disagreement}
        return obs, state, rewards, terminated, truncated, info

    def observe(self, state: PursuitState, params: Any) -> TeamArrays:
        return self.env.observe(state, params.game)
