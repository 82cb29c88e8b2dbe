"""MADDPG and M3DDPG on the two-team particle games: deterministic actors,
centralised critics, Gumbel-softmax for discrete moves, and M3DDPG's worst-case
perturbation of the other agents' actions."""

from mopa.algos.maddpg.config import MADDPGConfig
from mopa.algos.maddpg.losses import adversarial_actions
from mopa.algos.maddpg.train import Engine, OnlineModel, make_engine, make_train

__all__ = [
    "Engine",
    "MADDPGConfig",
    "OnlineModel",
    "adversarial_actions",
    "make_engine",
    "make_train",
]
