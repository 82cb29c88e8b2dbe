"""mopa's games: a functional multi-agent API, the registry and the pursuit family.

Examples:
    >>> import jax, mopa.envs
    >>> env, params = mopa.envs.make("tag")
    >>> obs, state = env.reset(jax.random.key(0), params)
    >>> [o.shape for o in obs]
    [(3, 16), (1, 14)]
"""

from mopa.envs.base import Env, StepOutput, TeamArrays
from mopa.envs.battalion import VARIANTS as BATTALION_VARIANTS
from mopa.envs.battalion import (
    BattalionEnv,
    BattalionParams,
    BattalionState,
    make_battalion,
)
from mopa.envs.battalion_wrappers import (
    SCRIPTED_VARIANTS,
    DiscreteActions,
    ScriptedRed,
    make_battalion_vs_red,
)
from mopa.envs.coin_game import VARIANTS as COIN_GAME_VARIANTS
from mopa.envs.coin_game import CoinGameEnv, make_coin_game
from mopa.envs.ipd import IPDEnv, make_ipd
from mopa.envs.particle import GAMES as PARTICLE_GAMES
from mopa.envs.particle import (
    ParticleEnv,
    ParticleParams,
    ParticleState,
    make_particle,
)
from mopa.envs.pursuit import (
    PREDATOR,
    PREY,
    VARIANTS,
    PursuitEnv,
    PursuitParams,
    PursuitState,
    make_pursuit,
)
from mopa.envs.registry import make, register, registered_envs
from mopa.envs.rollout import Trajectory, random_policy, rollout
from mopa.envs.spaces import Box, Discrete
from mopa.envs.wrappers import AutoReset, EpisodeStats, Wrapper

for _name in VARIANTS:
    register(_name, make_pursuit)
for _name in PARTICLE_GAMES:
    register(_name, make_particle)
for _name in BATTALION_VARIANTS:
    register(_name, make_battalion)
for _name in SCRIPTED_VARIANTS:
    register(_name, make_battalion_vs_red)
register("ipd", make_ipd)
for _name in COIN_GAME_VARIANTS:
    register(_name, make_coin_game)

__all__ = [
    "PREDATOR",
    "PREY",
    "AutoReset",
    "BattalionEnv",
    "BattalionParams",
    "BattalionState",
    "Box",
    "CoinGameEnv",
    "Discrete",
    "DiscreteActions",
    "Env",
    "EpisodeStats",
    "IPDEnv",
    "ParticleEnv",
    "ParticleParams",
    "ParticleState",
    "PursuitEnv",
    "PursuitParams",
    "PursuitState",
    "ScriptedRed",
    "StepOutput",
    "TeamArrays",
    "Trajectory",
    "Wrapper",
    "make",
    "random_policy",
    "register",
    "registered_envs",
    "rollout",
]
