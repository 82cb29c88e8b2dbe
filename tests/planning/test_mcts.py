"""The Gumbel MuZero tree search on ``tag_intent``: with one visit per joint
action its Q-values are the exhaustive joint lookahead's scores, it finds a
certain capture among the 125 joint actions, the particle posterior is Bayes' rule
on the imagined moves, it plays whole episodes under jit and vmap inside the Exp 6
intent predator; budget accounting; config and player errors."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.pursuit import PREDATOR, PREY
from mopa.errors import InvalidParameterError
from mopa.eval.evaluate import play_episodes
from mopa.planning import (
    FEEDS,
    FunctionOpponentModel,
    IntentConditionedModel,
    IntentModelParams,
    IntentPredator,
    IntentPredatorParams,
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    MCTSConfig,
    MCTSPlayer,
    PolicyOpponentModel,
    joint_actions,
    simulator_steps_per_decision,
)
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, init_params


def spec(kind, num_agents, obs_size):
    return PolicySpec(
        kind=kind,
        num_agents=num_agents,
        obs_size=obs_size,
        num_actions=5,
        hidden=(16,),
    )


def first_step(num_agents):
    """``(carry [A, 0], reset [A])`` of a feed-forward team's first step."""
    return jnp.zeros((num_agents, 0)), jnp.ones((num_agents,), bool)


def capture_state(env, env_params):
    """Predator 0 at distance 0.14 left of a still prey (contact below 0.125),
    its teammates and the obstacles far away."""
    _, state = env.reset(jax.random.key(0), env_params)
    return state.replace(
        pos=jnp.array([[-0.14, 0.0], [-0.8, -0.8], [0.8, -0.8], [0.0, 0.0]]),
        vel=jnp.zeros_like(state.vel),
        obstacle_pos=jnp.array([[5.0, 5.0], [-5.0, 5.0]]),
        step=jnp.zeros((), jnp.int32),
    )


def table_prey(num_intents):
    """A prey that plays ``softmax(table[k])`` under intent ``k ~ belief``
    (``params = {"table": [K, 5], "belief": [K]}``), whatever it sees."""
    return FunctionOpponentModel(
        lambda params, latent, obs: params["table"][latent][None],
        num_opponents=1,
        num_actions=5,
        latent_fn=lambda params, key: jax.random.categorical(
            key, jnp.log(params["belief"])
        ),
    )


@pytest.fixture(scope="module")
def searched():
    """One jitted search on ``tag_intent`` (125 simulations over the 125 joint
    actions, all considered, a uniform prior, no Gumbel noise: each root action is
    visited once) and the matching joint lookahead (one step then ``L`` greedy)."""
    env, env_params = make("tag_intent", predator_intent_obs=True)
    predator = spec("q", 3, env.predator_obs_size)
    prey = table_prey(env.num_intents)
    config = MCTSConfig(
        num_simulations=125,
        num_particles=4,
        leaf_horizon=1,
        gamma=0.9,
        leaf_weight=0.5,
        max_num_considered_actions=125,
        gumbel_scale=0.0,
        prior="uniform",
    )
    search = MCTSPlayer(env, "predator", config, prey, predator)
    lookahead = LookaheadPlayer(
        env,
        PREDATOR,
        LookaheadConfig(
            num_rollouts=1, horizon=2, gamma=0.9, leaf_weight=0.5, mode="joint"
        ),
        prey,
        predator,
    )
    own = init_params(predator, jax.random.key(1))
    plan_search, plan_lookahead = jax.jit(search.plan), jax.jit(lookahead.plan)

    def plan(state, table, belief, key=None, lookahead=False):
        key = jax.random.key(5) if key is None else key
        prey_params = {
            "table": jnp.asarray(table, jnp.float32),
            "belief": jnp.asarray(belief, jnp.float32),
        }
        params = LookaheadParams(env_params, own, prey_params)
        obs = env.observe(state, env_params)[PREDATOR]
        planner = plan_lookahead if lookahead else plan_search
        return planner(params, key, state, obs, *first_step(3))

    return env, env_params, plan


STILL = np.where(np.arange(5) == 0, 0.0, -np.inf)[None].repeat(4, 0)  # [K, 5]
FLAT = np.full((4,), 0.25)


@pytest.mark.slow
def test_first_visits_equal_the_lookahead_scores(searched):
    """With a still prey nothing is random: each root action's Q-value ``r_0 +
    gamma v`` (``v``: the ``L``-step greedy rollout and the leaf) is the joint
    lookahead's score at horizon ``L + 1``, and the best is taken."""
    env, env_params, plan = searched
    _, state = env.reset(jax.random.key(3), env_params)
    got = plan(state, STILL, FLAT)
    want = plan(state, STILL, FLAT, lookahead=True)
    np.testing.assert_array_equal(got.visit_counts, np.ones(125))
    np.testing.assert_allclose(got.q_values, want.scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got.actions, want.actions)
    top = np.sort(np.asarray(want.scores))
    assert top[-1] - top[-2] > 1e-5 and top[-1] - top[0] > 0.01  # a clear best
    np.testing.assert_allclose(np.asarray(got.action_weights).sum(), 1.0, rtol=1e-5)


