"""End to end on the real battalion duel (no mocks): a self-play run with a
curriculum, killed mid-run and resumed; evaluation outcomes from the game's own
end signals; ratings against the scripted anchors; a trained best response.

One self-play run (module fixture) serves most tests; every training in this file
uses the same settings, so the chunk compiles once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.core import checkpoint
from mopa.league import (
    ANCHORS,
    BestModel,
    Callback,
    CurriculumStage,
    EloRatings,
    LeaguePolicy,
    LeagueStore,
    MetricsLogger,
    OpponentPool,
    RatingEval,
    RewardBreakdown,
    TrainingConfig,
    WinRateVsPool,
    best_response_exploitability,
    evaluate,
    evaluate_detailed,
    read_metrics,
    run_episodes,
    train,
)
from mopa.policy import PolicySpec, init_params

# A short duel: units start 80-160 m apart on flat ground, damage 4x the default.
DUEL = {
    "max_steps": 60,
    "flat_terrain": True,
    "y_low": 0.48,
    "y_high": 0.52,
    "base_damage": 0.2,
}
SCRIPTED = ["scripted_l1", "scripted_l2", "scripted_l3", "random"]
TRAIN = dict(
    game="battalion_vs_red",
    game_kwargs=DUEL,
    total_timesteps=16 * 32 * 24,
    n_envs=16,
    n_steps=32,
    num_chunks=6,
    hidden=(32,),
    lr=1e-3,
    update_epochs=2,
    num_minibatches=2,
)


def gap_stage(name, gap):
    """Both units start ``gap`` map widths (+-0.01) from the centre line."""
    return CurriculumStage(
        name=name,
        game_kwargs={
            "blue_x_low": 0.5 - gap - 0.01,
            "blue_x_high": 0.5 - gap + 0.01,
            "red_x_low": 0.5 + gap - 0.01,
            "red_x_high": 0.5 + gap + 0.01,
        },
    )


class CrashError(Exception):
    pass


class CrashAfter(Callback):
    def __init__(self, chunk):
        self.chunk = chunk

    def on_chunk_end(self, run):
        if run.chunk == self.chunk:
            raise CrashError


@pytest.fixture(scope="module")
def league(tmp_path_factory):
    root = tmp_path_factory.mktemp("league")
    config = TrainingConfig(
        **TRAIN,
        enable_self_play=True,
        curriculum=(
            gap_stage("near", 0.04),
            gap_stage("mid", 0.06),
            gap_stage("far", 0.08),
        ),
        promote_threshold=0.55,
        win_rate_window=20,
        snapshot_freq=16 * 32 * 6,
        checkpoint_dir=str(root),
        run_id="sp",
    )
    with pytest.raises(CrashError):
        train(
            config,
            callbacks=[
                RatingEval(SCRIPTED, n_episodes=8, every=3, deterministic=False),
                CrashAfter(3),
            ],
        )
    with LeagueStore(root) as store:
        before = {
            "pool": [e.version for e in OpponentPool(store, "sp").entries],
            "games": EloRatings(store).games("sp"),
            "curriculum": store.get_state("run/sp")["curriculum"],
        }
    logger = MetricsLogger()
    breakdown = RewardBreakdown()
    vs_pool = WinRateVsPool(n_episodes=8, every=3)
    result = train(
        config,
        resume=root,
        callbacks=[
            breakdown,
            vs_pool,
            BestModel("scripted_l3", n_episodes=8, every=3, deterministic=False),
            RatingEval(SCRIPTED, n_episodes=8, every=3, deterministic=False),
            logger,
        ],
    )
    return {
        "root": root,
        "config": config,
        "before": before,
        "result": result,
        "logger": logger,
        "breakdown": breakdown,
        "vs_pool": vs_pool,
    }


@pytest.mark.slow
def test_self_play_promotes_through_every_stage(league):
    result = league["result"]
    assert [p["to"] for p in result.promotions] == ["mid", "far"]
    assert result.stage == "far"
    assert all(p["win_rate"] >= 0.55 for p in result.promotions)
    assert result.env_steps == 16 * 32 * 24


@pytest.mark.slow
def test_resume_loses_nothing(league):
    result, before = league["result"], league["before"]
    assert result.resumed_from_chunk == 3
    with LeagueStore(league["root"]) as store:
        pool = [e.version for e in OpponentPool(store, "sp").entries]
        # Chunks of 2048 steps, snapshots once 3072 steps passed: v0 at the
        # start, v1 at 4096 (before the crash), v2 at 8192 and v3 at 12288.
        assert before["pool"] == [0, 1]
        assert pool == [0, 1, 2, 3]
        # Ratings: 4 opponents x 8 games at chunk 3 (before the crash), again at 6.
        assert before["games"] == 32
        assert EloRatings(store).games("sp") == 64
        curriculum = store.get_state("run/sp")["curriculum"]
        assert curriculum["total_episodes"] > before["curriculum"]["total_episodes"]
        assert (
            curriculum["promotions"][: len(before["curriculum"]["promotions"])]
            == (before["curriculum"]["promotions"])
        )
    # Metrics of all 24 updates are there, the first 12 restored from the store.
    assert all(len(v) == 24 for v in result.metrics.values())


@pytest.mark.slow
def test_ratings_rise_above_the_scripted_anchors(league):
    with LeagueStore(league["root"]) as store:
        elo = EloRatings(store)
        assert elo.rating("sp") > max(elo.rating(name) for name in SCRIPTED)
        for name in SCRIPTED:  # anchors never move
            assert elo.rating(name) == ANCHORS[name]


@pytest.mark.slow
def test_metrics_log_and_reward_breakdown(league):
    rows = read_metrics(league["logger"].path)
    chunks = [r for r in rows if r["kind"] == "chunk"]
    assert [r["chunk"] for r in chunks] == [4, 5, 6]
    assert {r["kind"] for r in rows} >= {"chunk", "reward_breakdown", "pool", "ratings"}
    # The components are the whole reward: dealt + received + step + terminal
    # sum to the episode return.
    for row in chunks:
        parts = sum(
            row[f"breakdown/blue_reward_{c}_per_episode"]
            for c in ("dealt", "received", "step", "terminal")
        )
        assert parts == pytest.approx(row["return/blue"], rel=1e-4, abs=1e-4)
    assert len(league["breakdown"].history) == 3


@pytest.mark.slow
def test_pool_callback_records_every_member(league):
    row = league["vs_pool"].history[-1]
    assert row["pool_size"] == 4
    rates = [row[f"win_rate/v{v}"] for v in range(4)]
    assert row["win_rate_vs_pool"] == pytest.approx(np.mean(rates))
    with LeagueStore(league["root"]) as store:
        assert [e.games for e in OpponentPool(store, "sp").entries] == [8.0] * 4


@pytest.mark.slow
def test_manifest_rows(league):
    from mopa.league import CheckpointManifest

    with LeagueStore(league["root"]) as store:
        manifest = CheckpointManifest(store)
        kinds = [r.kind for r in manifest.rows()]
        assert kinds.count("snapshot") == 4 and kinds.count("final") == 1
        # BestModel evaluated once (chunk 6): its first score is the best so far.
        (best,) = manifest.rows("best")
        assert best.step == 16 * 32 * 24
        assert (league["root"] / "runs" / "sp" / "best.msgpack").exists()
        assert store.get_state("best/sp")["step"] == best.step
        assert kinds.count("periodic") == 6
        latest = manifest.latest_periodic("sp")
        assert latest.step == 16 * 32 * 24 and latest.stage == 2
        # keep_checkpoints=3: older periodic files were pruned.
        live = [r for r in manifest.rows("periodic") if not r.deleted]
        assert len(live) == 3


@pytest.mark.slow
def test_evaluate_outcomes_match_the_game_signals(league):
    final = league["result"].final_checkpoint
    policy = checkpoint_policy(final)
    out = run_episodes(policy, "scripted_l5", n_episodes=8, seed=0, deterministic=False)
    terminal = out["breakdown/blue_reward_terminal"]
    # The game pays +10 for a win, -10 for a loss, 0 for a draw.
    np.testing.assert_array_equal(np.sign(terminal), out["outcome"])
    result = evaluate_detailed(
        final, n_episodes=8, seed=0, opponent="scripted_l5", deterministic=False
    )
    assert (result.wins, result.draws, result.losses) == tuple(
        int(np.sum(out["outcome"] == k)) for k in (1, 0, -1)
    )
    assert result.win_rate + result.draw_rate + result.loss_rate == pytest.approx(1)
    # Episode i uses seed + i.
    part = evaluate_detailed(
        final, n_episodes=5, seed=3, opponent="scripted_l5", deterministic=False
    )
    assert part.wins == int(np.sum(out["outcome"][3:8] == 1))
    assert part.losses == int(np.sum(out["outcome"][3:8] == -1))
    assert part.n_episodes == 5
    against_l1 = evaluate(
        final, n_episodes=8, seed=0, opponent="scripted_l1", deterministic=False
    )
    assert against_l1 >= 0.75


def checkpoint_policy(path):
    from mopa.league import load_league_policy

    return load_league_policy(path)


def idle_policy(final) -> LeaguePolicy:
    """A fixed policy that never moves, turns or fires (discrete action 8)."""
    trained = checkpoint_policy(final)
    params = init_params(trained.spec, jax.random.key(0))
    params = jax.tree.map(jnp.zeros_like, params)
    params["params"]["Dense_0"]["bias"] = jnp.zeros(18).at[8].set(100.0)
    return trained._replace(params=params)


@pytest.mark.slow
def test_timeouts_are_draws_and_a_passive_side_loses(league):
    idle = idle_policy(league["result"].final_checkpoint)
    # L1 never moves or fires either: every episode reaches the step limit.
    # (Its actions are the same sampled or not: one logit is 100 above the rest.)
    kwargs = dict(n_episodes=8, deterministic=False)
    assert evaluate_detailed(idle, opponent="scripted_l1", **kwargs).draws == 8
    # L5 closes in and fires: the passive side never wins.
    against_l5 = evaluate_detailed(idle, opponent="scripted_l5", **kwargs)
    assert against_l5.wins == 0 and against_l5.losses >= 6


@pytest.mark.slow
def test_best_response_exploits_a_fixed_policy(league, tmp_path):
    idle = idle_policy(league["result"].final_checkpoint)
    path = checkpoint.write_policy_checkpoint(
        tmp_path / "idle.msgpack",
        algo="fixed",
        env=idle.env,
        env_overrides=dict(idle.env_overrides),
        config={},
        meta={},
        teams={
            "blue": (idle.spec.to_dict(), jax.tree.map(lambda x: x[None], idle.params))
        },
    )
    fields = {k: v for k, v in TRAIN.items() if k not in ("game", "game_kwargs")}
    found = best_response_exploitability(path, n_episodes=8, baseline=False, **fields)
    # The trained responder never loses to it and mostly wins: its win - loss
    # rate is a lower bound on the fixed policy's exploitability (the duel is
    # symmetric and zero-sum, so its value is 0).
    assert found.responder.losses == 0
    assert found.payoff >= 0.5
    assert found.env_steps == TRAIN["total_timesteps"]


def test_pursuit_win_is_a_capture_and_each_game_draws_its_opponent():
    """Pursuit games end only at the step limit: the prey wins an episode
    without a capture, the predators one with at least one. Each episode draws
    its opponent slot from the pool's weights."""
    from mopa.envs import make
    from mopa.league.arena import Arena, ArenaParams, outcome_rule
    from mopa.league.evaluation import episode_keys, play_outcomes

    env, params = make("tag")
    assert outcome_rule(env, params) == "pursuit"
    prey = PolicySpec(kind="random", num_agents=1, obs_size=14, num_actions=5)
    predators = PolicySpec(kind="random", num_agents=3, obs_size=16, num_actions=5)
    arena = Arena(env, learner=1, opponent=predators)
    weights = jnp.array([0.25, 0.0, 0.75])  # three slots, the middle one empty
    out = play_outcomes(
        arena, ArenaParams(params, {}, weights), prey, {}, episode_keys(0, 512), 25
    )
    captured = np.asarray(out["breakdown/prey_capture"]) < 0
    np.testing.assert_array_equal(out["outcome"], np.where(captured, -1, 1))
    assert 0 < captured.sum() < 512  # both outcomes occur
    share = np.bincount(np.asarray(out["slot"]), minlength=3) / 512
    np.testing.assert_allclose(share, [0.25, 0.0, 0.75], atol=0.05)


def test_config_errors():
    with pytest.raises(ValueError, match="no_such_field"):
        train(no_such_field=1)
    with pytest.raises(FileNotFoundError):
        train(TrainingConfig(**TRAIN), resume="/nonexistent/league")
    with pytest.raises(ValueError, match="pool_sampling"):
        TrainingConfig(pool_sampling="best")
    with pytest.raises(ValueError, match="self-play"):
        train(game="tag", enable_self_play=True, total_timesteps=512)


def test_arena_checks_the_opponent():
    from mopa.envs import make
    from mopa.errors import InvalidParameterError
    from mopa.league.arena import Arena, outcome_rule

    env, _ = make("tag")
    with pytest.raises(InvalidParameterError, match="opponent"):
        Arena(env, learner=0)
    wrong = PolicySpec(kind="random", num_agents=2, obs_size=14, num_actions=5)
    with pytest.raises(InvalidParameterError, match="agents"):
        Arena(env, learner=0, opponent=wrong)
    ipd, ipd_params = make("ipd")
    with pytest.raises(InvalidParameterError, match="win/draw/loss"):
        outcome_rule(ipd, ipd_params)
