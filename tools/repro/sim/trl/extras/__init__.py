"""Simulated trl.extras."""
