"""Opponent-learning awareness (POLA paper, Zhao et al. 2022): exact LOLA and
outer POLA on the exact IPD, and LOLA-DiCE, POLA-DiCE and POLA-OM on the sampled
IPD and the Coin Game.

>>> from mopa.algos.pola import ExactConfig, p_tft
>>> from mopa.algos.pola import SampledConfig, make_sampled_train
"""

from mopa.algos.pola.exact import ExactConfig, ExactOutput, p_tft
from mopa.algos.pola.exact import make_train as make_exact_train
from mopa.algos.pola.sampled import Learner, Metrics, SampledConfig
from mopa.algos.pola.sampled import make_train as make_sampled_train

__all__ = [
    "ExactConfig",
    "ExactOutput",
    "Learner",
    "Metrics",
    "SampledConfig",
    "make_exact_train",
    "make_sampled_train",
    "p_tft",
]
