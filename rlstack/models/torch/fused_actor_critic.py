"""Forward and backward of the built-in actor-critic blocks (SAC, TD3, DDPG) without autograd.

The reason is the one ``fused.py`` gives for PPO and DQN: with RL-Zoo's Pendulum
settings (batch 256, 256x256 or 400x300 networks, one gradient step per env step) a SAC
step spends more time recording and replaying torch's autograd graph than in its matrix
products. A loss that states its gradient with respect to the actor's outputs and the
critics' Q-values hands it to these graphs, which run the chain rule layer by layer and
write each parameter's gradient straight into its ``.grad`` buffer.

Two shapes of work make it faster than autograd, not only leaner:

* :class:`CriticsGraph` runs twin critics as one batched product per layer (``baddbmm``
  over the stacked ``[2, in, out]`` kernels of :class:`TorchCritics`), and a loss can feed
  it the replayed rows and the actor's rows in one pass: the weight gradients are taken
  from the rows the critics' loss reads (``param_rows``), the input gradient (d loss /
  d action, the actor's loss) from the others (``input_rows``), so the actor's loss never
  reaches the critics' weights, as ``critic_values(..., frozen=True)`` promises.
* :class:`ActorGraph` runs the actor once over ``[obs; next_obs]`` and back over the rows
  its loss reads.

Only what the catalog builds from ``fcnet_hiddens`` / ``post_fcnet_hiddens`` qualifies
(:func:`supports`): a :class:`TorchActorCritic` (not a subclass) over vector observations,
Box actions (Q(s, a) critics), dense tanh / relu / linear layers, one critic or stacked
twins. Anything else goes through autograd of the policy's ``loss()``.
"""

from __future__ import annotations

import torch
from torch import nn

from rlstack.models.torch.blocks import TorchActorCritic, TorchCritics, _critic_stack
from rlstack.models.torch.fused import _DIFFERENTIATED, _activate, _activation_grad


def supports(model: nn.Module) -> bool:
    """Whether :class:`ActorGraph` and :class:`CriticsGraph` cover ``model``: the built-in
    :class:`TorchActorCritic` of a Box action space, dense tanh / relu / linear layers
    over vector observations, one critic or stacked twin critics, each critic reading
    every column of ``concat(obs, action)``."""
    if type(model) is not TorchActorCritic:
        return False
    spec = model.spec
    if spec.discrete or not (len(spec.critics) == 1 or spec.stacked_critics):
        return False
    encoders = [spec.actor.encoder, *(critic.encoder for critic in spec.critics)]
    if any(encoder.images or not encoder.vector_columns for encoder in encoders):
        return False
    critic_columns = slice(0, spec.obs_size + spec.action_dim)
    if any(critic.encoder.column_index != critic_columns for critic in spec.critics):
        return False
    return all(layer.kind == "dense" and layer.activation in _DIFFERENTIATED for layer in spec.layers)


def attach_grads(params: list[nn.Parameter]) -> None:
    """Gives every parameter a ``.grad`` buffer that the graphs' backward passes overwrite
    (an optimizer's ``zero_grad`` drops them)."""
    for p in params:
        if p.grad is None or p.grad.shape != p.shape:
            p.grad = torch.empty_like(p)


