"""com.microsoft DynamicQuantizeLSTM: an LSTM whose weights are 8-bit and whose operands are rounded to 8 bits.

onnxruntime multiplies integer weights by activations it quantizes on the fly (uint8 over their range widened to
include 0): X once for the whole sequence, and each step's H before it meets R.  That per-step rounding is why
a plain LSTM on the dequantized weights is ~3e-3 away; the decomposition keeps it, as ai.onnx operators:

* W and R (``[D, rows, 4H]``, already in ``x @ W`` orientation) dequantized to float constants (scale and zero
  point per direction or per column), X through DynamicQuantizeLinear + DequantizeLinear, ``X @ W + Wb + Rb`` for
  all steps at once;
* one Loop per direction over the time steps (the trip count is X's first dim, so it folds to a constant once
  input shapes are fixed: a TensorIterator in the IR, a While in HLO) carrying H and C; its body rounds H the
  same way, adds ``H @ R``, and applies the gates with the node's activations, clip, peepholes and input_forget;
  the reverse direction runs the Loop on the time-reversed projections and reverses its stacked H back.

``sequence_lens`` is refused: onnxruntime quantizes H over its own subsets of rows when sequences end early.
"""

from __future__ import annotations

import numpy as np

from ...ir import Graph
from ...kernels import elementwise
from ...kernels.rnn import DEFAULT_ACTIVATIONS, activation_parameters, activation_specs
from ...types import TensorType
from .registry import Emitter, Refusal, decomposes

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}

#: the recurrent activations as ai.onnx operators: name -> (emitter, x, alpha, beta, element type) -> value
ACTIVATIONS = {
    "sigmoid": lambda e, x, a, b, t: e("Sigmoid", x),
    "tanh": lambda e, x, a, b, t: e("Tanh", x),
    "relu": lambda e, x, a, b, t: e("Relu", x),
    "softsign": lambda e, x, a, b, t: e("Softsign", x),
    "softplus": lambda e, x, a, b, t: e("Softplus", x),
    "leakyrelu": lambda e, x, a, b, t: e("LeakyRelu", x, alpha=float(a)),
    "elu": lambda e, x, a, b, t: e("Elu", x, alpha=float(a)),
    "thresholdedrelu": lambda e, x, a, b, t: e("ThresholdedRelu", x, alpha=float(a)),
    "hardsigmoid": lambda e, x, a, b, t: e("HardSigmoid", x, alpha=float(a), beta=float(b)),
    "affine": lambda e, x, a, b, t: e("Add", e("Mul", x, e.scalar(a, t)), e.scalar(b, t)),
    "scaledtanh": lambda e, x, a, b, t: e("Mul", e("Tanh", e("Mul", x, e.scalar(b, t))), e.scalar(a, t)),
}


def _dequantized_weight(e: Emitter, q, scale, zero_point, what: str) -> np.ndarray:
    """A ``[D, rows, 4H]`` weight as float32, its scale and zero point per direction ``[D]`` or per column
    ``[D, 4H]`` (as onnxruntime's kernel reads them)."""
    if any(v is None or v.const is None for v in (q, scale, zero_point)):
        raise Refusal(f"{what}, its scale and zero point must be constants")
    q, scale, zero_point = (v.const.numpy() for v in (q, scale, zero_point))
    shape = (q.shape[0], 1, -1) if scale.ndim == 2 else (q.shape[0], 1, 1)
    return elementwise.dequantize(q, scale.reshape(shape).astype(np.float32), zero_point.reshape(shape), np.float32)


def _fake_quantized(e: Emitter, x):
    """``x`` rounded to uint8 over its range and back, as onnxruntime rounds an activation operand."""
    q, scale, zero_point = e("DynamicQuantizeLinear", x, outputs=3)
    return e("DequantizeLinear", q, scale, zero_point)


