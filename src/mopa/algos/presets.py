"""Named training runs: every co-training run of the research (Exp 1-6).

Each preset is a complete config (3 seeds x 2M environment steps unless the
research ran otherwise); ``mopa train --preset NAME`` runs it and ``mopa train
--list-presets`` lists them. IQL settings the research did not state are mopa's
defaults (:class:`~mopa.algos.iql.config.IQLConfig`); MAPPO uses the research's
settings (32 games x 128 steps, 4 epochs x 4 minibatches, lr 3e-4 annealed).

The ``research_*`` presets are the research's exact training settings, as its code
and configs state them (``research-settings.md``): IQL's whole-episode replay with
RAdam, MAPPO's two hidden layers of 128 and world-state critic, and the game
constants the writeup leaves out. What mopa cannot express is named here and in
each preset's description rather than approximated silently:

* initialisation: mopa's networks use variance-scaling (LeCun normal for Q-networks,
  gain sqrt(2) and 0.01 for the actor) where the research uses orthogonal matrices
  of the same gains; mopa avoids orthogonal init on purpose
  (:mod:`mopa.models.networks`).
* IQL inputs: the research pads every agent's observation to the largest size and
  appends a one-hot over all agents; mopa's per-team networks see their own
  team's observation and a one-hot over the team. The inputs differ only by
  columns that are constant for a team (zeros, or a fixed id bit), which change the
  initial weights' scale but nothing a network can use.
* MAPPO: the research shuffles a team's agents into minibatches separately, and
  its critic gives one value per world state; mopa keeps each step's agents in the
  same minibatch, and its centralised critic gives one value per agent.
* Exp 5's balanced game: the reference states no constants for it, so its
  research presets keep mopa's ``tag_balanced`` game (collect radius 0.1).
"""

from __future__ import annotations

from mopa.algos.config import TrainConfig
from mopa.algos.iql.config import IQLConfig
from mopa.algos.mappo.config import MAPPOConfig
from mopa.errors import InvalidParameterError, UnknownNameError

JAXMARL_MPE_IQL = {
    "lr": 0.005,
    "max_grad_norm": 25.0,
    "hidden": (64, 64),
    "num_steps": 16,
    "buffer_size": 102_400,
    "anneal_lr": True,
}
"""JaxMARL's feed-forward IQL settings for its MPE games, where they differ from
mopa's defaults: learning rate 0.005 decayed linearly to 0, gradient clip 25, two
64-unit layers, 16-step segments and a replay of about 100k transitions (102,400,
a multiple of 32 games x 16 steps). The research's IQL trainers were built on
JaxMARL's; by its tables its predators catch 2-3x more than those of mopa's
defaults, and these settings close part of that gap (RESULTS.md, Exp 4)."""


RESEARCH_EPISODE_STEPS = 26
"""Steps per game and update of the research's IQL: JaxMARL's MPE episode. mopa's
games end after 25 transitions, so the 26th step starts the next episode and is
left out of the losses: 25 transitions learnt per episode, as in the research."""

RESEARCH_IQL = {
    "replay": "episodes",
    "num_envs": 8,
    "num_steps": RESEARCH_EPISODE_STEPS,
    "buffer_size": 5_000 * RESEARCH_EPISODE_STEPS,
    "batch_size": 32,
    "num_epochs": 1,
    "optimiser": "radam",
    "lr": 0.005,
    "anneal_lr": True,
    "max_grad_norm": 25.0,
    "gamma": 0.9,
    "double_q": True,
    "target_update_interval": 200,
    "tau": 1.0,
    "eps_start": 1.0,
    "eps_finish": 0.05,
    "eps_decay": 0.1,
    "learning_starts": 10_000,
    "hidden": (128, 128),
    "rnn": False,
    "agent_id": True,
    "opp_coef": 0.5,
    "opp_loss_all_steps": True,
    "total_steps": 2_000_000,
    "num_seeds": 3,
}
"""The research's IQL and OA-IQL (MLP): 8 games x 26 steps from a reset every
update, a replay of 5,000 whole episodes, one gradient step per update on 32
episodes (about 3.8x data reuse), RAdam at 0.005 decayed linearly, clip 25,
double-Q with gamma 0.9 and a target copied every 200 updates, epsilon 1 -> 0.05
over the first 10%, learning after 10,000 steps, the opponent head fitted on all
26 stored steps, 2M steps x 3 seeds (9,615 updates)."""

RESEARCH_IQL_RNN = {**RESEARCH_IQL, "rnn": True, "hidden": (64, 64)}
"""The research's recurrent IQL of Exp 2: ``Dense(64) -> GRU(64)``, the rest as
:data:`RESEARCH_IQL`."""