def test_search_finds_a_certain_capture(searched):
    env, env_params, plan = searched
    got = plan(capture_state(env, env_params), STILL, FLAT)
    # +x at the root gives predator 0 the velocity accel x dt = 2 x 0.1 = 0.2, so
    # the rollout's step moves it by 0.02 to distance 0.12 < 0.125: one capture,
    # 10 to every predator, discounted once: 9 (plus the small leaf value).
    assert got.actions[0] == 2
    first_is_right = joint_actions(3, 5)[:, 0] == 2
    q = np.asarray(got.q_values)
    assert q[first_is_right].min() > 8.0 and np.abs(q[~first_is_right]).max() < 1.0


def test_posterior_of_the_particles_is_bayes_on_the_imagined_moves(searched):
    """Each expanded root child's particle weights are Bayes' rule on one of the
    prey's five moves, ``w_p = pi(o | z_p) / sum_q pi(o | z_q)``; a sure belief
    (four copies of one intent) keeps them equal at every node."""
    env, env_params, plan = searched
    _, state = env.reset(jax.random.key(3), env_params)
    table = jax.random.normal(jax.random.key(6), (4, 5)) * 2.0
    key = jax.random.key(7)
    got = plan(state, table, FLAT, key)
    # The particles, by the key schedule of the module docstring.
    key_latent = jax.random.split(key, 3)[0]
    latents = np.asarray(
        jax.vmap(lambda k: jax.random.categorical(k, jnp.log(FLAT)))(
            jax.random.split(key_latent, 4)
        )
    )
    assert len(np.unique(latents)) > 1
    log_probs = jax.nn.log_softmax(table[latents], -1)  # [P, 5]
    posteriors = np.asarray(jax.nn.softmax(log_probs, 0)).T  # [5 moves, P]
    nodes = np.exp(np.asarray(got.tree.embeddings.log_weights[0]))  # [nodes, P]
    children = np.asarray(got.tree.children_index[0, 0])
    assert (children > 0).all()  # every root action expanded
    gaps = np.abs(posteriors[None] - nodes[children][:, None]).max(-1)  # [125, 5]
    assert gaps.min(-1).max() < 1e-5
    # Common random numbers: every root child samples the prey's move with the
    # same key from the same mixture (this prey ignores the state), so all
    # imagined the same move, which moved the posterior away from uniform.
    assert len(np.unique(gaps.argmin(-1))) == 1
    assert np.abs(nodes[children] - 0.25).max() > 0.05

    sure = plan(state, table, jnp.array([0.0, 0.0, 1.0, 0.0]), key)
    visited = np.asarray(sure.tree.node_visits[0]) > 0
    weights = np.exp(np.asarray(sure.tree.embeddings.log_weights[0]))
    np.testing.assert_allclose(weights[visited], 0.25, rtol=1e-5)


@pytest.fixture(scope="module")
def intent_setup():
    env, env_params = make("tag_intent", predator_intent_obs=True)
    K = env.num_intents
    predator = spec("actor", env.num_predators, env.predator_obs_size)
    prey = spec("actor", 1, env.prey_obs_size)
    model = IntentConditionedModel(PolicyOpponentModel(prey, PREY), K)
    weights = (
        init_params(predator, jax.random.key(1)),
        init_params(prey, jax.random.key(2)),
    )
    return env, env_params, predator, prey, model, weights


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_simulations", 0),
        ("num_particles", 0),
        ("leaf_horizon", -1),
        ("leaf_horizon", 1.5),
        ("max_depth", 0),
        ("max_num_considered_actions", 0),
        ("gamma", 1.5),
        ("leaf_weight", float("nan")),
        ("gumbel_scale", -1.0),
        ("prior", "value"),
        ("prior_temperature", 0.0),
    ],
)
def test_config_errors_name_the_field(field, value):
    with pytest.raises(InvalidParameterError, match=field):
        MCTSConfig(**{field: value})


