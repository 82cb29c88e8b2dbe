"""Named, runnable experiments and their reruns: the registry behind
``mopa experiment`` (:mod:`mopa.runs.registry`) and ``mopa verify``
(:mod:`mopa.runs.verify`). mopa's own experiments are declared in
:mod:`mopa.experiments`; an experiment of a user's own registers here the same way.
"""

from mopa.runs.registry import (
    EXPERIMENT_PACKAGES,
    Experiment,
    get_experiment,
    get_preset,
    register_experiment,
    registered_experiments,
    run_experiment,
)
from mopa.runs.verify import VerifyReport, verify_folder

__all__ = [
    "EXPERIMENT_PACKAGES",
    "Experiment",
    "VerifyReport",
    "get_experiment",
    "get_preset",
    "register_experiment",
    "registered_experiments",
    "run_experiment",
    "verify_folder",
]
