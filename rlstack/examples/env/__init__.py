"""Example environments."""
