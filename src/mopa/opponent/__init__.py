"""Part 1: opponent modelling. Trajectory datasets (:mod:`mopa.opponent.data`),
representations of a trajectory (:mod:`mopa.opponent.representations`), the
encoders that map them to a latent strategy (:mod:`mopa.opponent.encoders`),
online beliefs over strategies (:mod:`mopa.opponent.beliefs`), their calibration
(:mod:`mopa.opponent.calibration`), scikit-learn metrics of latents
(:mod:`mopa.opponent.metrics`) and latent-conditioned behaviour cloning
(:mod:`mopa.opponent.bc`).

Only the first-level names are re-exported here; import the submodules for the
rest (losses, update steps, data builders).
"""

from mopa.opponent.bc import (
    BCConfig,
    action_match,
    bc_log_probs_fn,
    steering_rate,
)
from mopa.opponent.bc import make_train as make_bc_train
from mopa.opponent.beliefs import (
    bayes_beliefs,
    fit_readout_temperature,
    init_bayes_belief,
    init_prefix_belief,
    policy_log_probs_fn,
    prefix_beliefs,
    random_soft_belief,
    readout_logits_fn,
    sample_strategy,
    soft_belief,
    update_bayes_belief,
    update_prefix_belief,
    window_logits_fn,
)
from mopa.opponent.calibration import (
    accuracy_by_step,
    brier_score,
    ece_by_step,
    expected_calibration_error,
    fit_temperature,
    negative_log_likelihood,
    reliability_diagram,
    temperature_scale,
)
from mopa.opponent.data import (
    TrajectoryDataset,
    concatenate,
    generate,
    load_dataset,
    save_dataset,
    split,
    split_indices,
)
from mopa.opponent.encoders import (
    ClassifierConfig,
    ClassifierData,
    JEPAConfig,
    JEPAData,
    VAEConfig,
    encode,
    load_encoder,
    make_jepa_data,
    make_prefix_data,
    make_train,
    predict_arrival,
    predict_proba,
    save_encoder,
    vae_encode,
)
from mopa.opponent.metrics import cluster_scores, gmm_bic, probe_accuracy
from mopa.opponent.representations import (
    last_window,
    occupancy,
    prefix_occupancies,
    prefix_windows,
    raw_sequence,
)

__all__ = [
    "BCConfig",
    "action_match",
    "accuracy_by_step",
    "bayes_beliefs",
    "bc_log_probs_fn",
    "brier_score",
    "cluster_scores",
    "ece_by_step",
    "expected_calibration_error",
    "fit_readout_temperature",
    "fit_temperature",
    "gmm_bic",
    "init_bayes_belief",
    "init_prefix_belief",
    "make_bc_train",
    "negative_log_likelihood",
    "policy_log_probs_fn",
    "prefix_beliefs",
    "probe_accuracy",
    "random_soft_belief",
    "readout_logits_fn",
    "reliability_diagram",
    "sample_strategy",
    "soft_belief",
    "steering_rate",
    "temperature_scale",
    "update_bayes_belief",
    "update_prefix_belief",
    "window_logits_fn",
    "ClassifierConfig",
    "ClassifierData",
    "JEPAConfig",
    "JEPAData",
    "TrajectoryDataset",
    "VAEConfig",
    "concatenate",
    "encode",
    "generate",
    "last_window",
    "load_dataset",
    "load_encoder",
    "make_jepa_data",
    "make_prefix_data",
    "make_train",
    "occupancy",
    "predict_arrival",
    "predict_proba",
    "prefix_occupancies",
    "prefix_windows",
    "raw_sequence",
    "save_dataset",
    "save_encoder",
    "split",
    "split_indices",
    "vae_encode",
]
