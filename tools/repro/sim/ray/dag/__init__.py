"""Simulated ray.dag: compiled graphs."""
