"""The torch optimizers of the policies (Adam, IMPALA's RMSProp), global-norm gradient
clipping, and the NaN/inf check that runs before every update."""

from __future__ import annotations

import math

import numpy as np
import torch

from rlstack.errors import NonFiniteError
from rlstack.utils.threads import flush_denormals

# Subnormal floats flushed to zero before torch starts its intra-op threads, which copy
# their creator's mode (rlstack/utils/threads.py: why, and what trainer.stop() puts back).
flush_denormals()


def check_finite_update(optimizer: "Adam | RMSProp", loss: torch.Tensor | None = None,
                        grad_norm: torch.Tensor | None = None) -> None:
    """Raises before an update from a NaN or inf loss or gradient.

    With ``loss`` (and ``grad_norm``, where clipping computed it) only those scalars are
    read: one device sync on a GPU. Without either, the gradients themselves are checked
    (a norm per parameter), for callers that apply gradients computed elsewhere. A norm that
    overflows float32 (entries beyond ~1e19) counts as non-finite: such an update would
    wreck the weights just the same.

    Raises:
        NonFiniteError: Naming what was not finite; no parameter has been touched.
    """
    if loss is None and grad_norm is None:
        grads = [p.grad for p in optimizer.params if p.grad is not None]
        if not grads or bool(torch.isfinite(torch.stack(torch._foreach_norm(grads))).all()):
            return
        bad = [f"#{i} {list(g.shape)}" for i, g in enumerate(grads) if not bool(torch.isfinite(g).all())]
        what = f"gradients of parameters {', '.join(bad)}" if bad else "gradient norm (overflow)"
    else:
        values = {name: value for name, value in (("loss", loss), ("gradient norm", grad_norm)) if value is not None}
        # One read of the device for both scalars (one sync on a GPU): a NaN or inf in
        # either makes their sum NaN or inf.
        total = loss + grad_norm if loss is not None and grad_norm is not None else next(iter(values.values()))
        if bool(torch.isfinite(total).all()):
            return
        what = (" and ".join(f"{name} ({value.item()})" for name, value in values.items()
                             if not math.isfinite(value.item()))
                or " + ".join(values) + " (overflow)")
    raise NonFiniteError.in_update(what, f"a torch {type(optimizer).__name__} step", optimizer.lr)


class Adam:
    """Adam (Kingma & Ba 2015) over a list of parameters, the twin of tf_policy.Adam.

    ``torch.optim.Adam`` would do, but constructing any ``torch.optim`` optimizer imports
    torch's compiler stack (``torch._dynamo``, 1-2 s of start-up on these machines). This
    one calls the same fused kernel (``torch._fused_adam_``) directly, falling back to a
    plain implementation where the kernel is missing, and keeps its state in the same
    three slots per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, eps: float = 1e-8,
                 beta1: float = 0.9, beta2: float = 0.999) -> None:
        self.params = list(params)
        self.lr, self.eps, self.beta1, self.beta2 = float(lr), float(eps), beta1, beta2
        self.exp_avgs = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p) for p in self.params]
        # Each parameter's step count is a view into one vector, so that a step where every
        # parameter has a gradient counts them all with one op (not one per parameter).
        device = self.params[0].device if self.params else None
        self._all_steps = torch.zeros(len(self.params), dtype=torch.float32, device=device)
        self.steps = list(self._all_steps.unbind())
        self._fused = hasattr(torch, "_fused_adam_")

    def zero_grad(self) -> None:
        """Drops the parameters' gradients."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, loss: torch.Tensor | None = None, grad_norm: torch.Tensor | None = None,
             check_finite: bool = True) -> None:
        """Applies one update from the parameters' ``.grad``.

        Args:
            loss: The loss the gradients come from; checked instead of the gradients.
            grad_norm: Their global norm, if clipping computed it; checked too.
            check_finite: False where the caller has checked already (the learner loop
                checks every optimizer's loss before it steps any).

        Raises:
            NonFiniteError: If what is checked (see :func:`check_finite_update`) is NaN
                or inf; nothing is updated.
        """
        if check_finite:
            check_finite_update(self, loss, grad_norm)
        params, exp_avgs, exp_avg_sqs, steps = self.params, self.exp_avgs, self.exp_avg_sqs, self.steps
        every_grad = all(p.grad is not None for p in params)
        if not every_grad:
            # As torch.optim: a parameter the loss does not use (say, the value layers of
            # PPO with use_critic=False) keeps its weights and its moments.
            used = [i for i, p in enumerate(params) if p.grad is not None]
            params, exp_avgs, exp_avg_sqs, steps = ([values[i] for i in used]
                                                    for values in (params, exp_avgs, exp_avg_sqs, steps))
            if not params:
                return
        grads = [p.grad for p in params]
        if every_grad:
            self._all_steps.add_(1.0)
        else:
            torch._foreach_add_(steps, 1.0)
        if self._fused:
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=self.lr,
                               beta1=self.beta1, beta2=self.beta2, weight_decay=0.0, eps=self.eps, amsgrad=False,
                               maximize=False)
            return
        for p, g, m, v, step in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
            m.mul_(self.beta1).add_(g, alpha=1.0 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
            correction1 = 1.0 - self.beta1 ** float(step)
            correction2 = 1.0 - self.beta2 ** float(step)
            denom = (v.sqrt() / correction2**0.5).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / correction1)

    def get_state(self) -> dict[str, np.ndarray]:
        """The step count and both moments per parameter, as numpy copies."""
        state = {}
        for i, (step, m, v) in enumerate(zip(self.steps, self.exp_avgs, self.exp_avg_sqs)):
            state[f"{i}/step"] = step.detach().cpu().numpy().copy()
            state[f"{i}/exp_avg"] = m.detach().cpu().numpy().copy()
            state[f"{i}/exp_avg_sq"] = v.detach().cpu().numpy().copy()
        return state

    @torch.no_grad()
    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        for i, (step, m, v) in enumerate(zip(self.steps, self.exp_avgs, self.exp_avg_sqs)):
            step.copy_(torch.from_numpy(np.array(state[f"{i}/step"], dtype=np.float32)))
            m.copy_(torch.from_numpy(np.array(state[f"{i}/exp_avg"], dtype=np.float32)))
            v.copy_(torch.from_numpy(np.array(state[f"{i}/exp_avg_sq"], dtype=np.float32)))


