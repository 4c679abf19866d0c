"""PPO's gradient in closed form: the built-in dense torch model run forward and backward
by hand, without autograd.

On CartPole-sized networks autograd's bookkeeping (recording the graph, replaying it,
dispatching many small ops) costs more than the arithmetic. PPO's loss can state its
gradient with respect to the model's two outputs (the distribution inputs and the value),
so :func:`ppo_grad_fn` computes the loss and that gradient, and :class:`DenseGraph` runs
the chain rule layer by layer with one matrix product per weight, writing straight into
each parameter's ``.grad``: the numbers of autograd of
:meth:`~rlstack.trainers.ppo.ppo_torch_policy.PPOTorchPolicy.loss` to float32 rounding
(tests/unit/test_closed_form.py), in about a third of the ops. It is kept because the
whole PPO training step is measured faster with it by more than the project's 1.3x rule
(bench/closed_form.py, BENCHMARKS.md "Closed-form gradients"); the other algorithms'
closed forms did not clear it and were removed.

With a separate value network of the policy network's shape (the default,
``vf_share_layers=False``) the two run as one batched product per layer (``bmm`` over a
leading axis of 2): the two networks' weights, and their gradients, are made views of one
stacked tensor per layer, so nothing is copied per step.

Only what the catalog builds from ``fcnet_hiddens`` / ``post_fcnet_hiddens`` qualifies
(:func:`supports`): dense layers with tanh, relu or linear activations, an optional
separate value encoder, a categorical or diagonal-Gaussian action distribution, a critic,
no recurrent state and no custom loss. Anything else goes through autograd of ``loss()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from rlstack.models.specs import plain_dense, twin_encoders
from rlstack.models.torch.model import TorchModel
from rlstack.sample_batch import SampleBatch

if TYPE_CHECKING:
    from rlstack.trainers.ppo.ppo_torch_policy import PPOTorchPolicy

# The activations whose derivative the hand-written backward passes know.
_DIFFERENTIATED = ("tanh", "relu", "linear")
# Layers with fewer input columns than this take their weight gradient as the
# transposed product (see _weight_grad).
_NARROW_INPUT = 16


class _TwinLayer(NamedTuple):
    # One layer of twin networks as views of stacked tensors: weight [2, out, in] and its
    # transpose (the forward's operand, taken once), bias [2, 1, out], their gradients
    # [2, out, in] and [2, out].
    weight: torch.Tensor
    weight_t: torch.Tensor
    bias: torch.Tensor
    weight_grad: torch.Tensor
    bias_grad: torch.Tensor
    activation: str


class DenseGraph:
    """The layers of a dense :class:`TorchModel`, run forward and backward by hand.

    Args:
        model: A built-in model accepted by :meth:`supports`. Its parameters are used
            in place (no copy), so optimizer updates are seen at once.
    """

    def __init__(self, model: TorchModel) -> None:
        spec = model.spec
        self.model = model
        self.pi_columns = spec.encoder.column_index
        self.pi_layers = [(model.layers[layer.name], layer.activation)
                          for layer in (*spec.encoder.fc, *spec.encoder.post_fc)]
        self.shared = spec.vf_encoder is None
        self.vf_layers = [] if self.shared else [(model.layers[layer.name], layer.activation)
                                                 for layer in (*spec.vf_encoder.fc, *spec.vf_encoder.post_fc)]
        self.vf_columns = self.pi_columns if self.shared else spec.vf_encoder.column_index
        self.logits = model.layers["logits"]
        self.value_out = model.layers["value_out"]
        self.twin = twin_encoders(spec)
        # Twin networks: one entry per layer (see _TwinLayer).
        self.stacked: list[_TwinLayer] = []

    @staticmethod
    def supports(model: nn.Module) -> bool:
        """Whether ``model`` is a built-in model made of dense layers only."""
        return type(model) is TorchModel and plain_dense(model.spec)

    def attach_grads(self) -> None:
        """Gives every parameter a ``.grad`` buffer that :meth:`backward` overwrites
        (and, for twin networks, makes weights and gradients views of stacked tensors)."""
        if self.twin:
            self._stack_twins()
        for p in self.model.parameters():
            if p.grad is None or p.grad.shape != p.shape:
                p.grad = torch.empty_like(p)

    def _stack_twins(self) -> None:
        stacked = []
        for i, ((pi, activation), (vf, _)) in enumerate(zip(self.pi_layers, self.vf_layers)):
            values, grads = [], []
            for name in ("weight", "bias"):
                a, b = getattr(pi, name), getattr(vf, name)
                both = getattr(self.stacked[i], name).view(2, *a.shape) if self.stacked else None
                if both is None or a.data_ptr() != both[0].data_ptr() or b.data_ptr() != both[1].data_ptr():
                    # Weights become views of one tensor; in-place updates (the optimizer,
                    # set_weights, load_state_dict) keep them so.
                    both = torch.stack([a.data, b.data])
                    a.data, b.data = both[0], both[1]
                grad = torch.empty_like(both)
                a.grad, b.grad = grad[0], grad[1]
                values.append(both)
                grads.append(grad)
            stacked.append(_TwinLayer(values[0], values[0].transpose(1, 2), values[1].unsqueeze(1), grads[0], grads[1],
                                      activation))
        self.stacked = stacked

    @torch.no_grad()
    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple]:
        """Returns ``(dist_inputs, values, saved)``: the model's outputs, equal to
        ``model(obs)``, and the activations :meth:`backward` needs."""
        if self.twin:
            x = obs[:, self.pi_columns]
            acts = [x.unsqueeze(0).expand(2, *x.shape)]
            for layer in self.stacked:
                acts.append(_activate(torch.baddbmm(layer.bias, acts[-1], layer.weight_t), layer.activation))
            pi_acts = vf_acts = acts
            pi_features, vf_features = acts[-1][0], acts[-1][1]
        else:
            pi_acts = _forward_stack(self.pi_layers, obs[:, self.pi_columns])
            vf_acts = pi_acts if self.shared else _forward_stack(self.vf_layers, obs[:, self.vf_columns])
            pi_features, vf_features = pi_acts[-1], vf_acts[-1]
        dist_inputs = torch.addmm(self.logits.bias, pi_features, self.logits.weight.t())
        values = torch.addmm(self.value_out.bias, vf_features, self.value_out.weight.t()).squeeze(1)
        return dist_inputs, values, (pi_acts, vf_acts, pi_features, vf_features)

    @torch.no_grad()
    def backward(self, saved: tuple, grad_dist_inputs: torch.Tensor, grad_values: torch.Tensor) -> None:
        """Writes d loss / d parameter into each parameter's ``.grad`` (call
        :meth:`attach_grads` first), given d loss / d ``dist_inputs`` ``[B, n]`` and
        d loss / d ``values`` ``[B]`` of the rows :meth:`forward` saw."""
        pi_acts, vf_acts, pi_features, vf_features = saved
        grad_values = grad_values.unsqueeze(1)
        # Each head: dW = g^T h, db = sum(g), dh = g W.
        _linear_param_grads(self.logits, grad_dist_inputs, pi_features)
        _linear_param_grads(self.value_out, grad_values, vf_features)
        if self.twin:
            grad = torch.empty_like(pi_acts[-1])
            torch.mm(grad_dist_inputs, self.logits.weight, out=grad[0])
            torch.mm(grad_values, self.value_out.weight, out=grad[1])
            for i in range(len(self.stacked) - 1, -1, -1):
                layer = self.stacked[i]
                grad = _activation_grad(grad, pi_acts[i + 1], layer.activation)
                _weight_grad(grad, pi_acts[i], layer.weight_grad)
                torch.sum(grad, 1, out=layer.bias_grad)
                if i > 0:
                    grad = torch.bmm(grad, layer.weight)
            return
        if self.pi_layers:
            grad_pi = torch.mm(grad_dist_inputs, self.logits.weight)
            if self.shared:  # both heads read the same features
                grad_pi.addmm_(grad_values, self.value_out.weight)
            _backward_stack(self.pi_layers, pi_acts, grad_pi)
        if self.vf_layers:
            _backward_stack(self.vf_layers, vf_acts, torch.mm(grad_values, self.value_out.weight))


def _activate(y: torch.Tensor, activation: str) -> torch.Tensor:
    # In place: y is a fresh layer output; backward needs only the activated values.
    if activation == "tanh":
        if y.device.type == "cpu":
            # tanh(y) = 2 sigmoid(2y) - 1: torch's float32 tanh kernel on CPU costs about
            # three times its sigmoid (BENCHMARKS.md, "Small costs behind choices in the
            # code"); the two differ by float32 rounding (~1e-7), as TF's own fast tanh does.
            return y.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)
        return y.tanh_()
    if activation == "relu":
        return y.relu_()
    return y


def _activation_grad(grad: torch.Tensor, out: torch.Tensor, activation: str) -> torch.Tensor:
    # d loss / d pre-activation from d loss / d output and the output itself.
    if activation == "tanh":
        return torch.ops.aten.tanh_backward(grad, out)
    if activation == "relu":
        return torch.ops.aten.threshold_backward(grad, out, 0)
    return grad


def _forward_stack(layers: list[tuple[nn.Linear, str]], x: torch.Tensor) -> list[torch.Tensor]:
    # acts[0] is the input, acts[i + 1] the output of layer i (after its activation).
    acts = [x]
    for linear, activation in layers:
        acts.append(_activate(torch.addmm(linear.bias, acts[-1], linear.weight.t()), activation))
    return acts


def _weight_grad(grad_out: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> None:
    # dW = g^T x ([out, in], batched over a leading axis or not). With few input columns
    # (a first layer over a handful of observation features) MKL's product into a
    # narrow [out, in] is several times slower than the transposed one, x^T g, copied
    # back (BENCHMARKS.md, "Small costs behind choices in the code").
    if x.shape[-1] < _NARROW_INPUT:
        out.copy_(torch.matmul(x.transpose(-1, -2), grad_out).transpose(-1, -2))
    elif x.dim() == 3:
        torch.bmm(grad_out.transpose(1, 2), x, out=out)
    else:
        torch.mm(grad_out.t(), x, out=out)


def _linear_param_grads(linear: nn.Linear, grad_out: torch.Tensor, x: torch.Tensor) -> None:
    _weight_grad(grad_out, x, linear.weight.grad)
    torch.sum(grad_out, 0, out=linear.bias.grad)


def _backward_stack(layers: list[tuple[nn.Linear, str]], acts: list[torch.Tensor], grad: torch.Tensor) -> None:
    # grad is d loss / d (output of the last layer, after its activation); the
    # observation (acts[0]) needs no gradient.
    for i in range(len(layers) - 1, -1, -1):
        linear, activation = layers[i]
        grad = _activation_grad(grad, acts[i + 1], activation)
        _linear_param_grads(linear, grad, acts[i])
        if i > 0:
            grad = torch.mm(grad, linear.weight)


# ----- the action distributions' derivatives -----------------------------------------

def _categorical_columns(actions: torch.Tensor, old_inputs: torch.Tensor) -> list[torch.Tensor]:
    # What _categorical_terms reads besides the logits, once per batch: the one-hot
    # actions, the old distribution's probabilities and log-probabilities.
    logp_old_all = torch.log_softmax(old_inputs, dim=1)
    return [F.one_hot(actions.long(), old_inputs.shape[1]).float(), logp_old_all.exp(), logp_old_all]


def _categorical_terms(z: torch.Tensor, a: torch.Tensor, p_old: torch.Tensor,
                       logp_old_all: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Per row, for logits z: (logp(a), KL(old || new), entropy) and each one's d/dz:
    # a - p, p - p_old, -p (log p + H) (a one-hot).
    logp_all = torch.log_softmax(z, dim=1)
    p = logp_all.exp()
    entropy = -(p * logp_all).sum(1)
    kl = (p_old * (logp_old_all - logp_all)).sum(1)
    return (logp_all * a).sum(1), kl, entropy, a - p, p - p_old, -p * (logp_all + entropy.unsqueeze(1))


def _gaussian_columns(actions: torch.Tensor, old_inputs: torch.Tensor) -> list[torch.Tensor]:
    # The actions as [B, k] and the old distribution's inputs.
    return [actions.float().reshape(old_inputs.shape[0], -1), old_inputs]


def _gaussian_terms(z: torch.Tensor, a: torch.Tensor, old_inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # Per row, for inputs z = [mu, s] (s the log std): (logp(a), KL(old || new), entropy)
    # and each one's d/dz: d logp = [(a - mu) / var, ((a - mu) / std)^2 - 1];
    # d KL = [(mu - mu_old) / var, 1 - (var_old + (mu - mu_old)^2) / var]; d entropy = [0, 1].
    mean, log_std = z.chunk(2, dim=1)
    mean_old, log_std_old = old_inputs.chunk(2, dim=1)
    inv_var = torch.exp(-2.0 * log_std)
    diff = a - mean
    scaled = diff * diff * inv_var
    logp = -0.5 * scaled.sum(1) - 0.5 * math.log(2.0 * math.pi) * mean.shape[1] - log_std.sum(1)
    shift = mean - mean_old
    spread = (torch.exp(2.0 * log_std_old) + shift * shift) * inv_var
    kl = (log_std - log_std_old + 0.5 * spread - 0.5).sum(1)
    entropy = (log_std + 0.5 * math.log(2.0 * math.pi * math.e)).sum(1)
    dlogp = torch.cat([diff * inv_var, scaled - 1.0], dim=1)
    dkl = torch.cat([shift * inv_var, 1.0 - spread], dim=1)
    dentropy = torch.cat([torch.zeros_like(mean), torch.ones_like(log_std)], dim=1)
    return logp, kl, entropy, dlogp, dkl, dentropy


# By ActionDistSpec kind: (the batch's extra columns, the per-row terms and derivatives).
DISTRIBUTION_TERMS: dict[str, tuple[Callable[..., list[torch.Tensor]], Callable[..., tuple[torch.Tensor, ...]]]] = {
    "categorical": (_categorical_columns, _categorical_terms),
    "diag_gaussian": (_gaussian_columns, _gaussian_terms),
}


# ----- PPO's loss and gradient ---------------------------------------------------------

def supports(policy: PPOTorchPolicy) -> bool:
    """Whether ``policy``'s loss can take the closed form: the built-in dense model (no
    custom loss, no recurrent state), a categorical or diagonal-Gaussian distribution of
    the catalog, and a critic (without one autograd leaves the value layers out of the
    update)."""
    return (policy.config["use_critic"] and policy.dist_spec.kind in DISTRIBUTION_TERMS
            and not policy.is_recurrent and DenseGraph.supports(policy.model))


def ppo_grad_fn(policy: PPOTorchPolicy, tensors: dict[str, torch.Tensor]) -> Callable[..., tuple[Any, dict]]:
    """The learner's gradient function for ``policy`` on the batch ``tensors``: PPO's
    loss and its gradient written out. With ``z`` the distribution inputs, ``r`` the
    ratio, ``B`` the minibatch size:

    * surrogate: d/dz of ``-mean(min(A r, A clip(r)))`` is ``-g r dlogp/dz / B`` with
      ``g = A`` where the unclipped term is the minimum (ties included, which is every
      row inside the clip range) and 0 where the clip binds;
    * KL(old || new) and the entropy H: their own d/dz over ``B`` (DISTRIBUTION_TERMS);
    * value loss ``clamp((v - v_target)^2, 0, vf_clip)``: ``2 (v - v_target) / B`` where
      the square is within the clip, else 0.
    """
    cfg = policy.config
    if policy.dense_graph is None:
        policy.dense_graph = DenseGraph(policy.model)
    graph = policy.dense_graph
    graph.attach_grads()
    clip_low, clip_high = 1.0 - cfg["clip_param"], 1.0 + cfg["clip_param"]
    kl_coeff, entropy_coeff = policy.kl_coeff, float(policy.entropy_coeff)
    vf_coeff, vf_clip = float(cfg["vf_loss_coeff"]), float(cfg["vf_clip_param"])
    columns_of, terms_of = DISTRIBUTION_TERMS[policy.dist_spec.kind]
    # Every column the loss reads in one matrix: one gather per minibatch.
    obs = tensors[SampleBatch.OBS].float()
    dist_columns = columns_of(tensors[SampleBatch.ACTIONS], tensors[SampleBatch.ACTION_DIST_INPUTS].float())
    packed = torch.cat([obs, *dist_columns,
                        torch.stack([tensors[SampleBatch.ACTION_LOGP].float(), tensors[SampleBatch.ADVANTAGES].float(),
                                     tensors[SampleBatch.VALUE_TARGETS].float()], dim=1)], dim=1)
    widths = [obs.shape[1], *(c.shape[1] for c in dist_columns), 3]
    # total = -surrogate + kl_coeff kl + vf_coeff vf - entropy_coeff entropy
    loss_weights = torch.tensor([-1.0, kl_coeff, vf_coeff, -entropy_coeff], device=policy.device)

    def grads(index: torch.Tensor, with_stats: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        rows = len(index)
        obs, *dist_parts, rest = packed.index_select(0, index).split(widths, dim=1)
        logp_old, advantages, value_targets = rest.unbind(1)
        dist_inputs, values, saved = graph.forward(obs)

        logp, kl, entropy, dlogp, dkl, dentropy = terms_of(dist_inputs, *dist_parts)
        ratio = torch.exp(logp - logp_old)
        pg_loss1 = advantages * ratio
        pg_loss2 = advantages * ratio.clamp(clip_low, clip_high)
        surrogate = torch.minimum(pg_loss1, pg_loss2)

        grad_logp = torch.where(pg_loss1 <= pg_loss2, advantages, 0.0).mul_(ratio).mul_(-1.0 / rows)
        grad_inputs = dlogp.mul_(grad_logp.unsqueeze(1))
        grad_inputs.add_(dkl, alpha=kl_coeff / rows)
        if entropy_coeff:
            grad_inputs.add_(dentropy, alpha=-entropy_coeff / rows)
        error = values - value_targets
        squared_error = error * error
        vf_loss = squared_error.clamp(max=vf_clip)
        grad_values = torch.where(squared_error <= vf_clip, error, 0.0).mul_(2.0 * vf_coeff / rows)
        graph.backward(saved, grad_inputs, grad_values)

        means = torch.stack([surrogate, kl, vf_loss, entropy], dim=1).mean(0)
        total_loss = (means * loss_weights).sum()
        if not with_stats:
            return total_loss, {}
        return total_loss, {"total_loss": total_loss, "policy_loss": -means[0], "vf_loss": means[2],
                            "kl": means[1], "entropy": means[3]}

    return grads