def activations(e: Emitter, kind: str, directions: int) -> list[list[tuple]]:
    """Per direction, the (name, alpha, beta) of the f, g, h activations of a ``kind`` ("rnn", "gru", "lstm")
    layer (one list for every direction, or one per direction)."""
    defaults = DEFAULT_ACTIVATIONS[kind]
    names = list(e.attr("activations") or defaults)
    per_direction = len(defaults)
    if kind == "rnn" and directions == 1 and len(names) == 2:
        names = names[:1]  # RNN's schema default lists one activation per direction of a bidirectional layer
    if len(names) not in (per_direction, per_direction * directions):
        raise Refusal(f"{len(names)} activations for {directions} direction(s)")
    specs = [
        activation_parameters(s)
        for s in activation_specs(names, e.attr("activation_alpha") or (), e.attr("activation_beta") or ())
    ]
    unknown = sorted({name for name, _, _ in specs} - set(ACTIVATIONS))
    if unknown:
        raise Refusal(f"activation {unknown[0]!r} is not decomposed")
    if len(specs) == per_direction:
        return [specs] * directions
    return [specs[d * per_direction : (d + 1) * per_direction] for d in range(directions)]


def gate_function(e: Emitter, acts, clip, dtype: str):
    """``gate(x, role)``: the activation of role ``role`` (f, g, h) of ``x`` clipped to ``clip`` first."""

    def gate(x, role: int, clipped: bool = True):
        if clip is not None and clipped:
            x = (
                e("Clip", x, e.scalar(-clip, dtype), e.scalar(clip, dtype))
                if e.opset >= 11
                else e("Clip", x, min=-float(clip), max=float(clip))
            )
        name, alpha, beta = acts[role]
        return ACTIVATIONS[name](e, x, alpha, beta, dtype)

    return gate


def lstm_step(e: Emitter, pre, c, peepholes, gate, input_forget: bool, hidden: int, dtype: str):
    """The LSTM gates on the pre-activations ``pre`` (B, 4H, gates i, o, f, c): the new (H, C)."""
    x_i, x_o, x_f, x_c = e.split(pre, [hidden] * 4, axis=1)
    p_i, p_o, p_f = peepholes or (None, None, None)
    i = gate(x_i if p_i is None else e("Add", x_i, e("Mul", p_i, c)), 0)
    if input_forget:
        forget = e("Sub", e.scalar(1.0, dtype), i)
    else:
        forget = gate(x_f if p_f is None else e("Add", x_f, e("Mul", p_f, c)), 0)
    c_new = e("Add", e("Mul", forget, c), e("Mul", i, gate(x_c, 1)))
    o = gate(x_o if p_o is None else e("Add", x_o, e("Mul", p_o, c_new)), 0)
    return e("Mul", o, gate(c_new, 2, clipped=False)), c_new


def _step(body: Emitter, inputs, xw, recurrent, peepholes, acts, clip, input_forget: bool, hidden: int):
    """The Loop body's nodes: (iteration, condition, H, C) -> (condition, H', C', H' stacked)."""
    iteration, condition, h, c = inputs
    pre = body("Add", body("Gather", xw, iteration, axis=0), body("MatMul", _fake_quantized(body, h), recurrent))
    h_new, c_new = lstm_step(
        body, pre, c, peepholes, gate_function(body, acts, clip, "float32"), input_forget, hidden, "float32"
    )
    return [body("Identity", condition), h_new, c_new, body("Identity", h_new)]


def _loop(e: Emitter, direction: int, xw, h0, c0, recurrent, peepholes, acts, clip, input_forget, hidden, steps):
    """One direction's Loop over the time steps: (final H, final C, H of every step ``[T, B, H]``)."""
    prefix = f"{e.node.name or e.node.op}/step{direction}"
    graph = Graph(e.graph.unique_name(prefix), parent=e.graph)
    state = TensorType("float32", (None, hidden))
    inputs = [
        graph.add_input(graph.unique_name(f"{prefix}/{name}"), t)
        for name, t in (
            ("iteration", TensorType("int64", ())),
            ("condition", TensorType("bool", ())),
            ("h", state),
            ("c", state),
        )
    ]
    body = Emitter(graph, e.node, e.opset, e.defaults, prefix=prefix)
    graph.outputs = _step(body, inputs, xw, recurrent, peepholes, acts, clip, input_forget, hidden)
    graph.nodes = body.nodes
    for node in graph.nodes:
        node.graph = graph
    for value in body.constants:
        graph.initializers[value.name] = value
    return e("Loop", steps, e.const(np.asarray(True)), h0, c0, outputs=3, body=graph)


