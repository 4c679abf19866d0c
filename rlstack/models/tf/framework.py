"""TensorFlow, imported once for every rlstack TF module: ``from rlstack.models.tf.framework import tf``.

``import tensorflow`` (2.21) ends by importing Keras 3's optimizers eagerly, only so that
they are registered for SavedModel loading: hundreds of modules and a fifth of the
import's time (BENCHMARKS.md has the figure). rlstack's TF code uses no Keras (plain variables and
its own Adam), so the first import here skips that step: TensorFlow's switch for the
legacy ``tf_keras`` package is set for the duration of the import only, which makes the
eager Keras import fail quietly (``tf_keras`` is not a dependency). ``tf.keras`` and
``import keras`` still work afterwards: the switch is read again when ``tf.keras`` is
first touched, and Keras then imports (and registers its optimizers) as usual.

Nothing is changed when TensorFlow is already imported or the user set
``TF_USE_LEGACY_KERAS`` themselves.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

_SWITCH = "TF_USE_LEGACY_KERAS"


def _import_tensorflow() -> ModuleType:
    if "tensorflow" in sys.modules or _SWITCH in os.environ:
        import tensorflow

        return tensorflow
    os.environ[_SWITCH] = "1"
    try:
        import tensorflow
    finally:
        del os.environ[_SWITCH]
    # With the switch on, TensorFlow put the (absent) tf_keras API folder, i.e. None, on
    # its package path where it would put Keras 3's; put back what it puts normally.
    from tensorflow.python.tools.module_util import get_parent_dir_for_name

    keras_dir = get_parent_dir_for_name("keras.api._v2.keras")
    tensorflow.__path__ = [keras_dir if p is None else p for p in tensorflow.__path__]
    return tensorflow


tf = _import_tensorflow()
