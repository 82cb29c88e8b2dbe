"""The team that keeps a belief over its opponent's hidden strategy
(:class:`~mopa.planning.IntentPredator`), on two games that name their opponent's
private fields: the pursuit game's prey intent and the battalion's Red strategy.
The belief carried step by step equals the one computed offline on the recorded
path; the feed hands the policy exactly the true intent, the belief or the
committed argmax; the module's example runs as written; a game that lacks what a
belief source reads is refused at construction."""

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.pursuit import INTENT_CORNERS
from mopa.errors import InvalidParameterError
from mopa.eval.evaluate import record_episode
from mopa.opponent.beliefs import prefix_beliefs
from mopa.opponent.encoders import ClassifierConfig, init_params
from mopa.opponent.soft_belief_game import soft_belief_game
from mopa.planning import (
    FEEDS,
    IntentPredator,
    IntentPredatorParams,
    PreyModel,
    classifier_logits_fn,
    intent_player,
)
from mopa.players import PolicyPlayer, initial_player_carry
from mopa.policy import PolicySpec, make_act_fn
from mopa.policy import init_params as init_policy


def _player(env, spec, classifier, feed, env_params, recent=0):
    """A classifier-belief player of ``env`` with random weights, and its params
    (one game: no seed axis)."""
    player = IntentPredator(
        env,
        spec,
        sources=("classifier",),
        classifier=classifier,
        commit_step=8,
        recent=recent,
    )
    params = IntentPredatorParams(
        env_params=env_params,
        policy_params=init_policy(spec, jax.random.key(1)),
        classifier_params=init_params(classifier, jax.random.key(2)),
        classifier_temperature=jnp.float32(0.5),
        jepa_params=(),
        jepa_temperature=jnp.float32(1.0),
        bayes_params=(),
        planner_params=(),
        source=jnp.int32(0),
        feed=jnp.int32(FEEDS.index(feed)),
    )
    return player, params


def pursuit_player(feed: str):
    env, params = make("tag_intent", predator_intent_obs=True)
    # The occupancy (8 x 8) and the last 8 positions, as the experiment reads.
    classifier = ClassifierConfig(input_size=80, num_classes=len(INTENT_CORNERS))
    spec = PolicySpec(
        kind="actor",
        num_agents=env.num_predators,
        obs_size=env.predator_obs_size,
        num_actions=5,
        hidden=(16,),
    )
    player, player_params = _player(env, spec, classifier, feed, params, recent=8)
    prey = PolicyPlayer(
        PolicySpec(kind="random", num_agents=1, obs_size=env.prey_obs_size,
                   num_actions=5)
    )  # fmt: skip
    return env, params, player, player_params, classifier, prey


def battalion_player(feed: str):
    env, params = soft_belief_game(
        make("battalion_vs_red", red="mixed", discrete=True)[0]
    )
    K = env.num_intents
    classifier = ClassifierConfig(input_size=64, num_classes=K, hidden=(16,))
    spec = PolicySpec(
        kind="actor", num_agents=1, obs_size=17 + K, num_actions=18, hidden=(16,)
    )
    player, player_params = _player(env, spec, classifier, feed, params)
    return env, params, player, player_params, classifier


def test_the_module_example_runs_on_the_battalion():
    results = doctest.testmod(intent_player, optionflags=doctest.ELLIPSIS)
    assert results.attempted >= 15 and results.failed == 0


@pytest.mark.parametrize("game", ["pursuit", "battalion"])
def test_online_belief_equals_the_offline_prefix_beliefs(game):
    """The belief carried through an episode equals prefix_beliefs computed on
    the recorded opponent positions afterwards (two paths to one number), in the
    pursuit game (the prey's lead positions) and in the battalion (Red's path)."""
    if game == "pursuit":
        env, params, player, player_params, classifier, prey = pursuit_player("belief")
        players, all_params, recent = (player, prey), (player_params, {}), 8
    else:
        env, params, player, player_params, classifier = battalion_player("belief")
        players, all_params, recent = (player,), (player_params,), 0
    states, carries = record_episode(
        env, params, players, all_params, jax.random.key(3), 25
    )
    online = np.stack([np.asarray(player.unpack(c[0]).belief) for c in carries])
    positions = jax.vmap(lambda s: env.opponent_position(s, params))(states)
    if game == "pursuit":  # the prey's lead position: where its velocity takes it
        np.testing.assert_allclose(
            positions, states.pos[:, -1] + params.dt * states.vel[:, -1], atol=1e-6
        )
    else:  # Red's position scaled to [-1, 1]
        red = states.game
        width = params.game.map_width
        np.testing.assert_allclose(positions[:, 0], 2 * red.x[:, 1] / width - 1, 1e-5)
        assert float(jnp.abs(positions).max()) <= 1.0
    logits_fn = classifier_logits_fn(
        classifier, player_params.classifier_params, 8, recent=recent
    )
    K = env.num_intents
    offline = np.asarray(prefix_beliefs(logits_fn, positions, K, 0.5, 1))
    np.testing.assert_allclose(online, offline, atol=1e-5)
    np.testing.assert_allclose(online.sum(-1), 1.0, atol=1e-5)
    assert np.ptp(online[-1]) > 1e-3  # a real belief, not the flat one


