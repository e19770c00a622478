"""Simulated ray.experimental."""
