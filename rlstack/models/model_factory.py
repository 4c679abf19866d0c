"""Classic RLlib's model factories: ``ModelCatalog.get_model_v2`` and ``get_action_dist``.

Framework-free: the framework's module is imported inside the call that asks for it
(``framework="torch"`` never imports TensorFlow and the reverse).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from rlstack.errors import ConfigError

_TF_NAMES = ("tf", "tf2", "tfe")


def _framework(framework: str) -> str:
    if framework == "torch":
        return "torch"
    if framework in _TF_NAMES:
        return "tf"
    raise ConfigError(f"Unknown framework {framework!r}; allowed: torch, tf, tf2, tfe.")


def _builtin_dists(framework: str) -> dict[str, type]:
    if framework == "torch":
        from rlstack.models.torch import torch_action_dist as dists

        return {"categorical": dists.TorchCategorical, "multi_categorical": dists.TorchMultiCategorical,
                "diag_gaussian": dists.TorchDiagGaussian}
    try:
        from rlstack.models.tf import tf_action_dist as dists  # written beside the TF models
    except ImportError as exc:
        raise ConfigError(
            "ModelCatalog.get_action_dist(framework='tf') needs rlstack.models.tf.tf_action_dist, which this "
            "install lacks; use framework='torch'."
        ) from exc
    return {"categorical": dists.Categorical, "multi_categorical": dists.MultiCategorical,
            "diag_gaussian": dists.DiagGaussian}


def get_action_dist(action_space: gym.Space, config: dict | None, dist_type: Any = None,
                    framework: str = "torch") -> tuple[type, int]:
    """See :meth:`rlstack.models.catalog.ModelCatalog.get_action_dist`."""
    from rlstack.models.catalog import action_dist_spec

    config = config or {}
    if dist_type is not None and not config.get("custom_action_dist"):
        if not isinstance(dist_type, type):
            raise ConfigError(
                f"dist_type must be an action distribution class; got {dist_type!r}. Pass the class, or set "
                "model.custom_action_dist to a registered name.")
        return dist_type, int(dist_type.required_model_output_shape(action_space, config))
    spec = action_dist_spec(action_space, config)
    if spec.custom_class is not None:
        return spec.custom_class, spec.num_outputs
    return _builtin_dists(_framework(framework))[spec.kind], spec.num_outputs


def get_model_v2(obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None, model_config: dict,
                 framework: str = "torch", name: str = "default_model", model_interface: type | None = None,
                 default_model: type | None = None, **model_kwargs: Any) -> Any:
    """See :meth:`rlstack.models.catalog.ModelCatalog.get_model_v2`."""
    from rlstack.models.catalog import MODEL_DEFAULTS, ModelCatalog
    from rlstack.models.modelv2 import ModelV2

    framework = _framework(framework)
    model_config = {**MODEL_DEFAULTS, **(model_config or {})}
    # gymnasium's Discrete.n is a numpy integer (gym 0.21's was an int), which Keras 3's
    # layers refuse as a size.
    num_outputs = None if num_outputs is None else int(num_outputs)
    custom = model_config.get("custom_model")
    if custom:
        model_class = custom if isinstance(custom, type) else ModelCatalog.get_custom_model(custom)
        kwargs = {**model_config.get("custom_model_config", {}), **model_kwargs}
    elif model_config.get("use_lstm") and default_model is None:
        return _lstm_model(obs_space, action_space, num_outputs, model_config, framework, name)
    else:
        model_class = default_model or _builtin_model_class(obs_space, framework)
        kwargs = model_kwargs
    if model_interface is not None and not issubclass(model_class, model_interface):
        # As 1.13: the chosen model wrapped in the interface class, a subclass of both whose
        # methods (get_q_values, ...) run over the chosen model's forward.
        model_class = type(f"{model_interface.__name__}As{model_class.__name__}", (model_interface, model_class), {})
    try:
        model = model_class(obs_space, action_space, num_outputs, model_config, name, **kwargs)
    except TypeError as exc:
        # As classic RLlib: retry without custom_model_config for models that read it
        # from model_config.
        if not kwargs or "unexpected keyword argument" not in str(exc):
            raise
        model = model_class(obs_space, action_space, num_outputs, model_config, name, **model_kwargs)
    if not isinstance(model, ModelV2):
        raise ConfigError(
            f"get_model_v2 built a {type(model).__name__}, which is not a ModelV2. Subclass TorchModelV2 (with "
            "torch.nn.Module) or TFModelV2, as in classic RLlib.")
    return model


def _lstm_model(obs_space: gym.Space, action_space: gym.Space, num_outputs: int | None, model_config: dict,
                framework: str, name: str) -> Any:
    # use_lstm: the built-in LSTM model (1.13 wrapped the default model in its LSTM wrapper).
    from rlstack.models.catalog import ModelCatalog
    from rlstack.models.specs import initial_weights

    spec = ModelCatalog.get_model_spec(obs_space, action_space, model_config, num_outputs=num_outputs)
    if framework == "torch":
        from rlstack.models.torch.recurrent_net import TorchLSTMModel

        model = TorchLSTMModel(spec, obs_space, action_space, name)
    else:
        from rlstack.models.tf.recurrent_net import TFLSTMModel

        model = TFLSTMModel(spec, obs_space, action_space, model_config, name)
    model.set_canonical_weights(initial_weights(spec, None))
    return model


def _builtin_model_class(obs_space: gym.Space, framework: str) -> type:
    original = getattr(obs_space, "original_space", obs_space)
    image = isinstance(original, gym.spaces.Box) and len(original.shape) == 3
    if framework == "torch":
        from rlstack.models.torch.fcnet import FullyConnectedNetwork
        from rlstack.models.torch.visionnet import VisionNetwork

        return VisionNetwork if image else FullyConnectedNetwork
    try:
        from rlstack.models.tf.fcnet import FullyConnectedNetwork as TFFullyConnectedNetwork
        from rlstack.models.tf.visionnet import VisionNetwork as TFVisionNetwork
    except ImportError as exc:
        raise ConfigError(
            "ModelCatalog.get_model_v2(framework='tf') needs rlstack.models.tf.fcnet / visionnet, which this "
            "install lacks; use framework='torch'."
        ) from exc
    return TFVisionNetwork if image else TFFullyConnectedNetwork