def test_budget_matches_the_joint_lookahead(intent_setup):
    env, _, predator, _, model, _ = intent_setup
    lookahead = LookaheadPlayer(
        env,
        PREDATOR,
        LookaheadConfig(num_rollouts=8, horizon=5, mode="joint", leaf_weight=0.0),
        model,
        predator,
    )
    budget = simulator_steps_per_decision(lookahead)
    assert budget == 125 * 8 * 5 == 5000
    config = MCTSConfig.for_budget(
        budget, num_particles=8, leaf_horizon=4, leaf_weight=0.0
    )
    # One expansion and 8 rollouts of 4 steps: 1 + 32 = 33 steps per simulation,
    # 5000 // 33 = 151 simulations, 151 x 33 = 4983 steps.
    assert config.num_simulations == 151 and config.simulator_steps == 4983
    player = MCTSPlayer(env, PREDATOR, config, model, predator)
    assert simulator_steps_per_decision(player) == 4983
    assert player.simulator_steps_per_decision() == 4983
    assert (
        MCTSConfig.for_budget(33, num_particles=1, leaf_horizon=0).num_simulations == 33
    )
    with pytest.raises(InvalidParameterError, match="budget"):
        MCTSConfig.for_budget(32, num_particles=8, leaf_horizon=4)
    with pytest.raises(InvalidParameterError, match="num_simulations"):
        MCTSConfig.for_budget(5000, num_simulations=3)
    with pytest.raises(InvalidParameterError, match="player"):
        simulator_steps_per_decision(PolicyPlayer(predator))


def test_player_errors_name_what_does_not_fit(intent_setup):
    env, _, predator, _, model, _ = intent_setup
    config = MCTSConfig()
    with pytest.raises(InvalidParameterError, match="own_spec: obs_size"):
        MCTSPlayer(env, PREDATOR, config, model, spec("actor", 3, 5))
    with pytest.raises(InvalidParameterError, match="team: unknown team 'wolf'"):
        MCTSPlayer(env, "wolf", config, model, predator)
    with pytest.raises(InvalidParameterError, match="leaf_fn"):
        MCTSPlayer(env, PREDATOR, config, model, predator)  # an actor, no Q leaf
    ok = MCTSPlayer(
        env, "predator", dataclasses.replace(config, leaf_weight=0.0), model, predator
    )
    assert ok.team == PREDATOR and ok.num_joint_actions == 125
    assert hash(ok) == hash(
        MCTSPlayer(
            env, PREDATOR, dataclasses.replace(config, leaf_weight=0.0), model, predator
        )
    )


def searching_predator(intent_setup):
    """A small tree-search intent predator and its params."""
    env, env_params, predator, prey, model, weights = intent_setup
    K = env.num_intents
    config = MCTSConfig(
        num_simulations=8,
        num_particles=2,
        leaf_horizon=1,
        leaf_weight=0.0,
        max_num_considered_actions=4,
    )
    planner = MCTSPlayer(
        env,
        PREDATOR,
        config,
        model,
        predator,
        reward_fn=lambda state, rewards, info: info["captures"].astype(jnp.float32),
    )
    player = IntentPredator(env, predator, sources=("flat",), planner=planner)
    player_params = IntentPredatorParams(
        env_params=env_params,
        policy_params=weights[0],
        classifier_params=(),
        classifier_temperature=jnp.float32(1.0),
        jepa_params=(),
        jepa_temperature=jnp.float32(1.0),
        bayes_params=(),
        planner_params=LookaheadParams(
            env_params,
            weights[0],
            IntentModelParams(weights[1], jnp.full((K,), 1.0 / K)),
        ),
        source=jnp.int32(0),
        feed=jnp.int32(FEEDS.index("belief")),
    )
    return player, player_params


@pytest.mark.slow
def test_intent_predator_plays_episodes_with_the_search(intent_setup):
    """The search as the Exp 6 planner: whole episodes under jit, vmapped over
    games (the tournament's layout); the same key replays the same episode."""
    env, env_params, predator, prey, model, weights = intent_setup
    player, player_params = searching_predator(intent_setup)
    keys = jax.random.split(jax.random.key(7), 2)
    horizon = 6
    totals = play_episodes(
        env,
        env_params,
        (player, PolicyPlayer(prey)),
        (player_params, weights[1]),
        jnp.stack([keys[0], keys[1], keys[0]]),
        horizon,
    )
    returns = np.asarray(totals.returns)
    captures = np.asarray(totals.sums["captures"])
    assert returns.shape == (3, 2) and np.isfinite(returns).all()
    assert (captures >= 0).all() and np.allclose(captures, np.round(captures))
    # Games of the batch are independent: game 2 replays game 0's key.
    np.testing.assert_array_equal(returns[2], returns[0])
    np.testing.assert_array_equal(captures[2], captures[0])