class RMSProp:
    """RMSProp as in the IMPALA paper's TF implementation (momentum form), the twin of
    tf_policy.RMSProp: ``ms = decay ms + (1 - decay) g^2``; ``mom = momentum mom +
    lr g / sqrt(ms + eps)``; ``w -= mom``. ``ms`` starts at 1 (TF1's RMSPropOptimizer).
    """

    def __init__(self, params: list[torch.nn.Parameter], lr: float, decay: float = 0.99, momentum: float = 0.0,
                 eps: float = 0.1) -> None:
        self.params = list(params)
        self.lr, self.decay, self.momentum, self.eps = float(lr), float(decay), float(momentum), float(eps)
        self.mean_squares = [torch.ones_like(p) for p in self.params]
        self.moments = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        """Drops the parameters' gradients."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, loss: torch.Tensor | None = None, grad_norm: torch.Tensor | None = None,
             check_finite: bool = True) -> None:
        """Applies one update from the parameters' ``.grad``; ``loss``, ``grad_norm`` and
        ``check_finite`` as in :meth:`Adam.step`.

        Raises:
            NonFiniteError: See :meth:`Adam.step`; nothing is updated.
        """
        if any(p.grad is None for p in self.params):
            raise RuntimeError("Every parameter needs a gradient before RMSProp.step(); is one unused by the loss?")
        if check_finite:
            check_finite_update(self, loss, grad_norm)
        for p, ms, mom in zip(self.params, self.mean_squares, self.moments):
            ms.mul_(self.decay).addcmul_(p.grad, p.grad, value=1.0 - self.decay)
            mom.mul_(self.momentum).add_(p.grad / torch.sqrt(ms + self.eps), alpha=self.lr)
            p.sub_(mom)

    def get_state(self) -> dict[str, np.ndarray]:
        """Mean squares and momentum buffers per parameter, as numpy copies."""
        state = {}
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            state[f"{i}/mean_square"] = ms.detach().cpu().numpy().copy()
            state[f"{i}/momentum"] = mom.detach().cpu().numpy().copy()
        return state

    @torch.no_grad()
    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restores :meth:`get_state`."""
        for i, (ms, mom) in enumerate(zip(self.mean_squares, self.moments)):
            ms.copy_(torch.from_numpy(np.array(state[f"{i}/mean_square"], dtype=np.float32)))
            mom.copy_(torch.from_numpy(np.array(state[f"{i}/momentum"], dtype=np.float32)))


def clip_grad_norm(params: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scales gradients so their global norm is at most ``max_norm``; returns the norm
    before clipping (torch.nn.utils.clip_grad_norm_'s formula)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:  # nothing in the loss (an optimizer whose loss this step skipped)
        return torch.zeros((), device=params[0].device if params else None)
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))  # one call for all norms
    torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm
