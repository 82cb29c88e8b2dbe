"""A game in which one team also observes its belief about the opponent's style.

:class:`BeliefObservation` wraps any mopa game. At every step it updates the joint
belief of :mod:`mopa.opponent.population` (over the population model's intents and
members, with the "none fits" test) from the opponent team's moves, and appends
that belief to every agent's observation of the observing team::

    obs'[team] = [obs[team], joint_belief (K x M, flattened), P(none fits)]

With ``max_members`` the joint belief is padded with zeros to ``K x max_members``,
so the observation keeps its width when a re-fitted model has more members (a
policy trained on one model can be trained on with the next).

Inside the game the opponent's moves are known exactly (they are the step's
actions), so any game works, with no inference of the moves from the state. The
belief starts afresh at every reset (an episode), from the model's priors. The
other teams' observations are unchanged.

The team then learns a policy that reads the belief (a belief-conditioned policy,
the research's Part 1), with any of mopa's trainers, by passing the wrapped game
as ``game=``::

    game = BeliefObservation(env, "predator", "prey", config, clones)
    run_training(mappo_config, game=(game, game.default_params))

The clone weights live in the params (:class:`BeliefGameParams`), not in the
wrapper: re-fitting the model changes numbers, not the compiled program.

:class:`IntentBeliefInput` is the same game for a team whose observation already
ends with an input for the opponent's intent (``tag_intent`` with
``predator_intent_obs``: a belief over the prey's corner, ``state.belief``). It
keeps the joint belief in the game's state, as :class:`BeliefObservation` does,
and writes the belief's intent marginal into that input::

    state.belief <- intent_belief (K), obs'[team] = game.observe(state)

so the observation keeps its width whatever the model's number of members (a
policy trained on one model can be trained on with a re-fitted one), and the team
reads, through the game's own intent input, what it can infer of the intent from
the moves. A planner reads the whole joint belief from the state
(:class:`~mopa.planning.StateBeliefPlanner`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from mopa.core.checks import check_fraction, check_probability
from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.spaces import Box, Discrete
from mopa.envs.wrappers import Wrapper
from mopa.errors import InvalidParameterError
from mopa.opponent.population import (
    DEFAULT_EPSILON,
    DEFAULT_FALLBACK_PRIOR,
    PopulationBeliefState,
    PopulationConfig,
    init_population_belief,
    intent_belief,
    joint_belief,
    none_fits_probability,
    num_members,
    observe_opponent,
)


@struct.dataclass
class BeliefGameParams:
    """Numbers of a :class:`BeliefObservation`: the game's and the model's."""

    env: Any
    """The wrapped game's params."""
    clones: Any
    """The population model's clone weights, leaves ``[M, ...]``."""

    @property
    def max_steps(self) -> Any:
        """The wrapped game's episode length (where it has one)."""
        return self.env.max_steps


@struct.dataclass
class BeliefGameState:
    """The wrapped game's state and the belief; the wrapped state's fields read
    through (``state.pos``, ``state.intent``), so tools that record a game's
    state (trajectory datasets) see the same fields."""

    env_state: Any
    belief: PopulationBeliefState

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("env_state", "belief"):
            raise AttributeError(name)
        return getattr(self.env_state, name)