class _Workspace:
    """Tensors kept from one gradient step to the next for a graph's large activations
    and gradients. A fresh megabyte-sized tensor per step comes from newly mapped memory
    whose first touch (page faults) made the element-wise ops on it several times slower
    than the arithmetic; reused buffers are touched once. Each graph runs once per
    gradient step, and nothing it returns lives in a buffer, so reuse is safe."""

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def get(self, key: tuple, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        """An uninitialised tensor of ``shape`` (``like``'s dtype and device) for ``key``."""
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape != shape or buffer.device != like.device:
            buffer = self._buffers[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
        return buffer


class ActorGraph:
    """The actor of a :class:`TorchActorCritic` accepted by :func:`supports`.

    On CPU one ``[256, 256] @ [256, 256]`` product keeps a single core busy where a
    batched product over a leading axis of 2 keeps two: each layer therefore runs the
    rows as two halves of one batched product (SAC's ``[obs; next_obs]`` halves are its
    two row sets), forward and back.

    Args:
        model: The actor-critic (or a target copy); its parameters are used in place (no
            copy), so optimizer updates and target-network averaging are seen at once.
    """

    def __init__(self, model: TorchActorCritic) -> None:
        actor = model.spec.actor
        layers = (*actor.encoder.fc, *actor.encoder.post_fc, actor.out)
        self.columns = actor.encoder.column_index
        self.linears = [model.actor[layer.name] for layer in layers]
        self.activations = [layer.activation for layer in layers]
        self.workspace = _Workspace()

    @torch.no_grad()
    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Returns ``(outputs, acts)``: ``model.actor_outputs(obs)`` ``[B, num_outputs]``
        and the activations :meth:`backward` needs (valid until the next call)."""
        acts = [obs[:, self.columns]]
        last = len(self.linears) - 1
        for i, (linear, activation) in enumerate(zip(self.linears, self.activations)):
            # The outputs (small) are fresh: the caller keeps them.
            out = None if i == last else self.workspace.get(("act", i), (len(obs), linear.out_features), obs)
            acts.append(_activate(_addmm_halves(acts[-1], linear.weight.t(), linear.bias, out), activation))
        return acts[-1], acts

    @torch.no_grad()
    def backward(self, acts: list[torch.Tensor], grad_outputs: torch.Tensor, rows: slice | None = None) -> None:
        """Writes d loss / d parameter into each actor parameter's ``.grad``, given d loss /
        d outputs of the forward pass's rows ``rows`` (all by default; the others carry
        no gradient)."""
        grad = grad_outputs
        for i in range(len(self.linears) - 1, -1, -1):
            linear = self.linears[i]
            x, y = (acts[i], acts[i + 1]) if rows is None else (acts[i][rows], acts[i + 1][rows])
            # In place below the top layer: grad is then this graph's own buffer.
            grad = _activation_grad_(grad, y, self.activations[i], in_place=i < len(self.linears) - 1)
            _linear_grads(linear, grad, x, self.workspace)
            if i > 0:
                grad = _matmul_halves(grad, linear.weight, self.workspace.get(("grad", i), x.shape, x))


class CriticsGraph:
    """The Q(s, a) critics of a :class:`TorchCritics` (one, or stacked twins) accepted by
    :func:`supports`, over inputs ``x = concat(obs, action)``.

    Twin critics run as one batched product per layer; a single critic runs its rows as
    two halves of one (see :class:`ActorGraph`).

    Args:
        critics: The critics (a model's, or a target copy); parameters used in place.
    """

    def __init__(self, critics: TorchCritics) -> None:
        self.stacked = critics.stacked
        layers = _critic_stack(critics.critic_specs[0])
        self.activations = [layer.activation for layer in layers]
        if self.stacked:
            self.kernels, self.biases = list(critics.kernels), list(critics.biases)
            self.linears: list[nn.Linear] = []
        else:
            self.linears = [critics.layers[layer.name] for layer in layers]
        self.workspace = _Workspace()

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Returns ``(q, acts)``: every critic's ``Q(s, a)`` ``[C, B]`` for ``x [B, in]``
        (equal to ``critic_values(obs, actions)``) and the activations :meth:`backward`
        needs (valid until the next call)."""
        last = len(self.activations) - 1
        if self.stacked:
            acts = [x.unsqueeze(0).expand(2, *x.shape)]
            for i, (kernel, bias, activation) in enumerate(zip(self.kernels, self.biases, self.activations)):
                out = None if i == last else self.workspace.get(("act", i), (2, len(x), kernel.shape[2]), x)
                acts.append(_activate(torch.baddbmm(bias, acts[-1], kernel, out=out), activation))
            return acts[-1].squeeze(2), acts
        acts = [x]
        for i, (linear, activation) in enumerate(zip(self.linears, self.activations)):
            out = None if i == last else self.workspace.get(("act", i), (len(x), linear.out_features), x)
            acts.append(_activate(_addmm_halves(acts[-1], linear.weight.t(), linear.bias, out), activation))
        return acts[-1].view(1, -1), acts

    @torch.no_grad()
    def backward(self, acts: list[torch.Tensor], grad_q: torch.Tensor, param_rows: slice | None,
                 input_rows: slice | None = None, input_columns: slice | None = None) -> torch.Tensor | None:
        """The chain rule from d loss / d ``q`` ``[C, B]`` back through the critics.

        Args:
            acts: From :meth:`forward`.
            grad_q: d loss / d q of every critic and row.
            param_rows: The rows whose gradient goes into the critics' ``.grad`` (the
                critics' own loss), or None to leave the weights' gradients alone.
            input_rows: The rows whose gradient w.r.t. the input is returned (a loss that
                reads the critics frozen), or None.
            input_columns: The input columns of that gradient (the action's).

        Returns:
            d loss / d ``x[input_rows, input_columns]``, summed over the critics, or None
            without ``input_rows``.
        """
        if not self.stacked:
            return self._backward_single(acts, grad_q[0].unsqueeze(1), param_rows, input_rows, input_columns)
        grad = grad_q.unsqueeze(2)
        last = len(self.kernels) - 1
        for i in range(last, -1, -1):
            grad = _activation_grad_(grad, acts[i + 1], self.activations[i], in_place=i < last)
            if param_rows is not None:
                # dW = x^T g, db = sum over rows of g, per critic.
                x, grad_rows = acts[i][:, param_rows], grad[:, param_rows]
                torch.bmm(x.transpose(1, 2), grad_rows, out=self.kernels[i].grad)
                torch.sum(grad_rows, 1, keepdim=True, out=self.biases[i].grad)
            if i > 0:
                grad = _matmul(grad, self.kernels[i].transpose(1, 2), self.workspace.get(("grad", i), acts[i].shape, grad))
            elif input_rows is not None:
                kernel = self.kernels[0][:, input_columns]
                return torch.bmm(grad[:, input_rows], kernel.transpose(1, 2)).sum(dim=0)
        return None

    @torch.no_grad()
    def forward_first(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Stacked twins only: the first critic alone, ``(Q_0(s, a) [B], acts)`` (equal to
        ``critic_values(obs, actions, first_only=True)[0]``), rows as two halves of one
        batched product: what DDPG's and TD3's actor loss reads."""
        acts = [x]
        last = len(self.kernels) - 1
        for i, (kernel, bias, activation) in enumerate(zip(self.kernels, self.biases, self.activations)):
            out = None if i == last else self.workspace.get(("first", i), (len(x), kernel.shape[2]), x)
            acts.append(_activate(_addmm_halves(acts[-1], kernel[0], bias[0], out), activation))
        return acts[-1].view(-1), acts

    @torch.no_grad()
    def backward_first(self, acts: list[torch.Tensor], grad_q: torch.Tensor, input_columns: slice) -> torch.Tensor:
        """d loss / d ``x[:, input_columns]`` from d loss / d Q_0 ``[B]`` of
        :meth:`forward_first` (the critic's weights take no gradient)."""
        grad = grad_q.unsqueeze(1)
        last = len(self.kernels) - 1
        for i in range(last, 0, -1):
            grad = _activation_grad_(grad, acts[i + 1], self.activations[i], in_place=i < last)
            grad = _matmul_halves(grad, self.kernels[i][0].t(), self.workspace.get(("first_grad", i), acts[i].shape, grad))
        grad = _activation_grad_(grad, acts[1], self.activations[0], in_place=last > 0)
        return torch.mm(grad, self.kernels[0][0][input_columns].t())

    def _backward_single(self, acts: list[torch.Tensor], grad: torch.Tensor, param_rows: slice | None,
                         input_rows: slice | None, input_columns: slice | None) -> torch.Tensor | None:
        last = len(self.linears) - 1
        for i in range(last, -1, -1):
            linear = self.linears[i]
            grad = _activation_grad_(grad, acts[i + 1], self.activations[i], in_place=i < last)
            if param_rows is not None:
                _linear_grads(linear, grad[param_rows], acts[i][param_rows], self.workspace)
            if i > 0:
                grad = _matmul_halves(grad, linear.weight, self.workspace.get(("grad", i), acts[i].shape, grad))
            elif input_rows is not None:
                return torch.mm(grad[input_rows], linear.weight[:, input_columns])
        return None


def _activation_grad_(grad: torch.Tensor, out: torch.Tensor, activation: str, in_place: bool) -> torch.Tensor:
    # d loss / d pre-activation from d loss / d output and the output itself, written
    # over grad when in_place (grad is then a workspace buffer).
    if not in_place or activation == "linear":
        return _activation_grad(grad, out, activation)
    if activation == "tanh":
        return torch.ops.aten.tanh_backward.grad_input(grad, out, grad_input=grad)
    return torch.ops.aten.threshold_backward.grad_input(grad, out, 0, grad_input=grad)


def _halves(x: torch.Tensor) -> torch.Tensor:
    # [B, k] as two halves of rows [2, B / 2, k] (one [1, B, k] when B is odd): the batch
    # axis of one batched product.
    rows = x.shape[0]
    return x.reshape(2, rows // 2, x.shape[1]) if rows % 2 == 0 else x.unsqueeze(0)


def _addmm_halves(x: torch.Tensor, kernel: torch.Tensor, bias: torch.Tensor,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    # bias + x @ kernel [B, out] for kernel [in, out] (into out when given), computed as
    # two halves of rows in one batched product.
    halves = _halves(x)
    out_halves = None if out is None else out.view(*halves.shape[:2], -1)
    y = torch.baddbmm(bias, halves, kernel.expand(len(halves), *kernel.shape), out=out_halves)
    return y.view(x.shape[0], -1)


def _matmul(grad: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # grad @ weight, batched, into out. A Q head's one output (K = 1) makes it an outer
    # product: broadcast, as bmm's path for K = 1 was several times slower, with an
    # output layout that slowed the ops after it.
    if weight.shape[-2] == 1:
        return torch.mul(grad, weight, out=out)
    return torch.bmm(grad, weight, out=out)


def _matmul_halves(grad: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # grad @ weight [B, in] (into out) for grad [B, out] and weight [out, in], in two
    # halves of rows.
    if weight.shape[0] == 1:
        return torch.mul(grad, weight, out=out)
    halves = _halves(grad)
    torch.bmm(halves, weight.expand(len(halves), *weight.shape), out=out.view(*halves.shape[:2], -1))
    return out


def _linear_grads(linear: nn.Linear, grad: torch.Tensor, x: torch.Tensor, workspace: _Workspace) -> None:
    # dW = g^T x (the two halves' products summed), db = sum over rows of g.
    grad_halves, x_halves = _halves(grad), _halves(x)
    products = workspace.get(("dW", id(linear)), (len(grad_halves), *linear.weight.shape), grad)
    torch.bmm(grad_halves.transpose(1, 2), x_halves, out=products)
    torch.sum(products, 0, out=linear.weight.grad)
    torch.sum(grad, 0, out=linear.bias.grad)
