"""ONNX RNN, GRU and LSTM, unrolled over their static sequence length.

Each step is DotGeneral products with the (per-direction) weights, gate
slices and the activations; the reverse direction walks the steps backwards.
``sequence_lens`` must be absent or a constant equal to the sequence length
everywhere; activations are Sigmoid / Tanh / Relu.
"""

from __future__ import annotations

import numpy as np

from ...types import TensorType
from .. import lowering
from ._common import (Refuse, attr, binary, concat, const_input, dtype_of, full, hlo, op_rules, optional_input,
                      reshape, scalar, shape_of, slice_, unary)

ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu"}


def _activations(node, defaults: list[str], dirs: int) -> list[str]:
    names = attr(node, "activations")
    names = [n.decode() if isinstance(n, bytes) else n for n in names] if names else defaults * dirs
    out = []
    for n in names:
        if n.lower() not in ACTIVATIONS:
            raise Refuse(f"activation {n!r} is not mapped")
        out.append(ACTIVATIONS[n.lower()])
    if attr(node, "activation_alpha") or attr(node, "activation_beta"):
        raise Refuse("activation_alpha/beta are not mapped")
    return out


def _take(b, v, index, axis):
    """``v[index]`` along ``axis``, the axis dropped."""
    vs = shape_of(v)
    starts, limits = [0] * len(vs), list(vs)
    starts[axis], limits[axis] = index, index + 1
    return reshape(b, slice_(b, v, starts, limits), vs[:axis] + vs[axis + 1:])


def _matmul_t(b, x, w):
    """x [B, I] times w [N, I] transposed -> [B, N]."""
    return hlo(b, "DotGeneral", x, w, type=TensorType(dtype_of(x), (shape_of(x)[0], shape_of(w)[0])),
               lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[1], lhs_batching_dimensions=[],
               rhs_batching_dimensions=[])


def _act(b, name, x, clip):
    if clip is not None:
        x = hlo(b, "Clamp", scalar(b, -clip, dtype_of(x)), x, scalar(b, clip, dtype_of(x)), type=x.type)
    return unary(b, name, x)


def _gate(b, v, i, hidden):
    return slice_(b, v, [0, i * hidden], [shape_of(v)[0], (i + 1) * hidden])


