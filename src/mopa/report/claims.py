"""The results pages and every experiment's headline claims, in one table.

:data:`PAGES` lists the site's results pages (one per experiment, a section per
result folder) and :data:`CLAIMS` what RESULTS.md's summary and each page's claims
table show: for every claim, the folder and the JSON path of mopa's figure, the
research's figure and the criterion that decides "met" (see
:mod:`mopa.report.docs` for the measures and criteria). A claim whose seed gives
no figure (a criterion of mopa's own experiments) says so. ``mopa docs render``
writes the pages from these; change a claim here, then run it.
"""

from __future__ import annotations

from mopa.report.docs import (
    AllOf,
    AtLeast,
    AtMost,
    Claim,
    Exceeds,
    Folder,
    IntervalAbove,
    IntervalBelow,
    IsTrue,
    MeanOf,
    MinOf,
    NotBelow,
    Page,
    Ratio,
    Recorded,
    Under,
    Value,
    mean,
)

PAGES = (
    Page(
        "intent",
        "Exp 6: hidden intent (the headline)",
        (
            Folder("intent", "On the research's networks (the default)"),
            Folder("intent_mopa", "On mopa's lighter networks"),
            Folder(
                "intent_mopa_draws",
                "Three draws on mopa's lighter networks, training included, pooled",
            ),
        ),
    ),
    Page(
        "intent_population",
        "Opponent models that generalise: a prey family, held-out prey, matches",
        (
            Folder("intent_population", "On the research's networks (the default)"),
            Folder(
                "intent_population_draws",
                "Three draws of the default, training included, pooled",
            ),
            Folder("intent_population_mopa", "On mopa's lighter networks"),
            Folder(
                "intent_population_online",
                "The online correction, trained on an AMD EPYC without AVX-512",
            ),
            Folder(
                "intent_population_threats",
                "The correction on the prey's threat features, on those stages",
            ),
        ),
    ),
    Page(
        "exp2",
        "Exp 2: shaping the prey's route around the obstacles",
        (
            Folder("exp2", "On the research's recipe (the default)"),
            Folder("exp2_mopa", "On mopa's lighter recipe"),
        ),
    ),
    Page(
        "exp3",
        "Exp 3: cross-play of IQL, OA-IQL and the opponent-head planner",
        (
            Folder("exp3", "On the research's recipe (the default)"),
            Folder("exp3_mopa", "On mopa's lighter recipe"),
        ),
    ),
    Page(
        "exp4",
        "Exp 4: does a dominated prey's trajectory carry the resource placement?",
        (
            Folder("exp4", "On the research's recipe (the default)"),
            Folder("exp4_mopa", "On mopa's lighter recipe, 6 seeds"),
            Folder("exp4_mopa_3seeds", "On mopa's lighter recipe, 3 seeds"),
        ),
    ),
    Page(
        "exp5",
        "Exp 5: distinct strategies, an encodable latent, a brittle opponent",
        (
            Folder("exp5", "On the research's recipe (the default)"),
            Folder("exp5_mopa", "On mopa's lighter recipe"),
        ),
    ),
    Page(
        "cotrain",
        "The co-training loop: red adapts, blue re-models it",
        (
            Folder("cotrain", "On tag_intent (the default profile)"),
            Folder("cotrain_battalion", "On the battalion, red the scripted family"),
        ),
    ),
    Page(
        "lemol",
        "LeMOL: modelling a learning opponent (seed 003)",
        (Folder("lemol", "LeMOL against a behaviour clone on push"),),
    ),
    Page(
        "pola",
        "Opponent-learning awareness: POLA on the IPD (seed 002)",
        (Folder("pola_ipd", "LOLA-DiCE, POLA-DiCE and POLA-OM, 3 seeds"),),
    ),
    Page(
        "wargame_ladder",
        "The wargame: a trained Blue against the Red ladder",
        (Folder("wargame_ladder", "Blue against the scripted Red ladder L1-L5"),),
    ),
    Page(
        "wargame_transfer",
        "The wargame: procedural scenarios and terrain transfer",
        (
            Folder("wargame_generalization", "Generalization across scenarios"),
            Folder("wargame_terrain", "Terrain transfer"),
        ),
    ),
    Page(
        "wargame_intent",
        "Opponent modelling in the wargame: type-aware against type-blind Blues",
        (Folder("wargame_intent", "Planning and MAPPO Blues against the Red family"),),
    ),
)
"""The site's results pages, in the order RESULTS.md lists them."""

