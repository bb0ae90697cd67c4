"""ai.onnx RNN, GRU and LSTM (every version) unrolled over their static time steps, once for every target.

Each step is a few MatMul/Add/activation nodes, so every ONNX variant (peepholes, ``input_forget``,
``linear_before_reset``, any activation, ``clip``, reverse, bidirectional, batch-major ``layout``) decomposes
with the same code, and the numbers follow the cell equations of :mod:`opconv.kernels.rnn`.  The input
projection ``X @ W^T + Wb`` of all steps is one MatMul before the loop; each step adds the recurrent
projection.  With ``sequence_lens`` (unless it is a constant equal to the sequence length everywhere) each
step is masked per batch entry: past an entry's length its state is kept and its output is zero; in the
reverse direction this makes each entry start at its own last valid step, as ONNX defines.  Unrolling needs
the sequence length: the converters run this pass on their static copy.
"""

from __future__ import annotations

import numpy as np

from .recurrent import activations, gate_function, lstm_step
from .registry import Emitter, Refusal, decomposes

_GATES = {"RNN": "h", "GRU": "zrh", "LSTM": "iofc"}  # ONNX gate stacking order
_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}
MAX_STEPS = 1024  # unrolling a longer sequence would make an unreasonably large graph


def _weight(value):
    """A weight input as a numpy array when it is a constant, else the value itself (or None)."""
    if value is None:
        return None
    return value if value.const is None else value.const.numpy()


class _Cell:
    """One direction's weights (numpy arrays for constants, else values) and its step."""

    def __init__(self, e: Emitter, kind: str, w, r, bias, peep, hidden: int, dtype: str, acts, clip):
        self.e, self.kind, self.hidden, self.dtype = e, kind, hidden, dtype
        self.gates = len(_GATES[kind])
        self.gate = gate_function(e, acts, clip, dtype)
        self.w, self.r = w, r  # (gates*H, I), (gates*H, H)
        rows = self.gates * hidden
        self.wb = None if bias is None else self._part(bias, 0, 2, rows)
        self.rb = None if bias is None else self._part(bias, 1, 2, rows)
        self.peep = None if peep is None else [self._value(self._part(peep, k, 3, hidden)) for k in range(3)]
        self.input_forget = bool(e.attr("input_forget", 0))
        self.linear_before_reset = bool(e.attr("linear_before_reset", 0))

    def _value(self, w):
        return self.e.const(w.astype(self.dtype)) if isinstance(w, np.ndarray) else w

    def _part(self, w, i: int, n: int, size: int):
        """Piece ``i`` of ``n`` equal pieces (of ``size`` rows) of ``w`` along axis 0."""
        if isinstance(w, np.ndarray):
            return np.split(w, n, axis=0)[i]
        return self.e.split(w, [size] * n, axis=0)[i]

    def _gates_of(self, array, letters: str):
        """The rows of the listed gates of a gate-stacked array, in the listed order."""
        order = _GATES[self.kind]
        parts = [self._part(array, order.index(g), self.gates, self.hidden) for g in letters]
        if len(parts) == 1:
            return parts[0]
        if all(isinstance(p, np.ndarray) for p in parts):
            return np.concatenate(parts, axis=0)
        return self.e("Concat", *[self._value(p) for p in parts], axis=0)

    def _transposed(self, w):
        return (
            self.e.const(np.ascontiguousarray(w.T).astype(self.dtype))
            if isinstance(w, np.ndarray)
            else self.e("Transpose", w, perm=[1, 0])
        )

    def _add_bias(self, x, bias):
        if bias is None or (isinstance(bias, np.ndarray) and not np.any(bias)):
            return x
        return self.e("Add", x, self._value(bias))

    def project(self, xt):
        """``X @ W^T + Wb`` for every step at once: (T, B, gates*H)."""
        return self._add_bias(self.e("MatMul", xt, self._transposed(self.w)), self.wb)

    def _recur(self, h, letters: str):
        """``H @ R_letters^T + Rb_letters`` as one MatMul over the listed gates."""
        out = self.e("MatMul", h, self._transposed(self._gates_of(self.r, letters)))
        return out if self.rb is None else self._add_bias(out, self._gates_of(self.rb, letters))

    def step(self, xw, h, c):
        """One step on the projected input ``xw`` (B, gates*H): the new ``(h, c)``."""
        e, gate, hidden = self.e, self.gate, self.hidden
        if self.kind == "RNN":
            return gate(e("Add", xw, self._recur(h, "h")), 0), None
        if self.kind == "GRU":
            xz, xr, xh = e.split(xw, [hidden] * 3, axis=1)
            zr = e("Add", e("Concat", xz, xr, axis=1), self._recur(h, "zr"))
            z_pre, r_pre = e.split(zr, [hidden] * 2, axis=1)
            z, r = gate(z_pre, 0), gate(r_pre, 0)
            if self.linear_before_reset:
                hh = e("Mul", r, self._recur(h, "h"))
            else:
                hh = self._recur(e("Mul", r, h), "h")
            cand = gate(e("Add", xh, hh), 1)
            # H' = (1 - z) * h~ + z * H = h~ + z * (H - h~)
            return e("Add", cand, e("Mul", z, e("Sub", h, cand))), None
        pre = e("Add", xw, self._recur(h, "iofc"))
        return lstm_step(e, pre, c, self.peep, gate, self.input_forget, hidden, self.dtype)


