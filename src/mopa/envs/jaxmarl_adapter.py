"""Any JaxMARL environment as a mopa game: ``make("jaxmarl:MPE_simple_adversary_v3")``.

JaxMARL keys everything by agent name; mopa wants per-team arrays. The adapter
groups agents into teams by name (``adversary_0``, ``adversary_1``, ``agent_0``
-> teams ``adversary`` and ``agent``, in JaxMARL's agent order), and falls back to
one agent per team when the names do not group (a name without a ``_N`` suffix, or
agents of one group with different action spaces). Inside a team:

* observations are flattened, cast to float32 and zero-padded at the end to the
  team's largest observation (sizes are read from a traced reset, not from
  JaxMARL's declared spaces, which are sometimes wrong);
* actions are JaxMARL's ``Discrete(n)`` (int32 ``[A_t]``) or ``Box`` (float
  ``[A_t, *shape]``; mopa's ``Box`` keeps the smallest low and largest high bound);
  other action spaces are refused;
* rewards are per agent ``[A_t]``.

``step`` calls JaxMARL's ``step_env``, never its auto-resetting ``step``; wrap the
game in :class:`mopa.envs.AutoReset` to chain episodes. Episode boundaries are
JaxMARL's own (its MPE games end after 26 transitions, mopa's after 25).
JaxMARL has a single ``done["__all__"]``; it becomes ``terminated`` or
``truncated`` by ``done_as``:

* ``"auto"`` (default): if the game has an integer ``max_steps`` and its state a
  ``step`` counter, an episode that ends with ``step >= max_steps`` is truncated
  (a time limit) and any other end is terminated; a game without a step limit
  reports every end as terminated. JaxMARL's MPE games therefore always truncate.
  When a game's own end falls on the last step it is reported as truncated.
* ``"terminated"`` or ``"truncated"``: every end is reported that way (e.g.
  ``done_as="truncated"`` for ``coin_game``, whose episodes end by time only but
  which keeps no ``max_steps``).

If the JaxMARL game has ``get_world_state(state)`` (SMAX, FACMAC MPE), it is the
game's ``global_state(state, params)``. A JaxMARL game's numbers live on the
JaxMARL object, not in mopa's parameter pytree: ``params`` is ``None``, and the
keyword arguments of :func:`make_jaxmarl` (other than ``done_as``) go to
``jaxmarl.make`` once, at construction.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.spaces import Box, Discrete
from mopa.errors import InvalidParameterError, MopaError, UnknownNameError

JAXMARL_PREFIX = "jaxmarl:"
"""Names starting with this build a JaxMARL game through :func:`make_jaxmarl`."""

DONE_AS = ("auto", "terminated", "truncated")

_INDEXED_NAME = re.compile(r"^(.+)_(\d+)$")


def group_agents(
    agents: list[str], action_spaces: list[Any]
) -> tuple[list[str], list[list[int]]]:
    """Team names and teams (lists of agent indices): agents named ``<team>_<N>``
    grouped by ``<team>`` in order of first appearance, or one agent per team,
    named after it, when a name has no ``_N`` suffix or a group mixes action
    spaces.

    Args:
        agents: JaxMARL's agent names, in its order.
        action_spaces: each agent's mopa action space.
    """
    matches = [_INDEXED_NAME.match(str(name)) for name in agents]
    if all(matches):
        groups: dict[str, list[int]] = {}
        for i, match in enumerate(matches):
            groups.setdefault(match.group(1), []).append(i)
        teams = list(groups.values())
        if all(len({action_spaces[i] for i in team}) == 1 for team in teams):
            return list(groups), teams
    return [str(name) for name in agents], [[i] for i in range(len(agents))]


def _mopa_space(space: Any, agent: str, name: str) -> Discrete | Box:
    """mopa's version of a JaxMARL (or gymnax) action space."""
    shape = tuple(getattr(space, "shape", ()) or ())
    if hasattr(space, "n") and shape == ():
        return Discrete(int(space.n))
    if hasattr(space, "low") and hasattr(space, "high"):
        return Box(float(np.min(space.low)), float(np.max(space.high)), shape)
    raise MopaError(
        f"{name}: agent {agent!r} has a {type(space).__name__} action space; "
        "the JaxMARL adapter supports Discrete and Box only"
    )


