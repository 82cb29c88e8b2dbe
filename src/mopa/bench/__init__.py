"""Speed benchmarks (``mopa bench ...``): measured on the code that ships.

The names each benchmark accepts are here, without JAX, so that the command line
can offer them without loading a benchmark."""

ENCODERS = ("classifier", "vae", "jepa")
"""Encoders whose training is timed (:mod:`mopa.bench.belief_speed`)."""
BELIEFS = (
    "classifier",
    "jepa",
    "bayes",
    "intent_classifier",
    "intent_jepa",
    "intent_bayes",
)
"""Belief updates whose latency is timed (:mod:`mopa.bench.belief_speed`)."""