@pytest.mark.slow
def test_a_spread_tournament_plays_the_search_with_one_devices_numbers(
    intent_setup,
):
    """A tournament long enough to split its episodes over the session's 3 CPU
    devices runs each device's share under ``shard_map`` (the search maps over its
    games one after another, which sharding annotations alone do not split, so
    every device would search every game): the episodes are those one device
    plays."""
    from mopa.eval.tournament import (
        MIN_SPREAD_EPISODES,
        _episode_mesh,
        broadcast_seeds,
        cell_keys,
        play_tournament,
    )

    env, env_params, predator, prey, model, weights = intent_setup
    player, player_params = searching_predator(intent_setup)
    num_episodes = MIN_SPREAD_EPISODES + 1  # 33 = 3 x 11
    assert _episode_mesh(num_episodes).size == 3
    horizon = 4
    played = play_tournament(
        env,
        env_params,
        [("search", player, broadcast_seeds(player_params, 1))],
        [("prey", PolicyPlayer(prey), broadcast_seeds(weights[1], 1))],
        jax.random.key(5),
        num_episodes=num_episodes,
        horizon=horizon,
    )
    alone = play_episodes(
        env,
        env_params,
        (player, PolicyPlayer(prey)),
        (player_params, weights[1]),
        cell_keys(jax.random.key(5), "search", "prey", 1, num_episodes)[0],
        horizon,
    )
    np.testing.assert_array_equal(played.returns[0, 0, 0], np.asarray(alone.returns))


@pytest.mark.slow
def test_a_one_device_tournament_plays_the_search_beside_the_other_rows(
    intent_setup, monkeypatch
):
    """On one device the search's row group is a program of its own, run beside
    the other rows' program; every cell's episodes are those of the tournament
    played as one program, in the same places."""
    from mopa.eval import tournament
    from mopa.eval.tournament import (
        MIN_SPREAD_EPISODES,
        TournamentEntry,
        broadcast_seeds,
    )

    env, env_params, predator, prey, model, weights = intent_setup
    player, player_params = searching_predator(intent_setup)
    seeds = lambda tree: broadcast_seeds(tree, 1)  # noqa: E731
    rows = [
        ("policy", PolicyPlayer(predator), seeds(weights[0])),
        ("search", player, seeds(player_params)),
        ("random", PolicyPlayer(predator, greedy=False), seeds(weights[0])),
    ]
    columns = [
        ("prey", PolicyPlayer(prey), seeds(weights[1])),
        ("prey_sampled", PolicyPlayer(prey, greedy=False), seeds(weights[1])),
    ]
    kwargs = dict(num_episodes=3, horizon=4)
    assert kwargs["num_episodes"] < MIN_SPREAD_EPISODES
    groups_a = tournament._group([TournamentEntry(*row) for row in rows])
    groups_b = tournament._group([TournamentEntry(*column) for column in columns])
    assert [g.indices for g in groups_a] == [(0,), (1,), (2,)]
    assert tournament._programs(groups_a, groups_b, None) == [
        ((0, 2), (0, 1)),
        ((1,), (0, 1)),
    ]
    split = tournament.play_tournament(
        env, env_params, rows, columns, jax.random.key(3), **kwargs
    )
    monkeypatch.setattr(
        tournament,
        "_programs",
        lambda a, b, mesh: [(tuple(range(len(a))), tuple(range(len(b))))],
    )
    whole = tournament.play_tournament(
        env, env_params, rows, columns, jax.random.key(3), **kwargs
    )
    assert split.row_names == whole.row_names == ("policy", "search", "random")
    np.testing.assert_array_equal(split.returns, whole.returns)
    for name in whole.totals:
        np.testing.assert_array_equal(split.totals[name], whole.totals[name])
    # The rows are not all alike, so the comparison can tell places apart.
    assert not np.array_equal(whole.returns[0], whole.returns[1])


def test_programs_of_a_tournament_follow_the_players_that_play_in_turn():
    """Which blocks run as programs of their own: a group that plays its games in
    turn, with every group of the other side (a column group only with the plain
    row groups); one program when spread over devices or when no group does."""
    from mopa.eval.tournament import _Group, _programs
    from mopa.players import plays_games_in_turn

    @dataclasses.dataclass(frozen=True)
    class Stub:
        games_in_turn: bool

    def groups(*in_turn):
        return [_Group(Stub(t), (i,), None) for i, t in enumerate(in_turn)]

    assert plays_games_in_turn(Stub(True)) and not plays_games_in_turn(None)
    assert _programs(groups(False, False), groups(False), None) == [((0, 1), (0,))]
    assert _programs(groups(True, False), groups(False), "mesh") == [((0, 1), (0,))]
    assert _programs(groups(False, True), groups(False, True), None) == [
        ((0,), (0,)),
        ((1,), (0, 1)),
        ((0,), (1,)),
    ]
    assert _programs(groups(True), groups(True, False), None) == [((0,), (0, 1))]
    assert _programs(groups(False), groups(True), None) == [((0,), (0,))]