RESEARCH_MAPPO = {
    "num_envs": 32,
    "num_steps": 128,
    "hidden": (128, 128),
    "activation": "relu",
    "critic_input": "all_obs",
    "agent_id": True,
    "lr": 3e-4,
    "anneal_lr": True,
    "max_grad_norm": 0.5,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "update_epochs": 4,
    "num_minibatches": 4,
    "total_steps": 2_000_000,
    "num_seeds": 3,
}
"""The research's MAPPO: actor and critic of two ReLU layers of 128, the critic on
every agent's observation concatenated, Adam (eps 1e-5) at 3e-4 annealed, clip
0.5, 32 games x 128 steps, gamma 0.99, GAE 0.95, PPO clip 0.2 (value clipped),
entropy 0.01, value 0.5, 4 epochs x 4 minibatches, 2M steps x 3 seeds (488
updates)."""

RESEARCH_OBSTACLES = ((0.5, 0.5), (-0.5, -0.5))
"""Pinned obstacle positions of the research's static games (Exp 2, Exp 4)."""

RESEARCH_RESOURCE_GAME = (
    ("num_resources", 4),
    ("fixed_obstacles", True),
    ("obstacle_pos", RESEARCH_OBSTACLES),
    ("collect_radius", 0.15),
    ("collect_reward", 5.0),
    ("resource_ring_radius", 0.6),
    ("resource_corner", 0.8),
)
"""The research's resource game (Exp 4); mopa's ``tag_resources`` collects at 0.1."""

RESEARCH_SHAPING_GAME = (
    ("fixed_obstacles", True),
    ("obstacle_pos", RESEARCH_OBSTACLES),
    ("shape_coef", 0.1),
    ("shape_r_in", 0.25),
    ("shape_r_out", 0.6),
)
"""The research's static game with directional shaping (Exp 2)."""

RESEARCH_INTENT_GAME = (
    ("intent_radius", 0.35),
    ("intent_reward", 4.0),
    ("intent_corner", 0.8),
    ("predator_max_speed", 0.75),
    ("predator_accel", 2.0),
)
"""The research's hidden-intent game (Exp 6), as its configs state it."""

SHAPING_DIRECTIONS = {"baseline": 0.0, "cw": -1.0, "ccw": 1.0}
"""Exp 2's prey shaping: off, clockwise, counter-clockwise."""

INTENT_CONDITIONS = {
    "unaware": (),
    "oracle": (("predator_intent_obs", True),),
    "belief": (
        ("predator_intent_obs", True),
        ("belief_alpha_low", 0.0),
        ("belief_alpha_high", 1.0),
    ),
}
"""Exp 6's predators: blind to the intent, told it, or given a noisy belief."""

IQL_GAP = "differs: LeCun-normal init (research: orthogonal)"
MAPPO_GAP = (
    "differs: variance-scaling init (research: orthogonal), a step's agents share "
    "a minibatch, a critic value per agent"
)


def _iql(algo: str, env: str, **fields) -> IQLConfig:
    return IQLConfig(algo=algo, env=env, **fields)


def _mappo(env: str, **fields) -> MAPPOConfig:
    return MAPPOConfig(algo="mappo", env=env, **fields)


def _build() -> dict[str, tuple[str, TrainConfig]]:
    presets: dict[str, tuple[str, TrainConfig]] = {}
    # Exp 1: recurrent IQL vs OA-IQL on tag, one seed.
    for algo in ("iql", "oa_iql"):
        presets[f"exp1_{algo}_rnn"] = (
            f"Exp 1: GRU {algo.upper()} on tag, 1 seed",
            _iql(algo, "tag", rnn=True, num_seeds=1),
        )
    # Exp 2: pinned obstacles, prey shaping off / clockwise / counter-clockwise.
    for variant, direction in (("baseline", 0.0), ("cw", -1.0), ("ccw", 1.0)):
        presets[f"exp2_static_{variant}"] = (
            f"Exp 2: GRU IQL on tag_static, prey shaping {variant}",
            _iql(
                "iql", "tag_static", rnn=True, env_overrides=(("shape_dir", direction),)
            ),
        )
    # Exp 3: MLP IQL and OA-IQL on tag (then the cross-play tournament).
    for algo in ("iql", "oa_iql"):
        presets[f"exp3_{algo}"] = (
            f"Exp 3: MLP {algo.upper()} on tag",
            _iql(algo, "tag"),
        )
    # Exp 4: resources, three algorithms x three placements, and vanilla MAPPO.
    for placement in ("circle", "corners", "random"):
        overrides = (("resource_placement", placement),)
        for algo in ("iql", "oa_iql"):
            presets[f"exp4_{algo}_{placement}"] = (
                f"Exp 4: {algo.upper()} on tag_resources, {placement} placement",
                _iql(algo, "tag_resources", env_overrides=overrides),
            )
        presets[f"exp4_iql_jaxmarl_{placement}"] = (
            f"Exp 4: IQL with JaxMARL's MPE settings on tag_resources, "
            f"{placement} placement",
            _iql("iql", "tag_resources", env_overrides=overrides, **JAXMARL_MPE_IQL),
        )
        presets[f"exp4_mappo_{placement}"] = (
            f"Exp 4: MAPPO on tag_resources, {placement} placement",
            _mappo("tag_resources", env_overrides=overrides),
        )
    presets["exp4_mappo_tag"] = ("Exp 4: MAPPO on plain tag (baseline)", _mappo("tag"))
    # Exp 5: specialists on the balanced game, one placement each.
    for placement in ("circle", "corners"):
        overrides = (("resource_placement", placement),)
        presets[f"exp5_iql_{placement}"] = (
            f"Exp 5: IQL {placement} specialist on tag_balanced",
            _iql("iql", "tag_balanced", env_overrides=overrides),
        )
        presets[f"exp5_mappo_{placement}"] = (
            f"Exp 5: MAPPO {placement} specialist on tag_balanced",
            _mappo("tag_balanced", env_overrides=overrides),
        )
    # Exp 6: hidden intent; predators unaware, told the corner, or given a belief.
    for condition, overrides in INTENT_CONDITIONS.items():
        presets[f"exp6_mappo_{condition}"] = (
            f"Exp 6: MAPPO on tag_intent, {condition} predators",
            _mappo("tag_intent", env_overrides=overrides),
        )
    presets.update(_research())
    return presets


def _research() -> dict[str, tuple[str, TrainConfig]]:
    """The ``research_*`` presets: the research's exact settings, per experiment."""
    presets: dict[str, tuple[str, TrainConfig]] = {}
    # Exp 2: recurrent IQL (width 64) on the static game, shaping off / CW / CCW.
    for variant, direction in SHAPING_DIRECTIONS.items():
        presets[f"research_iql_rnn_tag_static_{variant}"] = (
            f"Exp 2, research settings: GRU-64 IQL on tag_static, prey shaping "
            f"{variant}; {IQL_GAP}",
            _iql(
                "iql",
                "tag_static",
                env_overrides=(*RESEARCH_SHAPING_GAME, ("shape_dir", direction)),
                **RESEARCH_IQL_RNN,
            ),
        )
    # Exp 3: MLP IQL and OA-IQL on tag.
    for algo in ("iql", "oa_iql"):
        presets[f"research_{algo}_tag"] = (
            f"Exp 3, research settings: MLP {algo.upper()} on tag; {IQL_GAP}",
            _iql(algo, "tag", **RESEARCH_IQL),
        )
    # Exp 4: the resource game (collect radius 0.15), three placements.
    for placement in ("circle", "corners", "random"):
        overrides = (*RESEARCH_RESOURCE_GAME, ("resource_placement", placement))
        for algo in ("iql", "oa_iql"):
            presets[f"research_{algo}_tag_resources_{placement}"] = (
                f"Exp 4, research settings: {algo.upper()} on tag_resources, "
                f"{placement} placement; {IQL_GAP}",
                _iql(algo, "tag_resources", env_overrides=overrides, **RESEARCH_IQL),
            )
        presets[f"research_mappo_tag_resources_{placement}"] = (
            f"Exp 4, research settings: MAPPO 2x128 on tag_resources, {placement} "
            f"placement; {MAPPO_GAP}",
            _mappo("tag_resources", env_overrides=overrides, **RESEARCH_MAPPO),
        )
    presets["research_mappo_tag"] = (
        f"Exp 4, research settings: MAPPO 2x128 on plain tag; {MAPPO_GAP}",
        _mappo("tag", **RESEARCH_MAPPO),
    )
    # Exp 5: specialists on the balanced game (no research game constants known).
    for placement in ("circle", "corners"):
        overrides = (("resource_placement", placement),)
        presets[f"research_iql_tag_balanced_{placement}"] = (
            f"Exp 5, research trainer: IQL {placement} specialist on mopa's "
            f"tag_balanced (its constants are not in the reference); {IQL_GAP}",
            _iql("iql", "tag_balanced", env_overrides=overrides, **RESEARCH_IQL),
        )
        presets[f"research_mappo_tag_balanced_{placement}"] = (
            f"Exp 5, research trainer: MAPPO 2x128 {placement} specialist on mopa's "
            f"tag_balanced (its constants are not in the reference); {MAPPO_GAP}",
            _mappo("tag_balanced", env_overrides=overrides, **RESEARCH_MAPPO),
        )
    # Exp 6: hidden intent, the critic on every observation (so it sees the intent).
    for condition, overrides in INTENT_CONDITIONS.items():
        presets[f"research_mappo_tag_intent_{condition}"] = (
            f"Exp 6, research settings: MAPPO 2x128 on tag_intent, {condition} "
            f"predators, critic on all observations; {MAPPO_GAP}",
            _mappo(
                "tag_intent",
                env_overrides=(*RESEARCH_INTENT_GAME, *overrides),
                **RESEARCH_MAPPO,
            ),
        )
    presets["research_mappo_tag_intent_unaware_private_critic"] = (
        "Exp 6, research settings but mopa's critic (global state without the "
        f"intent): MAPPO 2x128 on tag_intent, unaware predators; {MAPPO_GAP}",
        _mappo(
            "tag_intent",
            env_overrides=RESEARCH_INTENT_GAME,
            **{**RESEARCH_MAPPO, "critic_input": "state"},
        ),
    )
    return presets


PRESETS = _build()
"""``{name: (description, config)}``."""

RECIPES = ("research", "mopa")
"""Training recipes of the reproduction experiments (``exp2`` - ``exp5``, ``intent``):
``research``, the research's exact settings (the ``research_*`` presets), and
``mopa``, mopa's lighter settings (the ``expN_*`` presets) that the first figures
were run with."""


def _research_counterparts() -> dict[str, str]:
    """``{expN_* preset: its research_* counterpart}``."""
    pairs = {}
    for variant in SHAPING_DIRECTIONS:
        pairs[f"exp2_static_{variant}"] = f"research_iql_rnn_tag_static_{variant}"
    for algo in ("iql", "oa_iql"):
        pairs[f"exp3_{algo}"] = f"research_{algo}_tag"
    for placement in ("circle", "corners", "random"):
        for algo in ("iql", "oa_iql", "mappo"):
            pairs[f"exp4_{algo}_{placement}"] = (
                f"research_{algo}_tag_resources_{placement}"
            )
    pairs["exp4_mappo_tag"] = "research_mappo_tag"
    for placement in ("circle", "corners"):
        for algo in ("iql", "mappo"):
            pairs[f"exp5_{algo}_{placement}"] = (
                f"research_{algo}_tag_balanced_{placement}"
            )
    # The unaware predators keep mopa's critic (the intent stays private); the
    # research's, which sees it, is the preset research_mappo_tag_intent_unaware.
    pairs["exp6_mappo_unaware"] = "research_mappo_tag_intent_unaware_private_critic"
    for condition in ("oracle", "belief"):
        pairs[f"exp6_mappo_{condition}"] = f"research_mappo_tag_intent_{condition}"
    return pairs


RESEARCH_COUNTERPARTS = _research_counterparts()
"""``{expN_* preset: research_* preset}``: what the ``research`` recipe trains in
place of each of mopa's experiment presets. The Exp 6 unaware predators' critic
stays mopa's (it cannot see the prey's intent); ``exp4_iql_jaxmarl_*`` has no
counterpart."""


def check_recipe(recipe: str) -> None:
    """Raise :class:`InvalidParameterError` unless ``recipe`` is one of
    :data:`RECIPES`."""
    if recipe not in RECIPES:
        raise InvalidParameterError(
            f"recipe must be one of {', '.join(RECIPES)}, got {recipe!r}"
        )


def recipe_preset(name: str, recipe: str) -> TrainConfig:
    """The config that ``recipe`` trains for experiment preset ``name``: the preset
    itself under ``mopa``, its research counterpart under ``research``.

    Raises:
        InvalidParameterError: unknown recipe, or a preset without a research
            counterpart under ``research``.
        UnknownNameError: unknown preset.
    """
    check_recipe(recipe)
    if recipe == "mopa":
        return preset(name)
    if name not in RESEARCH_COUNTERPARTS:
        preset(name)  # an unknown name says so first
        raise InvalidParameterError(
            f"preset {name!r} is one of mopa's alternatives with no research "
            "counterpart; run it with recipe 'mopa'"
        )
    return preset(RESEARCH_COUNTERPARTS[name])


def preset(name: str) -> TrainConfig:
    """The config of preset ``name``."""
    if name not in PRESETS:
        raise UnknownNameError(
            f"unknown preset {name!r}; see `mopa train --list-presets`"
        )
    return PRESETS[name][1]
