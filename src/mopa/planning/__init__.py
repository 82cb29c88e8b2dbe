"""Planning (Part 2): Monte-Carlo lookahead over the true simulator with a sampled
opponent model, as a :class:`~mopa.players.Player`.
Its tree-search alternative: :class:`MCTSPlayer` (Gumbel MuZero through mctx).

Teams that keep a belief over their opponent's hidden strategy and act on it, for
any game that names its opponent's private fields
(:class:`~mopa.envs.base.IntentGame`): :class:`IntentPredator` (a belief from the
opponent's path or moves, fed to a policy or to a planner's opponent model) and
:class:`PopulationPredator` (a planner against a population model, with a
fallback for an opponent no member fits and its online correction); the pursuit
game's scripted prey from outside a trained family, :class:`EvaderPrey` and
:class:`WandererPrey`. A planner distilled into a policy by DAgger: :func:`dagger`.

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
from mopa.planning.intent_player import (
    FEEDS,
    SOURCES,
    IntentPredator,
    IntentPredatorParams,
    PreyModel,
    classifier_logits_fn,
    intent_predator_params,
    jepa_logits_fn,
    prefix_features,
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
from mopa.planning.population_player import (
    SCRIPTED_PREY_PLAYERS,
    EvaderPrey,
    Matches,
    PopulationCarry,
    PopulationPredator,
    WandererPrey,
    match_beliefs,
    match_player,
    match_residuals,
    match_summary,
    pooled_match_summary,
    population_planner_params,
)

__all__ = [
    "DaggerConfig",
    "DaggerRound",
    "Relabelled",
    "dagger",
    "relabel_episodes",
    "FEEDS",
    "MODES",
    "SOURCES",
    "SCRIPTED_PREY_PLAYERS",
    "EvaderPrey",
    "Matches",
    "IntentPredator",
    "IntentPredatorParams",
    "PopulationCarry",
    "PopulationPredator",
    "PreyModel",
    "WandererPrey",
    "classifier_logits_fn",
    "intent_predator_params",
    "jepa_logits_fn",
    "match_beliefs",
    "match_player",
    "match_summary",
    "pooled_match_summary",
    "population_planner_params",
    "match_residuals",
    "prefix_features",
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
