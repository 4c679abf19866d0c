"""What several test files share: test envs, models, callbacks and actors, the closed-form
gradient cases, the tuned-example runner, the CPU census, and small conversions."""
