"""A planner that reads its belief about the opponent from its own observation.

In a :class:`~mopa.opponent.belief_game.BeliefObservation` game the planning team's
observation ends with the joint belief over the opponent's (intent, member) and the
none-fits probability, updated inside the game from the opponent's moves::

    obs[team] = [game observation, joint_belief (K x M, flattened), P(none fits)]

:class:`ObservedBeliefPlanner` wraps a planner (:class:`LookaheadPlayer` or
:class:`MCTSPlayer`) whose opponent model is a
:class:`~mopa.planning.PopulationOpponentModel` without a fallback: before each
decision it puts the belief of the observation into the model's params, so every
rollout imagines an opponent drawn from the belief the game holds (with the
none-fits mixture already in it: :func:`~mopa.opponent.population.joint_belief`).
It is a :class:`~mopa.players.Player`: tournaments, datasets and matches play it as
any other, with the planner's params (:class:`LookaheadParams`, the belief slot
filled with anything of shape ``[K, M]``).

:class:`StateBeliefPlanner` is the same for an
:class:`~mopa.opponent.belief_game.IntentBeliefInput` game, whose team observes only
the belief's intent marginal (in the game's own intent input) and whose state holds
the whole joint belief: it reads the belief from the state, and its planner
simulates the wrapped game (the state's inner game state, whose intent input
already holds the marginal, so the imagined team reads what the real one reads).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from mopa.errors import InvalidParameterError
from mopa.opponent.population import joint_belief
from mopa.planning.lookahead import LookaheadParams, LookaheadPlayer
from mopa.planning.mcts import MCTSPlayer
from mopa.planning.opponents import PopulationOpponentModel
from mopa.players import plays_games_in_turn


@dataclasses.dataclass(frozen=True)
class _JointBeliefPlanner:
    """A planner whose population model takes the joint belief before each
    decision (the Player's properties are the planner's)."""

    planner: LookaheadPlayer | MCTSPlayer
    """The planner; its opponent model a :class:`PopulationOpponentModel` with no
    fallback."""

    def __post_init__(self):
        model = self.planner.opponent_model
        if not isinstance(model, PopulationOpponentModel) or model.fallback:
            raise InvalidParameterError(
                "planner: its opponent model must be a PopulationOpponentModel "
                "without a fallback (the belief it acts on is the joint belief)"
            )

    @property
    def num_agents(self) -> int:
        return self.planner.num_agents

    @property
    def games_in_turn(self) -> bool:
        """The planner's (:func:`~mopa.players.plays_games_in_turn`)."""
        return plays_games_in_turn(self.planner)

    @property
    def carry_size(self) -> int:
        return self.planner.carry_size


@dataclasses.dataclass(frozen=True)
class ObservedBeliefPlanner(_JointBeliefPlanner):
    """``planner`` acting on the belief at the end of its team's observation."""

    num_members: int
    """``M``: the members of the population model (the belief game's)."""
    padded_members: int | None = None
    """The members the observed belief has room for (the belief game's
    ``max_members``); ``None``: ``num_members``."""

    def __post_init__(self):
        super().__post_init__()
        if self.num_members < 1:
            raise InvalidParameterError(
                f"num_members must be >= 1, got {self.num_members}"
            )
        if self.padded_members is not None and self.padded_members < self.num_members:
            raise InvalidParameterError(
                f"padded_members ({self.padded_members}) must be at least "
                f"num_members ({self.num_members})"
            )
        width = self.belief_size + 1
        obs_size = self.planner.own_spec.obs_size
        if obs_size <= width:
            raise InvalidParameterError(
                f"the planning team's observation ({obs_size}) is too narrow to "
                f"end with a belief of {self.belief_size} and a none-fits entry"
            )

    @property
    def belief_size(self) -> int:
        K = self.planner.opponent_model.config.num_intents
        return K * (self.padded_members or self.num_members)

    def belief(self, obs: jax.Array) -> jax.Array:
        """``[K, M]`` the joint belief at the end of ``obs [A, D]`` (agent 0's: every
        agent of the team observes the same belief)."""
        K = self.planner.opponent_model.config.num_intents
        flat = obs[0, -(self.belief_size + 1) : -1]
        return flat.reshape(K, -1)[:, : self.num_members]

    def act(
        self,
        params: LookaheadParams,
        key: jax.Array,
        state: Any,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
    ) -> tuple[jax.Array, jax.Array]:
        """The planner's move with the observed belief; see
        :class:`~mopa.players.Player`."""
        model = params.opponent_params.replace(belief=self.belief(obs))
        params = params.replace(opponent_params=model)
        return self.planner.act(params, key, state, obs, carry, reset)


@dataclasses.dataclass(frozen=True)
class StateBeliefPlanner(_JointBeliefPlanner):
    """``planner`` acting on the joint belief an
    :class:`~mopa.opponent.belief_game.IntentBeliefInput` game keeps in its state
    (see the module docstring). ``planner.env`` is the wrapped game."""

    def act(
        self,
        params: LookaheadParams,
        key: jax.Array,
        state: Any,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
    ) -> tuple[jax.Array, jax.Array]:
        """The planner's move with the state's belief (``state`` a
        :class:`~mopa.opponent.belief_game.BeliefGameState`, ``params`` the
        planner's, its belief slot of any ``[K, M]``); see
        :class:`~mopa.players.Player`."""
        model = params.opponent_params.replace(belief=joint_belief(state.belief))
        params = params.replace(opponent_params=model)
        return self.planner.act(params, key, state.env_state, obs, carry, reset)
