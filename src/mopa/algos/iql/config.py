"""Configuration of independent Q-learning per team (IQL) and its opponent-aware
variant (OA-IQL)."""

from __future__ import annotations

import dataclasses

from mopa.algos.config import TrainConfig
from mopa.core.checks import check_count
from mopa.errors import InvalidParameterError

IQL_ALGOS = ("iql", "oa_iql")
REPLAYS = ("segments", "episodes")
"""What a replayed item is: a segment of a continuing game, or a whole episode."""
OPTIMISERS = ("adam", "radam")


@dataclasses.dataclass(frozen=True, kw_only=True)
class IQLConfig(TrainConfig):
    """IQL with one shared Q-network per team, a replay buffer of trajectory
    segments (or whole episodes), an epsilon-greedy schedule and a target network.
    ``oa_iql`` adds the opponent-action head and its cross-entropy loss."""

    algo: str = "iql"
    """``iql`` or ``oa_iql`` (adds the opponent-action head)."""
    num_envs: int = 32
    num_steps: int = 8
    """Steps each game takes per update, stored and replayed together: a segment,
    or with ``replay="episodes"`` one whole episode (and any steps after its end,
    which are not learnt from)."""
    replay: str = "segments"
    """``segments``: games continue across updates and each update stores
    ``num_steps`` consecutive steps per game. ``episodes`` (the research's recipe):
    every update resets its ``num_envs`` games and stores each game's first episode
    whole; ``num_steps`` must cover the game's episode length."""
    buffer_size: int = 51_200
    """Replay capacity in collected steps (``buffer_size / num_steps`` segments or
    episodes); a multiple of ``num_envs x num_steps``."""
    batch_size: int = 32
    """Segments (or episodes) per gradient step."""
    num_epochs: int = 1
    """Gradient steps per update."""
    learning_starts: int = 10_000
    """Environment steps collected before learning begins."""
    lr: float = 1e-3
    """Learning rate."""
    anneal_lr: bool = False
    """Decay the learning rate linearly from ``lr`` towards 0 over ``num_updates x
    num_epochs`` gradient steps (JaxMARL's IQL does); no gradient steps are taken
    before ``learning_starts``, so it ends a little above 0."""
    optimiser: str = "adam"
    """``adam``, or ``radam`` (rectified Adam; Liu et al. 2020), the research's."""
    gamma: float = 0.9
    """Discount."""
    double_q: bool = False
    """Double Q-learning targets (van Hasselt et al. 2016): the online network picks
    the next action and the target network values it, instead of the target
    network's max."""
    eps_start: float = 1.0
    """Initial exploration rate."""
    eps_finish: float = 0.05
    """Final exploration rate."""
    eps_decay: float = 0.1
    """Fraction of the run over which epsilon decays linearly."""
    target_update_interval: int = 200
    """Updates between target-network refreshes."""
    tau: float = 1.0
    """Target refresh step: 1 copies, smaller values blend (Polyak)."""
    max_grad_norm: float = 10.0
    """Global gradient-norm clip."""
    hidden: tuple[int, ...] = (128, 128)
    """Trunk widths (``rnn``: the dense layer, then the GRU)."""
    rnn: bool = False
    """GRU Q-network (Exp 1) instead of the MLP."""
    agent_id: bool = True
    """Append each agent's one-hot index in its team to its observation."""
    opp_coef: float = 0.5
    """Weight of the opponent-action cross-entropy (``oa_iql``)."""
    opp_loss_all_steps: bool = False
    """With ``replay="episodes"``, fit the opponent head on every stored step of an
    item, the step after the episode's end included, instead of the episode's steps
    only (the TD loss always keeps to the episode). The research's choice: its
    JaxMARL episodes run 26 transitions, of which its TD loss learns 25 and its
    opponent head all 26; mopa's episodes run 25, so its 26th stored step is the
    next episode's first. Segment replay learns from every step either way."""

    def __post_init__(self):
        super().__post_init__()
        for name, choices in (
            ("algo", IQL_ALGOS),
            ("replay", REPLAYS),
            ("optimiser", OPTIMISERS),
        ):
            if getattr(self, name) not in choices:
                raise InvalidParameterError(
                    f"{name} must be one of {choices} for IQLConfig, got "
                    f"{getattr(self, name)!r}"
                )
        object.__setattr__(self, "hidden", tuple(self.hidden))
        self.check_positive(
            "buffer_size",
            "batch_size",
            "num_epochs",
            "lr",
            "target_update_interval",
            "max_grad_norm",
        )
        if not self.hidden or min(self.hidden) < 1:
            raise InvalidParameterError(
                f"hidden must be positive widths, got {self.hidden}"
            )
        check_count("buffer_size", self.buffer_size)
        if self.rnn and len(self.hidden) != 2:
            raise InvalidParameterError(
                f"hidden must have 2 widths (dense, GRU) when rnn, got {self.hidden}"
            )
        if self.buffer_size % self.steps_per_update:
            raise InvalidParameterError(
                f"buffer_size ({self.buffer_size}) must be a multiple of num_envs x "
                f"num_steps ({self.steps_per_update})"
            )
        if self.batch_size > self.buffer_segments:
            raise InvalidParameterError(
                f"batch_size ({self.batch_size} {self.replay}) exceeds the buffer's "
                f"{self.buffer_segments} {self.replay}"
            )
        if self.learning_starts < 0:
            raise InvalidParameterError(
                f"learning_starts must be >= 0, got {self.learning_starts}"
            )
        for name in ("gamma", "eps_start", "eps_finish", "eps_decay", "tau"):
            self.check_range(name, 0.0, 1.0)
        if self.opp_coef < 0:
            raise InvalidParameterError(f"opp_coef must be >= 0, got {self.opp_coef}")

    @property
    def opponent_head(self) -> bool:
        return self.algo == "oa_iql"

    @property
    def episode_replay(self) -> bool:
        """Whole episodes with a reset per update (``replay="episodes"``)."""
        return self.replay == "episodes"

    @property
    def buffer_segments(self) -> int:
        """Replay capacity in stored items: segments, or whole episodes."""
        return self.buffer_size // self.num_steps
