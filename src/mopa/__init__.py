"""mopa: model opponents, plan adversarially.

Adaptive opponent modelling for adversarial co-training in JAX: native games, team
learners, opponent-strategy encoders with calibrated beliefs, and planners that
sample the opponent from those beliefs.
"""

__version__ = "0.1.0"
