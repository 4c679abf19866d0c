"""Classic RLlib's policy templates: a policy class built from functions.

``build_policy_class(name, framework, loss_fn=..., postprocess_fn=..., stats_fn=...)``
(and its framework-bound forms ``build_torch_policy`` / ``build_tf_policy``) is how 1.x
users wrote their own algorithms. Here the class it returns is a subclass of rlstack's
:class:`~rlstack.policies.torch_policy.TorchPolicy` or
:class:`~rlstack.policies.tf_policy.TFPolicy`: the model, acting, the learner loop
(``num_sgd_iter`` epochs of ``sgd_minibatch_size`` rows, ``grad_clip``, ``lr_schedule``)
and checkpoints are theirs, and the functions fill in the parts 1.13 let a template set.

The functions take 1.13's arguments: ``loss_fn(policy, model, dist_class, train_batch)``
returns the loss (or one per optimizer), ``postprocess_fn(policy, sample_batch,
other_agent_batches, episode)`` the piece with its new columns, ``stats_fn(policy,
train_batch)`` a dict of scalars for ``learner_stats``. In a loss, ``model(train_batch)``
returns ``(dist_inputs, state)``, ``model.value_function()`` the values of that call, and
``dist_class(dist_inputs, model)`` the policy's action distribution.

Arguments whose 1.13 meaning rlstack's learner cannot keep (a hand-written action
sampler, gradient functions, an optimizer object) are refused when the class is built,
with what to write instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rlstack.sample_batch import SampleBatch

__all__ = ["build_policy_class"]

# 1.13 arguments a template cannot honour on rlstack's learner, and what to do instead.
_REFUSED = {
    "action_sampler_fn": "subclass rlstack's TorchPolicy / TFPolicy and override compute_actions",
    "action_distribution_fn": "set model.custom_action_dist, or override compute_actions in a subclass",
    "make_model_and_action_dist": "use make_model and model.custom_action_dist",
    "compute_gradients_fn": "rlstack's learner differentiates loss_fn itself; change the loss instead",
    "apply_gradients_fn": "rlstack's learner applies the gradients (grad_clip clips them)",
    "extra_grad_process_fn": "set grad_clip for gradient clipping",
    "optimizer_fn": "set lr, lr_schedule and grad_clip (the learner builds its Adam), or subclass and "
                    "override make_optimizers",
    "grad_stats_fn": "report the statistics from stats_fn",
}


class _LossBatch(dict):
    """The minibatch a 1.13 loss function reads: columns of tensors by name, ``dones``
    derived from ``terminateds`` and ``truncateds``, and ``is_training``."""

    is_training = True

    def __missing__(self, key: str) -> Any:
        if key == SampleBatch.DONES and SampleBatch.TERMINATEDS in self:
            done = dict.__getitem__(self, SampleBatch.TERMINATEDS)
            if SampleBatch.TRUNCATEDS in self:
                truncated = dict.__getitem__(self, SampleBatch.TRUNCATEDS)
                return (done + truncated) > 0
            return done > 0
        raise KeyError(key)


class _DistClass:
    """The policy's action distribution class as a 1.13 loss calls it:
    ``dist_class(dist_inputs, model)`` (the model argument is the policy's own)."""

    def __init__(self, make: Callable[[Any], Any]) -> None:
        self._make = make

    def __call__(self, dist_inputs: Any, model: Any = None) -> Any:
        return self._make(dist_inputs)


def build_policy_class(
    name: str,
    framework: str,
    *,
    loss_fn: Callable | None,
    get_default_config: Callable[[], dict] | None = None,
    stats_fn: Callable | None = None,
    postprocess_fn: Callable | None = None,
    extra_action_out_fn: Callable | None = None,
    extra_learn_fetches_fn: Callable | None = None,
    validate_spaces: Callable | None = None,
    before_init: Callable | None = None,
    before_loss_init: Callable | None = None,
    after_init: Callable | None = None,
    _after_loss_init: Callable | None = None,
    make_model: Callable | None = None,
    mixins: Sequence[type] | None = None,
    get_batch_divisibility_req: Callable | None = None,
    _base: type | None = None,
    **refused: Any,
) -> type:
    """A policy class for ``framework`` ("torch" or "tf") from classic RLlib's template
    functions (see the module docstring for their arguments).

    The class has ``with_updates(**changes)`` (the same template with some functions
    replaced) and, for TF, ``as_eager()`` (itself: rlstack's TF policies run eagerly
    with traced graphs already). ``_base`` is the policy class to build on (a built-in
    one, for :meth:`Policy.with_updates`): its methods stay where no function is given.

    Raises:
        TypeError: For an argument rlstack's learner cannot honour (naming what to use
            instead), or an unknown one.
        ValueError: For a framework other than torch or tf.
    """
    given = {key: value for key, value in refused.items() if value is not None}
    for key in given:
        if key not in _REFUSED:
            raise TypeError(f"build_policy_class() got an unexpected keyword argument {key!r}")
        raise TypeError(f"{name}: the policy template argument {key} is not offered by rlstack: {_REFUSED[key]}.")
    if framework in ("tf", "tf2", "tfe"):
        from rlstack.models.tf.framework import tf as backend
        from rlstack.policies.tf_policy import TFPolicy as root

        framework = "tf"
    elif framework == "torch":
        import torch as backend

        from rlstack.policies.torch_policy import TorchPolicy as root
    else:
        raise ValueError(f"{name}: framework must be 'torch' or 'tf', not {framework!r}.")
    base = _base or root
    template = dict(
        loss_fn=loss_fn, get_default_config=get_default_config, stats_fn=stats_fn, postprocess_fn=postprocess_fn,
        extra_action_out_fn=extra_action_out_fn, extra_learn_fetches_fn=extra_learn_fetches_fn,
        validate_spaces=validate_spaces, before_init=before_init, before_loss_init=before_loss_init,
        after_init=after_init, _after_loss_init=_after_loss_init, make_model=make_model, mixins=mixins,
        get_batch_divisibility_req=get_batch_divisibility_req, _base=_base,
    )

    def as_tensor(value: Any) -> Any:
        if framework == "torch":
            return value.detach() if isinstance(value, backend.Tensor) else backend.as_tensor(float(value))
        return backend.convert_to_tensor(value, backend.float32)

    def as_float32(value: Any) -> Any:
        if framework == "torch":
            return value.float() if isinstance(value, backend.Tensor) and value.dtype == backend.float64 else value
        return backend.cast(value, backend.float32) if getattr(value, "dtype", None) == backend.float64 else value

    def __init__(self, observation_space: Any, action_space: Any, config: dict, *args: Any, **kwargs: Any) -> None:
        if get_default_config is not None:
            config = {**get_default_config(), **config}
        if validate_spaces is not None:
            validate_spaces(self, observation_space, action_space, config)
        if before_init is not None:
            before_init(self, observation_space, action_space, config)
        # Mixins' own __init__ is the template functions' to call, as in classic RLlib.
        base.__init__(self, observation_space, action_space, config, *args, **kwargs)
        for hook in (before_loss_init, _after_loss_init, after_init):
            if hook is not None:
                hook(self, observation_space, action_space, config)

    def make_custom_model(self) -> Any:
        if make_model is not None:
            return make_model(self, self.observation_space, self.action_space, self.config)
        return base.make_custom_model(self)

    def loss(self, train_batch: dict) -> tuple[Any, dict]:
        if loss_fn is None:
            if base is not root:
                return base.loss(self, train_batch)
            raise NotImplementedError(f"{name} was built without a loss_fn, so it cannot learn; give the "
                                      "template a loss_fn or leave the policy out of policies_to_train.")
        # Columns a postprocess function added as float64 (numpy's default) are float32,
        # the dtype of every other float column and of the model's outputs.
        # A recurrent model's padded sequences as 1.13 laid them out: step columns as rows
        # [S * T, ...], state_in_* and seq_lens per sequence (ModelV2's call reads them).
        rows, _ = self.unroll(train_batch)
        batch = _LossBatch({key: as_float32(value) for key, value in rows.items()})
        make_dist = self.action_dist if framework == "torch" else self.action_distribution
        out = loss_fn(self, self.model, _DistClass(make_dist), batch)
        losses = list(out) if isinstance(out, (list, tuple)) else [out]
        stats = {key: as_tensor(value) for key, value in (stats_fn(self, batch) if stats_fn else {}).items()
                 if _is_scalar(value)}
        return (losses if len(losses) > 1 else losses[0]), stats

    def postprocess_trajectory(self, batch: SampleBatch, other_agent_batches: Any = None,
                               episode: Any = None) -> SampleBatch:
        if postprocess_fn is None:
            return base.postprocess_trajectory(self, batch)
        return postprocess_fn(self, batch, other_agent_batches, episode)

    def after_learn(self, stats: dict) -> dict:
        extra = base.after_learn(self, stats)
        if extra_learn_fetches_fn is not None:
            extra = {**extra, **extra_learn_fetches_fn(self)}
        return extra

    def compute_actions(self, obs_batch: Any, *args: Any, **kwargs: Any) -> tuple[Any, dict]:
        actions, extras = base.compute_actions(self, obs_batch, *args, **kwargs)
        if extra_action_out_fn is not None:
            extras = {**extras, **self._extra_action_outputs(obs_batch)}
        return actions, extras

    def _extra_action_outputs(self, obs_batch: Any) -> dict:
        # 1.13 called extra_action_out_fn(policy, input_dict, state_batches, model,
        # action_dist) right after the model's forward pass on the same observations.
        import numpy as np

        obs = np.asarray(obs_batch, dtype=np.float32)
        if framework == "torch":
            with backend.no_grad():
                obs_tensor = backend.from_numpy(obs).to(self.device)
                dist_inputs, _ = self.model({SampleBatch.OBS: obs_tensor})
                out = extra_action_out_fn(self, {SampleBatch.OBS: obs_tensor}, [], self.model,
                                          self.action_dist(dist_inputs))
            return {key: value.cpu().numpy() if isinstance(value, backend.Tensor) else np.asarray(value)
                    for key, value in out.items()}
        obs_tensor = backend.convert_to_tensor(obs)
        dist_inputs, _ = self.model({SampleBatch.OBS: obs_tensor})
        out = extra_action_out_fn(self, {SampleBatch.OBS: obs_tensor}, [], self.model,
                                  self.action_distribution(dist_inputs))
        return {key: np.asarray(value) for key, value in out.items()}

    @classmethod
    def with_updates(cls: type, **changes: Any) -> type:
        """The same template with the given functions (or ``name``) replaced."""
        return build_policy_class(**{"name": name, "framework": framework, **template, **changes})

    @classmethod
    def as_eager(cls: type) -> type:
        return cls

    namespace: dict[str, Any] = {
        "__init__": __init__, "make_custom_model": make_custom_model, "loss": loss,
        "postprocess_trajectory": postprocess_trajectory, "after_learn": after_learn,
        "compute_actions": compute_actions, "_extra_action_outputs": _extra_action_outputs,
        "with_updates": with_updates, "as_eager": as_eager,
        # Whatever the postprocess function reads, the worker records V(s) where it cut
        # a piece before its episode ended (bootstrap_value), as for the built-in policies.
        "needs_bootstrap_value": True if postprocess_fn is not None or _base is None else base.needs_bootstrap_value,
        "__doc__": f"{name}: a policy built by rlstack's policy template ({framework}).",
        "__module__": _caller_module(),
    }
    if framework != "torch":
        # The loss is the user's Python code, which may branch on tensors.
        namespace["needs_autograph"] = property(lambda self: True)
    return type(name, (*(mixins or ()), base), namespace)


def _is_scalar(value: Any) -> bool:
    shape = getattr(value, "shape", ())
    return len(tuple(shape)) == 0 or int(getattr(value, "numel", lambda: 1)()) == 1 if shape is not None else True


def _caller_module() -> str:
    # The module that called the template (past this one and its framework shims), so
    # the class's repr and its pickled reference name the user's module.
    import sys

    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("rlstack.policies."):
        frame = frame.f_back
    return frame.f_globals.get("__name__", __name__) if frame is not None else __name__
