"""Models: the framework-free catalog and preprocessors; torch/ and tf/ implementations."""

from rlstack.models.catalog import MODEL_DEFAULTS, ModelCatalog
from rlstack.models.modelv2 import ModelV2
from rlstack.models.specs import ModelSpec
from rlstack.models.preprocessors import Preprocessor

__all__ = ["MODEL_DEFAULTS", "ModelCatalog", "ModelSpec", "ModelV2", "Preprocessor"]
