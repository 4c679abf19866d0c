"""Example policies of 1.13's ``ray.rllib.examples.policy``."""
