"""mopa: model opponents, plan adversarially.

Adaptive opponent modelling for adversarial co-training in JAX: native games, team
learners, opponent-strategy encoders with calibrated beliefs, and planners that
sample the opponent from those beliefs.
"""

__version__ = "0.1.0"


def load_policy(path, team=None, seed=0):
    """Load a trained team policy; see :func:`mopa.policy.load_policy`."""
    from mopa.policy import load_policy as _load

    return _load(path, team=team, seed=seed)
