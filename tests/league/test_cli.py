"""``mopa league`` subcommands that manage a league directory (registry, ratings,
pool, prune, export/import)."""

import argparse
import json

from mopa.cli import league
from mopa.league import CheckpointManifest, EloRatings, LeagueStore


def run(*argv):
    parser = argparse.ArgumentParser()
    league.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["league", *argv])
    return args.run(args)


def test_registry_ratings_prune_and_export(tmp_path, capsys):
    root = tmp_path / "league"
    ckpt = tmp_path / "a.msgpack"
    ckpt.write_bytes(b"x")
    assert run("registry", "--league", str(root), "register", "--echelon",
               "brigade", "--version", "v1", "--path", str(ckpt)) == 0  # fmt: skip
    run("registry", "--league", str(root), "list")
    assert f"brigade/v1  None  {ckpt.resolve()}" in capsys.readouterr().out
    with LeagueStore(root) as store:
        EloRatings(store).update("agent", "scripted_l1", [1.0, 1.0])
        old = tmp_path / "old.msgpack"
        old.write_bytes(b"x")
        CheckpointManifest(store).register(old, kind="periodic", step=1)
        CheckpointManifest(store).register(ckpt, kind="periodic", step=2)
    run("ratings", "--league", str(root))
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[-1] == "agent" and "2 games" in out[0]
    run("prune", "--league", str(root), "--keep", "0")
    # The registered checkpoint is referenced: only the other one goes.
    assert capsys.readouterr().out.strip() == f"deleted {old.resolve()}"
    assert ckpt.exists() and not old.exists()
    exported = tmp_path / "export.json"
    run("export", "--league", str(root), "--out", str(exported))
    data = json.loads(exported.read_text())
    assert data["elo"]["game_counts"]["agent"] == 2
    run("export", "--league", str(tmp_path / "copy"), "--import", str(exported))
    assert json.loads(capsys.readouterr().out)["elo"] == data["elo"]
