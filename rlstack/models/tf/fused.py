"""Forward and backward of a built-in all-dense TFModel without a GradientTape.

The TensorFlow twin of :mod:`rlstack.models.torch.fused` (see there for the idea). In a
graph, a tape-derived gradient of a 64x64 PPO network is ~370 ops per SGD step, most
of them shape bookkeeping for a batch dimension only known at run time (Shape,
BroadcastGradientArgs, Reshape, Pack), each costing the executor a microsecond or more.
A loss that states its gradient with respect to the model's two outputs hands it to
:meth:`DenseGraph.gradients`, which runs the chain rule layer by layer: per dense layer
one product for the weight, a column sum for the bias, one product for the layer below
and the activation's own gradient kernel. The same numbers as the tape (to float32
rounding) in about a fifth of the ops.

Only what the catalog builds from ``fcnet_hiddens`` / ``post_fcnet_hiddens`` qualifies:
dense layers with tanh, relu or linear activations and an optional separate value
encoder. Anything else (images, other activations, a free log-std, custom models) keeps
the tape.
"""

from __future__ import annotations

from rlstack.models.specs import EncoderSpec, LayerSpec, plain_dense
from rlstack.models.tf.framework import tf
from rlstack.models.tf.model import TFModel, vector_part


class DenseGraph:
    """The layers of a dense :class:`TFModel`, run forward and backward by hand.

    Args:
        model: A built-in model accepted by :meth:`supports`; its variables are read
            where the graph runs, so optimizer updates are seen at once.
    """

    def __init__(self, model: TFModel) -> None:
        spec = model.spec
        self.model = model
        self.pi_layers = (*spec.encoder.fc, *spec.encoder.post_fc)
        self.vf_encoder: EncoderSpec | None = spec.vf_encoder
        self.vf_layers = () if spec.vf_encoder is None else (*spec.vf_encoder.fc, *spec.vf_encoder.post_fc)

    @staticmethod
    def supports(model: tf.Module) -> bool:
        """Whether ``model`` is a built-in model made of dense layers only."""
        return type(model) is TFModel and plain_dense(model.spec)

    def forward(self, obs: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tuple]:
        """Returns ``(dist_inputs, values, saved)``: the model's outputs, equal to
        ``model.policy_and_value(obs)``, and the activations :meth:`gradients` needs."""
        spec = self.model.spec
        pi_acts = self._forward_stack(self.pi_layers, vector_part(obs, spec.encoder))
        vf_acts = pi_acts if self.vf_encoder is None else self._forward_stack(self.vf_layers,
                                                                               vector_part(obs, self.vf_encoder))
        kernel, bias = self._weights("logits")
        dist_inputs = tf.nn.bias_add(tf.matmul(pi_acts[-1], kernel), bias)
        kernel, bias = self._weights("value_out")
        values = tf.squeeze(tf.nn.bias_add(tf.matmul(vf_acts[-1], kernel), bias), axis=1)
        return dist_inputs, values, (pi_acts, vf_acts)

    def gradients(self, saved: tuple, grad_dist_inputs: tf.Tensor, grad_values: tf.Tensor) -> list[tf.Tensor]:
        """d loss / d variable for every variable of ``model.variables_list`` (in that
        order), given d loss / d ``dist_inputs`` ``[B, n]`` and d loss / d ``values``
        ``[B]`` of the rows :meth:`forward` saw."""
        pi_acts, vf_acts = saved
        grads: dict[str, tf.Tensor] = {}
        grad_values = tf.expand_dims(grad_values, 1)
        grad_pi = self._linear_grads("logits", pi_acts[-1], grad_dist_inputs, grads)
        grad_vf = self._linear_grads("value_out", vf_acts[-1], grad_values, grads)
        if self.vf_encoder is None:  # both heads read the same features
            self._backward_stack(self.pi_layers, pi_acts, grad_pi + grad_vf, grads)
        else:
            self._backward_stack(self.pi_layers, pi_acts, grad_pi, grads)
            self._backward_stack(self.vf_layers, vf_acts, grad_vf, grads)
        return [grads[name] for name in sorted(self.model.weight_vars)]

    def _weights(self, layer_name: str) -> tuple[tf.Variable, tf.Variable]:
        return self.model.weight_vars[f"{layer_name}/kernel"], self.model.weight_vars[f"{layer_name}/bias"]

    def _forward_stack(self, layers: tuple[LayerSpec, ...], x: tf.Tensor) -> list[tf.Tensor]:
        # acts[0] is the input, acts[i + 1] the output of layer i (after its activation).
        acts = [x]
        for layer in layers:
            kernel, bias = self._weights(layer.name)
            y = tf.nn.bias_add(tf.matmul(acts[-1], kernel), bias)
            if layer.activation == "tanh":
                y = tf.tanh(y)
            elif layer.activation == "relu":
                y = tf.nn.relu(y)
            acts.append(y)
        return acts

    def _linear_grads(self, layer_name: str, x: tf.Tensor, grad_out: tf.Tensor, grads: dict[str, tf.Tensor],
                      input_grad: bool = True) -> tf.Tensor | None:
        # y = x W + b: dW = x^T g, db = sum(g), and d loss / d x = g W^T is returned.
        kernel, _ = self._weights(layer_name)
        grads[f"{layer_name}/kernel"] = tf.matmul(x, grad_out, transpose_a=True)
        grads[f"{layer_name}/bias"] = tf.reduce_sum(grad_out, axis=0)
        return tf.matmul(grad_out, kernel, transpose_b=True) if input_grad else None

    def _backward_stack(self, layers: tuple[LayerSpec, ...], acts: list[tf.Tensor], grad: tf.Tensor,
                        grads: dict[str, tf.Tensor]) -> None:
        # grad is d loss / d (output of the last layer, after its activation).
        for i in range(len(layers) - 1, -1, -1):
            layer = layers[i]
            if layer.activation == "tanh":
                grad = tf.raw_ops.TanhGrad(y=acts[i + 1], dy=grad)
            elif layer.activation == "relu":  # the output is positive exactly where the input is
                grad = tf.raw_ops.ReluGrad(gradients=grad, features=acts[i + 1])
            # The observation (below layer 0) needs no gradient.
            grad = self._linear_grads(layer.name, acts[i], grad, grads, input_grad=i > 0)