_OWN = "none (mopa's own criterion)"
"""The seed column of a claim the research makes no figure for."""


def _intent_claims(folder: str, default: bool) -> tuple[Claim, ...]:
    """Exp 6's orderings on one folder; the default adds the common pool's."""
    c = "conditions"
    claims = [
        Claim(
            f"{folder}.belief_over_unaware",
            folder,
            "belief planner >= 1.5x the intent-blind predators (paired)",
            "1.61x (4.31 / 2.68)",
            Ratio(f"{c}.belief_planner", f"{c}.unaware"),
            AtLeast(1.5),
        ),
        Claim(
            f"{folder}.belief_over_flat",
            folder,
            "belief planner above the flat-belief planner (paired)",
            "4.31 against 3.07",
            mean(f"{c}.belief_planner"),
            Exceeds(mean(f"{c}.flat_belief_planner"), "flat_belief_planner"),
        ),
        Claim(
            f"{folder}.belief_over_oracle",
            folder,
            "belief planner at least the oracle told the corner (paired)",
            "4.31 against 4.05",
            mean(f"{c}.belief_planner"),
            Exceeds(mean(f"{c}.oracle"), "oracle", apart=False),
        ),
        Claim(
            f"{folder}.random_corner",
            folder,
            "oracle fed a random corner below the intent-blind predators",
            "1.42 against 2.68",
            mean(f"{c}.oracle_random_intent"),
            Under(mean(f"{c}.unaware"), "unaware", apart=False),
        ),
        Claim(
            f"{folder}.accuracy",
            folder,
            "online belief's accuracy at step 25 >= 0.95",
            "0.97",
            Value("belief_accuracy_by_step.24", ".3f"),
            AtLeast(0.95),
        ),
        Claim(
            f"{folder}.ece",
            folder,
            "online belief's mean calibration error <= 0.05",
            _OWN,
            MeanOf("ece_by_step", ".4f"),
            AtMost(0.05),
        ),
    ]
    if default:
        claims += [
            Claim(
                f"{folder}.common_over_unaware",
                folder,
                "belief planner >= 1.5x the blind predators against a common pool",
                "not measured (own-seed pairing only)",
                Ratio(
                    "conditions_common_opponent.belief_planner",
                    "conditions_common_opponent.unaware",
                ),
                AtLeast(1.5),
            ),
            Claim(
                f"{folder}.common_over_oracle",
                folder,
                "belief planner at least the oracle against a common pool",
                "not measured (own-seed pairing only)",
                mean("conditions_common_opponent.belief_planner"),
                Exceeds(
                    mean("conditions_common_opponent.oracle"), "oracle", apart=False
                ),
            ),
            Claim(
                f"{folder}.mcts",
                folder,
                "tree search (mcts_planner) over the blind predators (paired)",
                "not in the research",
                Ratio(f"{c}.mcts_planner", f"{c}.unaware"),
            ),
        ]
    return tuple(claims)


def _population_claims(folder: str, default: bool) -> tuple[Claim, ...]:
    """The held-out criteria on one folder; the default adds adaptation, the
    out-of-family ones and the gap to the true model."""
    h = "conditions_held_out"
    claims = [
        Claim(
            f"{folder}.population_over_unaware",
            folder,
            "population lookahead >= 1.5x the blind predators, held-out prey",
            _OWN,
            Ratio(f"{h}.population_planner", f"{h}.unaware"),
            AtLeast(1.5),
        ),
        Claim(
            f"{folder}.population_over_oracle",
            folder,
            "population lookahead at least the oracle, held-out prey",
            _OWN,
            mean(f"{h}.population_planner"),
            Exceeds(mean(f"{h}.oracle"), "oracle", apart=False),
        ),
        Claim(
            f"{folder}.mcts_over_unaware",
            folder,
            "population tree search >= 2.5x the blind predators, held-out prey",
            _OWN,
            Ratio(f"{h}.population_mcts", f"{h}.unaware"),
            AtLeast(2.5),
        ),
        Claim(
            f"{folder}.accuracy",
            folder,
            "intent belief's accuracy at step 25 >= 0.95, held-out prey",
            _OWN,
            Value("belief_accuracy_by_step.24", ".3f"),
            AtLeast(0.95),
        ),
        Claim(
            f"{folder}.ece",
            folder,
            "intent belief's mean calibration error <= 0.05, held-out prey",
            _OWN,
            Value("mean_ece", ".3f"),
            AtMost(0.05),
        ),
        Claim(
            f"{folder}.log_likelihood",
            folder,
            "population's held-out log-likelihood per move above the best clone's",
            _OWN,
            Value("log_likelihood_per_move.population", ".4f"),
            Exceeds(
                Value("log_likelihood_per_move.best_single_clone", ".4f"),
                "the best single clone",
                apart=False,
            ),
        ),
    ]
    if default:
        a = "adaptation"
        claims += [
            Claim(
                f"{folder}.true_model_gap",
                folder,
                "population lookahead within 15% of the faced prey's own model",
                _OWN,
                Ratio(f"{h}.population_planner", f"{h}.true_model_planner"),
                AtLeast(0.85),
            ),
            Claim(
                f"{folder}.adaptation",
                folder,
                "in ten-episode matches, episodes 6-10 catch more than episode 1",
                _OWN,
                Value(
                    f"{a}.held_out.late_minus_first.mean",
                    "+.2f",
                    interval=f"{a}.held_out.late_minus_first.ci95",
                ),
                IntervalAbove(0.0),
            ),
            Claim(
                f"{folder}.none_fits_evader",
                folder,
                "the belief says none fits the scripted evader by a match's end",
                _OWN,
                Value(f"{a}.per_prey.evader.none_fits_by_episode_end.-1"),
                AtLeast(0.5),
            ),
            Claim(
                f"{folder}.none_fits_wanderer",
                folder,
                "the belief says none fits the scripted wanderer by a match's end",
                _OWN,
                Value(f"{a}.per_prey.wanderer.none_fits_by_episode_end.-1"),
                AtLeast(0.5),
            ),
            Claim(
                f"{folder}.evader_versus_flat",
                folder,
                "out of family, the lookahead not below the flat-belief planner: "
                "evader (paired)",
                _OWN,
                mean("out_of_family_versus_flat_per_prey.evader", "+.2f"),
                NotBelow(0.0),
            ),
            Claim(
                f"{folder}.wanderer_versus_flat",
                folder,
                "out of family, the lookahead not below the flat-belief planner: "
                "wanderer (paired)",
                _OWN,
                mean("out_of_family_versus_flat_per_prey.wanderer", "+.2f"),
                NotBelow(0.0),
            ),
        ]
    return tuple(claims)


def _exp2_claims(folder: str) -> tuple[Claim, ...]:
    return (
        Claim(
            f"{folder}.cw",
            folder,
            "CW shaping turns the prey clockwise (mean angular step < 0)",
            Value("research.mean_dangle.cw", "+.4f"),
            Value("mean_dangle.cw", "+.4f", interval="mean_dangle_ci95.cw"),
            IntervalBelow(0.0),
        ),
        Claim(
            f"{folder}.ccw",
            folder,
            "CCW shaping turns the prey counter-clockwise (mean angular step > 0)",
            Value("research.mean_dangle.ccw", "+.4f"),
            Value("mean_dangle.ccw", "+.4f", interval="mean_dangle_ci95.ccw"),
            IntervalAbove(0.0),
        ),
        Claim(
            f"{folder}.vae",
            folder,
            "the trajectory VAE does not identify the variant (ARI)",
            "<= 0.03",
            Value("vae_ari", ".3f"),
            AtMost(0.03),
        ),
        Claim(
            f"{folder}.captures",
            folder,
            "predators' captures per episode, unshaped baseline",
            Value("research.captures_per_episode.baseline", ".1f"),
            Value(
                "captures_per_episode.mean.baseline",
                interval="captures_per_episode.ci95.baseline",
            ),
        ),
    )


def _exp3_claims(folder: str) -> tuple[Claim, ...]:
    return (
        Claim(
            f"{folder}.plan_prey",
            folder,
            "the OA-plan prey concedes the fewest captures in every row",
            "yes (about 2 fewer than the greedy prey)",
            Value("findings.oa_plan_prey_fewest_in_every_row"),
            IsTrue(),
        ),
        Claim(
            f"{folder}.plan_predators",
            folder,
            "the OA-plan predators are the worst in every column",
            "yes",
            Value("findings.oa_plan_pred_worst_in_every_column"),
            IsTrue(),
        ),
        Claim(
            f"{folder}.head_accuracy",
            folder,
            "the prey's opponent-action head more accurate than the predators'",
            "0.58 against 0.53 (Exp 1)",
            Value("opp_head_accuracy.prey", ".3f"),
            Exceeds(Value("opp_head_accuracy.pred", ".3f"), "predators'", apart=False),
        ),
    )


def _exp4_claims(folder: str) -> tuple[Claim, ...]:
    return (
        Claim(
            f"{folder}.raw_probe",
            folder,
            "a linear probe on the prey's raw positions reads the placement "
            "(chance 0.5)",
            Value("research.probe_raw_placement", ".2f"),
            Value("probe_raw_placement", ".3f"),
        ),
        Claim(
            f"{folder}.distance_probe",
            folder,
            "a probe on the prey's distance from the centre reads the placement",
            "not measured",
            Value("probe_radius_placement", ".3f"),
        ),
    )


def _exp5_claims(folder: str) -> tuple[Claim, ...]:
    return (
        Claim(
            f"{folder}.probe",
            folder,
            "occupancy linear probe tells the specialists apart, one episode (IQL)",
            Value("research.probe_occupancy.iql", ".2f"),
            Value("probe_occupancy", ".3f"),
            AtLeast(0.95),
        ),
        Claim(
            f"{folder}.vae",
            folder,
            "a VAE clusters the specialists without labels at L = 100 (ARI)",
            Value("research.vae_ari_L100", ".2f"),
            Value("vae_ari_by_L.100"),
            AtLeast(0.8),
        ),
        Claim(
            f"{folder}.steering",
            folder,
            "a clone steered by the latent takes the named route",
            Value("research.steering_rate", ".2f"),
            Value("steering_rate", ".3f", interval="steering_ci95"),
            AtLeast(0.8),
        ),
        Claim(
            f"{folder}.brittleness",
            folder,
            "MAPPO predators lose captures against a prey they did not co-train with",
            Value("research.brittleness_drop", ".0%"),
            Value("brittleness_drop", ".1%", interval="brittleness_drop_ci95"),
            IntervalAbove(0.0),
        ),
    )


def _final(blue: str, figure: str) -> Value:
    return mean(f"final.{blue}.{figure}")


def _cotrain_claims(folder: str) -> tuple[Claim, ...]:
    """The co-training loop's criteria at its last generation: the planning blue
    (the tree search, the teacher) over the blind blue, its distilled policy's
    exploitability and what it keeps of the planner, every blue's improvement on
    the held-out reds, and re-fitting over fitting once on the newest reds."""
    last = "lineages.plan.-1"
    claims = []
    for figure, reds in (
        ("score_vs_held_out", "held-out reds"),
        ("score_vs_population", "red's population"),
    ):
        claims.append(
            Claim(
                f"{folder}.planner_{figure}",
                folder,
                f"the planning blue (tree search) >= 1.5x the blind blue, {reds}",
                _OWN,
                Ratio(f"{last}.planners.mcts.{figure}", f"final.blind.{figure}"),
                AllOf(
                    (
                        AtLeast(1.5),
                        Recorded(
                            f"criteria.mcts_over_blind/{figure}.intervals_apart",
                            "intervals apart",
                        ),
                    )
                ),
            )
        )
    exploited = "exploitability.score_vs_best_response"
    claims += [
        Claim(
            f"{folder}.distilled_exploitability",
            folder,
            "the distilled policy concedes less to its best response than blind "
            "(captures against it)",
            _OWN,
            _final("plan", exploited),
            Exceeds(_final("blind", exploited), "blind"),
        ),
        Claim(
            f"{folder}.distilled_keep",
            folder,
            "the distilled policy keeps >= 90% of the tree search's captures, "
            "red's population",
            _OWN,
            Ratio(
                "final.plan.score_vs_population",
                f"{last}.planners.mcts.score_vs_population",
            ),
            AtLeast(0.9),
        ),
    ]
    for blue in ("blind", "remodel", "fit_once", "plan"):
        claims.append(
            Claim(
                f"{folder}.improvement_{blue}",
                folder,
                f"{blue} catches more at the last generation than at generation 0, "
                "held-out reds (paired)",
                _OWN,
                mean(f"improvement.{blue}.blue"),
                IntervalAbove(0.0),
            )
        )
    claims.append(
        Claim(
            f"{folder}.remodel_newest",
            folder,
            "re-modelling blue above the never re-fitted one, the newest reds",
            _OWN,
            _final("remodel", "score_vs_newest"),
            Exceeds(_final("fit_once", "score_vs_newest"), "fit_once"),
        )
    )
    return tuple(claims)


