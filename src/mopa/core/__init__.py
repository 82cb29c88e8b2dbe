"""Shared pieces: run metadata, atomic files, and (later) returns, rollouts, replay."""
