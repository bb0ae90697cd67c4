"""ONNX RNN, GRU and LSTM (every version) unrolled over their static time steps into opset1 layers.

opset1 has LSTMCell (and RNNCell, outside the published list) but no GRU
cell, no peepholes in the published LSTMCell and only sigmoid/tanh/relu
activations; a TensorIterator would be a loop the static shapes do not need.
Unrolling with the converter's static shapes avoids all of that: each step is
a few MatMul/Add/activation layers, so every ONNX variant (peepholes,
``input_forget``, ``linear_before_reset``, any activation, ``clip``, reverse,
bidirectional, batch-major ``layout``) converts with the same code, and the
numbers follow the cell equations in :mod:`opconv.kernels.rnn` exactly.

The input projection ``X @ W^T + Wb`` of all steps is one MatMul before the
loop; each step adds the recurrent projection.  With ``sequence_lens``
(unless it is a constant equal to the sequence length everywhere), each step
is masked per batch entry: past an entry's length its state is kept and its
output is zero; in the reverse direction this makes each entry start at its
own last valid step, as ONNX defines.
"""

from __future__ import annotations

import numpy as np

from ...kernels import rnn as K
from ...types import TensorType, element_type
from ._common import (Refuse, Rule, attr, const, constant_value, np_dtype, i64, ov,
                      static_shape)

_GATES = {"RNN": "h", "GRU": "zrh", "LSTM": "iofc"}  # ONNX gate stacking order
_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}
_MAX_STEPS = 1024  # unrolling a longer sequence would make an unreasonably large IR


def _activation(b, x, spec, dtype):
    """Apply one ONNX RNN activation ``(name, alpha, beta)`` with opset1 layers."""
    name, alpha, beta = spec
    name = name.lower()
    default_alpha, default_beta = (K._ACTIVATIONS[name][1:] if name in K._ACTIVATIONS else (None, None))
    alpha = default_alpha if alpha is None else alpha
    beta = default_beta if beta is None else beta
    builders = {
        "sigmoid": lambda: ov(b, "Sigmoid", x),
        "tanh": lambda: ov(b, "Tanh", x),
        "relu": lambda: ov(b, "ReLU", x),
        "affine": lambda: ov(b, "Add", ov(b, "Multiply", x, const(b, alpha, dtype)), const(b, beta, dtype)),
        "leakyrelu": lambda: ov(b, "PReLU", x, const(b, [alpha], dtype)),
        "thresholdedrelu": lambda: ov(b, "Multiply", x, ov(b, "Convert", ov(
            b, "Greater", x, const(b, alpha, dtype)), destination_type=np.dtype(dtype).name)),
        "scaledtanh": lambda: ov(b, "Multiply", ov(b, "Tanh", ov(b, "Multiply", x, const(b, beta, dtype))),
                                 const(b, alpha, dtype)),
        "hardsigmoid": lambda: ov(b, "HardSigmoid", x, const(b, alpha, dtype), const(b, beta, dtype)),
        "elu": lambda: ov(b, "Elu", x, alpha=float(alpha)),
        "softsign": lambda: ov(b, "Divide", x, ov(b, "Add", ov(b, "Abs", x), const(b, 1, dtype))),
        "softplus": lambda: ov(b, "Log", ov(b, "Add", ov(b, "Exp", x), const(b, 1, dtype))),
    }
    if name not in builders:
        raise Refuse(f"activation {spec[0]!r} has no opset1 form")
    return builders[name]()


def _activations(node, kind: str, directions: int) -> list[list]:
    """Per direction, the ``(name, alpha, beta)`` specs of the f, g, h roles."""
    per = len(K.DEFAULT_ACTIVATIONS[kind.lower()])
    names = attr(node, "activations")
    if names is None:
        return [[(n, None, None) for n in K.DEFAULT_ACTIVATIONS[kind.lower()]]] * directions
    names = list(names)
    if kind == "RNN" and directions == 1 and len(names) == 2:
        names = names[:1]  # RNN's schema default lists one activation per direction of a bidirectional layer
    if len(names) != per * directions:
        raise Refuse(f"{len(names)} activations for {directions} direction(s) of {kind}")
    specs = K.activation_specs(names, attr(node, "activation_alpha") or (), attr(node, "activation_beta") or ())
    return [[(n, a, bb) for n, a, bb in specs[d * per:(d + 1) * per]] for d in range(directions)]


