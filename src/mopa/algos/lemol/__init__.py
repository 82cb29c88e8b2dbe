"""LeMOL: an LSTM opponent model that tracks a learning opponent across episodes,
feeding its prediction to a MADDPG agent's actor and critic."""

from mopa.algos.lemol.config import LeMOLConfig
from mopa.algos.lemol.model import OpponentModel
from mopa.algos.lemol.train import LeMOL, LeMOLOutput, make_lemol, make_train

__all__ = [
    "LeMOL",
    "LeMOLConfig",
    "LeMOLOutput",
    "OpponentModel",
    "make_lemol",
    "make_train",
]