class BeliefObservation(Wrapper):
    """``env`` with ``team``'s observation extended by its belief about
    ``opponent``'s style (see the module docstring)."""

    def __init__(
        self,
        env: Env,
        team: str,
        opponent: str,
        population: PopulationConfig,
        clones: Any,
        *,
        epsilon: float = DEFAULT_EPSILON,
        fallback_prior: float = DEFAULT_FALLBACK_PRIOR,
        max_members: int | None = None,
    ):
        super().__init__(env)
        self.team = env.team_index(team)
        self.opponent = env.team_index(opponent)
        if self.team == self.opponent:
            raise InvalidParameterError(
                f"team and opponent must differ, both are {team!r}"
            )
        if not isinstance(population, PopulationConfig):
            raise InvalidParameterError(
                "population must be a PopulationConfig, got "
                f"{type(population).__name__}"
            )
        space = env.action_space(self.opponent)
        if not isinstance(space, Discrete) or space.n != population.num_actions:
            raise InvalidParameterError(
                f"population: its clones take {population.num_actions} actions; "
                f"{opponent!r} plays {space}"
            )
        check_probability("fallback_prior", fallback_prior)
        check_fraction("epsilon", epsilon)
        self.population = population
        self.num_members = num_members(clones)
        if max_members is not None and max_members < self.num_members:
            raise InvalidParameterError(
                f"max_members ({max_members}) must be at least the model's "
                f"{self.num_members} members"
            )
        self.max_members = max_members
        self.epsilon = float(epsilon)
        self.fallback_prior = float(fallback_prior)
        self._clones = clones
        if callable(getattr(env, "global_state", None)):
            # Centralised critics read the game's state; the belief is in the
            # team's own observations, which they read as well.
            self.global_state = self._global_state

    # -- structure ---------------------------------------------------------------
    @property
    def belief_size(self) -> int:
        """Entries appended to the team's observation: ``K M + 1`` (``M`` the
        members, or ``max_members``)."""
        return self.population.num_intents * self.padded_members + 1

    @property
    def padded_members(self) -> int:
        """The members the observed belief has room for."""
        return self.num_members if self.max_members is None else self.max_members

    def observation_space(self, team: int) -> Box:
        space = self.env.observation_space(team)
        if team != self.team:
            return space
        (width,) = space.shape
        return Box(
            low=min(float(space.low), 0.0),
            high=max(float(space.high), 1.0),
            shape=(width + self.belief_size,),
            dtype=space.dtype,
        )

    @property
    def default_params(self) -> BeliefGameParams:
        return BeliefGameParams(env=self.env.default_params, clones=self._clones)

    def validate_params(self, params: Any) -> None:
        if not isinstance(params, BeliefGameParams):
            raise InvalidParameterError(
                f"params must be BeliefGameParams, got {type(params).__name__}"
            )
        self.env.validate_params(params.env)
        if num_members(params.clones) != self.num_members:
            raise InvalidParameterError(
                f"params.clones: {num_members(params.clones)} members, the game "
                f"was built for {self.num_members}"
            )

    def _key(self) -> tuple:
        return (
            type(self),
            self.env,
            self.team,
            self.opponent,
            self.population,
            self.num_members,
            self.epsilon,
            self.fallback_prior,
            self.max_members,
        )

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    # -- dynamics ----------------------------------------------------------------
    def fresh_belief(self) -> PopulationBeliefState:
        """The belief before an episode's first move."""
        return init_population_belief(
            self.population.num_intents,
            self.num_members,
            fallback_prior=self.fallback_prior,
        )

    def _reset(self, key: jax.Array, params: BeliefGameParams):
        obs, env_state = self.env.reset(key, params.env)
        return self._present(obs, env_state, self.fresh_belief(), params)

    def _step(
        self,
        key: jax.Array,
        state: BeliefGameState,
        actions: TeamArrays,
        params: BeliefGameParams,
    ) -> StepOutput:
        seen = self.env.observe(state.env_state, params.env)[self.opponent]
        belief = observe_opponent(
            self.population,
            params.clones,
            state.belief,
            seen,
            actions[self.opponent],
            self.epsilon,
        )
        obs, env_state, rewards, terminated, truncated, info = self.env.step(
            key, state.env_state, actions, params.env
        )
        obs, state = self._present(obs, env_state, belief, params)
        return obs, state, rewards, terminated, truncated, info

    def _present(
        self,
        obs: TeamArrays,
        env_state: Any,
        belief: PopulationBeliefState,
        params: BeliefGameParams,
    ) -> tuple[TeamArrays, BeliefGameState]:
        """The observations and the state given the game's and the belief."""
        del params
        return self._extend(obs, belief), BeliefGameState(env_state, belief)

    def _global_state(self, state: BeliefGameState, params: BeliefGameParams):
        return self.env.global_state(state.env_state, params.env)

    def observe(self, state: BeliefGameState, params: BeliefGameParams) -> TeamArrays:
        return self._extend(self.env.observe(state.env_state, params.env), state.belief)

    def _extend(self, obs: TeamArrays, belief: PopulationBeliefState) -> TeamArrays:
        features = belief_features(belief, self.padded_members)
        own = obs[self.team]
        extra = jnp.broadcast_to(
            features.astype(own.dtype), (own.shape[0], features.size)
        )
        return tuple(
            jnp.concatenate([o, extra], -1) if t == self.team else o
            for t, o in enumerate(obs)
        )


