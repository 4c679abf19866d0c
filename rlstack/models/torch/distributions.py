"""The built-in torch action distributions by the catalog's kind (the classes live in
``torch_action_dist.py``); the TF twins in models/tf/distributions.py match them."""

from __future__ import annotations

from rlstack.models.torch.torch_action_dist import (
    TorchCategorical,
    TorchDiagGaussian,
    TorchMultiActionDistribution,
    TorchMultiCategorical,
    TorchSquashedGaussian,
)

# The names the policies and tests have used.
Categorical = TorchCategorical
MultiCategorical = TorchMultiCategorical
DiagGaussian = TorchDiagGaussian
SquashedGaussian = TorchSquashedGaussian

DISTRIBUTIONS = {"categorical": Categorical, "multi_categorical": MultiCategorical, "diag_gaussian": DiagGaussian,
                 "multi_action": TorchMultiActionDistribution}
