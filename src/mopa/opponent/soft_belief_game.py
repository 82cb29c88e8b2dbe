"""A game in which one team observes a soft belief about its opponent's hidden
intent, of a sharpness drawn per episode: the game a belief-conditioned policy
trains in.

:class:`SoftBeliefGame` wraps any game that names its opponent's private fields
(:class:`~mopa.envs.base.IntentGame`: ``num_intents``, ``belief_team``,
:meth:`~mopa.envs.base.IntentGame.true_intent`; e.g. the battalion against the
scripted strategy family, ``make("battalion_vs_red", red="mixed")``). At reset it
draws ``alpha ~ U[alpha_low, alpha_high]`` and keeps the belief ``alpha *
onehot(intent) + (1 - alpha) / K`` (:func:`~mopa.opponent.beliefs.soft_belief`)
for the episode, appended to every agent's observation of the observing team::

    obs'[team] = [obs[team], belief (K)]

A policy trained on beliefs of random sharpness learns to hedge on a flat one and
commit on a sharp one; with ``alpha_low = alpha_high = 0`` the belief is the flat
``1 / K`` in every episode, a constant, and the team sees its observations only.
The wrapped game is itself an :class:`~mopa.envs.base.IntentGame` whose team
observes a belief, so a player that keeps its own belief
(:class:`~mopa.planning.IntentPredator`) plays it, overwriting the slot with what
it believes. :meth:`SoftBeliefGame.global_state` (a centralised critic's input,
training only) is the game's global state followed by the true intent's one-hot.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.envs.base import StepOutput, TeamArrays
from mopa.envs.spaces import Box
from mopa.envs.wrappers import Wrapper
from mopa.errors import InvalidParameterError
from mopa.opponent.beliefs import soft_belief


@struct.dataclass
class SoftBeliefParams:
    """Parameters of :class:`SoftBeliefGame`."""

    game: Any
    """The embedded game's parameters."""
    alpha_low: jax.Array
    """``[]`` lower end of the per-episode belief sharpness."""
    alpha_high: jax.Array
    """``[]`` upper end of the per-episode belief sharpness."""


@struct.dataclass
class SoftBeliefState:
    """The embedded game's state and this episode's belief."""

    game: Any
    belief: jax.Array  # [K] the belief the team sees this episode


class SoftBeliefGame(Wrapper):
    """``env`` with the observing team's observation extended by a soft belief
    over the opponent's intent (see the module docstring).

    Args:
        env: an :class:`~mopa.envs.base.IntentGame` with ``num_intents >= 1``.
    """

    observes_belief = True

    def __init__(self, env: Any):
        super().__init__(env)
        if getattr(env, "num_intents", 0) < 1 or not callable(
            getattr(env, "true_intent", None)
        ):
            raise InvalidParameterError(
                f"env: {env.name} names no hidden intent of its opponent (an "
                "IntentGame with num_intents >= 1 and true_intent)"
            )

    def observation_space(self, team: int) -> Box:
        size = self.env.observation_space(team).shape[0]
        if team != self.belief_team:
            return self.env.observation_space(team)
        return Box(-1.0, 1.0, (size + self.num_intents,))

    @property
    def default_params(self) -> SoftBeliefParams:
        return SoftBeliefParams(
            self.env.default_params, jnp.asarray(0.0), jnp.asarray(1.0)
        )

    def validate_params(self, params: SoftBeliefParams) -> None:
        self.env.validate_params(params.game)
        low, high = np.asarray(params.alpha_low), np.asarray(params.alpha_high)
        if not np.all((low >= 0.0) & (low <= high) & (high <= 1.0)):
            raise InvalidParameterError(
                f"{self.name}: parameters alpha_low/high must satisfy 0 <= low <= "
                f"high <= 1, got {low.tolist()}, {high.tolist()}"
            )

    def _reset(
        self, key: jax.Array, params: SoftBeliefParams
    ) -> tuple[TeamArrays, SoftBeliefState]:
        key_game, key_alpha = jax.random.split(key)
        _, game = self.env.reset(key_game, params.game)
        alpha = jax.random.uniform(
            key_alpha, (), minval=params.alpha_low, maxval=params.alpha_high
        )
        belief = soft_belief(self.env.true_intent(game), alpha, self.num_intents)
        state = SoftBeliefState(game, belief.astype(jnp.float32))
        return self.observe(state, params), state

    def _step(
        self,
        key: jax.Array,
        state: SoftBeliefState,
        actions: TeamArrays,
        params: SoftBeliefParams,
    ) -> StepOutput:
        _, game, rewards, terminated, truncated, info = self.env.step(
            key, state.game, actions, params.game
        )
        state = state.replace(game=game)
        return (
            self.observe(state, params),
            state,
            rewards,
            terminated,
            truncated,
            info,
        )

    def observe(self, state: SoftBeliefState, params: SoftBeliefParams) -> TeamArrays:
        obs = self.env.observe(state.game, params.game)
        team = self.belief_team
        belief = jnp.broadcast_to(state.belief, (obs[team].shape[0], self.num_intents))
        return tuple(
            jnp.concatenate([o, belief], -1) if t == team else o
            for t, o in enumerate(obs)
        )

    def global_state(
        self, state: SoftBeliefState, params: SoftBeliefParams
    ) -> jax.Array:
        """``[S + K]``: the game's global state and the true intent's one-hot."""
        onehot = jax.nn.one_hot(self.env.true_intent(state.game), self.num_intents)
        return jnp.concatenate(
            [self.unwrapped.global_state(state.game, params.game), onehot]
        )

    # -- the hidden intent (mopa.envs.base.IntentGame) ----------------------------
    def true_intent(self, state: SoftBeliefState) -> jax.Array:
        return self.env.true_intent(state.game)

    def with_belief(self, state: SoftBeliefState, belief: jax.Array) -> Any:
        return state.replace(belief=belief)

    def opponent_position(
        self, state: SoftBeliefState, params: SoftBeliefParams
    ) -> jax.Array:
        return self.env.opponent_position(state.game, params.game)


def soft_belief_game(
    env: Any, alpha_low: float | jax.Array = 0.0, alpha_high: float | jax.Array = 1.0
) -> tuple[SoftBeliefGame, SoftBeliefParams]:
    """``env`` wrapped in a :class:`SoftBeliefGame` whose belief has sharpness in
    ``[alpha_low, alpha_high]``, and its params (the game's defaults)."""
    game = SoftBeliefGame(env)
    return game, SoftBeliefParams(
        env.default_params,
        jnp.asarray(alpha_low, jnp.float32),
        jnp.asarray(alpha_high, jnp.float32),
    )
