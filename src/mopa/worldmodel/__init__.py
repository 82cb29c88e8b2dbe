"""Learned world models of the pursuit games (Exp 6's ``wm_ssm_planner`` and
``wm_jepa_planner``): an ensemble of state-space dynamics models and a JEPA latent
world model, their k-step position error, and a game whose physics is the model,
so the lookahead planner rolls through it instead of the true simulator.

>>> from mopa.worldmodel import SSMConfig
>>> SSMConfig(num_agents=4).state_size
16
"""

from mopa.worldmodel.config import (
    JEPAWorldConfig,
    SSMConfig,
    WorldModelConfig,
    config_from_dict,
)
from mopa.worldmodel.data import (
    EpisodeData,
    episodes_from_dataset,
    generate_episodes,
    select_episodes,
    split_features,
    state_features,
)
from mopa.worldmodel.dynamics import (
    Dynamics,
    SimulatorDynamics,
    constant_rmse_by_step,
    dynamics_of,
    fit_and_score,
    make_train,
    rmse_by_step,
    rmse_k_step,
    rollout,
)
from mopa.worldmodel.env import (
    LearnedDynamicsEnv,
    LearnedDynamicsParams,
)
from mopa.worldmodel.files import init_params, load_world_model, save_world_model
from mopa.worldmodel.jepa import LatentDynamics
from mopa.worldmodel.ssm import EnsembleDynamics

__all__ = [
    "Dynamics",
    "EnsembleDynamics",
    "EpisodeData",
    "JEPAWorldConfig",
    "LatentDynamics",
    "LearnedDynamicsEnv",
    "LearnedDynamicsParams",
    "SSMConfig",
    "SimulatorDynamics",
    "WorldModelConfig",
    "config_from_dict",
    "constant_rmse_by_step",
    "dynamics_of",
    "fit_and_score",
    "episodes_from_dataset",
    "generate_episodes",
    "init_params",
    "load_world_model",
    "make_train",
    "rmse_by_step",
    "rmse_k_step",
    "rollout",
    "save_world_model",
    "select_episodes",
    "split_features",
    "state_features",
]