def _raw_key(key: jax.Array) -> jax.Array:
    """JaxMARL expects old-style ``uint32[2]`` keys; mopa passes typed keys."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key


class JaxMarlEnv(Env):
    """A JaxMARL environment behind mopa's per-team API (see the module docstring).

    Hashes by identity, like the JaxMARL object it holds (JaxMARL jits its methods
    with the environment as a static argument).
    """

    def __init__(self, jaxmarl_env: Any, name: str, done_as: str = "auto"):
        if done_as not in DONE_AS:
            raise InvalidParameterError(
                f"{name}: done_as must be one of {DONE_AS}, got {done_as!r}"
            )
        self.jaxmarl_env = jaxmarl_env
        self.name = name
        self.done_as = done_as
        agents = list(jaxmarl_env.agents)
        spaces = [_mopa_space(jaxmarl_env.action_space(a), a, name) for a in agents]
        team_names, teams = group_agents(agents, spaces)
        self.team_names = tuple(team_names)
        # JaxMARL's agent names of each team, in JaxMARL's order.
        self.team_agents = tuple(tuple(agents[i] for i in team) for team in teams)
        self.team_sizes = tuple(len(team) for team in teams)
        self._action_spaces = tuple(spaces[team[0]] for team in teams)
        obs_shapes, state_shape = jax.eval_shape(
            jaxmarl_env.reset, jax.random.PRNGKey(0)
        )
        if not isinstance(obs_shapes, dict) or not all(
            hasattr(obs_shapes.get(a), "shape") for a in agents
        ):
            raise MopaError(
                f"{name}: observations are not one array per agent name; the "
                "JaxMARL adapter cannot convert this environment"
            )
        # Flattened size of each agent's real observation.
        self.agent_obs_sizes = {a: math.prod(obs_shapes[a].shape) for a in agents}
        self._obs_sizes = tuple(
            max(self.agent_obs_sizes[a] for a in team) for team in self.team_agents
        )
        max_steps = getattr(jaxmarl_env, "max_steps", None)
        self._time_limit = (
            isinstance(max_steps, int | np.integer)
            and not isinstance(max_steps, bool)
            and hasattr(state_shape, "step")
        )

    # -- structure ---------------------------------------------------------------
    def observation_space(self, team: int) -> Box:
        return Box(-np.inf, np.inf, (self._obs_sizes[team],))

    def action_space(self, team: int) -> Discrete | Box:
        return self._action_spaces[team]

    @property
    def default_params(self) -> None:
        """JaxMARL keeps its numbers on the environment object: no parameters."""
        return None

    # -- conversions -------------------------------------------------------------
    def to_team_obs(self, obs: dict[str, jax.Array]) -> TeamArrays:
        """JaxMARL's observation dict as per-team ``[A_t, D_t]`` float32 arrays."""
        teams = []
        for agents, size in zip(self.team_agents, self._obs_sizes, strict=True):
            rows = []
            for agent in agents:
                flat = jnp.ravel(obs[agent]).astype(jnp.float32)
                rows.append(jnp.pad(flat, (0, size - flat.shape[0])))
            teams.append(jnp.stack(rows))
        return tuple(teams)

    def to_jaxmarl_actions(self, actions: TeamArrays) -> dict[str, jax.Array]:
        """Per-team actions as JaxMARL's dict keyed by agent name."""
        return {
            agent: team_actions[j]
            for agents, team_actions in zip(self.team_agents, actions, strict=True)
            for j, agent in enumerate(agents)
        }

    def to_team_values(self, values: dict[str, jax.Array]) -> TeamArrays:
        """A per-agent dict of scalars (rewards) as per-team ``[A_t]`` float32."""
        return tuple(
            jnp.stack([jnp.asarray(values[a], jnp.float32) for a in agents])
            for agents in self.team_agents
        )

    # -- dynamics ----------------------------------------------------------------
    def _reset(self, key: jax.Array, params: None) -> tuple[TeamArrays, Any]:
        obs, state = self.jaxmarl_env.reset(_raw_key(key))
        return self.to_team_obs(obs), state

    def _step(
        self, key: jax.Array, state: Any, actions: TeamArrays, params: None
    ) -> StepOutput:
        obs, next_state, rewards, dones, info = self.jaxmarl_env.step_env(
            _raw_key(key), state, self.to_jaxmarl_actions(actions)
        )
        done = jnp.asarray(dones["__all__"], bool)
        if self.done_as == "truncated":
            time_up = jnp.ones((), bool)
        elif self.done_as == "auto" and self._time_limit:
            time_up = next_state.step >= self.jaxmarl_env.max_steps
        else:
            time_up = jnp.zeros((), bool)
        return (
            self.to_team_obs(obs),
            next_state,
            self.to_team_values(rewards),
            done & ~time_up,
            done & time_up,
            dict(info),
        )

    def observe(self, state: Any, params: None) -> TeamArrays:
        return self.to_team_obs(self.jaxmarl_env.get_obs(state))


