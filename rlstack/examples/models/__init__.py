"""Example models (each module imports its framework only when a model is built)."""
