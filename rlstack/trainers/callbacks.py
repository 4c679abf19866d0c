"""RLlib 1.13's module path of the training callbacks (``ray.rllib.agents.callbacks``):
they live in ``rlstack/evaluation/callbacks.py``, beside the rollout workers that call
most of their hooks."""

from rlstack.evaluation.callbacks import DefaultCallbacks, MemoryTrackingCallbacks, MultiCallbacks

__all__ = ["DefaultCallbacks", "MemoryTrackingCallbacks", "MultiCallbacks"]


def __getattr__(name: str) -> object:
    # 1.13's callbacks module also held RE3UpdateCallbacks, the partner of its RE3
    # exploration, which rlstack does not have: say so instead of "cannot import name".
    if name == "RE3UpdateCallbacks":
        raise ImportError(
            "rlstack has no RE3 exploration (random-encoder intrinsic rewards), so no RE3UpdateCallbacks: explore "
            "with exploration_config (EpsilonGreedy, GaussianNoise, OrnsteinUhlenbeckNoise, StochasticSampling), "
            "or add an intrinsic reward in a gymnasium wrapper or in on_postprocess_trajectory.", name=name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