class JaxMarlEnvWithGlobalState(JaxMarlEnv):
    """A JaxMARL game that has ``get_world_state``: adds :meth:`global_state`."""

    def __init__(self, jaxmarl_env: Any, name: str, done_as: str = "auto"):
        super().__init__(jaxmarl_env, name, done_as)
        _, state = jax.eval_shape(jaxmarl_env.reset, jax.random.PRNGKey(0))
        world = jax.eval_shape(jaxmarl_env.get_world_state, state)
        self.global_state_size = sum(math.prod(x.shape) for x in jax.tree.leaves(world))

    def global_state(self, state: Any, params: None) -> jax.Array:
        """``[global_state_size]`` float32: JaxMARL's world state, flattened (a
        world state per agent, as FACMAC's, is concatenated in sorted-key order)."""
        world = self.jaxmarl_env.get_world_state(state)
        return jnp.concatenate(
            [jnp.ravel(x).astype(jnp.float32) for x in jax.tree.leaves(world)]
        )


def make_jaxmarl(
    name: str, done_as: str = "auto", **kwargs: Any
) -> tuple[JaxMarlEnv, None]:
    """Build JaxMARL's game ``name`` (``"jaxmarl:<JaxMARL id>"``) as a mopa game.

    Args:
        name: ``"jaxmarl:"`` followed by a JaxMARL environment id.
        done_as: how JaxMARL's ``done`` is reported (see the module docstring).
        **kwargs: passed to ``jaxmarl.make`` (JaxMARL ignores unknown keywords of
            many games silently).

    Returns:
        ``(env, None)``: the game and its (empty) parameters.

    Raises:
        MopaError: jaxmarl is not installed, or an agent's action space is
            neither Discrete nor Box.
        UnknownNameError: JaxMARL has no game of that id.
        InvalidParameterError: JaxMARL refuses the keyword arguments.
    """
    env_id = name.removeprefix(JAXMARL_PREFIX)
    try:
        import jaxmarl
    except ImportError:
        raise MopaError(
            f"{name} needs JaxMARL, which is not installed; install it with "
            "pip install 'mopa[dev]' (or pip install jaxmarl==0.2.0)"
        ) from None
    known = list(jaxmarl.registered_envs)
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known, n=1)
        hint = f" (did you mean {JAXMARL_PREFIX + close[0]!r}?)" if close else ""
        raise UnknownNameError(f"JaxMARL has no environment {env_id!r}{hint}")
    try:
        inner = jaxmarl.make(env_id, **kwargs)
    except ImportError as error:  # games whose extra packages are missing
        raise MopaError(f"{name}: {str(error).splitlines()[0]}") from None
    except (TypeError, ValueError, AssertionError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InvalidParameterError(f"{name}: {message}") from None
    cls = (
        JaxMarlEnvWithGlobalState
        if callable(getattr(inner, "get_world_state", None))
        else JaxMarlEnv
    )
    env = cls(inner, name, done_as)
    return env, env.default_params
