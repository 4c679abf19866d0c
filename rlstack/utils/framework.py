"""Lazy, checked imports of the deep-learning frameworks.

Only the modules that need torch or TensorFlow call these, so that training with one
framework never imports the other (ARCHITECTURE.md, "Framework isolation").
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import Any

from rlstack.errors import ConfigError, FrameworkNotInstalledError, pip_install

logger = logging.getLogger(__name__)

FRAMEWORKS = ("torch", "tf")

_INSTALL_HINT = {
    "torch": f"{pip_install('torch')} (or: pip install torch)",
    "tf": f"{pip_install('tf')} (or: pip install tensorflow-cpu)",
}


def check_framework(framework: str | None) -> str | None:
    """Validates a ``framework`` config value and returns its canonical name.

    ``"tf2"`` is accepted as an alias of ``"tf"`` because classic RLlib YAML files use it;
    ``"tfe"`` (1.x's eager TF, which rlstack's TF policies are: TF 2, eager, compiled with
    ``tf.function``) too, with a deprecation warning. None is RLlib 1.13's setting for
    policy classes of the user's own that import neither framework: it stays None here,
    and the trainer checks that its policies need no framework
    (:func:`check_framework_free_policies`).

    Args:
        framework: The ``framework`` config value.

    Returns:
        "torch", "tf" or None.

    Raises:
        ConfigError: If the value is not one of the supported frameworks.
    """
    if framework == "tf2":
        return "tf"
    if framework == "tfe":
        from rlstack.utils.deprecation import deprecation_warning_once

        deprecation_warning_once("framework='tfe'", "framework='tf'",
                                 help="rlstack's TF policies are eager TF 2 compiled with tf.function.")
        return "tf"
    if framework is None:
        return None
    if framework not in FRAMEWORKS:
        raise ConfigError(
            f"Unknown framework {framework!r}; allowed: 'torch', 'tf' (or its aliases 'tf2', 'tfe'), or None for "
            "policy classes of your own that import neither. Set config['framework'] to one of them."
        )
    return framework


def policy_class_framework(policy_class: type | str) -> str | None:
    """The framework a policy class is built on: "torch", "tf", or None for one that uses
    neither (a ``Policy`` subclass of the user's own, or rlstack's numpy acting policy).

    Args:
        policy_class: A policy class, or its ``"module:Class"`` import path (imported here).

    Returns:
        "torch", "tf" or None.
    """
    from rlstack.utils.imports import import_object

    cls = import_object(policy_class, "policy class") if isinstance(policy_class, str) else policy_class
    framework = getattr(cls, "framework", None)
    return framework if framework in FRAMEWORKS else None


def check_framework_free_policies(algorithm: str, policy_classes: Mapping[str, type | str | None]) -> None:
    """Checks that ``framework=None`` can build every policy: each has a class of the
    user's own that imports neither torch nor TensorFlow.

    Args:
        algorithm: The trainer's name, for the message.
        policy_classes: Each policy id's class (or import path); None where the policy is
            the algorithm's own, which is built on a framework.

    Raises:
        ConfigError: Naming the first policy that needs a framework, and which to set.
    """
    for policy_id, policy_class in policy_classes.items():
        if policy_class is None:
            raise ConfigError(
                f"framework=None, but policy {policy_id!r} is {algorithm}'s own policy, which is built on torch or "
                "TensorFlow: set config['framework'] to 'torch' or 'tf'. framework=None (RLlib 1.13's setting) is "
                "for policies whose class is your own Policy subclass importing neither, e.g. multiagent.policies: "
                f"{{{policy_id!r}: PolicySpec(policy_class=MyPolicy)}}."
            )
        needs = policy_class_framework(policy_class)
        if needs is not None:
            name = policy_class if isinstance(policy_class, str) else policy_class.__name__
            raise ConfigError(
                f"framework=None, but policy {policy_id!r} ({name}) is a {needs} policy: set config['framework'] "
                f"to {needs!r}. framework=None is for policy classes that import neither torch nor TensorFlow."
            )


def check_installed(framework: str | None) -> None:
    """Raises an ImportError with the install command if ``framework`` is missing,
    without importing it (so the check costs microseconds, not seconds).

    ``None`` (policies of the user's own that use neither framework) needs nothing.

    Raises:
        FrameworkNotInstalledError: If the framework's package cannot be found.
    """
    if framework is None:
        return
    module = "torch" if framework == "torch" else "tensorflow"
    try:
        found = importlib.util.find_spec(module) is not None
    except ValueError:  # a module set to None in sys.modules
        found = False
    if not found:
        name = "PyTorch" if framework == "torch" else "TensorFlow"
        raise FrameworkNotInstalledError(
            f"framework={framework!r} needs {name}, which is not installed: {_INSTALL_HINT[framework]}"
        )


# ----- classic RLlib 1.x's try_import_* helpers ----------------------------------------
# 1.13 scripts start with `torch, nn = try_import_torch()` or `tf1, tf, tfv = try_import_tf()`.
# They import the framework when called (never when this module is imported), so a script
# that only asks for torch never loads TensorFlow.


def _is_installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module set to None in sys.modules
        return False


def _missing(name: str, error: bool, hint: str) -> None:
    message = f"{name} is not installed: {hint}"
    if error:
        raise FrameworkNotInstalledError(message)
    logger.info("%s; try_import returns None in its place.", message)


def try_import_torch(error: bool = False) -> tuple[Any, Any]:
    """Imports PyTorch, as classic RLlib's ``try_import_torch``.

    Args:
        error: Raise instead of returning ``(None, None)`` when torch is missing.

    Returns:
        ``(torch, torch.nn)``, or ``(None, None)`` when torch is not installed.

    Raises:
        FrameworkNotInstalledError: (an ImportError) If ``error`` and torch is missing.
    """
    if not _is_installed("torch"):
        _missing("PyTorch", error, _INSTALL_HINT["torch"])
        return None, None
    import torch
    import torch.nn as nn

    return torch, nn


def try_import_tf(error: bool = False) -> tuple[Any, Any, Any]:
    """Imports TensorFlow, as classic RLlib's ``try_import_tf``.

    TensorFlow is imported through ``rlstack.models.tf.framework`` (which skips TF's
    eager Keras import), so it is the same module every rlstack TF policy uses.

    Args:
        error: Raise instead of returning ``(None, None, None)`` when TF is missing.

    Returns:
        ``(tf1, tf, tfv)``: ``tf.compat.v1``, the ``tensorflow`` module and its major
        version (2); ``(None, None, None)`` when TensorFlow is not installed.

    Raises:
        FrameworkNotInstalledError: (an ImportError) If ``error`` and TF is missing.
    """
    if not _is_installed("tensorflow"):
        _missing("TensorFlow", error, _INSTALL_HINT["tf"])
        return None, None, None
    from rlstack.models.tf.framework import tf

    return tf.compat.v1, tf, int(tf.__version__.split(".")[0])


def try_import_tfp(error: bool = False) -> Any:
    """Imports TensorFlow Probability, as classic RLlib's ``try_import_tfp``.

    rlstack itself never uses it; scripts that do get it here, or None.

    Args:
        error: Raise instead of returning None when it is missing.

    Returns:
        The ``tensorflow_probability`` module, or None when it (or TF) is not installed.

    Raises:
        FrameworkNotInstalledError: (an ImportError) If ``error`` and it is missing.
    """
    if not (_is_installed("tensorflow") and _is_installed("tensorflow_probability")):
        _missing("TensorFlow Probability", error, "pip install tensorflow-probability")
        return None
    try_import_tf()  # TF first, through rlstack's import of it
    import tensorflow_probability

    return tensorflow_probability


def try_import_jax(error: bool = False) -> tuple[Any, Any]:
    """Imports JAX and Flax, as classic RLlib's ``try_import_jax``.

    rlstack has no JAX policies (``framework`` is "torch" or "tf"); scripts that use JAX
    for their own code get it here.

    Args:
        error: Raise instead of returning ``(None, None)`` when JAX is missing.

    Returns:
        ``(jax, flax)`` (flax None when only JAX is installed), or ``(None, None)``.

    Raises:
        FrameworkNotInstalledError: (an ImportError) If ``error`` and JAX is missing.
    """
    if not _is_installed("jax"):
        _missing("JAX", error, "pip install jax")
        return None, None
    import jax

    flax = None
    if _is_installed("flax"):
        import flax
    return jax, flax