class _Cell:
    """One direction's weights and step function; weights are numpy arrays (constants) or run-time values."""

    def __init__(self, b, kind, node, w, r, bias, peep, hidden, dtype, acts, clip):
        self.b, self.kind, self.hidden, self.dtype, self.acts, self.clip = b, kind, hidden, dtype, acts, clip
        self.gates = len(_GATES[kind])
        self.w = w  # (gates*H, I)
        self.r = r  # (gates*H, H)
        self.wb = None if bias is None else _part(b, bias, 0, 0, 2)
        self.rb = None if bias is None else _part(b, bias, 0, 1, 2)
        self.peep = peep
        self.input_forget = bool(attr(node, "input_forget", 0))
        self.linear_before_reset = bool(attr(node, "linear_before_reset", 0))

    def _clip(self, x):
        if self.clip is None:
            return x
        return ov(self.b, "Clamp", x, min=-float(self.clip), max=float(self.clip))

    def _gates_of(self, array, letters: str):
        """The rows of the listed gates of a gate-stacked array, in the listed order."""
        order = _GATES[self.kind]
        return _cat(self.b, [_part(self.b, array, 0, order.index(g), self.gates) for g in letters], 0)

    def project(self, xt):
        """``X @ W^T + Wb`` for every step at once: (T, B, gates*H)."""
        out = ov(self.b, "MatMul", xt, _value(self.b, self.w, self.dtype), transpose_b=True)
        return _add_bias(self.b, out, self.wb, self.dtype)

    def _recur(self, h, letters: str, with_bias: bool = True):
        """``H @ R_letters^T + Rb_letters`` as one MatMul over the listed gates."""
        b = self.b
        out = ov(b, "MatMul", h, _value(b, self._gates_of(self.r, letters), self.dtype), transpose_b=True)
        if with_bias and self.rb is not None:
            out = _add_bias(b, out, self._gates_of(self.rb, letters), self.dtype)
        return out

    def _split(self, x, parts: int):
        return _split(self.b, x, 1, parts)

    def step(self, xw, h, c):
        """One step on the projected input ``xw`` (B, gates*H): the new ``(h, c)``."""
        b, f = self.b, self.acts
        act = lambda x, role: _activation(b, self._clip(x), f[role], self.dtype)  # noqa: E731
        if self.kind == "RNN":
            return act(ov(b, "Add", xw, self._recur(h, "h")), 0), None
        if self.kind == "GRU":
            xz, xr, xh = self._split(xw, 3)
            zr = ov(b, "Add", ov(b, "Concat", xz, xr, axis=1), self._recur(h, "zr"))
            z_pre, r_pre = self._split(zr, 2)
            z, r = act(z_pre, 0), act(r_pre, 0)
            if self.linear_before_reset:
                hh = ov(b, "Multiply", r, self._recur(h, "h"))
            else:
                hh = self._recur(ov(b, "Multiply", r, h), "h")
            cand = act(ov(b, "Add", xh, hh), 1)
            # H' = (1 - z) * h~ + z * H = h~ + z * (H - h~)
            return ov(b, "Add", cand, ov(b, "Multiply", z, ov(b, "Subtract", h, cand))), None
        pre = ov(b, "Add", xw, self._recur(h, "iofc"))
        pi, po, pf, pc = self._split(pre, 4)
        if self.peep is not None:
            p_i, p_o, p_f = (_value(b, _part(b, self.peep, 0, k, 3), self.dtype) for k in range(3))
            pi = ov(b, "Add", pi, ov(b, "Multiply", c, p_i))
            pf = ov(b, "Add", pf, ov(b, "Multiply", c, p_f))
        i = act(pi, 0)
        forget = ov(b, "Subtract", const(b, 1, self.dtype), i) if self.input_forget else act(pf, 0)
        c_new = ov(b, "Add", ov(b, "Multiply", forget, c), ov(b, "Multiply", i, act(pc, 1)))
        if self.peep is not None:
            po = ov(b, "Add", po, ov(b, "Multiply", c_new, p_o))
        o = act(po, 0)
        return ov(b, "Multiply", o, _activation(b, c_new, f[2], self.dtype)), c_new


