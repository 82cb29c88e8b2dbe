"""The arena: one side of a two-team game as a one-team game, with the other side
played by a pool of frozen policies, and every episode's outcome in ``info``.

Training and evaluation of the league both run through :class:`Arena`. Its numbers
(the game's params, the opponents' stacked weights and the sampling weights) are
one parameter pytree, :class:`ArenaParams`, so a new pool snapshot, a new sampling
distribution or a curriculum stage that only changes game parameters is a new
*value* of the same compiled program, never a recompilation.

Opponents: the pool is ``K`` slots of one :class:`~mopa.policy.PolicySpec` with
parameters stacked ``[K, ...]``; each episode, at its reset, draws its slot from
``params.weights [K]`` (zero weight = empty slot). Games are vmapped, so every game
of a batch draws its own opponent.

Outcomes (``info["episode_win"]``, ``["episode_draw"]``, ``["episode_loss"]``,
floats, meaningful on the step an episode ends) come from the game's own end
signals, from the learning side's point of view:

* battalion games: ``blue_win`` / ``red_win`` / ``draw`` of the final step (a
  simultaneous elimination and the step limit are draws);
* pursuit games (``tag`` family), which end only at the step limit: the
  predators win an episode in which at least one capture happened, the prey wins
  one it survives without a capture; there are no draws.

Reward breakdown: every per-agent info entry of the learning side (keys starting
with its team name, such as ``blue_reward_dealt`` or ``prey_capture``) is summed
over the episode (mean over the side's agents) into
``info["episode_breakdown/<key>"]``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from mopa.envs.base import Env, StepOutput, TeamArrays, info_spec
from mopa.errors import InvalidParameterError
from mopa.policy import PolicySpec, make_act_fn

OUTCOME_KEYS = ("episode_win", "episode_draw", "episode_loss")
"""Info keys of an episode's outcome for the learning side."""


@struct.dataclass
class ArenaParams:
    """Every number of an arena."""

    game: Any
    """The two-team (or one-team) game's params."""
    opponents: Any
    """Opponent parameters stacked over slots ``[K, ...]`` (``{}`` when none)."""
    weights: jax.Array
    """``[K]`` sampling weights of the slots (need not be normalised; zero = never
    drawn)."""


@struct.dataclass
class ArenaState:
    game: Any
    opponent_obs: jax.Array  # [A_o, D_o] (zeros [0, 0] without an opponent)
    opponent_carry: jax.Array  # [A_o, H_o]
    slot: jax.Array  # [] int32: the opponent slot of this episode
    first: jax.Array  # [] bool: the next step is the episode's first
    captured: jax.Array  # [] bool: a capture happened this episode (pursuit)
    sums: dict  # breakdown key -> [] running episode sum


def outcome_rule(env: Env, params: Any) -> str:
    """``"battalion"`` or ``"pursuit"``: how ``env``'s episodes are won (see the
    module docstring).

    Raises:
        InvalidParameterError: the game reports no end-of-episode signal mopa
            knows how to turn into a win, a draw or a loss.
    """
    info = info_spec(env, params)
    if {"blue_win", "red_win", "draw"} <= set(info):
        return "battalion"
    if "captures" in info:
        return "pursuit"
    raise InvalidParameterError(
        f"{env.name} reports no win/draw/loss signal in its info; the league needs "
        "a battalion or a pursuit game"
    )


