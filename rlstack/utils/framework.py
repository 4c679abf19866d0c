"""Lazy, checked imports of the deep-learning frameworks.

Only the modules that need torch or TensorFlow call these, so that training with one
framework never imports the other (DESIGN.md, "Framework isolation").
"""

from __future__ import annotations

import importlib.util

from rlstack.errors import ConfigError, FrameworkNotInstalledError

FRAMEWORKS = ("torch", "tf")

_INSTALL_HINT = {
    "torch": "pip install 'rlstack[torch]' (or: pip install torch)",
    "tf": "pip install 'rlstack[tf]' (or: pip install tensorflow-cpu)",
}


def check_framework(framework: str) -> str:
    """Validates a ``framework`` config value and returns its canonical name.

    ``"tf2"`` is accepted as an alias of ``"tf"`` because classic RLlib YAML files use it.

    Raises:
        ConfigError: If the value is not one of the supported frameworks.
    """
    if framework == "tf2":
        return "tf"
    if framework not in FRAMEWORKS:
        raise ConfigError(
            f"Unknown framework {framework!r}; allowed: 'torch', 'tf' (or its alias 'tf2'). "
            "Set config['framework'] to one of them."
        )
    return framework


def check_installed(framework: str) -> None:
    """Raises an ImportError with the install command if ``framework`` is missing,
    without importing it (so the check costs microseconds, not seconds).

    Raises:
        FrameworkNotInstalledError: If the framework's package cannot be found.
    """
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