def _run(b, m, kind: str):
    node = m.root
    x, w, r = node.inputs[:3]
    bias, seq_lens, h0 = optional_input(m, 3), optional_input(m, 4), optional_input(m, 5)
    c0 = optional_input(m, 6) if kind == "LSTM" else None
    peep = optional_input(m, 7) if kind == "LSTM" else None
    layout = int(attr(node, "layout", 0))
    if layout:
        x = hlo(b, "Transpose", x, type=TensorType(dtype_of(x), tuple(shape_of(x)[i] for i in (1, 0, 2))),
                permutation=[1, 0, 2])
        h0, c0 = (None if v is None else hlo(b, "Transpose", v, type=TensorType(
            dtype_of(v), tuple(shape_of(v)[i] for i in (1, 0, 2))), permutation=[1, 0, 2]) for v in (h0, c0))
    seq, batch, _ = shape_of(x)
    dt = dtype_of(x)
    hidden = int(attr(node, "hidden_size"))
    direction = attr(node, "direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    if seq_lens is not None:
        lens = np.asarray(const_input(m, "x4", "sequence_lens")).reshape(-1)
        if not (lens == seq).all():
            raise Refuse("sequence_lens shorter than the sequence are not mapped")
    if kind == "LSTM" and attr(node, "input_forget", 0):
        raise Refuse("input_forget=1 is not mapped")
    clip = attr(node, "clip")
    clip = None if clip is None else float(clip)
    n_gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    acts = _activations(node, defaults, dirs)
    per_dir = len(defaults)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        f, g, hh = (acts[d * per_dir + i] if i < per_dir else None for i in range(3))
        wd, rd = _take(b, w, d, 0), _take(b, r, d, 0)
        if bias is not None:
            bd = _take(b, bias, d, 0)
            wb = slice_(b, bd, [0], [n_gates * hidden])
            rb = slice_(b, bd, [n_gates * hidden], [2 * n_gates * hidden])
        else:
            wb = rb = full(b, 0, dt, (n_gates * hidden,))
        h = _take(b, h0, d, 0) if h0 is not None else full(b, 0, dt, (batch, hidden))
        c = _take(b, c0, d, 0) if c0 is not None else full(b, 0, dt, (batch, hidden))
        pd = _take(b, peep, d, 0) if peep is not None else None
        reverse = direction == "reverse" or d == 1
        outputs = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            xt = _take(b, x, t, 0)
            xw = binary(b, "Add", _matmul_t(b, xt, wd), wb)
            if kind == "RNN":
                h = _act(b, f, binary(b, "Add", xw, binary(b, "Add", _matmul_t(b, h, rd), rb)), clip)
            elif kind == "GRU":
                xz, xr, xh = (_gate(b, xw, i, hidden) for i in range(3))
                hr_all = _matmul_t(b, h, rd)
                rbz, rbr, rbh = (slice_(b, rb, [i * hidden], [(i + 1) * hidden]) for i in range(3))
                rz, rr, rh = (_gate(b, hr_all, i, hidden) for i in range(3))
                z = _act(b, f, binary(b, "Add", xz, binary(b, "Add", rz, rbz)), clip)
                rgate = _act(b, f, binary(b, "Add", xr, binary(b, "Add", rr, rbr)), clip)
                if attr(node, "linear_before_reset", 0):
                    cand = binary(b, "Add", xh, binary(b, "Mul", rgate, binary(b, "Add", rh, rbh)))
                else:
                    rdh = slice_(b, rd, [2 * hidden, 0], [3 * hidden, hidden])
                    cand = binary(b, "Add", xh, binary(b, "Add", _matmul_t(b, binary(b, "Mul", rgate, h), rdh), rbh))
                hcand = _act(b, g, cand, clip)
                one = scalar(b, 1, dt)
                h = binary(b, "Add", binary(b, "Mul", binary(b, "Sub", one, z), hcand), binary(b, "Mul", z, h))
            else:
                gates = binary(b, "Add", xw, binary(b, "Add", _matmul_t(b, h, rd), rb))
                gi, go, gf, gc = (_gate(b, gates, i, hidden) for i in range(4))
                if pd is not None:
                    pi, po, pf = (slice_(b, pd, [i * hidden], [(i + 1) * hidden]) for i in range(3))
                    gi = binary(b, "Add", gi, binary(b, "Mul", c, pi))
                    gf = binary(b, "Add", gf, binary(b, "Mul", c, pf))
                i_t, f_t = _act(b, f, gi, clip), _act(b, f, gf, clip)
                c = binary(b, "Add", binary(b, "Mul", f_t, c), binary(b, "Mul", i_t, _act(b, g, gc, clip)))
                if pd is not None:
                    go = binary(b, "Add", go, binary(b, "Mul", c, po))
                h = binary(b, "Mul", _act(b, f, go, clip), unary(b, hh, c))
            outputs[t] = reshape(b, h, (1, 1, batch, hidden))
        ys.append(concat(b, outputs, 0))
        hs.append(reshape(b, h, (1, batch, hidden)))
        cs.append(reshape(b, c, (1, batch, hidden)))
    y, y_h, y_c = concat(b, ys, 1), concat(b, hs, 0), concat(b, cs, 0)
    if layout:
        y = hlo(b, "Transpose", y, type=TensorType(dt, (batch, seq, dirs, hidden)), permutation=[2, 0, 1, 3])
        y_h, y_c = (hlo(b, "Transpose", v, type=TensorType(dt, (batch, dirs, hidden)), permutation=[1, 0, 2])
                    for v in (y_h, y_c))
    outs = [y, y_h, y_c][:m.n_outputs]
    for i, v in enumerate(outs):
        if i >= len(node.outputs) or node.outputs[i] is None:
            outs[i] = None
        elif v.producer is None:
            outs[i] = hlo(b, "Copy", v, type=v.type)
    return outs + [None] * (m.n_outputs - len(outs))


RULES = (op_rules("RNN-unrolled", "RNN", lambda b, m: _run(b, m, "RNN"), 6, 3, _outputs=2)
         + op_rules("GRU-unrolled", "GRU", lambda b, m: _run(b, m, "GRU"), 6, 3, _outputs=2)
         + op_rules("LSTM-unrolled", "LSTM", lambda b, m: _run(b, m, "LSTM"), 8, 3, _outputs=3))
lowering.add_rules("onnx", "hlo", RULES)
