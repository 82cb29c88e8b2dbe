"""The team that plans against a population model of its opponent
(:class:`~mopa.planning.PopulationPredator`) and the pursuit game's scripted prey
from outside a trained family: the belief and the online correction the player
carries through a match equal the ones recomputed from the recorded moves
(:func:`~mopa.planning.match_beliefs`, :func:`~mopa.planning.match_residuals`);
the planning prior reaches the planner; the evader and the wanderer move as their
rules say."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.pursuit import PREY
from mopa.errors import InvalidParameterError
from mopa.opponent.bc import BCConfig, init_bc_params
from mopa.opponent.online import OnlineResidualConfig, residual_weight
from mopa.opponent.population import PopulationConfig
from mopa.planning import (
    EvaderPrey,
    IntentConditionedModel,
    IntentModelParams,
    LookaheadParams,
    OnlineResidualModel,
    OnlineResidualParams,
    PolicyOpponentModel,
    PopulationCarry,
    PopulationModelParams,
    PopulationOpponentModel,
    PopulationPredator,
    WandererPrey,
    match_beliefs,
    match_residuals,
)
from mopa.planning.pursuit_planners import pursuit_lookahead
from mopa.players import PolicyPlayer, initial_player_carry
from mopa.policy import PolicySpec
from mopa.policy import init_params as init_policy


def _state_with(env, params, prey, predators):
    _, state = env.reset(jax.random.key(0), params)
    P = env.num_predators
    pos = state.pos.at[P].set(jnp.asarray(prey)).at[:P].set(jnp.asarray(predators))
    return state.replace(pos=pos, vel=jnp.zeros_like(state.vel))


def test_the_evader_runs_from_the_nearest_predator_and_turns_at_the_wall():
    env, params = make("tag_intent", predator_intent_obs=True)
    evader = EvaderPrey(env)
    far = [[0.0, -0.9], [0.0, 0.9], [-0.9, -0.9]]

    model = evader.opponent_model()

    def act(prey, predators):
        state = _state_with(env, params, prey, predators)
        every = env.observe(state, params)
        obs = every[1]
        actions, _ = evader.act({}, jax.random.key(0), state, obs, obs[:, :0], None)
        # As a planner's model, read from the prey's observation: the same move.
        logits = model.logits((), model.sample_latent((), jax.random.key(1)), every)
        assert logits.shape == (1, 5)
        assert int(jnp.argmax(logits[0])) == int(actions[0])
        assert np.sum(np.isfinite(np.asarray(logits))) == 1
        return int(actions[0])

    # The nearest predator is 0.2 to the prey's left: push +x (action 2).
    assert act([0.0, 0.0], [[-0.2, 0.0], *far[1:]]) == 2
    # ... 0.2 above it: push -y (action 3).
    assert act([0.0, 0.0], [[0.0, 0.2], *far[1:]]) == 3
    # Past the wall at x = 0.8 with the predator to its left: away (+1) plus twice
    # inward (-2) on x gives -1, so it turns back (action 1).
    assert act([0.8, 0.0], [[0.6, 0.0], *far[1:]]) == 1


def test_the_wanderer_keeps_its_move_or_draws_a_new_one():
    env, params = make("tag_intent", predator_intent_obs=True)
    _, state = env.reset(jax.random.key(0), params)
    obs = env.observe(state, params)[1]
    wanderer = WandererPrey(env, persistence=0.8)
    carry = initial_player_carry(wanderer).at[0, 0].set(3.0)  # last move: 3
    act = jax.jit(
        jax.vmap(lambda key, reset: wanderer.act({}, key, state, obs, carry, reset))
    )
    keys = jax.random.split(jax.random.key(1), 4000)
    going, carried = act(keys, jnp.zeros((4000, 1), bool))
    going = np.asarray(going[:, 0])
    # It carries the move it made.
    np.testing.assert_array_equal(np.asarray(carried[:, 0, 0]), going)
    # Kept with probability 0.8, else one of the 5 moves uniformly (3 included):
    # 3 with probability 0.8 + 0.2 / 5 = 0.84, each other move 0.04.
    assert np.mean(going == 3) == pytest.approx(0.84, abs=0.02)
    for move in (0, 1, 2, 4):
        assert np.mean(going == move) == pytest.approx(0.04, abs=0.012)
    # At an episode's first step it always draws: uniform over the 5 moves.
    fresh, _ = act(keys, jnp.ones((4000, 1), bool))
    counts = np.bincount(np.asarray(fresh[:, 0]), minlength=5) / 4000
    np.testing.assert_allclose(counts, 0.2, atol=0.025)
    with pytest.raises(InvalidParameterError, match="persistence"):
        WandererPrey(env, persistence=1.0)


def _random_population_predator(
    carry_across_episodes=True, horizon=1, online=False, threats=False, **fallback
):
    env, params = make("tag_intent", predator_intent_obs=True)
    K, M = env.num_intents, 3
    config = PopulationConfig(
        clone=BCConfig(num_actions=5, hidden=(8,)), num_intents=K, drop_obs_tail=K
    )
    width = env.prey_obs_size - K
    clones = jax.tree.map(
        lambda *xs: jnp.stack(xs),
        *(
            init_bc_params(config.clone, jax.random.key(10 + m), width, K)
            for m in range(M)
        ),
    )
    spec = PolicySpec(
        kind="actor",
        num_agents=env.num_predators,
        obs_size=env.predator_obs_size,
        num_actions=5,
        hidden=(8,),
    )
    prey_spec = dataclasses.replace(spec, num_agents=1, obs_size=env.prey_obs_size)
    flat_prey = IntentConditionedModel(
        PolicyOpponentModel(prey_spec, team=PREY, greedy=True), K
    )
    plain = pursuit_lookahead(
        env,
        spec,
        flat_prey,
        num_rollouts=1,
        horizon=horizon,
        gamma=0.95,
        distance_weight=1.0,
    )
    prey = init_policy(prey_spec, jax.random.key(2))
    extra = {}
    if fallback:  # the flat model of a random prey for "none fits"
        extra = dict(
            none_fits=jnp.zeros(()),
            fallback_params=IntentModelParams(
                policy_params=prey, belief=jnp.full((K,), 1.0 / K)
            ),
        )
    fallback_model = plain.opponent_model if fallback or online else None
    if online:  # the flat model corrected online
        residual = OnlineResidualConfig(
            num_actions=5,
            obs_size=env.prey_obs_size,
            drop_obs_tail=K,
            capacity=6,
            features_fn=env.prey_threat_features if threats else None,
            reweigh_base=threats,
        )
        fallback_model = OnlineResidualModel(fallback_model, residual, team=PREY)
        extra = dict(
            none_fits=jnp.zeros(()),
            fallback_params=OnlineResidualParams(
                base_params=IntentModelParams(
                    policy_params=prey, belief=jnp.full((K,), 1.0 / K)
                ),
                weights=jnp.zeros((residual.num_features, 5)),
                residual_weight=jnp.float32(0.5),
            ),
        )
    planner = dataclasses.replace(
        plain,
        opponent_model=PopulationOpponentModel(
            config, team=PREY, fallback=fallback_model
        ),
    )
    player = PopulationPredator(
        env=env,
        population=config,
        num_members=M,
        planner=planner,
        carry_across_episodes=carry_across_episodes,
        **fallback,
    )
    player_params = LookaheadParams(
        env_params=params,
        own_params=init_policy(spec, jax.random.key(1)),
        opponent_params=PopulationModelParams(
            clone_params=clones, belief=jnp.full((K, M), 1.0 / (K * M)), **extra
        ),
    )
    return env, params, player, player_params, config, clones, prey_spec, prey


def _play_match(player, player_params, env, params, prey_spec, prey, T):
    """Two episodes of ``T`` steps against a random prey; per step the player's
    carry, and the prey's observation, move and step index."""
    prey_player = PolicyPlayer(prey_spec, greedy=False)
    act = jax.jit(player.act)
    prey_act = jax.jit(prey_player.act)
    step = jax.jit(env.step)
    carry = initial_player_carry(player)
    carries, obs_log, action_log, step_log = [], [], [], []
    key = jax.random.key(3)
    for _ in range(2):  # two episodes
        key, key_reset = jax.random.split(key)
        obs, state = env.reset(key_reset, params)
        for t in range(T):
            key, key_pred, key_prey, key_env = jax.random.split(key, 4)
            first = jnp.full((3,), t == 0)
            actions, carry = act(player_params, key_pred, state, obs[0], carry, first)
            prey_actions, _ = prey_act(
                prey, key_prey, state, obs[1], obs[1][:, :0], first[:1]
            )
            carries.append(player.unpack(carry[0]))
            obs_log.append(obs[1])
            action_log.append(prey_actions)
            step_log.append(t)
            obs, state, *_ = step(key_env, state, (actions, prey_actions), params)
    return carries, obs_log, action_log, step_log


