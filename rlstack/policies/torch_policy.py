"""TorchPolicy: the torch base of every algorithm's torch policy.

It owns the model, the action distribution, the optimizer, device placement and the
minibatch-SGD loop; an algorithm adds ``loss()`` (and, if it needs them, the hooks
``after_learn`` and ``on_global_var_update``).

``self.model`` is always a ModelV2 (``models/modelv2.py``): the built-in
:class:`TorchModel`, a user's 1.13-style ``TorchModelV2``, or a shortcut module wrapped
in :class:`ShortcutTorchModel`. Policies call it through ``policy_and_value(obs)`` /
``value(obs)`` / ``q_values(obs)`` on flat observations; a model's ``custom_loss`` is
added through :meth:`TorchPolicy.model_loss` and its ``metrics()`` are reported beside
the learner stats.
"""

from __future__ import annotations

import hashlib
import logging
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlstack.errors import NonFiniteError
from rlstack.models.catalog import initial_weights
from rlstack.models.modelv2 import ModelV2, model_obs_space
from rlstack.models.torch.distributions import DISTRIBUTIONS
from rlstack.models.torch.model import TorchModel
from rlstack.models.torch.torch_action_dist import TorchDistributionWrapper
from rlstack.models.torch.torch_modelv2 import ShortcutTorchModel
from rlstack.policies.policy import Policy, PolicyState, decode_json, encode_json
# Re-exported: the algorithm policies import the optimizers from here.
from rlstack.policies.torch_optimizers import Adam, RMSProp, check_finite_update, clip_grad_norm  # noqa: F401
from rlstack.sample_batch import SampleBatch
from rlstack.utils.schedules import make_schedule

logger = logging.getLogger(__name__)

# ``grads(index, with_stats=True) -> (loss, stats)``: see TorchPolicy.make_grad_fn.
GradFn = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]


def model_weights(model: ModelV2) -> dict[str, np.ndarray]:
    """A model's weights as numpy copies: the canonical layout for built-in models, the
    ``state_dict`` otherwise (a shortcut model's own, so its keys are the user's)."""
    if isinstance(model, TorchModel):
        return model.get_canonical_weights()
    module = model.wrapped if isinstance(model, ShortcutTorchModel) else model
    return {name: value.detach().cpu().numpy().copy() for name, value in module.state_dict().items()}


def load_model_weights(model: ModelV2, weights: dict[str, np.ndarray]) -> None:
    """Loads weights from :func:`model_weights` into ``model`` (on its device)."""
    if isinstance(model, TorchModel):
        model.set_canonical_weights(weights)
        return
    module = model.wrapped if isinstance(model, ShortcutTorchModel) else model
    # np.array copies: arrays from Ray's object store are read-only.
    module.load_state_dict({name: torch.from_numpy(np.array(v)) for name, v in weights.items()})


def _single_loss(out: Any, model_name: str) -> torch.Tensor:
    losses = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(losses) != 1 or not isinstance(losses[0], torch.Tensor):
        raise TypeError(
            f"{model_name}.custom_loss must return the loss as a tensor or a one-element list of tensors (this "
            f"policy has one optimizer); got {type(out).__name__} of {len(losses)}.")
    return losses[0]


def _writable(array: np.ndarray) -> np.ndarray:
    # Arrays fetched from Ray's object store are read-only views; torch wants to own
    # writable memory.
    array = np.ascontiguousarray(array)
    return array if array.flags.writeable else array.copy()


def pick_device(num_gpus: float, fake_gpus: bool = False) -> torch.device:
    """``cuda:0`` when GPUs are asked for and visible, else the CPU (with a warning unless
    ``fake_gpus``, which keeps a GPU config on the CPU on purpose).

    Under Ray, ``cuda:0`` is the GPU Ray assigned to this process (Ray sets
    ``CUDA_VISIBLE_DEVICES``).
    """
    if num_gpus and num_gpus > 0 and not fake_gpus:
        if torch.cuda.is_available():
            return torch.device("cuda:0")
        logger.warning("num_gpus=%s but torch sees no GPU; the policy runs on the CPU.", num_gpus)
    return torch.device("cpu")


