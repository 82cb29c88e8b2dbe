"""Adversarial co-training with opponent modelling: red's population adapts to
blue generation after generation, blue keeps what it learned, re-models red
(without red's private labels) and acts through its belief, or plans against it
and distils the plan (see :mod:`mopa.cotrain.loop`)::

    from mopa.cotrain import CotrainConfig, run_cotrain
    from mopa.core.stages import Stages

    results = run_cotrain(CotrainConfig(generations=5), print, Stages("runs/ct"))

``run_cotrain(..., backend=RayBackend(2))`` runs its independent jobs on Ray with
the same results. ``mopa cotrain --profile quick --out runs/cotrain`` runs it with
its files (results.json, config.json, meta.json, results.md, the curves and
report.html; the league store in ``runs/cotrain/stages``).
"""

from mopa.cotrain.evaluation import belief_on_red, read_team
from mopa.cotrain.loop import (
    BLUES,
    PLANNERS,
    CotrainConfig,
    meta_weights,
    pool_source,
    run_cotrain,
    write_league,
    write_team,
)
from mopa.cotrain.model import read_model, write_model

__all__ = [
    "BLUES",
    "PLANNERS",
    "CotrainConfig",
    "belief_on_red",
    "meta_weights",
    "pool_source",
    "read_model",
    "read_team",
    "run_cotrain",
    "write_league",
    "write_model",
    "write_team",
]
