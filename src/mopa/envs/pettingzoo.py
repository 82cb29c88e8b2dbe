"""A PettingZoo ``ParallelEnv`` over any mopa game.

This module owns the translation between mopa's functional, team-array API and
PettingZoo's stateful, per-agent dictionaries: agent names, Gymnasium spaces, the
episode's PRNG keys and game state, action validation and the conversion of every
output to NumPy and Python scalars. The game itself stays pure; reset and step are
compiled once per game and the parameters are passed to them as arguments.

>>> import mopa.envs
>>> from mopa.envs.pettingzoo import to_pettingzoo
>>> penv = to_pettingzoo(*mopa.envs.make("tag"))
>>> observations, infos = penv.reset(seed=0)
>>> penv.agents
['predator_0', 'predator_1', 'predator_2', 'prey_0']

PettingZoo and Gymnasium are the optional extra ``pettingzoo``; this module is not
imported by :mod:`mopa.envs`.
"""

from __future__ import annotations

import secrets
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.base import Env, TeamArrays
from mopa.envs.spaces import Box, Discrete
from mopa.errors import InvalidActionError

try:
    import gymnasium
    from pettingzoo import ParallelEnv
except ImportError as error:
    raise ImportError(
        "mopa.envs.pettingzoo needs PettingZoo and Gymnasium; install them with "
        'pip install "mopa[pettingzoo]"'
    ) from error

RENDER_MODES = ("rgb_array",)
"""Render modes the adapter supports."""


def team_agent_names(env: Env) -> list[list[str]]:
    """PettingZoo names of the agents of each team of ``env``: ``f"{team}_{i}"``.

    Example: ``[["predator_0", "predator_1", "predator_2"], ["prey_0"]]`` for
    ``tag``.
    """
    return [
        [f"{team}_{i}" for i in range(size)]
        for team, size in zip(env.team_names, env.team_sizes, strict=True)
    ]


def to_gymnasium_space(space: Box | Discrete) -> gymnasium.spaces.Space:
    """The Gymnasium equivalent of a mopa space (one agent's observation or
    action)."""
    if isinstance(space, Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, Box):
        return gymnasium.spaces.Box(
            low=space.low, high=space.high, shape=space.shape, dtype=space.dtype
        )
    raise TypeError(f"no Gymnasium equivalent for space {space!r}")