class TorchPolicy(Policy):
    """Base class of torch policies.

    Args:
        observation_space: The env's observation space.
        action_space: The env's action space.
        config: The trainer's merged config.
        num_gpus: GPUs this copy may use.
    """

    framework = "torch"

    @staticmethod
    def pin_threads(config: dict) -> None:
        """One intra-op thread in each rollout worker: workers share the machine's cores
        with each other and the learner."""
        torch.set_num_threads(1)

    # The ModelV2 class built from model_spec() for built-in models.
    model_class: type[TorchModel] = TorchModel
    # Shuffle rows before each SGD epoch; sequence losses (V-trace) keep the batch order.
    shuffle_minibatches: bool = True
    # Actor-critic losses: an ``entropy_coeff`` (float) that follows ``entropy_coeff_schedule``.
    schedules_entropy_coeff: bool = False

    # Batch columns the loss reads; only these are moved to the device.
    loss_columns: tuple[str, ...] = ()

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, config: dict, num_gpus: float = 0,
        sampling_seed: int | None = None,
    ) -> None:
        super().__init__(observation_space, action_space, config, num_gpus, sampling_seed)
        self.device = pick_device(num_gpus, bool(config.get("_fake_gpus")))
        self.sampling_generator = torch.Generator(device=self.device)
        if sampling_seed is None:
            self.sampling_generator.seed()
        else:
            self.sampling_generator.manual_seed(int(sampling_seed))
        custom = self.make_custom_model()
        if custom is not None:
            if not isinstance(custom, torch.nn.Module):
                raise TypeError(
                    f"custom_model {type(custom).__name__} is a ModelV2 but not a torch.nn.Module; torch policies "
                    "need class MyModel(TorchModelV2, nn.Module) (or framework='tf' for a TFModelV2).")
            self.model: ModelV2 = custom
            self.builtin_model = False
        else:
            spec = self.model_spec()
            self.model = self.model_class(spec, model_obs_space(observation_space), action_space)
            self.model.set_canonical_weights(initial_weights(spec, config.get("seed")))
            self.builtin_model = True
        self.model.to(self.device)
        # Acting mode (dropout off, is_training False) until learn_on_batch switches it.
        self.model.eval()
        # Built-in distributions take the catalog's spec; a custom one (classic RLlib's
        # interface) takes the model.
        if self.dist_spec.custom_class is not None:
            self.dist_class, self._dist_arg = self.dist_spec.custom_class, self.model
        else:
            self.dist_class, self._dist_arg = DISTRIBUTIONS[self.dist_spec.kind], self.dist_spec
        self._has_custom_loss = type(self.model).custom_loss is not ModelV2.custom_loss
        self.lr_schedule = make_schedule(config["lr"], config.get("lr_schedule"), "lr_schedule")
        self.optimizer = self.make_optimizer(list(self.model.parameters()), self.lr_schedule.value(0))
        if self.schedules_entropy_coeff:
            self.entropy_coeff_schedule = make_schedule(
                config["entropy_coeff"], config.get("entropy_coeff_schedule"), "entropy_coeff_schedule")
            self.entropy_coeff = self.entropy_coeff_schedule.value(0)
        self._rng = np.random.default_rng(config.get("seed"))

    def adapt_shortcut_model(self, model: Any) -> ModelV2:
        """Wraps a shortcut custom model (an ``nn.Module`` called on flat observations that
        returns ``(dist_inputs, values)``) in :class:`ShortcutTorchModel`.

        Raises:
            TypeError: If the model is not an ``nn.Module``.
        """
        if not isinstance(model, torch.nn.Module):
            raise TypeError(
                f"custom_model built a {type(model).__name__}; torch policies need a TorchModelV2 (class MyModel("
                "TorchModelV2, nn.Module)) or a torch.nn.Module returning (dist_inputs, values) from flat "
                "observations.")
        return ShortcutTorchModel(model, model_obs_space(self.observation_space), self.action_space,
                                  self.dist_spec.num_outputs, self.config.get("model", {}))

    def action_dist(self, dist_inputs: torch.Tensor) -> TorchDistributionWrapper:
        """The action distribution over ``dist_inputs [B, num_outputs]`` (the built-in one,
        or ``model.custom_action_dist`` constructed as classic RLlib did, with the model)."""
        return self.dist_class(dist_inputs, self._dist_arg)

    def _sample(self, dist: TorchDistributionWrapper) -> torch.Tensor:
        # Built-in distributions draw from this policy's own generator; a custom one
        # (classic RLlib's sample() takes no argument) from torch's global generator.
        if self.dist_spec.custom_class is None:
            return dist.sample(self.sampling_generator)
        return dist.sample()

    def make_optimizer(self, params: list[torch.nn.Parameter], lr: float) -> Adam | RMSProp:
        """Adam with ``adam_epsilon`` (algorithms with ``opt_type`` override this)."""
        return Adam(params, lr=lr, eps=self.config.get("adam_epsilon", 1e-8))

    # ----- acting -----------------------------------------------------------------

    def _explore(self, explore: bool | None) -> bool:
        return self.config.get("explore", True) if explore is None else bool(explore)

    def compute_actions(self, obs_batch: np.ndarray, explore: bool | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            dist_inputs, values = self.model.policy_and_value(obs)
            dist = self.action_dist(dist_inputs)
            actions = self._sample(dist) if self._explore(explore) else dist.deterministic_sample()
            logp = dist.logp(actions)
        return actions.cpu().numpy(), {
            SampleBatch.ACTION_LOGP: logp.cpu().numpy(),
            SampleBatch.ACTION_DIST_INPUTS: dist_inputs.cpu().numpy(),
            SampleBatch.VF_PREDS: values.cpu().numpy(),
        }

    def compute_values(self, obs_batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            obs = torch.from_numpy(np.asarray(obs_batch, dtype=np.float32)).to(self.device)
            return self.model.value(obs).cpu().numpy()

    # ----- learning ---------------------------------------------------------------

    @abstractmethod
    def loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Returns ``(loss, stats)`` on a minibatch of tensors keyed by column name."""

    def model_loss(self, train_batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """:meth:`loss`, changed by the model's ``custom_loss`` when it defines one (classic
        RLlib's torch call: ``custom_loss([loss], train_batch)``; a list or a tensor back)."""
        loss, stats = self.loss(train_batch)
        if self._has_custom_loss:
            loss = self.model_custom_loss(loss, train_batch)
        return loss, stats

    def model_custom_loss(self, loss: torch.Tensor, train_batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``loss`` through the model's ``custom_loss`` (a list or a tensor back)."""
        return _single_loss(self.model.custom_loss([loss], train_batch), type(self.model).__name__)

    def after_learn(self, stats: dict[str, float]) -> dict[str, float]:
        """Called once per ``learn_on_batch`` with the mean stats; returns extra stats."""
        return {}

    def _to_tensors(self, batch: SampleBatch) -> dict[str, torch.Tensor]:
        columns = self.loss_columns or tuple(batch.keys())
        return {key: torch.from_numpy(_writable(batch[key])).to(self.device) for key in columns}

    def make_grad_fn(self, tensors: dict[str, torch.Tensor]) -> GradFn:
        """Returns ``grads(index, with_stats=True) -> (loss, stats)``, which puts d loss / d
        parameter of the minibatch ``tensors[...][index]`` into every parameter's ``.grad``.

        The default runs :meth:`loss` and autograd; a policy whose loss gradient is
        known in closed form may return a faster function with the same result, and may
        leave the statistics out (``{}``) when ``with_stats`` is False.
        """
        def grads(index: torch.Tensor, with_stats: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            loss, stats = self.model_loss({key: value[index] for key, value in tensors.items()})
            self.optimizer.zero_grad()
            loss.backward()
            return loss, stats

        return grads

    def learn_on_batch(self, batch: SampleBatch) -> dict[str, float]:
        """Runs ``num_sgd_iter`` epochs of minibatch SGD (one full-batch step by default).

        Returns:
            The loss statistics averaged over the last epoch's minibatches, plus the
            current learning rate and whatever :meth:`after_learn` adds.
        """
        if self.calls_learn_hook:
            self.run_learn_on_batch_callback(batch)
        n = batch.count
        minibatch_size = min(int(self.config.get("sgd_minibatch_size") or n), n)
        num_epochs = int(self.config.get("num_sgd_iter", 1))
        grad_clip = self.config.get("grad_clip")
        self.model.train()
        try:
            grads = self.make_grad_fn(self._to_tensors(batch))
            last_epoch_stats: list[dict[str, torch.Tensor]] = []
            for epoch in range(num_epochs):
                order = torch.from_numpy(self._rng.permutation(n) if self.shuffle_minibatches else np.arange(n))
                order = order.to(self.device)
                # Only the last epoch's statistics are reported.
                last_epoch = epoch == num_epochs - 1
                for start in range(0, n, minibatch_size):
                    index = order[start : start + minibatch_size]
                    loss, stats = grads(index, with_stats=last_epoch)
                    grad_norm = clip_grad_norm(self.optimizer.params, grad_clip) if grad_clip is not None else None
                    try:
                        # Checks the loss (and the gradient norm) first: one device sync per step.
                        self.optimizer.step(loss, grad_norm)
                    except NonFiniteError:
                        # Nothing was updated: the same minibatch gives the statistics to name.
                        stats = stats or grads(index)[1]
                        raise self._non_finite_error(stats, epoch, start // minibatch_size) from None
                    if last_epoch:
                        if grad_norm is not None:
                            stats["grad_gnorm"] = grad_norm
                        last_epoch_stats.append({key: value.detach() for key, value in stats.items()})
        finally:
            # Also after an error (a user's custom_loss raising): acting must not stay in
            # train mode (dropout, batch-norm updates).
            self.model.eval()
        mean_stats = {key: float(torch.stack([s[key] for s in last_epoch_stats]).float().mean())
                      for key in last_epoch_stats[0]}
        mean_stats["cur_lr"] = self.optimizer.lr
        mean_stats.update(self.after_learn(mean_stats))
        return mean_stats

    def _non_finite_error(self, stats: dict[str, torch.Tensor], epoch: int, minibatch: int) -> NonFiniteError:
        # Only on the error path: which loss statistics are NaN or inf.
        terms = [key for key, value in stats.items() if not bool(torch.isfinite(value.detach()).all())]
        what = f"loss terms {', '.join(terms)}" if terms else "gradients (the loss terms are finite)"
        return NonFiniteError.in_update(what, f"{type(self).__name__}.learn_on_batch (epoch {epoch}, minibatch "
                                              f"{minibatch})", self.optimizer.lr)

    def on_global_var_update(self, global_timestep: int) -> None:
        super().on_global_var_update(global_timestep)
        self.optimizer.lr = float(self.lr_schedule.value(global_timestep))
        if self.schedules_entropy_coeff:
            self.entropy_coeff = self.entropy_coeff_schedule.value(global_timestep)

    # ----- weights and state ------------------------------------------------------

    def get_weights(self) -> dict[str, np.ndarray]:
        return model_weights(self.model)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        load_model_weights(self.model, weights)

    def export_model(self, export_dir: str, onnx: int | None = None) -> str:
        from rlstack.models.torch.export import export_torch_model

        return export_torch_model(self.model, self.preprocessor.size, export_dir, onnx)

    def get_state(self) -> PolicyState:
        state = super().get_state()
        state.update({f"optimizer/{key}": value for key, value in self.optimizer.get_state().items()})
        state["minibatch_rng"] = encode_json(self._rng.bit_generator.state)
        state["sampling_rng"] = self.sampling_generator.get_state().numpy()
        return state

    def set_state(self, state: PolicyState) -> None:
        super().set_state(state)
        prefix = "optimizer/"
        optimizer_state = {key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)}
        if optimizer_state:
            self.optimizer.set_state(optimizer_state)
        if "minibatch_rng" in state:
            self._rng.bit_generator.state = decode_json(state["minibatch_rng"])
        if "sampling_rng" in state:
            saved = np.array(state["sampling_rng"], dtype=np.uint8)
            if saved.size == self.sampling_generator.get_state().numel():
                self.sampling_generator.set_state(torch.from_numpy(saved))
            else:
                # Saved on another device type (a CUDA generator's state is 16 bytes, a
                # CPU one's 5056): continue from a seed derived from it, deterministically.
                self.sampling_generator.manual_seed(int.from_bytes(hashlib.sha256(saved.tobytes()).digest()[:8], "little"))
        self.on_global_var_update(self.global_timestep)