def _per_direction(e: Emitter, value, d: int):
    """``value[d]`` (a stacked per-direction input), or None."""
    return None if value is None else e("Gather", value, e.const(np.int64(d)), axis=0)


def _reversed_in_time(e: Emitter, x):
    return e.slice(x, [-1], [np.iinfo(np.int64).min], [0], [-1])


@decomposes("DynamicQuantizeLSTM")
def dynamic_quantize_lstm(e: Emitter):
    e.require_opset(11, "DynamicQuantizeLinear")
    x, w, r, b, lengths, initial_h, initial_c, p, w_scale, w_zero, r_scale, r_zero = (e.input(i) for i in range(12))
    if lengths is not None:
        raise Refusal(
            "sequence_lens is not decomposed (onnxruntime quantizes each step's H over its own subsets "
            "of rows when sequences end early)"
        )
    if int(e.attr("layout", 0) or 0):
        raise Refusal("layout=1 is not decomposed")
    direction = e.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise Refusal(f"direction {direction!r}")
    reverses = _DIRECTIONS[direction]
    hidden = int(e.attr("hidden_size") or 0)
    weights = _dequantized_weight(e, w, w_scale, w_zero, "W")
    recurrents = _dequantized_weight(e, r, r_scale, r_zero, "R")
    hidden = hidden or recurrents.shape[1]
    if weights.shape[0] != len(reverses) or recurrents.shape != (len(reverses), hidden, 4 * hidden):
        raise Refusal(
            f"W {list(weights.shape)} and R {list(recurrents.shape)} do not fit direction {direction!r} "
            f"and hidden_size {hidden}"
        )
    acts = activations(e, "lstm", len(reverses))
    clip = e.attr("clip")
    input_forget = bool(e.attr("input_forget", 0))

    operand = _fake_quantized(e, x)  # one range over the whole sequence, shared by both directions
    steps = e.dim(x, 0)
    if initial_h is None or initial_c is None:
        zeros = e(
            "ConstantOfShape",
            e("Concat", e.slice(e("Shape", x), [1], [2], [0]), e.ints([hidden]), axis=0),
            value=np.zeros(1, np.float32),
        )
    finals_h, finals_c, stacked = [], [], []
    for d, reverse in enumerate(reverses):
        xw = e("MatMul", operand, e.const(weights[d]))
        if b is not None:
            bias = _per_direction(e, b, d)
            xw = e(
                "Add",
                xw,
                e("Add", e.slice(bias, [0], [4 * hidden], [0]), e.slice(bias, [4 * hidden], [8 * hidden], [0])),
            )
        peepholes = None if p is None else e.split(_per_direction(e, p, d), [hidden] * 3, axis=0)
        h_last, c_last, ys = _loop(
            e,
            d,
            _reversed_in_time(e, xw) if reverse else xw,
            zeros if initial_h is None else _per_direction(e, initial_h, d),
            zeros if initial_c is None else _per_direction(e, initial_c, d),
            e.const(recurrents[d]),
            peepholes,
            acts[d],
            clip,
            input_forget,
            hidden,
            steps,
        )
        finals_h.append(e.unsqueeze(h_last, [0]))
        finals_c.append(e.unsqueeze(c_last, [0]))
        stacked.append(e.unsqueeze(_reversed_in_time(e, ys) if reverse else ys, [1]))

    def joined(parts, axis):
        return parts[0] if len(parts) == 1 else e("Concat", *parts, axis=axis)

    return [joined(stacked, 1), joined(finals_h, 0), joined(finals_c, 0)]