class Arena(Env):
    """Team ``learner`` of ``env`` as a one-team game; see the module docstring.

    Args:
        env: a two-team game (or a one-team game such as ``battalion_vs_red``,
            whose opponent is embedded; then ``opponent`` must be ``None``).
        learner: index of the learning side in ``env``.
        opponent: the pool's policy spec for the other side (``random`` specs
            allowed); ``None`` only for one-team games.
    """

    def __init__(self, env: Env, learner: int = 0, opponent: PolicySpec | None = None):
        if env.num_teams not in (1, 2):
            raise InvalidParameterError(
                f"the league plays one- or two-team games; {env.name} has "
                f"{env.num_teams} teams"
            )
        if env.num_teams == 2 and opponent is None:
            raise InvalidParameterError(
                f"{env.name} has two teams: give the opponent's policy spec"
            )
        if env.num_teams == 1 and (opponent is not None or learner != 0):
            raise InvalidParameterError(
                f"{env.name} is a one-team game: its opponent is built in"
            )
        if not 0 <= learner < env.num_teams:
            raise InvalidParameterError(f"learner must be a team index, got {learner}")
        self.env = env
        self.learner = learner
        self.opponent = opponent
        self.name = env.name
        self.team_names = (env.team_names[learner],)
        self._rule = outcome_rule(env, env.default_params)
        if opponent is not None:
            team = 1 - learner
            if opponent.num_agents != env.team_sizes[team]:
                raise InvalidParameterError(
                    f"the opponent spec acts for {opponent.num_agents} agents; team "
                    f"{env.team_names[team]!r} has {env.team_sizes[team]}"
                )
        info = info_spec(env, env.default_params)
        prefix = f"{self.team_names[0]}_"
        self.breakdown_keys = tuple(
            k
            for k in sorted(info)
            if k.startswith(prefix)
            and info[k].ndim <= 1
            and jnp.issubdtype(info[k].dtype, jnp.floating)
        )

    # -- structure -------------------------------------------------------------------
    @property
    def opponent_team(self) -> int | None:
        return None if self.opponent is None else 1 - self.learner

    @property
    def team_sizes(self) -> tuple[int, ...]:
        return (self.env.team_sizes[self.learner],)

    def observation_space(self, team: int):
        return self.env.observation_space(self.learner)

    def action_space(self, team: int):
        return self.env.action_space(self.learner)

    @property
    def default_params(self) -> ArenaParams:
        return ArenaParams(self.env.default_params, {}, jnp.ones((1,)))

    def validate_params(self, params: ArenaParams) -> None:
        self.env.validate_params(params.game)

    def __getattr__(self, name: str) -> Any:
        if name == "global_state" and hasattr(self.env, "global_state"):
            return lambda state, params: self.env.global_state(state.game, params.game)
        raise AttributeError(name)

    def __hash__(self) -> int:
        return hash((type(self), self.env, self.learner, self.opponent))

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and self.env == other.env
            and self.learner == other.learner
            and self.opponent == other.opponent
        )

    # -- dynamics --------------------------------------------------------------------
    def _opponent_shapes(self) -> tuple[tuple[int, int], tuple[int, int]]:
        if self.opponent is None:
            return (0, 0), (0, 0)
        team = self.opponent_team
        size = self.env.team_sizes[team]
        obs = int(self.env.observation_space(team).shape[0])
        return (size, obs), (size, self.opponent.carry_size)

    def _reset(self, key: jax.Array, params: ArenaParams):
        key_game, key_slot = jax.random.split(key)
        obs, game = self.env.reset(key_game, params.game)
        obs_shape, carry_shape = self._opponent_shapes()
        weights = jnp.asarray(params.weights, jnp.float32)
        slot = jax.random.categorical(key_slot, jnp.log(weights / weights.sum()))
        state = ArenaState(
            game=game,
            opponent_obs=(
                obs[self.opponent_team]
                if self.opponent is not None
                else jnp.zeros(obs_shape)
            ),
            opponent_carry=jnp.zeros(carry_shape),
            slot=slot.astype(jnp.int32),
            first=jnp.ones((), bool),
            captured=jnp.zeros((), bool),
            sums={k: jnp.zeros(()) for k in self.breakdown_keys},
        )
        return (obs[self.learner],), state

    def _step(
        self, key: jax.Array, state: ArenaState, actions: TeamArrays, params
    ) -> StepOutput:
        key_game, key_opponent = jax.random.split(key)
        carry = state.opponent_carry
        if self.opponent is None:
            full = (actions[0],)
        else:
            chosen = jax.tree.map(lambda x: x[state.slot], params.opponents)
            reset = jnp.full((self.opponent.num_agents,), state.first)
            opponent_actions, carry = make_act_fn(self.opponent)(
                chosen, key_opponent, state.opponent_obs, carry, reset, False
            )
            full = [None, None]
            full[self.learner] = actions[0]
            full[self.opponent_team] = opponent_actions
            full = tuple(full)
        obs, game, rewards, terminated, truncated, info = self.env.step(
            key_game, state.game, full, params.game
        )
        done = terminated | truncated
        captured = state.captured
        if self._rule == "battalion":
            mine = self.team_names[0]
            theirs = "red" if mine == "blue" else "blue"
            win, loss, draw = info[f"{mine}_win"], info[f"{theirs}_win"], info["draw"]
        else:
            captured = captured | (info["captures"] > 0)
            predator_won = done & captured
            prey_won = done & ~captured
            predators = self.learner == 0  # pursuit: team 0 is the predators
            win, loss = (
                (predator_won, prey_won) if predators else (prey_won, predator_won)
            )
            draw = jnp.zeros((), bool)
        sums = {
            k: state.sums[k] + jnp.mean(jnp.asarray(info[k], jnp.float32))
            for k in self.breakdown_keys
        }
        info = {
            **info,
            "episode_win": win.astype(jnp.float32),
            "episode_draw": draw.astype(jnp.float32),
            "episode_loss": loss.astype(jnp.float32),
            **{f"episode_breakdown/{k}": v for k, v in sums.items()},
        }
        state = ArenaState(
            game=game,
            opponent_obs=(
                obs[self.opponent_team]
                if self.opponent is not None
                else state.opponent_obs
            ),
            opponent_carry=carry,
            slot=state.slot,
            first=jnp.zeros((), bool),
            captured=captured,
            sums=sums,
        )
        return (
            (obs[self.learner],),
            state,
            (rewards[self.learner],),
            terminated,
            truncated,
            info,
        )

    def observe(self, state: ArenaState, params: ArenaParams) -> TeamArrays:
        return (self.env.observe(state.game, params.game)[self.learner],)


def stack_opponents(params_list: list[Any], num_slots: int) -> tuple[Any, jax.Array]:
    """Stack up to ``num_slots`` opponents' params into ``[K, ...]`` slots.

    Empty slots repeat the first opponent's params and get weight 0.

    Returns:
        ``(stacked params [K, ...], occupied [K] bool)``.
    """
    if not params_list:
        raise InvalidParameterError("the pool needs at least one opponent")
    if len(params_list) > num_slots:
        raise InvalidParameterError(
            f"{len(params_list)} opponents do not fit {num_slots} slots"
        )
    padded = list(params_list) + [params_list[0]] * (num_slots - len(params_list))
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *padded)
    occupied = jnp.arange(num_slots) < len(params_list)
    return stacked, occupied