class MopaParallelEnv(ParallelEnv[str, np.ndarray, Any]):
    """A mopa game as a PettingZoo ``ParallelEnv``.

    Every agent acts every step and all agents finish together: the game's
    ``terminated`` and ``truncated`` are scalars, copied to every agent, and once
    either is true ``agents`` becomes empty until the next :meth:`reset`. The
    observation returned by the final step is the true final observation (mopa
    games never reset by themselves).

    Keys: ``reset(seed)`` splits ``jax.random.key(seed)`` into
    ``(key_reset, key_steps)`` (as :func:`mopa.envs.rollout.rollout` does) and
    resets the game with ``key_reset``; each step splits ``key_steps`` into
    ``(key_steps, key_step)`` and steps the game with ``key_step``. The game
    driven by these keys and the same actions reproduces the adapter's episode.

    Infos: every 0-d entry of the game's ``info`` goes to every agent as a Python
    scalar, and an entry named ``f"{team}_..."`` of shape ``[A_team]`` gives each
    agent of that team its own element (e.g. ``prey_collect``). Other entries are
    left out. Note that infos are not observations: a game may report hidden
    quantities there (``tag_intent``'s ``intent``).

    Args:
        env: the mopa game (unwrapped: the adapter does its own episode handling).
        params: the game's parameter pytree; ``env.default_params`` if ``None``.
            Validated once here.
        render_mode: ``None`` or ``"rgb_array"``.

    Raises:
        ValueError: ``render_mode`` is not supported.
        InvalidParameterError: ``params`` is invalid for ``env``.
    """

    def __init__(
        self, env: Env, params: Any = None, render_mode: str | None = None
    ) -> None:
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(
                f"render_mode must be None or one of {list(RENDER_MODES)}, "
                f"got {render_mode!r}"
            )
        params = env.default_params if params is None else params
        env.validate_params(params)
        self._env = env
        self._params = params
        self.render_mode = render_mode
        self.metadata = {
            "name": env.name,
            "render_modes": list(RENDER_MODES),
            "is_parallelizable": True,
        }

        self._team_agents = team_agent_names(env)
        self.possible_agents = [a for agents in self._team_agents for a in agents]
        self.agents: list[str] = []
        # One space object per agent, so that seeding one agent's space leaves the
        # others alone; observation_space(agent) returns the same object each call.
        self.observation_spaces = {
            agent: to_gymnasium_space(env.observation_space(t))
            for t, agents in enumerate(self._team_agents)
            for agent in agents
        }
        self.action_spaces = {
            agent: to_gymnasium_space(env.action_space(t))
            for t, agents in enumerate(self._team_agents)
            for agent in agents
        }

        self._has_global_state = callable(getattr(env, "global_state", None))
        if self._has_global_state:
            shape = jax.eval_shape(
                lambda key: env.global_state(env.reset(key, params)[1], params),
                jax.random.key(0),
            )
            self.state_space = gymnasium.spaces.Box(
                -np.inf, np.inf, shape.shape, np.dtype(shape.dtype)
            )

        self._key_steps: jax.Array | None = None
        self._state: Any = None

    # -- properties ----------------------------------------------------------------
    @property
    def game(self) -> Env:
        """The wrapped mopa game."""
        return self._env

    @property
    def params(self) -> Any:
        """The game's parameter pytree used by every reset and step."""
        return self._params

    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        """Gymnasium space of ``agent``'s observation (the same object each call)."""
        return self.observation_spaces[self._check_agent(agent)]

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        """Gymnasium space of ``agent``'s action (the same object each call)."""
        return self.action_spaces[self._check_agent(agent)]

    # -- episode -------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start an episode.

        Args:
            seed: seed of ``jax.random.key``; a fresh random seed if ``None``.
            options: accepted for API compatibility and ignored.

        Returns:
            ``(observations, infos)``: each agent's observation ``[D_t]`` float32
            and an empty info dict.
        """
        seed = secrets.randbits(32) if seed is None else seed
        obs, self._state, self._key_steps = _reset_game(
            self._env, jax.random.key(seed), self._params
        )
        self.agents = list(self.possible_agents)
        observations = self._per_agent(jax.device_get(obs))
        return observations, {agent: {} for agent in self.agents}

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[
        dict[str, np.ndarray],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        """Advance the game one step with every live agent's action.

        Args:
            actions: one action per live agent: an integer for a ``Discrete``
                action space, an array of the space's shape for a ``Box``.

        Returns:
            ``(observations, rewards, terminations, truncations, infos)``, keyed by
            the agents that acted. Observations are float32 ``[D_t]`` arrays,
            rewards Python floats, terminations and truncations Python bools.

        Raises:
            RuntimeError: no episode is running (call :meth:`reset`).
            InvalidActionError: an agent is missing or unknown, or an action has
                the wrong shape, dtype or value; the game's state is unchanged.
        """
        if not self.agents:
            raise RuntimeError(
                f"{self._env.name}: no episode is running; call reset() first"
            )
        team_actions = self._team_actions(actions)
        outputs, self._state, self._key_steps = _step_game(
            self._env, self._key_steps, self._state, team_actions, self._params
        )
        obs, rewards, terminated, truncated, info = jax.device_get(outputs)
        agents = self.agents
        observations = self._per_agent(obs)
        agent_rewards = {
            agent: float(reward)
            for agent, reward in zip(agents, np.concatenate(rewards), strict=True)
        }
        terminations = dict.fromkeys(agents, bool(terminated))
        truncations = dict.fromkeys(agents, bool(truncated))
        infos = self._agent_infos(info)
        if terminated or truncated:
            self.agents = []
        return observations, agent_rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        """The game's ``global_state`` (for centralised critics) as NumPy.

        Raises:
            NotImplementedError: the game defines no ``global_state``.
            RuntimeError: :meth:`reset` has not been called.
        """
        if not self._has_global_state:
            raise NotImplementedError(
                f"{self._env.name} defines no global_state(state, params)"
            )
        if self._state is None:
            raise RuntimeError(f"{self._env.name}: call reset() before state()")
        return np.asarray(_global_state(self._env, self._state, self._params))

    def render(self) -> np.ndarray | None:
        """An ``[H, W, 3]`` uint8 frame of the current state in ``"rgb_array"``
        mode, drawn by :func:`mopa.report.render.render_state`; ``None`` (with a
        warning) when the adapter was built without a render mode."""
        if self.render_mode is None:
            gymnasium.logger.warn(
                "render() called on a MopaParallelEnv built with render_mode=None; "
                "pass render_mode='rgb_array' to to_pettingzoo"
            )
            return None
        if self._state is None:
            raise RuntimeError(f"{self._env.name}: call reset() before render()")
        try:
            from mopa.report.render import render_state
        except ImportError as error:
            raise ImportError(
                "rendering needs mopa.report.render.render_state, which is not "
                "available in this installation"
            ) from error
        return render_state(self._env, self._state, self._params)

    def close(self) -> None:
        """Nothing to release: the game holds no resources."""

    # -- helpers -------------------------------------------------------------------
    def _check_agent(self, agent: str) -> str:
        if agent not in self.observation_spaces:
            raise KeyError(
                f"unknown agent {agent!r} for {self._env.name}; agents are "
                f"{self.possible_agents}"
            )
        return agent

    def _team_actions(self, actions: dict[str, Any]) -> TeamArrays:
        """Check the actions dict and stack it into one array per team."""
        if not isinstance(actions, dict):
            raise InvalidActionError(
                f"{self._env.name}: actions must be a dict keyed by agent name, got "
                f"{type(actions).__name__}"
            )
        missing = [agent for agent in self.agents if agent not in actions]
        unknown = [agent for agent in actions if agent not in self.agents]
        if missing or unknown:
            problems = []
            if missing:
                problems.append(f"missing actions for {missing}")
            if unknown:
                problems.append(f"actions for unknown or finished agents {unknown}")
            raise InvalidActionError(
                f"{self._env.name}: {'; '.join(problems)}; live agents are "
                f"{self.agents}"
            )
        stacked = tuple(
            np.asarray([actions[agent] for agent in agents])
            for agents in self._team_agents
        )
        checked = self._env.check_actions(stacked)
        # Fixed dtypes, so the jitted step never retraces on int64 vs int32 inputs.
        return tuple(
            jnp.asarray(act, self._env.action_space(t).dtype)
            for t, act in enumerate(checked)
        )

    def _per_agent(self, team_obs: TeamArrays) -> dict[str, np.ndarray]:
        """``{agent: obs [D_t]}`` from per-team ``[A_t, D_t]`` NumPy arrays."""
        return {
            agent: team_obs[t][i]
            for t, agents in enumerate(self._team_agents)
            for i, agent in enumerate(agents)
        }

    def _agent_infos(self, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Per-agent infos from the game's (NumPy) info; rules in the class
        docstring."""
        infos: dict[str, dict[str, Any]] = {agent: {} for agent in self.agents}
        for name, value in info.items():
            if not isinstance(value, np.ndarray | np.generic):
                continue
            if value.ndim == 0:
                for agent in infos:
                    infos[agent][name] = value.item()
                continue
            for t, agents in enumerate(self._team_agents):
                team = self._env.team_names[t]
                if name.startswith(f"{team}_") and value.shape == (len(agents),):
                    for agent, element in zip(agents, value, strict=True):
                        infos[agent][name] = element.item()
        return infos