@pytest.mark.slow
@pytest.mark.parametrize("threats", [False, True])
def test_the_online_correction_equals_the_offline_one_across_a_match(threats):
    """The fallback's correction the player carries at every step of two episodes
    equals :func:`match_residuals` on the recorded prey moves (carried into the
    second episode), and is what the planner is handed; on the raw observation or
    on the game's threat features and the reweighed base."""

    env, params, player, player_params, *_, prey_spec, prey = (
        _random_population_predator(online=True, threats=threats)
    )
    T = 4
    params = params.replace(max_steps=T)
    carries, obs_log, action_log, step_log = _play_match(
        player, player_params, env, params, prey_spec, prey, T
    )
    residual = player.online
    assert residual is not None
    offline = match_residuals(
        residual,
        player_params.opponent_params.fallback_params.base_params,
        jnp.stack(obs_log),
        jnp.stack(action_log),
        jnp.asarray(step_log),
        T,
    )
    online = jax.tree.map(lambda *xs: jnp.stack(xs), *(c.online for c in carries))
    # offline: before each step's move; online: after the previous step's move,
    # the state the player acts on at that step: the same
    np.testing.assert_array_equal(online.count, offline.count)
    np.testing.assert_allclose(online.weights, offline.weights, atol=1e-4)
    np.testing.assert_allclose(
        residual_weight(online), residual_weight(offline), atol=1e-5
    )
    # 3 moves seen in each episode (an episode's last move is never seen), the
    # second episode's added to the first's
    assert int(carries[-1].online.count) == 2 * (T - 1)
    np.testing.assert_array_equal(offline.count, [0, 1, 2, 3, 3, 4, 5, 6])
    assert np.abs(np.asarray(carries[-1].online.weights)).max() > 0
    width = env.prey_obs_size - env.num_intents + 1 + (11 + 5 if threats else 0)
    assert online.weights.shape[1:] == (width, 5)


