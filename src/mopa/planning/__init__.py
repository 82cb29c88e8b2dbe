"""Planning (Part 2): Monte-Carlo lookahead over the true simulator with a sampled
opponent model, as a :class:`~mopa.players.Player`.
Its tree-search alternative: :class:`MCTSPlayer` (Gumbel MuZero through mctx).
A planner distilled into a policy by DAgger: :func:`dagger`.

>>> from mopa.planning import LookaheadConfig
>>> LookaheadConfig(num_rollouts=8, horizon=5, mode="joint").gamma
0.95
"""

from mopa.planning.distill import (
    DaggerConfig,
    DaggerRound,
    Relabelled,
    dagger,
    relabel_episodes,
)
from mopa.planning.lookahead import (
    MODES,
    LeafFn,
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    Plan,
    RewardFn,
    joint_actions,
)
from mopa.planning.mcts import (
    PRIORS,
    MCTSConfig,
    MCTSPlan,
    MCTSPlayer,
    SearchNode,
    simulator_steps_per_decision,
)
from mopa.planning.observed_belief import ObservedBeliefPlanner, StateBeliefPlanner
from mopa.planning.opponents import (
    FallbackLatent,
    FunctionOpponentModel,
    IntentConditionedModel,
    IntentModelParams,
    OnlineResidualModel,
    OnlineResidualParams,
    OpponentHeadModel,
    OpponentModel,
    PolicyOpponentModel,
    PopulationModelParams,
    PopulationOpponentModel,
    ResidualLatent,
    greedy_logits,
    predictive_logits,
    residual_params,
)

__all__ = [
    "DaggerConfig",
    "DaggerRound",
    "Relabelled",
    "dagger",
    "relabel_episodes",
    "MODES",
    "FallbackLatent",
    "FunctionOpponentModel",
    "IntentConditionedModel",
    "IntentModelParams",
    "LeafFn",
    "LookaheadConfig",
    "LookaheadParams",
    "LookaheadPlayer",
    "MCTSConfig",
    "MCTSPlan",
    "MCTSPlayer",
    "ObservedBeliefPlanner",
    "StateBeliefPlanner",
    "OnlineResidualModel",
    "OnlineResidualParams",
    "OpponentHeadModel",
    "OpponentModel",
    "Plan",
    "PolicyOpponentModel",
    "PopulationModelParams",
    "PopulationOpponentModel",
    "PRIORS",
    "ResidualLatent",
    "residual_params",
    "RewardFn",
    "SearchNode",
    "greedy_logits",
    "joint_actions",
    "predictive_logits",
    "simulator_steps_per_decision",
]
