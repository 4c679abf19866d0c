"""What several test files share: test envs, models, callbacks and actors, the fused-gradient
cases, the tuned-example runner, the CPU census, and small conversions."""
