"""A tiny test-only game for learning tests: every step a random signal in
``[0, n)`` is shown to every agent, and each agent earns 1 for playing it.

Two teams (2 "blue" agents, 1 "red" agent). The best return is ``max_steps`` per
agent per episode, and once the red agent has learnt, its action is predictable
from blue's observation: the opponent head's accuracy can be checked against
chance (``1 / n``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from mopa.envs.base import Env
from mopa.envs.spaces import Box, Discrete


@struct.dataclass
class SignalParams:
    max_steps: int = 5


@struct.dataclass
class SignalState:
    signal: jax.Array  # [] int32
    step: jax.Array  # [] int32


@dataclasses.dataclass(frozen=True)
class SignalGame(Env):
    name: str = "signal"
    num_signals: int = 4
    team_names = ("blue", "red")
    team_sizes = (2, 1)

    def observation_space(self, team: int) -> Box:
        return Box(0.0, 1.0, (self.num_signals,))

    def action_space(self, team: int) -> Discrete:
        return Discrete(self.num_signals)

    @property
    def default_params(self) -> SignalParams:
        return SignalParams()

    def _reset(self, key, params):
        state = SignalState(
            jax.random.randint(key, (), 0, self.num_signals), jnp.zeros((), jnp.int32)
        )
        return self.observe(state, params), state

    def _step(self, key, state, actions, params):
        rewards = tuple((a == state.signal).astype(jnp.float32) for a in actions)
        step = state.step + 1
        state = SignalState(jax.random.randint(key, (), 0, self.num_signals), step)
        info = {}
        return (
            self.observe(state, params),
            state,
            rewards,
            jnp.zeros((), bool),
            step >= params.max_steps,
            info,
        )

    def observe(self, state, params):
        onehot = jax.nn.one_hot(state.signal, self.num_signals)
        return tuple(
            jnp.broadcast_to(onehot, (n, self.num_signals)) for n in self.team_sizes
        )


def signal_game(num_signals: int = 4) -> tuple[SignalGame, SignalParams]:
    env = SignalGame(num_signals=num_signals)
    return env, env.default_params


CHANCE = float(np.float32(1 / 4))
