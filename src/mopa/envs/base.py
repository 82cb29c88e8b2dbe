"""The functional multi-agent game API every mopa game implements.

A game is a hashable object holding only static structure (team sizes, counts that
fix array shapes). Everything numeric lives in an explicit parameter pytree that is
passed to every call, so speeds, rewards and placements can be vmapped and are never
frozen into a compiled function by accident::

    obs, state = env.reset(key, params)
    obs, state, rewards, terminated, truncated, info = env.step(
        key, state, actions, params
    )

Teams are a tuple indexed by team (``env.team_names``); inside a team, agents are
the leading array axis: ``obs[t]`` is ``[A_t, D_t]``, ``actions[t]`` is ``[A_t]``
and ``rewards[t]`` is ``[A_t]``. ``terminated`` (the game ended by its own rules)
and ``truncated`` (the step limit) are scalar booleans, kept apart. The observation
returned by the final step is the true final observation: ``step`` never resets;
:class:`mopa.envs.wrappers.AutoReset` does, and keeps that observation in ``info``.
"""

from __future__ import annotations

import abc
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.spaces import Box, Discrete
from mopa.errors import InvalidActionError

TeamArrays = tuple[jax.Array, ...]
"""One array per team, agents of the team on the leading axis."""

StepOutput = tuple[TeamArrays, Any, TeamArrays, jax.Array, jax.Array, dict]
"""``(obs, state, rewards, terminated, truncated, info)``."""


def is_concrete(x: Any) -> bool:
    """Whether every leaf of ``x`` holds a concrete value (not a JAX tracer)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


class Env(abc.ABC):
    """Base class of mopa games: static structure here, numbers in ``params``.

    Subclasses implement ``_reset``, ``_step``, ``observe``, the spaces and
    ``default_params``. The public ``reset`` and ``step`` add input checks: shapes
    and dtypes are checked always (they are static under ``jit``); action values
    and parameter values are checked whenever they are concrete (outside ``jit``).
    """

    name: str
    team_names: tuple[str, ...]
    team_sizes: tuple[int, ...]

    # -- structure ---------------------------------------------------------------
    @property
    def num_teams(self) -> int:
        return len(self.team_names)

    @property
    def num_agents(self) -> int:
        return sum(self.team_sizes)

    def team_index(self, team: str) -> int:
        """Index of the team called ``team`` in every per-team tuple."""
        try:
            return self.team_names.index(team)
        except ValueError:
            raise InvalidActionError(
                f"unknown team {team!r} for {self.name}; teams are {self.team_names}"
            ) from None

    @abc.abstractmethod
    def observation_space(self, team: int) -> Box:
        """Space of one agent's observation in team ``team``."""

    @abc.abstractmethod
    def action_space(self, team: int) -> Discrete | Box:
        """Space of one agent's action in team ``team``."""

    @property
    @abc.abstractmethod
    def default_params(self) -> Any:
        """The game's default parameter pytree."""

    def validate_params(self, params: Any) -> None:  # noqa: B027 - optional hook
        """Raise :class:`~mopa.errors.InvalidParameterError` naming a bad field.

        Only concrete values can be checked; the default checks nothing.
        """

    # -- dynamics ----------------------------------------------------------------
    def reset(self, key: jax.Array, params: Any) -> tuple[TeamArrays, Any]:
        """Start an episode. Returns ``(obs, state)``."""
        if is_concrete(params):
            self.validate_params(params)
        return self._reset(key, params)

    def step(
        self, key: jax.Array, state: Any, actions: TeamArrays, params: Any
    ) -> StepOutput:
        """Advance one step. Returns ``(obs, state, rewards, terminated, truncated,
        info)``; see the module docstring for shapes."""
        actions = self.check_actions(actions)
        if is_concrete(params):
            self.validate_params(params)
        return self._step(key, state, actions, params)

    @abc.abstractmethod
    def _reset(self, key: jax.Array, params: Any) -> tuple[TeamArrays, Any]: ...

    @abc.abstractmethod
    def _step(
        self, key: jax.Array, state: Any, actions: TeamArrays, params: Any
    ) -> StepOutput: ...

    @abc.abstractmethod
    def observe(self, state: Any, params: Any) -> TeamArrays:
        """Every team's observations of ``state`` (what ``reset``/``step`` return)."""

    # -- checks ------------------------------------------------------------------
    def check_actions(self, actions: Any) -> TeamArrays:
        """Check one step's actions and return them as a tuple of arrays.

        Raises:
            InvalidActionError: wrong number of teams, wrong shape or dtype, or
                (for concrete values) a value outside the action space.
        """
        if not isinstance(actions, tuple | list) or len(actions) != self.num_teams:
            raise InvalidActionError(
                f"{self.name}: actions must be a tuple of {self.num_teams} arrays, "
                f"one per team {self.team_names}; got {type(actions).__name__}"
                + (f" of length {len(actions)}" if hasattr(actions, "__len__") else "")
            )
        checked = []
        for t, act in enumerate(actions):
            space = self.action_space(t)
            team = self.team_names[t]
            act = act if isinstance(act, jax.Array) else np.asarray(act)
            want_shape = (self.team_sizes[t], *space.shape)
            if tuple(act.shape) != want_shape:
                raise InvalidActionError(
                    f"{self.name}: actions for team {team!r} must have shape "
                    f"{want_shape}, got {tuple(act.shape)}"
                )
            if isinstance(space, Discrete):
                if not jnp.issubdtype(act.dtype, jnp.integer):
                    raise InvalidActionError(
                        f"{self.name}: actions for team {team!r} must be integers, "
                        f"got dtype {act.dtype}"
                    )
                if is_concrete(act):
                    values = np.asarray(act)
                    bad = (values < 0) | (values >= space.n)
                    if bad.any():
                        raise InvalidActionError(
                            f"{self.name}: action {values[bad][0]} for team {team!r} "
                            f"is out of range [0, {space.n - 1}]"
                        )
            elif not jnp.issubdtype(act.dtype, jnp.floating):
                raise InvalidActionError(
                    f"{self.name}: actions for team {team!r} must be floats, "
                    f"got dtype {act.dtype}"
                )
            checked.append(jnp.asarray(act))
        return tuple(checked)


