"""The small LeMOL run the tests share, as a config and as ``mopa lemol`` flags."""

from mopa.algos.lemol import LeMOLConfig

SMALL = LeMOLConfig(
    discrete_actions=True,
    num_episodes=40,
    batch_size=16,
    polyak=0.01,
    num_units=32,
    agent_update_freq=2,
    omlr=1e-2,
    lstm_hidden_dim=32,
    chunk_length=50,
    num_traj_to_train=4,
    traj_per_iter=2,
    om_training_iters=5,
    n_opp_cycles=4,
    num_seeds=2,
)
"""LeMOL (adversary) against MADDPG opponents on push with one-hot moves: 4
cycles of 2 play-outs of 40 episodes (500 updates each), then 5 passes of
20 chunks of 50 steps. Run once per session, through the CLI
(``conftest.small_run``)."""

SMALL_FLAGS = [
    "--discrete_actions", "--num_episodes", "40", "--batch_size", "16",
    "--polyak", "0.01", "--num_units", "32", "--agent_update_freq", "2",
    "--omlr", "1e-2", "--lstm_hidden_dim", "32", "--chunk_length", "50",
    "--num_traj_to_train", "4", "--traj_per_iter", "2", "--om_training_iters", "5",
    "--n_opp_cycles", "4", "--num_seeds", "2",
]  # fmt: skip
"""``mopa lemol`` flags for :data:`SMALL`."""