def _recurrent(b, m):
    node, kind = m.root, m.root.op
    inputs = list(node.inputs) + [None] * 8
    x, h0_in, c0_in = inputs[0], inputs[5], inputs[6]
    direction = attr(node, "direction", "forward")
    direction = "forward" if direction == "foward" else direction  # GRU-1's schema default is misspelt
    if direction not in _DIRECTIONS:
        raise Refuse(f"direction {direction!r}")
    reverses = _DIRECTIONS[direction]
    layout = int(attr(node, "layout", 0))
    shape = static_shape(x)
    steps, batch = (shape[0], shape[1]) if layout == 0 else (shape[1], shape[0])
    if steps > _MAX_STEPS:
        raise Refuse(f"{steps} time steps is too many to unroll (limit {_MAX_STEPS})")
    dtype = np_dtype(x)
    w, r, bias = _weight(inputs[1]), _weight(inputs[2]), _weight(inputs[3])
    peep = _weight(inputs[7]) if kind == "LSTM" else None
    lens = _weight(inputs[4])
    if isinstance(lens, np.ndarray) and np.all(lens == steps):
        lens = None  # every entry runs the whole sequence: no masking
    hidden = int((r.shape if isinstance(r, np.ndarray) else static_shape(r))[-1])
    if attr(node, "hidden_size") is not None and int(attr(node, "hidden_size")) != hidden:
        raise Refuse(f"hidden_size {attr(node, 'hidden_size')} does not match R's shape {r.shape}")
    clip = attr(node, "clip")
    acts = _activations(node, kind, len(reverses))

    # Time-major (T, B, I); the input projection of every step at once, then split per step.
    xt = x if layout == 0 else ov(b, "Transpose", x, i64(b, [1, 0, 2], "perm"))
    ys, hs, cs = [], [], []
    for d, reverse in enumerate(reverses):
        pick = lambda v: None if v is None else _part(b, v, 0, d, len(reverses), squeeze=True)  # noqa: E731
        cell = _Cell(b, kind, node, pick(w), pick(r), pick(bias), pick(peep), hidden, dtype, acts[d], clip)
        proj = cell.project(xt)
        per_step = [proj] if steps == 1 else _split(b, proj, 0, steps)
        h = _initial(b, h0_in, d, batch, hidden, dtype, layout)
        c = _initial(b, c0_in, d, batch, hidden, dtype, layout) if kind == "LSTM" else None
        outs = [None] * steps
        for t in (reversed(range(steps)) if reverse else range(steps)):
            xw = ov(b, "Squeeze", per_step[t], i64(b, [0], "axes"))
            h_new, c_new = cell.step(xw, h, c)
            if lens is None:
                h, c, outs[t] = h_new, c_new, h_new
            else:
                running = ov(b, "Unsqueeze", ov(b, "Greater", _value(b, lens, None), const(b, t, _dtype(lens))),
                             i64(b, [1], "axes"))  # (B, 1): step t is inside the entry's sequence
                h = ov(b, "Select", running, h_new, h)
                c = None if c is None else ov(b, "Select", running, c_new, c)
                outs[t] = ov(b, "Select", running, h_new, const(b, 0, dtype))
        ys.append(ov(b, "Concat", *[ov(b, "Unsqueeze", o, i64(b, [0, 1], "axes")) for o in outs], axis=0)
                  if steps > 1 else ov(b, "Unsqueeze", outs[0], i64(b, [0, 1], "axes")))
        hs.append(ov(b, "Unsqueeze", h, i64(b, [0], "axes")))
        cs.append(ov(b, "Unsqueeze", c, i64(b, [0], "axes")) if c is not None else None)

    y = ys[0] if len(ys) == 1 else ov(b, "Concat", *ys, axis=1)  # (T, D, B, H)
    y_h = hs[0] if len(hs) == 1 else ov(b, "Concat", *hs, axis=0)  # (D, B, H)
    y_c = None if kind != "LSTM" else (cs[0] if len(cs) == 1 else ov(b, "Concat", *cs, axis=0))
    if layout == 1:
        y = ov(b, "Transpose", y, i64(b, [2, 0, 1, 3], "perm"))
        y_h = ov(b, "Transpose", y_h, i64(b, [1, 0, 2], "perm"))
        y_c = None if y_c is None else ov(b, "Transpose", y_c, i64(b, [1, 0, 2], "perm"))
    wanted = [y, y_h, y_c][:len(m.outputs)]
    return [v if old is not None else None for v, old in zip(wanted, m.outputs)] + \
        [None] * (m.n_outputs - len(m.outputs))