class IntentGame(Protocol):
    """A game that names its opponent's private fields: one team (the observer)
    may keep a belief over the hidden intent of another (the opponent), ``K``
    strategies drawn per episode, and a player that does
    (:class:`~mopa.planning.IntentPredator`,
    :class:`~mopa.planning.PopulationPredator`) reads the game only through these
    members. A game provides the ones the player's parts use:

    * always: ``num_intents``, ``belief_team`` and ``observes_belief`` (the
      observer's observation ends with ``K`` belief entries, which the player
      overwrites with what it feeds its policy);
    * the true-intent feed: :meth:`true_intent`; a planner: :meth:`with_belief`;
    * beliefs read from the opponent's path (a prefix classifier, an arrival
      readout): :meth:`opponent_position`, and :meth:`intent_targets` for a
      readout;
    * Bayes from the opponent's moves: ``opponent_team``,
      :meth:`transition_memory`, :meth:`previous_state` and
      :meth:`opponent_move`.

    The pursuit game with a hidden intent (``tag_intent``,
    :class:`~mopa.envs.pursuit.PursuitEnv`) provides them all; the battalion
    against its scripted strategy family under
    :class:`~mopa.opponent.belief_game.SoftBeliefGame` those of a policy reading a
    belief from Red's path.
    """

    num_intents: int
    """``K``: the opponent's hidden strategies."""
    belief_team: int
    """The team that keeps a belief (the observer)."""
    opponent_team: int
    """The team whose intent is hidden (a team of the game's, for Bayes)."""
    observes_belief: bool
    """The observer's observation ends with a ``[K]`` belief."""

    def true_intent(self, state: Any) -> jax.Array:
        """``[]`` int32: the opponent's intent this episode (never observed)."""
        ...

    def with_belief(self, state: Any, belief: jax.Array) -> Any:
        """``state`` with the observer observing ``belief`` ``[K]`` (the state a
        planner imagines from)."""
        ...

    def opponent_position(self, state: Any, params: Any) -> jax.Array:
        """``[2]`` where the opponent is, in the arena's ``[-1, 1]`` units, as a
        belief over its intent reads its path."""
        ...

    def intent_targets(self, params: Any) -> jax.Array:
        """``[K, 2]`` where each intent leads the opponent (same units)."""
        ...

    def transition_memory(self, state: Any) -> Any:
        """What of ``state`` a player keeps for one step to rebuild it."""
        ...

    def previous_state(self, state: Any, memory: Any) -> Any:
        """The state before ``state``, rebuilt from the ``memory`` kept then."""
        ...

    def opponent_move(
        self, params: Any, previous: Any, actions: jax.Array, state: Any
    ) -> jax.Array:
        """``[]`` int32: the opponent's move of the transition ``previous ->
        state``, given the observer's ``actions`` ``[A]`` in it."""
        ...


def info_spec(env: Env, params: Any) -> dict[str, jax.ShapeDtypeStruct]:
    """Shapes and dtypes of the ``info`` dict that ``env.step`` returns (traced
    abstractly; nothing is computed)."""

    def probe(key):
        _, state = env.reset(key, params)
        actions = tuple(
            jnp.zeros((n, *env.action_space(t).shape), env.action_space(t).dtype)
            for t, n in enumerate(env.team_sizes)
        )
        return env.step(key, state, actions, params)[-1]

    return jax.eval_shape(probe, jax.random.key(0))


EPISODE_SUM_KEYS = ("captures", "blue_win", "red_win", "draw")
"""Scalar info keys that training and evaluation total per episode when a game
reports them: the pursuit games' captures, and the battalion's outcome (true on an
episode's last step only, so each totals 0 or 1)."""


def episode_sum_keys(env: Env, params: Any) -> tuple[str, ...]:
    """The keys of :data:`EPISODE_SUM_KEYS` that ``env`` reports as scalars."""
    info = info_spec(env, params)
    return tuple(k for k in EPISODE_SUM_KEYS if k in info and info[k].shape == ())