# Jitted with the game static: adapters over equal games share one compilation.
@partial(jax.jit, static_argnums=0)
def _reset_game(
    env: Env, key: jax.Array, params: Any
) -> tuple[TeamArrays, Any, jax.Array]:
    """Reset ``env`` with ``key_reset``; return ``(obs, state, key_steps)``."""
    key_reset, key_steps = jax.random.split(key)
    obs, state = env.reset(key_reset, params)
    return obs, state, key_steps


@partial(jax.jit, static_argnums=0)
def _step_game(
    env: Env, key_steps: jax.Array, state: Any, actions: TeamArrays, params: Any
) -> tuple[tuple, Any, jax.Array]:
    """Step ``env`` with a fresh ``key_step`` split from ``key_steps``.

    Returns:
        ``((obs, rewards, terminated, truncated, info), state, key_steps)``.
    """
    key_steps, key_step = jax.random.split(key_steps)
    obs, state, rewards, terminated, truncated, info = env.step(
        key_step, state, actions, params
    )
    return (obs, rewards, terminated, truncated, info), state, key_steps


@partial(jax.jit, static_argnums=0)
def _global_state(env: Env, state: Any, params: Any) -> jax.Array:
    """``env.global_state(state, params)``, jitted."""
    return env.global_state(state, params)


def to_pettingzoo(
    env: Env, params: Any = None, render_mode: str | None = None
) -> MopaParallelEnv:
    """Wrap a mopa game as a PettingZoo ``ParallelEnv``.

    Args:
        env: the mopa game, e.g. the first element of ``mopa.envs.make("tag")``.
        params: its parameter pytree; ``env.default_params`` if ``None``.
        render_mode: ``None`` or ``"rgb_array"``.

    Returns:
        A :class:`MopaParallelEnv`; see it for names, keys and infos.
    """
    return MopaParallelEnv(env, params, render_mode)