def _battalion_claims(folder: str) -> tuple[Claim, ...]:
    """The battalion league's criteria at its last generation: the planning blue
    (the per-agent lookahead, the teacher) over the blind blue, and its distilled
    policy's win rate against the lookahead's, against red's population and the
    held-out reds."""
    planner = "lineages.plan.-1.planners.lookahead"
    claims = []
    for figure, reds in (
        ("score_vs_population", "red's population"),
        ("score_vs_held_out", "held-out reds"),
    ):
        claims.append(
            Claim(
                f"{folder}.planner_{figure}",
                folder,
                f"the planning blue (lookahead) wins more than the blind blue, {reds}",
                _OWN,
                mean(f"{planner}.{figure}"),
                Exceeds(_final("blind", figure), "blind"),
            )
        )
        claims.append(
            Claim(
                f"{folder}.distilled_keep_{figure}",
                folder,
                f"the distilled policy wins >= 80% as often as the lookahead, {reds}",
                _OWN,
                Ratio(f"final.plan.{figure}", f"{planner}.{figure}"),
                AtLeast(0.8),
            )
        )
    return tuple(claims)


CLAIMS: tuple[Claim, ...] = (
    *_intent_claims("intent", default=True),
    *_intent_claims("intent_mopa", default=False),
    *_intent_claims("intent_mopa_draws", default=True),
    *_population_claims("intent_population", default=True),
    *_population_claims("intent_population_draws", default=True),
    *_population_claims("intent_population_mopa", default=False),
    *_population_claims("intent_population_online", default=False),
    *_population_claims("intent_population_threats", default=False),
    *_exp2_claims("exp2"),
    *_exp2_claims("exp2_mopa"),
    *_exp3_claims("exp3"),
    *_exp3_claims("exp3_mopa"),
    *_exp4_claims("exp4"),
    *_exp4_claims("exp4_mopa"),
    *_exp4_claims("exp4_mopa_3seeds"),
    *_exp5_claims("exp5"),
    *_exp5_claims("exp5_mopa"),
    *_cotrain_claims("cotrain"),
    *_battalion_claims("cotrain_battalion"),
    Claim(
        "lemol.accuracy",
        "lemol",
        "LeMOL predicts a learning opponent better than a behaviour clone "
        "(accuracy, cycles 7-12)",
        "better (no figure on push at this size)",
        Value("accuracy_gap.mean", "+.3f", interval="accuracy_gap.ci95"),
        IntervalAbove(0.0),
    ),
    Claim(
        "lemol.return",
        "lemol",
        "the focal adversary's return with LeMOL above MADDPG's (cycles 7-12)",
        "higher",
        mean("returns.lemol"),
        Exceeds(mean("returns.maddpg"), "MADDPG", apart=False),
    ),
    Claim(
        "pola_ipd.pola_om",
        "pola_ipd",
        "POLA-OM cooperates: reward per step against each other >= 0.25",
        "about 0.315",
        Value("pola_om.vs_each_other", ".3f", half_width="pola_om.ci95.vs_each_other"),
        AtLeast(0.25),
    ),
    Claim(
        "pola_ipd.pola_om_seeds",
        "pola_ipd",
        "POLA-OM cooperates in every seed (>= 0.25)",
        "about 0.315",
        MinOf("pola_om.per_seed.vs_each_other"),
        AtLeast(0.25),
    ),
    Claim(
        "pola_ipd.pola_om_alld",
        "pola_ipd",
        "POLA-OM is not exploited by ALLD (>= -0.1)",
        "about -0.04",
        Value("pola_om.vs_alld", "+.3f", half_width="pola_om.ci95.vs_alld"),
        AtLeast(-0.1),
    ),
    Claim(
        "pola_ipd.pola_dice_seeds",
        "pola_ipd",
        "POLA-DiCE cooperates in every seed (>= 0.25)",
        "about 0.31",
        MinOf("pola_dice.per_seed.vs_each_other"),
        AtLeast(0.25),
    ),
    Claim(
        "pola_ipd.lola_dice",
        "pola_ipd",
        "LOLA-DiCE's reward per step against each other",
        "about 0.11",
        Value(
            "lola_dice.vs_each_other", ".3f", half_width="lola_dice.ci95.vs_each_other"
        ),
    ),
    Claim(
        "wargame_ladder.l4",
        "wargame_ladder",
        "win rate against Red L4 >= 0.95",
        "reference PPO 1.00",
        Value("levels.L4.win_rate", ".3f", interval="levels.L4.win_ci95"),
        AtLeast(0.95),
    ),
    Claim(
        "wargame_ladder.l5",
        "wargame_ladder",
        "win rate against Red L5 >= 0.60",
        "reference PPO 0.25",
        Value("levels.L5.win_rate", ".3f", interval="levels.L5.win_ci95"),
        AtLeast(0.60),
    ),
    Claim(
        "wargame_ladder.all",
        "wargame_ladder",
        "every level's target met (L1-L4 0.95, L5 0.60)",
        "reference PPO 0.85-1.00, L5 0.25",
        Value("all_targets_met"),
        IsTrue(),
    ),
    Claim(
        "wargame_generalization.zero_shot",
        "wargame_generalization",
        "zero-shot win rate on held-out scenarios >= 0.55",
        "criterion 0.55",
        Value("pooled.zero_shot.win_rate", ".3f", interval="pooled.zero_shot.win_ci95"),
        AtLeast(0.55),
    ),
    Claim(
        "wargame_generalization.fine_tuned",
        "wargame_generalization",
        "fine-tuned Blue at least 0.8 of the specialist's win rate",
        "criterion 0.8",
        Value("criteria.fine_tuned_over_specialist"),
        AtLeast(0.8),
    ),
    Claim(
        "wargame_terrain.zero_shot",
        "wargame_terrain",
        "zero-shot win-rate drop on new terrain under 20 points",
        "criterion < 0.20",
        Value("drops.zero_shot.diff", ".3f", interval="drops.zero_shot.ci95"),
        AtMost(0.20),
    ),
    Claim(
        "wargame_terrain.fine_tuned",
        "wargame_terrain",
        "fine-tuned win-rate drop on new terrain under 5 points",
        "criterion < 0.05",
        Value("drops.fine_tuned.diff", ".3f", interval="drops.fine_tuned.ci95"),
        AtMost(0.05),
    ),
    Claim(
        "wargame_intent.planner",
        "wargame_intent",
        "type-aware planning Blue beats the type-blind one, intervals apart",
        "criterion: intervals apart",
        Value(
            "planning.conditions.aware_planner.win_rate",
            ".3f",
            interval="planning.conditions.aware_planner.win_rate_ci95",
        ),
        Exceeds(
            Value(
                "planning.conditions.blind_planner.win_rate",
                ".3f",
                interval="planning.conditions.blind_planner.win_rate_ci95",
            ),
            "the type-blind planner",
        ),
    ),
    Claim(
        "wargame_intent.mappo",
        "wargame_intent",
        "type-aware MAPPO Blue beats the type-blind one, intervals apart",
        "criterion: intervals apart",
        Value(
            "conditions.aware.win_rate",
            ".3f",
            interval="conditions.aware.win_rate_ci95",
        ),
        Exceeds(
            Value(
                "conditions.blind.win_rate",
                ".3f",
                interval="conditions.blind.win_rate_ci95",
            ),
            "the type-blind MAPPO Blue",
        ),
    ),
)
"""Every experiment's headline claims, in the order of :data:`PAGES`."""