class IntentBeliefInput(BeliefObservation):
    """``env`` whose ``team`` observes, through the game's own intent input, the
    intent marginal of its belief about ``opponent`` (see the module docstring).

    ``env``'s state must have a ``belief`` field ``[K]`` (``K`` the model's
    intents) that its ``observe`` writes into ``team``'s observation, as
    ``tag_intent`` with ``predator_intent_obs`` does.
    """

    def __init__(
        self,
        env: Env,
        team: str,
        opponent: str,
        population: PopulationConfig,
        clones: Any,
        *,
        epsilon: float = DEFAULT_EPSILON,
        fallback_prior: float = DEFAULT_FALLBACK_PRIOR,
    ):
        super().__init__(
            env,
            team,
            opponent,
            population,
            clones,
            epsilon=epsilon,
            fallback_prior=fallback_prior,
        )
        if not _ends_with_intent_input(env, self.team, population.num_intents):
            raise InvalidParameterError(
                f"{env.name}: {team!r}'s observation does not end with an intent "
                f"input of {population.num_intents} entries (a state field "
                f"belief, as tag_intent's with predator_intent_obs) for the "
                f"belief's intent marginal"
            )

    @property
    def belief_size(self) -> int:
        """Entries the belief adds to the team's observation: none (it fills the
        game's own intent input)."""
        return 0

    def observation_space(self, team: int) -> Box:
        return self.env.observation_space(team)

    def _present(self, obs, env_state, belief, params):
        del obs  # observed again, with the belief's marginal in the intent input
        state = BeliefGameState(self._with_input(env_state, belief), belief)
        return self.env.observe(state.env_state, params.env), state

    def observe(self, state: BeliefGameState, params: BeliefGameParams) -> TeamArrays:
        return self.env.observe(state.env_state, params.env)

    @staticmethod
    def _with_input(env_state: Any, belief: PopulationBeliefState) -> Any:
        marginal = intent_belief(belief).astype(env_state.belief.dtype)
        return env_state.replace(belief=marginal)


def _ends_with_intent_input(env: Env, team: int, num_intents: int) -> bool:
    """Whether ``team``'s observation ends with the state's ``belief`` ``[K]``:
    observed with the belief all 0 and all 1, its last ``K`` entries are those."""
    _, state = env.reset(jax.random.key(0), env.default_params)
    belief = getattr(state, "belief", None)
    if getattr(belief, "shape", None) != (num_intents,):
        return False
    ends = [
        env.observe(
            state.replace(belief=jnp.full_like(belief, value)), env.default_params
        )[team][:, -num_intents:]
        for value in (0.0, 1.0)
    ]
    return bool(jnp.all(ends[0] == 0.0) & jnp.all(ends[1] == 1.0))


def belief_features(
    belief: PopulationBeliefState, padded_members: int | None = None
) -> jax.Array:
    """``[K M + 1]`` what :class:`BeliefObservation` appends: the joint belief,
    flattened (intent-major; with ``padded_members``, each intent's row padded
    with zeros to that many members), and the none-fits probability."""
    joint = joint_belief(belief)
    if padded_members is not None:
        joint = jnp.pad(joint, ((0, 0), (0, padded_members - joint.shape[1])))
    return jnp.concatenate([joint.reshape(-1), none_fits_probability(belief)[None]])


__all__ = [
    "BeliefGameParams",
    "BeliefGameState",
    "BeliefObservation",
    "IntentBeliefInput",
    "belief_features",
]
