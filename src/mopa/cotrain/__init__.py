"""Adversarial co-training with opponent modelling: red's population adapts to
blue generation after generation, blue re-models red without labels and acts
through its belief (see :mod:`mopa.cotrain.loop`)::

    from mopa.cotrain import CotrainConfig, run_cotrain
    from mopa.core.stages import Stages

    results = run_cotrain(CotrainConfig(generations=5), print, Stages("runs/ct"))

``run_cotrain(..., backend=RayBackend(2))`` runs its independent jobs on Ray with
the same results. ``mopa cotrain --profile quick --out runs/cotrain`` runs it with
its files (results.json, config.json, meta.json, results.md, the curves and
report.html; the league store in ``runs/cotrain/stages``).
"""

from mopa.cotrain.loop import (
    BLUES,
    CotrainConfig,
    belief_on_red,
    pool_source,
    read_model,
    read_team,
    run_cotrain,
    write_league,
    write_model,
    write_team,
)

__all__ = [
    "BLUES",
    "CotrainConfig",
    "belief_on_red",
    "pool_source",
    "read_model",
    "read_team",
    "run_cotrain",
    "write_league",
    "write_model",
    "write_team",
]
