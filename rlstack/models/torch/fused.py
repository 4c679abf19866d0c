"""Forward and backward of a built-in all-dense TorchModel without autograd.

On CartPole-sized MLPs torch's autograd costs more than the arithmetic: a PPO SGD step
on RLlib's default 256x256 networks spends ~0.4 ms in matrix products and ~1.4 ms in
recording and replaying the graph and dispatching ~150 small ops. A loss that can state
its gradient with respect to the model's two outputs (PPO's can, see
``ppo_torch_policy``) hands that gradient to :meth:`DenseGraph.backward`, which runs the
chain rule layer by layer with one matrix product per weight and writes the result
straight into each parameter's ``.grad`` buffer: the same numbers as autograd (to float32
rounding), about a third of the ops.

With a separate value network of the policy network's shape (the default,
``vf_share_layers=False``) the two run as one batched product per layer (``bmm`` over a
leading axis of 2): the two networks' weights, and their gradients, are made views of
one stacked tensor per layer, so nothing is copied per step.

Only what the catalog builds from ``fcnet_hiddens`` / ``post_fcnet_hiddens`` qualifies:
dense layers with tanh, relu or linear activations and an optional separate value
encoder. Anything else (images, other activations, a free log-std, custom models) goes
through autograd as before.

:class:`QDenseGraph` does the same for the built-in Q-network of the DQN family
(:class:`TorchQModel` over dense layers, dueling or not): DQN's loss states its gradient
with respect to ``Q(s, .)`` (``dqn_torch_policy``), and the chain rule runs back through
the advantage and value streams into the shared encoder.

The actor-critic blocks of SAC, TD3 and DDPG (:class:`TorchActorCritic`) have their own
graphs, :class:`~rlstack.models.torch.fused_actor_critic.ActorGraph` and
:class:`~rlstack.models.torch.fused_actor_critic.CriticsGraph`, in
``fused_actor_critic.py``: they reuse this module's activation helpers, and their losses'
gradients are written out in ``sac_torch_policy`` and ``ddpg_torch_policy``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from rlstack.models.specs import QModelSpec, plain_dense, twin_encoders
from rlstack.models.torch.model import TorchModel, TorchQModel

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


class QDenseGraph:
    """The layers of a dense :class:`TorchQModel`, run forward and backward by hand.

    The network is an encoder (``fcnet_hiddens``, ``post_fcnet_hiddens``), an advantage
    stream (``hiddens`` with ReLU, then one output per action) and, when dueling, a value
    stream of the same shape into one output, ``Q = V + A - mean_a A``.

    Args:
        model: A built-in Q-network accepted by :meth:`supports`. Its parameters are
            used in place (no copy), so optimizer updates and target-network copies
            (``load_state_dict``) are seen at once.
    """

    def __init__(self, model: TorchQModel) -> None:
        spec: QModelSpec = model.spec
        self.model = model
        self.columns = spec.encoder.column_index
        self.encoder = _dense_layers(model, (*spec.encoder.fc, *spec.encoder.post_fc))
        self.advantage = _dense_layers(model, (*spec.advantage_hiddens, spec.advantage_out))
        self.value = _dense_layers(model, (*spec.value_hiddens, spec.value_out)) if spec.dueling else []

    @staticmethod
    def supports(model: nn.Module) -> bool:
        """Whether ``model`` is a built-in Q-network (not a subclass: a user's may change
        the forward pass or add a ``custom_loss``) of dense tanh, relu or linear layers
        over vector observations (not distributional, not noisy)."""
        if type(model) is not TorchQModel:
            return False
        spec = model.spec
        if spec.encoder.images or not spec.encoder.vector_columns or spec.num_atoms > 1 or spec.noisy:
            return False
        return all(layer.kind == "dense" and layer.activation in _DIFFERENTIATED for layer in spec.layers)

    def attach_grads(self) -> None:
        """Gives every parameter a ``.grad`` buffer that :meth:`backward` overwrites."""
        for p in self.model.parameters():
            if p.grad is None or p.grad.shape != p.shape:
                p.grad = torch.empty_like(p)

    @torch.no_grad()
    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Returns ``(q_values [B, num_actions], saved)``: ``model.q_values(obs)`` and the
        activations :meth:`backward` needs."""
        encoder_acts = _forward_stack(self.encoder, obs[:, self.columns])
        advantage_acts = _forward_stack(self.advantage, encoder_acts[-1])
        if not self.value:
            return advantage_acts[-1], (encoder_acts, advantage_acts, None)
        value_acts = _forward_stack(self.value, encoder_acts[-1])
        advantages = advantage_acts[-1]
        # In the model's order, (V + A) - mean_a A: the same rounding as q_values().
        q_values = torch.add(value_acts[-1], advantages).sub_(advantages.mean(dim=1, keepdim=True))
        return q_values, (encoder_acts, advantage_acts, value_acts)

    @torch.no_grad()
    def backward(self, saved: tuple, grad_q_values: torch.Tensor) -> None:
        """Writes d loss / d parameter into each parameter's ``.grad`` (call
        :meth:`attach_grads` first), given d loss / d ``q_values`` ``[B, num_actions]`` of
        the rows :meth:`forward` saw."""
        encoder_acts, advantage_acts, value_acts = saved
        needs_features_grad = bool(self.encoder)
        if value_acts is None:
            grad_features = _backward_stack(self.advantage, advantage_acts, grad_q_values, needs_features_grad)
        else:
            # Q = V + A - mean_a A: dA = g - mean_a g, dV = sum_a g.
            grad_advantages = grad_q_values - grad_q_values.mean(dim=1, keepdim=True)
            grad_value = grad_q_values.sum(dim=1, keepdim=True)
            grad_features = _backward_stack(self.advantage, advantage_acts, grad_advantages, needs_features_grad)
            grad_from_value = _backward_stack(self.value, value_acts, grad_value, needs_features_grad)
            if needs_features_grad:  # both streams read the same features
                grad_features.add_(grad_from_value)
        if needs_features_grad:
            _backward_stack(self.encoder, encoder_acts, grad_features)


def _dense_layers(model: TorchModel, layers: tuple) -> list[tuple[nn.Linear, str]]:
    # (module, activation) of each layer spec, in order.
    return [(model.layers[layer.name], layer.activation) for layer in layers]


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


def _backward_stack(layers: list[tuple[nn.Linear, str]], acts: list[torch.Tensor], grad: torch.Tensor,
                    input_grad: bool = False) -> torch.Tensor | None:
    # grad is d loss / d (output of the last layer, after its activation); returns
    # d loss / d acts[0] when input_grad (a stream's input: the encoder's features),
    # else None (the observation needs no gradient).
    for i in range(len(layers) - 1, -1, -1):
        linear, activation = layers[i]
        grad = _activation_grad(grad, acts[i + 1], activation)
        _linear_param_grads(linear, grad, acts[i])
        if i > 0 or input_grad:
            grad = torch.mm(grad, linear.weight)
    return grad if input_grad else None
