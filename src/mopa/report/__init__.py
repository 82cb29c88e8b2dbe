"""Plots, GIFs and reports that read saved results."""