def _weight(value):
    """A weight input as a numpy array when it is a constant, else the value itself (or None)."""
    if value is None:
        return None
    data = constant_value(value)
    return value if data is None else np.asarray(data)


def _part(b, w, axis: int, i: int, n: int, squeeze: bool = False):
    """Piece ``i`` of ``n`` equal pieces of ``w`` along ``axis`` (an array for arrays, a layer for values)."""
    if isinstance(w, np.ndarray):
        piece = np.split(w, n, axis=axis)[i]
        return piece.squeeze(axis) if squeeze else piece
    shape = list(static_shape(w))
    size = shape[axis] // n
    sliced = ov(b, "StridedSlice", w, i64(b, [0] * axis + [i * size], "begin"),
                i64(b, [0] * axis + [(i + 1) * size], "end"), i64(b, [1] * (axis + 1), "stride"),
                begin_mask=[1] * axis + [0], end_mask=[1] * axis + [0])
    shape[axis] = size
    sliced.type = TensorType(w.dtype, tuple(shape))  # later pieces of the rule read static shapes
    if not squeeze:
        return sliced
    out = ov(b, "Squeeze", sliced, i64(b, [axis], "axes"))
    out.type = TensorType(w.dtype, tuple(shape[:axis] + shape[axis + 1:]))
    return out


def _cat(b, parts: list, axis: int):
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts, axis=axis)
    return ov(b, "Concat", *[_value(b, p, None) for p in parts], axis=axis)


def _value(b, w, dtype):
    """``w`` as a graph value (a constant for arrays)."""
    return const(b, w, dtype if dtype is not None else w.dtype, "W") if isinstance(w, np.ndarray) else w


def _dtype(w):
    return w.dtype if isinstance(w, np.ndarray) else np.dtype(element_type(w.dtype).numpy)


def _add_bias(b, x, bias, dtype):
    if bias is None or (isinstance(bias, np.ndarray) and not np.any(bias)):
        return x
    return ov(b, "Add", x, _value(b, bias, dtype))


def _split(b, x, axis: int, parts: int) -> list:
    """Split-1 of ``x`` into ``parts`` equal pieces along ``axis``."""
    return ov(b, "Split", x, const(b, axis, np.int64, "axis"), _outputs=parts, num_splits=parts)


def _initial(b, value, d, batch, hidden, dtype, layout):
    """Direction ``d``'s initial state (B, H): the input's slice, or zeros."""
    if value is None:
        return const(b, np.zeros((batch, hidden), dtype), dtype, "zeros")
    data = constant_value(value)
    if data is not None:
        data = np.asarray(data)
        return const(b, data[d] if layout == 0 else data[:, d], dtype, "initial")
    axis = 0 if layout == 0 else 1
    sliced = ov(b, "StridedSlice", value, i64(b, [0, 0, 0][:axis] + [d], "begin"),
                i64(b, [0, 0, 0][:axis] + [d + 1], "end"), i64(b, [1] * (axis + 1), "stride"),
                begin_mask=[1] * axis + [0], end_mask=[1] * axis + [0])
    return ov(b, "Squeeze", sliced, i64(b, [axis], "axes"))


def _pattern(kind: str, n_outputs: int):
    fn = lambda op: op.node(kind, _any_inputs=True, _outputs=n_outputs)  # noqa: E731
    fn.__name__ = kind.lower()
    return fn


# Any of the many optional inputs may be omitted: the replacement reads the node's inputs.
RULES = [Rule(f"{kind.lower()}-unrolled", _pattern(kind, 3 if kind == "LSTM" else 2), _recurrent)
         for kind in ("LSTM", "GRU", "RNN")]
