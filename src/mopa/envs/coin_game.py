"""The Coin Game: two agents on a small torus, each rewarded for picking up coins
and punished when the other takes a coin of its colour.

Two variants, kept under different names:

* ``coin_game`` (the POLA variant): a 3 x 3 torus with ONE coin whose colour
  alternates after every pickup (first colour random; a new coin appears uniformly
  on a cell with no agent); 4 moves (right, left, down, up), no stay. Whoever steps
  onto the coin gets +1 whatever its colour; if it was the other agent's colour,
  that agent gets -2. Both agents can take the same coin in one step. Both agents
  observe the same red-centric 36-vector: four 3 x 3 planes (red agent, blue agent,
  red coin, blue coin).
* ``coin_game_two_coins`` (the common Pax/JaxMARL variant): one red and one blue
  coin on the board at once, each respawning (uniformly on a cell with no agent)
  when taken; 5 moves (the four above and stay); the same rewards per coin;
  egocentric views: planes (own agent, other agent, own coin, other coin), rolled so
  the observer stands at the centre cell.

Team 0 is red, team 1 blue; each team is one agent. ``info["captures"]`` counts the
coins each agent picked up in the step, ``info["own_coin"]`` those of its own
colour.

Scripted evaluation opponents (POLA's definitions, for ``coin_game``): ALLD takes
the shortest path to the coin whatever its colour (vertical moves first); ALLC goes
for the coin only when it is its own colour and moves away otherwise; TFT plays
ALLC but switches to ALLD after a step with negative reward, and back after a step
with positive reward.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.core.checks import bounded, check_bounds
from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.spaces import Box, Discrete
from mopa.errors import InvalidParameterError

RED, BLUE = 0, 1
"""Team indices."""

MOVES = np.array([[0, 1], [0, -1], [1, 0], [-1, 0], [0, 0]], np.int32)
"""(row, column) offset of each action: right, left, down, up, and stay (two-coin
variant only)."""

OPPOSITE_MOVE = np.array([1, 0, 3, 2, 4], np.int32)
"""The action that undoes each action."""


@struct.dataclass
class CoinGameParams:
    """Numbers of a Coin Game; all may be vmapped."""

    max_steps: int = bounded(50, low=1)
    """Steps per episode; ``truncated`` is true on the last."""
    pickup_reward: float = bounded(1.0, low=0.0)
    """Paid to an agent for every coin it picks up, whatever the colour."""
    stolen_penalty: float = bounded(2.0, low=0.0)
    """Taken from an agent when the other agent picks up a coin of its colour."""


@struct.dataclass
class CoinGameState:
    """State of one Coin Game."""

    pos: jax.Array  # [2, 2] int32: (row, column) of red and blue
    coin_pos: jax.Array  # [C, 2] int32: coin positions
    coin_colour: jax.Array  # [C] int32: RED or BLUE owner of each coin
    step: jax.Array  # [] int32


@dataclasses.dataclass(frozen=True)
class CoinGameEnv(Env):
    """A Coin Game with ``num_coins`` coins (1: POLA variant, 2: two-coin variant)
    on a ``grid_size`` x ``grid_size`` torus."""

    name: str = "coin_game"
    num_coins: int = bounded(1, choices=(1, 2))
    grid_size: int = bounded(3, low=2)
    base_params: CoinGameParams = dataclasses.field(
        default_factory=CoinGameParams, compare=False, hash=False
    )

    team_names = ("red", "blue")
    team_sizes = (1, 1)

    def __post_init__(self):
        check_bounds(self.name, self)

    @property
    def num_actions(self) -> int:
        return 4 if self.num_coins == 1 else 5

    @property
    def obs_size(self) -> int:
        return 4 * self.grid_size**2

    def observation_space(self, team: int) -> Box:
        return Box(0.0, 1.0, (self.obs_size,))

    def action_space(self, team: int) -> Discrete:
        return Discrete(self.num_actions)

    @property
    def default_params(self) -> CoinGameParams:
        return jax.tree.map(jnp.asarray, self.base_params)

    def validate_params(self, params: CoinGameParams) -> None:
        """Raise :class:`InvalidParameterError` naming the first invalid field."""
        check_bounds(self.name, params, "parameter ")

    # -- helpers -----------------------------------------------------------------
    def _free_cell(self, key: jax.Array, pos: jax.Array) -> jax.Array:
        """``[2]`` a cell drawn uniformly among those no agent stands on."""
        n = self.grid_size
        flat = pos[:, 0] * n + pos[:, 1]
        occupied = (jnp.arange(n * n)[:, None] == flat[None]).any(-1)
        cell = jax.random.categorical(key, jnp.where(occupied, -jnp.inf, 0.0))
        return jnp.stack([cell // n, cell % n]).astype(jnp.int32)

    def _planes(self, agents: jax.Array, coins: jax.Array, mask: jax.Array):
        """``[4 * n * n]`` planes: agent 0, agent 1, coin 0, coin 1 (masked)."""
        n = self.grid_size
        grid = jnp.zeros((4, n, n), jnp.float32)
        grid = grid.at[0, agents[0, 0], agents[0, 1]].set(1.0)
        grid = grid.at[1, agents[1, 0], agents[1, 1]].set(1.0)
        grid = grid.at[2, coins[0, 0], coins[0, 1]].add(mask[0])
        return grid.at[3, coins[1, 0], coins[1, 1]].add(mask[1])

    def observe(self, state: CoinGameState, params: CoinGameParams) -> TeamArrays:
        if self.num_coins == 1:
            coins = jnp.concatenate([state.coin_pos, state.coin_pos])
            is_red = (state.coin_colour[0] == RED).astype(jnp.float32)
            obs = self._planes(state.pos, coins, jnp.stack([is_red, 1 - is_red]))
            obs = obs.reshape(-1)
            return (obs[None], obs[None])
        centre = self.grid_size // 2
        views = []
        for agent in (RED, BLUE):
            order = jnp.array([agent, 1 - agent])
            shift = centre - state.pos[agent]
            agents = (state.pos[order] + shift) % self.grid_size
            coins = (state.coin_pos[order] + shift) % self.grid_size
            views.append(self._planes(agents, coins, jnp.ones(2)).reshape(1, -1))
        return tuple(views)

    # -- dynamics ----------------------------------------------------------------
    def _reset(
        self, key: jax.Array, params: CoinGameParams
    ) -> tuple[TeamArrays, CoinGameState]:
        key_pos, key_coin, key_colour = jax.random.split(key, 3)
        n = self.grid_size
        cells = jax.random.randint(key_pos, (2,), 0, n * n)
        pos = jnp.stack([cells // n, cells % n], -1).astype(jnp.int32)
        coin_keys = jax.random.split(key_coin, self.num_coins)
        coin_pos = jax.vmap(self._free_cell, in_axes=(0, None))(coin_keys, pos)
        if self.num_coins == 1:
            colour = jax.random.randint(key_colour, (1,), 0, 2, jnp.int32)
        else:
            colour = jnp.array([RED, BLUE], jnp.int32)
        state = CoinGameState(pos, coin_pos, colour, jnp.zeros((), jnp.int32))
        return self.observe(state, params), state

    def _step(
        self,
        key: jax.Array,
        state: CoinGameState,
        actions: TeamArrays,
        params: CoinGameParams,
    ) -> StepOutput:
        moves = jnp.asarray(MOVES)[jnp.stack([actions[0][0], actions[1][0]])]
        pos = (state.pos + moves) % self.grid_size
        # takes[a, c]: agent a stands on coin c after moving.
        takes = (pos[:, None, :] == state.coin_pos[None, :, :]).all(-1)
        owner = jax.nn.one_hot(state.coin_colour, 2, dtype=bool)  # [C, 2]
        stolen = takes[:, :, None] & owner[None] & ~jnp.eye(2, dtype=bool)[:, None]
        rewards = params.pickup_reward * takes.sum(1) - params.stolen_penalty * (
            stolen.sum((0, 1))
        )
        own = (takes & owner.T).sum(1)
        taken = takes.any(0)  # [C]
        new_coins = jax.vmap(self._free_cell, in_axes=(0, None))(
            jax.random.split(key, self.num_coins), pos
        )
        coin_pos = jnp.where(taken[:, None], new_coins, state.coin_pos)
        colour = state.coin_colour
        if self.num_coins == 1:
            colour = jnp.where(taken, 1 - colour, colour)
        step = state.step + 1
        next_state = CoinGameState(pos, coin_pos, colour, step)
        rewards = rewards.astype(jnp.float32)
        info = {
            "captures": takes.sum(1).astype(jnp.int32),
            "own_coin": own.astype(jnp.int32),
        }
        return (
            self.observe(next_state, params),
            next_state,
            (rewards[:1], rewards[1:]),
            jnp.zeros((), bool),
            step >= params.max_steps,
            info,
        )


VARIANTS = {"coin_game": 1, "coin_game_two_coins": 2}
"""Registered Coin Games and their number of coins."""


def make_coin_game(name: str, **overrides: Any) -> tuple[CoinGameEnv, CoinGameParams]:
    """Build the registered Coin Game ``name`` with ``overrides`` (``grid_size`` or
    :class:`CoinGameParams` fields)."""
    from mopa.envs.registry import split_overrides

    structure, params = split_overrides(name, CoinGameEnv, CoinGameParams, overrides)
    coins = structure.pop("num_coins", VARIANTS[name])
    if coins != VARIANTS[name]:
        raise InvalidParameterError(
            f"{name}: num_coins is {VARIANTS[name]} in this game, got {coins} "
            f"(the games by coins: {VARIANTS})"
        )
    env = CoinGameEnv(
        name=name,
        num_coins=VARIANTS[name],
        **structure,
        base_params=CoinGameParams(**params),
    )
    params = env.default_params
    env.validate_params(params)
    return env, params


# -- scripted opponents ------------------------------------------------------------
SCRIPTED = ("alld", "allc", "tft")
"""Names of the scripted Coin Game opponents (for ``coin_game``)."""


def _decode(obs: jax.Array, agent: int, grid_size: int):
    """Own position, coin position and whether the coin is the agent's own colour,
    from the red-centric observation of ``coin_game``."""
    planes = obs.reshape(4, grid_size * grid_size)
    me = jnp.argmax(planes[agent])
    coin = jnp.argmax(planes[2] + planes[3])
    own = planes[2 + agent].sum() > 0.5
    rc = lambda cell: jnp.stack([cell // grid_size, cell % grid_size])  # noqa: E731
    return rc(me), rc(coin), own


def move_towards(me: jax.Array, coin: jax.Array, grid_size: int) -> jax.Array:
    """The first move of a shortest torus path from ``me`` to ``coin``, closing the
    vertical distance first (``[2]`` positions in, ``[]`` int32 action out)."""
    down = (coin[0] - me[0]) % grid_size
    up = (me[0] - coin[0]) % grid_size
    right = (coin[1] - me[1]) % grid_size
    left = (me[1] - coin[1]) % grid_size
    horizontal = jnp.where(right <= left, 0, 1)
    vertical = jnp.where(down <= up, 2, 3)
    return jnp.where(down == 0, horizontal, vertical).astype(jnp.int32)


def scripted_action(
    name: str, obs: jax.Array, agent: int, defecting: jax.Array, grid_size: int = 3
) -> jax.Array:
    """Action of a scripted Coin Game player in seat ``agent``.

    Args:
        name: one of :data:`SCRIPTED`.
        obs: ``[36]`` the red-centric observation of ``coin_game``.
        agent: the seat played (static).
        defecting: ``[]`` bool, TFT's current mode (ignored by ALLD and ALLC).
        grid_size: side of the torus.

    Returns:
        ``[]`` int32 action.
    """
    me, coin, own = _decode(obs, agent, grid_size)
    towards = move_towards(me, coin, grid_size)
    cooperative = jnp.where(own, towards, jnp.asarray(OPPOSITE_MOVE)[towards])
    if name == "alld":
        return towards
    if name == "allc":
        return cooperative
    return jnp.where(defecting, towards, cooperative).astype(jnp.int32)


def update_tft_mode(defecting: jax.Array, reward: jax.Array) -> jax.Array:
    """TFT's mode after a step with ``reward``: defect after a negative reward,
    cooperate again after a positive one."""
    return jnp.where(reward < 0, True, jnp.where(reward > 0, False, defecting))
