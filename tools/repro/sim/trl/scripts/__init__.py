"""Simulated trl.scripts."""