def _initial(e: Emitter, value, d: int, batch: int, hidden: int, dtype: str, layout: int):
    """Direction ``d``'s initial state (B, H): the input's slice, or zeros."""
    if value is None:
        return e.const(np.zeros((batch, hidden), dtype))
    if value.const is not None:
        data = value.const.numpy()
        return e.const(data[d] if layout == 0 else data[:, d])
    return e("Reshape", e("Gather", value, e.const(np.int64(d)), axis=layout), e.ints([batch, hidden]))


def _steps_of(e: Emitter, x, steps: int, rest: list[int]):
    """``x`` (T, ...) cut into its ``steps`` slices, each reshaped to ``rest``."""
    parts = e.split(x, [1] * steps, axis=0)
    return [e("Reshape", p, e.ints(rest)) for p in parts]


def _stacked(e: Emitter, values: list, shape: list[int], axis: int):
    """``values`` each reshaped to ``shape`` and concatenated along ``axis``."""
    parts = [e("Reshape", v, e.ints(shape)) for v in values]
    return parts[0] if len(parts) == 1 else e("Concat", *parts, axis=axis)


@decomposes("LSTM", domain="", since=1, composite=True)
@decomposes("GRU", domain="", since=1, composite=True)
@decomposes("RNN", domain="", since=1, composite=True)
def recurrent_1(e: Emitter):
    kind = e.node.op
    x = e.input(0)
    direction = e.attr("direction", "forward")
    direction = "forward" if direction == "foward" else direction  # GRU-1's schema default is misspelt
    if direction not in _DIRECTIONS:
        raise Refusal(f"direction {direction!r}")
    reverses = _DIRECTIONS[direction]
    layout = int(e.attr("layout", 0) or 0)
    shape = e.static_shape(x)
    if shape is None:
        raise Refusal("the input's shape is not static (unrolling needs the sequence length)")
    steps, batch = (shape[0], shape[1]) if layout == 0 else (shape[1], shape[0])
    if steps > MAX_STEPS:
        raise Refusal(f"{steps} time steps is too many to unroll (limit {MAX_STEPS})")
    dtype = e.dtype(x)
    w, r, bias = _weight(e.input(1)), _weight(e.input(2)), _weight(e.input(3))
    peep = _weight(e.input(7)) if kind == "LSTM" else None
    lens = _weight(e.input(4))
    if isinstance(lens, np.ndarray) and np.all(lens == steps):
        lens = None  # every entry runs the whole sequence: no masking
    r_shape = r.shape if isinstance(r, np.ndarray) else e.static_shape(r)
    if r_shape is None:
        raise Refusal("R's shape is unknown")
    hidden = int(r_shape[-1])
    declared = e.node.attrs.get("hidden_size")
    if declared is not None and int(declared.value) != hidden:
        raise Refusal(f"hidden_size {declared.value} does not match R's shape {tuple(r_shape)}")
    clip = e.node.attrs.get("clip")
    clip = None if clip is None else float(clip.value)
    acts = activations(e, kind.lower(), len(reverses))

    # Time-major (T, B, I); the input projection of every step at once, then split per step.
    xt = x if layout == 0 else e("Transpose", x, perm=[1, 0, 2])
    lens_value = None
    if lens is not None:
        e.require_opset(9, "masking the steps past sequence_lens (Where, Greater of integers)")
        lens_value = e.const(lens) if isinstance(lens, np.ndarray) else lens
    ys, hs, cs = [], [], []
    for d, reverse in enumerate(reverses):

        def pick(v, d=d):  # called at once, for this direction
            if v is None:
                return None
            if isinstance(v, np.ndarray):
                return v[d]
            return e("Gather", v, e.const(np.int64(d)), axis=0)

        cell = _Cell(e, kind, pick(w), pick(r), pick(bias), pick(peep), hidden, dtype, acts[d], clip)
        per_step = _steps_of(e, cell.project(xt), steps, [batch, cell.gates * hidden])
        h = _initial(e, e.input(5), d, batch, hidden, dtype, layout)
        c = _initial(e, e.input(6), d, batch, hidden, dtype, layout) if kind == "LSTM" else None
        outs = [None] * steps
        for t in reversed(range(steps)) if reverse else range(steps):
            h_new, c_new = cell.step(per_step[t], h, c)
            if lens_value is None:
                h, c, outs[t] = h_new, c_new, h_new
            else:  # (B, 1): step t is inside the entry's sequence
                running = e.unsqueeze(e("Greater", lens_value, e.const(np.asarray(t, np.int32))), [1])
                h = e("Where", running, h_new, h)
                c = None if c is None else e("Where", running, c_new, c)
                outs[t] = e("Where", running, h_new, e.scalar(0.0, dtype))
        ys.append(_stacked(e, outs, [1, 1, batch, hidden], 0))
        hs.append(h)
        cs.append(c)

    y = ys[0] if len(ys) == 1 else e("Concat", *ys, axis=1)  # (T, D, B, H)
    y_h = _stacked(e, hs, [1, batch, hidden], 0)  # (D, B, H)
    y_c = None if kind != "LSTM" else _stacked(e, cs, [1, batch, hidden], 0)
    if layout == 1:
        y = e("Transpose", y, perm=[2, 0, 1, 3])
        y_h = e("Transpose", y_h, perm=[1, 0, 2])
        y_c = None if y_c is None else e("Transpose", y_c, perm=[1, 0, 2])
    return [v if e.output_used(i) else None for i, v in enumerate([y, y_h, y_c])]
