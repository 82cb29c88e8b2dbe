"""Learners: team co-training (IQL, OA-IQL, MAPPO, IPPO) and, per folder, other
algorithm families.

>>> from mopa.algos import make_config, run_training
>>> config = make_config("mappo", env="tag", total_steps=2_000_000)
"""

from mopa.algos.config import TrainConfig
from mopa.algos.driver import RunResult, run_training
from mopa.algos.iql.config import IQLConfig
from mopa.algos.mappo.config import MAPPOConfig
from mopa.algos.presets import PRESETS, preset
from mopa.algos.registry import ALGOS, make_config

__all__ = [
    "ALGOS",
    "PRESETS",
    "IQLConfig",
    "MAPPOConfig",
    "RunResult",
    "TrainConfig",
    "make_config",
    "preset",
    "run_training",
]
