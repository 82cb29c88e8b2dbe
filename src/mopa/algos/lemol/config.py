"""The configuration of a LeMOL run: MADDPG's fields, the play-out cycles against
a learning opponent, and the opponent model's training."""

from __future__ import annotations

import dataclasses

from mopa.algos.maddpg.config import MADDPGConfig
from mopa.core.checks import check_positive
from mopa.errors import InvalidParameterError

LEMOL_POLICIES = ("maddpg", "m3ddpg", "lemol")
"""Learners a team can use in a LeMOL run."""
OPPONENT_MODELS = ("lstm", "bc")
"""``lstm``: LeMOL's model of the opponent's learning; ``bc``: the same model with
its memory cut (a behaviour clone of every stored play-out, blind to learning)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LeMOLConfig(MADDPGConfig):
    """A LeMOL run (Davies et al. 2020, "Learning to Model Opponent Learning").

    The run is ``n_opp_cycles`` cycles; a cycle is ``traj_per_iter`` play-outs,
    then ``om_training_iters`` passes of opponent-model training. Each play-out
    pits the focal team (the ``lemol`` one, else the adversaries), which keeps
    learning across play-outs, against a fresh opponent that learns from scratch
    for ``num_episodes`` episodes.
    """

    bad_policy: str = "lemol"
    """Learner of the adversaries: ``lemol``, ``maddpg`` or ``m3ddpg``."""
    omlr: float = 1e-3
    """Adam learning rate of the opponent model."""
    lstm_hidden_dim: int = 64
    """Units of the LSTM that reads the opponent's experience."""
    chunk_length: int = 64
    """Time steps per opponent-model gradient step; backpropagation is truncated
    between chunks (the LSTM state is carried over without its gradient)."""
    num_traj_to_train: int = 8
    """Opponent trajectories (one per play-out and game, the most recent kept)
    the opponent model trains on in each pass."""
    traj_per_iter: int = 3
    """Play-outs against fresh opponents before each round of model training."""
    om_training_iters: int = 5
    """Passes over the stored trajectories after each cycle's play-outs."""
    n_opp_cycles: int = 10
    """Cycles of play-outs and opponent-model training."""
    opponent_model: str = "lstm"
    """``lstm`` (LeMOL) or ``bc`` (the memory cut: a behaviour-cloning baseline)."""

    allowed_policies = LEMOL_POLICIES

    def __post_init__(self):
        super().__post_init__()
        check_positive(
            self,
            "omlr", "lstm_hidden_dim", "chunk_length", "num_traj_to_train",
            "traj_per_iter", "om_training_iters", "n_opp_cycles",
        )  # fmt: skip
        if self.good_policy == self.bad_policy == "lemol":
            raise InvalidParameterError(
                "good_policy and bad_policy cannot both be lemol (LeMOL models one "
                "learning opponent)"
            )
        if self.uses_model and (self.scenario, self.num_adversaries) != ("push", 1):
            raise InvalidParameterError(
                "lemol models one opponent: it needs scenario push with "
                f"num_adversaries 1, got {self.scenario} with {self.num_adversaries}"
            )
        if self.num_traj_to_train % self.num_envs:
            raise InvalidParameterError(
                f"num_traj_to_train ({self.num_traj_to_train}) must be a multiple "
                f"of num_envs ({self.num_envs})"
            )
        if self.opponent_model not in OPPONENT_MODELS:
            raise InvalidParameterError(
                f"opponent_model must be lstm or bc, got {self.opponent_model!r}"
            )

    # -- derived ---------------------------------------------------------------------
    @property
    def focal_team(self) -> int:
        """The team that keeps learning across play-outs: the ``lemol`` one, else
        the adversaries (team 0)."""
        return 1 if self.good_policy == "lemol" else 0

    @property
    def uses_model(self) -> bool:
        """Whether an agent reads the opponent model's prediction."""
        return "lemol" in self.team_policies

    @property
    def num_playouts(self) -> int:
        return self.n_opp_cycles * self.traj_per_iter

    @property
    def num_chunks(self) -> int:
        """Chunks of ``chunk_length`` covering a play-out (the last one padded)."""
        return -(-self.steps_per_playout // self.chunk_length)