@pytest.mark.parametrize("carry_across_episodes", [True, False])
def test_the_online_belief_equals_the_offline_one_across_a_match(
    carry_across_episodes,
):
    """Two episodes of 4 steps: the belief the player carries at every step
    equals :func:`match_beliefs` on the recorded prey moves (with the carry off,
    the second episode starts afresh)."""
    env, params, player, player_params, config, clones, prey_spec, prey = (
        _random_population_predator(carry_across_episodes)
    )
    T = 4
    params = params.replace(max_steps=T)
    carries, obs_log, action_log, step_log = _play_match(
        player, player_params, env, params, prey_spec, prey, T
    )
    beliefs = [c.belief for c in carries]
    assert isinstance(carries[-1], PopulationCarry)
    offline = match_beliefs(
        config,
        clones,
        jnp.stack(obs_log),
        jnp.stack(action_log),
        jnp.asarray(step_log),
        T,
        player.epsilon,
        player.fallback_prior,
    )
    online = jax.tree.map(lambda *xs: jnp.stack(xs), *beliefs)
    first_episode = slice(0, T)
    np.testing.assert_allclose(
        online.log_posterior[first_episode],
        offline.log_posterior[first_episode],
        atol=1e-5,
    )
    # The belief moved off the prior, so the comparison is not of two priors.
    assert not np.allclose(online.log_posterior[T - 1], online.log_posterior[0])
    if carry_across_episodes:
        np.testing.assert_allclose(
            online.log_posterior, offline.log_posterior, atol=1e-5
        )
        np.testing.assert_allclose(
            online.log_odds_none_fits, offline.log_odds_none_fits, atol=1e-5
        )
        # The second episode starts with the first's member marginal.
        carried = jax.nn.logsumexp(online.log_posterior[T], 0)
        before = jax.nn.logsumexp(online.log_posterior[T - 1], 0)
        np.testing.assert_allclose(carried, before, atol=1e-5)
    else:
        np.testing.assert_allclose(
            online.log_posterior[T], online.log_posterior[0], atol=1e-6
        )