def test_hard_inference_commits_at_the_commit_step():
    """The commit feed follows the running argmax up to commit_step positions,
    then keeps the argmax it had there."""
    env, params, player, player_params, _, prey = pursuit_player("commit")
    _, carries = record_episode(
        env, params, (player, prey), (player_params, {}), jax.random.key(4), 25
    )
    unpacked = [player.unpack(c[0]) for c in carries]
    argmax = np.array([int(np.argmax(c.belief)) for c in unpacked])
    committed = np.array([int(c.committed) for c in unpacked])
    np.testing.assert_array_equal(committed[:8], argmax[:8])
    np.testing.assert_array_equal(committed[8:], argmax[7])


def test_the_battalion_blue_acts_on_what_it_is_fed():
    """Blue's greedy policy acts on its observation with the belief slot set to
    the fed intent input: Red's true strategy (the game's ``true_intent``), the
    carried belief, or the strategy drawn at the episode's start (the feed is a
    number of the params: one compiled player for all three)."""
    env, params, player, player_params, _ = battalion_player("belief")
    K = env.num_intents
    act = jax.jit(player.act)
    policy = jax.jit(make_act_fn(player.spec), static_argnums=5)
    step = jax.jit(env.step)
    for feed in ("true", "belief", "random"):
        fed_params = player_params.replace(feed=jnp.int32(FEEDS.index(feed)))
        carry = initial_player_carry(player)
        obs, state = env.reset(jax.random.key(5), params)
        for t in range(3):
            first = jnp.full((1,), t == 0)
            actions, carry = act(
                fed_params, jax.random.key(t), state, obs[0], carry, first
            )
            held = player.unpack(carry[0])
            fed = {
                "true": jax.nn.one_hot(env.true_intent(state), K),
                "belief": held.belief,
                "random": jax.nn.one_hot(held.random_intent, K),
            }[feed]
            view = jnp.concatenate([obs[0][:, :-K], fed[None]], -1)
            expected, _ = policy(
                fed_params.policy_params,
                jax.random.key(0),
                view,
                jnp.zeros((1, 0)),
                jnp.zeros((1,), bool),
                True,
            )
            np.testing.assert_array_equal(actions, expected)
            obs, state, *_ = step(jax.random.key(10 + t), state, (actions,), params)


def test_the_battalion_names_red_strategy_as_the_hidden_intent():
    """``true_intent`` is the drawn Red type's index among the game's types, and
    the soft-belief game's slot is that strategy's soft belief."""
    from mopa.envs.scripted_red import RED_TYPE_INDEX, STRATEGIES

    env, params = soft_belief_game(
        make("battalion_vs_red", red="mixed", discrete=True)[0], 1.0, 1.0
    )
    assert env.num_intents == len(STRATEGIES) == 6
    seen = set()
    for seed in range(12):
        obs, state = env.reset(jax.random.key(seed), params)
        intent = int(env.true_intent(state))
        assert RED_TYPE_INDEX[STRATEGIES[intent]] == int(state.game.red_type)
        np.testing.assert_array_equal(obs[0][0, -6:], np.eye(6)[intent])
        seen.add(intent)
    assert len(seen) > 2


def test_a_game_without_what_a_source_reads_is_refused():
    """The battalion names no moves of Red's (Red is no team of it): the Bayes
    source, which reads them, is refused with the members it lacks; the
    unwrapped game has no belief slot at all."""
    env, _, _, _, _ = battalion_player("belief")
    K = env.num_intents
    spec = PolicySpec(kind="actor", num_agents=1, obs_size=17 + K, num_actions=18)
    with pytest.raises(InvalidParameterError, match="bayes source.*opponent_team"):
        IntentPredator(env, spec, sources=("bayes",), prey_model=PreyModel(spec))
    with pytest.raises(InvalidParameterError, match="jepa source.*intent_targets"):
        from mopa.opponent.encoders import JEPAConfig

        IntentPredator(env, spec, sources=("jepa",), jepa=JEPAConfig(input_size=64))
    with pytest.raises(InvalidParameterError, match="observes a belief"):
        IntentPredator(make("battalion_vs_red", red="mixed")[0], spec)