def test_the_planning_prior_reaches_the_planner():
    """A planner whose prior says "none fits" with near certainty imagines only the
    fallback: its moves do not depend on the clones. With the belief's own small
    prior the clones play, and other clones give other moves."""

    def moves(planning_prior, clone_scale):
        env, params, player, player_params, *_ = _random_population_predator(
            horizon=4, fallback_prior=0.01, planning_prior=planning_prior
        )
        opponent = player_params.opponent_params
        player_params = player_params.replace(
            opponent_params=opponent.replace(
                clone_params=jax.tree.map(
                    lambda x: x * clone_scale, opponent.clone_params
                )
            )
        )
        act = jax.jit(player.act)
        first = jnp.ones((env.num_predators,), bool)
        carry = initial_player_carry(player)
        out = []
        for seed in range(12):
            obs, state = env.reset(jax.random.key(100 + seed), params)
            actions, _ = act(
                player_params, jax.random.key(seed), state, obs[0], carry, first
            )
            out.append(np.asarray(actions))
        return np.stack(out)

    sure = 1 - 1e-6
    np.testing.assert_array_equal(moves(sure, 1.0), moves(sure, 30.0))
    assert not np.array_equal(moves(None, 1.0), moves(None, 30.0))
    with pytest.raises(InvalidParameterError, match="planning_prior must be in"):
        _random_population_predator(planning_prior=1.5)


def test_population_planner_params_start_uniform_for_every_seed():
    """Every seed's copy of the game and the clones, a uniform (intent, member)
    belief, and with a fallback a none-fits probability of 0."""
    from mopa.planning import population_planner_params

    own = {"w": jnp.arange(6.0).reshape(3, 2)}  # 3 seeds
    clones = {"w": jnp.ones((4, 5))}  # 4 members
    env_params = {"speed": jnp.float32(0.5)}
    plain = population_planner_params(env_params, own, clones, 2)
    assert plain.own_params is own
    np.testing.assert_array_equal(plain.env_params["speed"], [0.5] * 3)
    assert plain.opponent_params.clone_params["w"].shape == (3, 4, 5)
    np.testing.assert_array_equal(
        plain.opponent_params.belief, np.full((3, 2, 4), 1 / 8)
    )
    assert plain.opponent_params.none_fits == ()
    fallback = {"v": jnp.zeros((3, 7))}
    with_fallback = population_planner_params(
        env_params, own, clones, 2, fallback_params=fallback
    )
    np.testing.assert_array_equal(with_fallback.opponent_params.none_fits, [0.0] * 3)
    assert with_fallback.opponent_params.fallback_params is fallback


def test_match_summary_reads_the_belief_through_every_match():
    """Two matches of three two-step episodes: the belief before any move (every
    member alike, intent 0 the argmax), so the largest member probability is 1/M,
    the none-fits probability the prior's and the intent right where it is 0; the
    pooled summary of one opponent is its own."""
    from mopa.opponent.population import init_population_belief
    from mopa.planning import Matches, match_summary, pooled_match_summary

    C, M, T, K, members = 2, 3, 2, 2, 4
    start = init_population_belief(K, members, fallback_prior=0.2)
    beliefs = jax.tree.map(lambda x: jnp.broadcast_to(x, (C, M * T, *x.shape)), start)
    intents = np.array([[0, 1, 0, 0, 1, 1], [1, 1, 1, 1, 0, 0]])
    captures = np.array([[1.0, 2.0, 3.0], [0.0, 2.0, 2.0]])
    summary = match_summary(Matches(captures, beliefs, intents, None))
    assert summary["num_matches"] == C
    assert [e["mean"] for e in summary["captures_by_episode"]] == [0.5, 2.0, 2.5]
    np.testing.assert_allclose(summary["top_member_by_episode_end"], [0.25] * M)
    np.testing.assert_allclose(
        summary["none_fits_by_episode_end"], [0.2] * M, rtol=1e-5
    )
    assert summary["none_fits_flagged_share"] == 0.0
    # step 0 of each episode: intents 0, 0, 1, 1 / 1, 1, 0, ...: right where 0
    right = (intents == 0).reshape(C, M, T).mean((0, 1))
    np.testing.assert_allclose(summary["intent_accuracy_by_step"], right)
    assert "residual_weight_by_episode_end" not in summary
    pooled = pooled_match_summary([summary])
    assert {k: v for k, v in pooled.items() if k != "raw"} == {
        k: v for k, v in summary.items() if k != "raw"
    }
