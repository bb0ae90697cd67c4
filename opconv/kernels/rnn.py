"""Recurrent kernels: RNN, GRU and LSTM cells and whole sequences.

Conventions
-----------
Weights are stacked by gate along their first dim, in the order named by
``gate_order``: ``w`` is ``(gates * H, I)``, ``r`` is ``(gates * H, H)``.  The
gate letters are ``i`` (input), ``o`` (output), ``f`` (forget), ``c`` (cell)
for LSTM and ``z`` (update), ``r`` (reset), ``h`` (hidden) for GRU.  ONNX uses
``"iofc"`` and ``"zrh"``; OpenVINO uses ``"fico"`` and ``"zrh"``.  Biases come
as ``b_w`` (added to the input projection) and ``b_r`` (added to the
recurrent projection), each ``(gates * H,)`` in the same order; a dialect with
one combined bias passes it as ``b_w``.  GRU's ``linear_before_reset`` needs
the hidden gate's recurrent bias separately, so it lives in ``b_r``.
Peepholes are ``(3 * H,)`` in ``peephole_order`` (ONNX: ``"iof"``).

Activations are given per role (``f``, ``g``, ``h`` as ONNX names them) by
name (case-insensitive: ``Sigmoid``, ``Tanh``, ``Relu``, ``Affine``,
``LeakyRelu``, ``ThresholdedRelu``, ``ScaledTanh``, ``HardSigmoid``, ``Elu``,
``Softsign``, ``Softplus``), as a ``(name, alpha, beta)`` tuple (``None``
keeps a default), or as any callable.  ``clip`` bounds every gate
pre-activation to ``[-clip, clip]``.

Cell equations (``*`` element-wise, ``@`` matrix product, ``Xw = x @ W^T + Wb``):

* RNN:  ``H = f(Xw + H @ R^T + Rb)``
* GRU:  ``z = f(Xw_z + H @ Rz^T + Rb_z)``, ``r`` alike,
  ``h = g(Xw_h + (r * H) @ Rh^T + Rb_h)`` or, with ``linear_before_reset``,
  ``h = g(Xw_h + r * (H @ Rh^T + Rb_h))``; ``H' = (1 - z) * h + z * H``
* LSTM: ``i = f(Xw_i + H @ Ri^T + Rb_i + Pi * C)``, ``f`` alike (or ``1 - i``
  with ``input_forget``), ``c = g(Xw_c + H @ Rc^T + Rb_c)``,
  ``C' = f * C + i * c``, ``o = f(Xw_o + H @ Ro^T + Rb_o + Po * C')``,
  ``H' = o * h(C')``

Sequence functions follow ONNX's layouts: ``x`` is ``(T, B, I)`` (``layout=0``)
or ``(B, T, I)`` (``layout=1``); per-direction weights are stacked on a
leading ``num_directions`` dim; ``Y`` is ``(T, D, B, H)`` or ``(B, T, D, H)``
and the final states ``(D, B, H)`` or ``(B, D, H)``.  With
``sequence_lens``, steps past a batch entry's length leave its state alone and
output zeros; the reverse direction starts at each entry's last valid step.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ExecutionError
from . import elementwise as E
from ._common import downcast, upcast

# name -> (function(x, alpha, beta), default alpha, default beta)
_ACTIVATIONS: dict[str, tuple[Callable, float | None, float | None]] = {
    "sigmoid": (lambda x, a, b: E.sigmoid(x), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "affine": (lambda x, a, b: E.affine(x, a, b), 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: E.leaky_relu(x, a), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: E.thresholded_relu(x, a), 1.0, None),
    "scaledtanh": (lambda x, a, b: E.scaled_tanh(x, a, b), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: E.hard_sigmoid(x, a, b), 0.2, 0.5),
    "elu": (lambda x, a, b: E.elu(x, a), 1.0, None),
    "softsign": (lambda x, a, b: E.softsign(x), None, None),
    "softplus": (lambda x, a, b: E.softplus(x), None, None),
}

ActivationSpec = str | tuple | Callable

#: Default activations per cell kind, ONNX roles (f, g, h).
DEFAULT_ACTIVATIONS = {"rnn": ("tanh",), "gru": ("sigmoid", "tanh"), "lstm": ("sigmoid", "tanh", "tanh")}


def takes_alpha(name: str) -> bool:
    """Whether activation ``name`` has an alpha parameter."""
    return _ACTIVATIONS[name.lower()][1] is not None


def takes_beta(name: str) -> bool:
    """Whether activation ``name`` has a beta parameter."""
    return _ACTIVATIONS[name.lower()][2] is not None


def activation_parameters(spec: str | tuple) -> tuple[str, float | None, float | None]:
    """``(lower-case name, alpha, beta)`` of a name or ``(name, alpha, beta)`` spec, the activation's defaults
    filled in (None for a parameter it does not take)."""
    name, alpha, beta = (spec, None, None) if isinstance(spec, str) else (tuple(spec) + (None, None))[:3]
    try:
        _, default_alpha, default_beta = _ACTIVATIONS[name.lower()]
    except KeyError:
        raise ExecutionError(f"unknown RNN activation {name!r}; expected one of {sorted(_ACTIVATIONS)}") from None
    return name.lower(), default_alpha if alpha is None else alpha, default_beta if beta is None else beta


def activation(spec: ActivationSpec) -> Callable[[np.ndarray], np.ndarray]:
    """Resolve an activation spec (see the module docstring) to a function."""
    if callable(spec):
        return spec
    name, alpha, beta = activation_parameters(spec)
    function = _ACTIVATIONS[name][0]
    return lambda x: function(x, alpha, beta)


def activation_specs(names: Sequence[str], alphas: Sequence[float] = (), betas: Sequence[float] = ()) -> list:
    """``(name, alpha, beta)`` specs from ONNX's parallel attribute lists.

    The alpha (beta) values are consumed in order by the activations that take
    an alpha (beta), which is how onnxruntime reads ``activation_alpha`` /
    ``activation_beta``.
    """
    alphas, betas = iter(alphas), iter(betas)
    return [
        (n, next(alphas, None) if takes_alpha(n) else None, next(betas, None) if takes_beta(n) else None) for n in names
    ]


# A model's constant weights, transposed once (see keep_transposed): id -> (weak reference, the copy)
_KEPT_TRANSPOSED: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def keep_transposed(weights: np.ndarray) -> None:
    """Make and keep ``weights`` (``(D, rows, cols)`` per direction) transposed to ``(D, cols, rows)``, C-contiguous,
    for as long as ``weights`` lives: the sequence kernels then multiply by that copy, which BLAS reads faster
    than a transposed view (a session does this once for constant W and R).  Only for arrays no one can
    write (a model's initializers), so that the copy stays equal to them."""
    if (
        type(weights) is not np.ndarray
        or weights.flags.writeable
        or weights.ndim != 3
        or weights.dtype not in (np.float32, np.float64)  # the types the kernels compute in as they are
    ):
        return
    if _kept_transposed(weights) is not None:
        return
    key = id(weights)
    ref = weakref.ref(weights, lambda _ref: _KEPT_TRANSPOSED.pop(key, None))
    _KEPT_TRANSPOSED[key] = (ref, np.ascontiguousarray(np.swapaxes(weights, 1, 2)))


def _kept_transposed(weights) -> np.ndarray | None:
    entry = _KEPT_TRANSPOSED.get(id(weights))
    return entry[1] if entry is not None and entry[0]() is weights else None


def _gates(stacked: np.ndarray | None, order: str, hidden: int, axis: int = 0) -> dict:
    """Split a gate-stacked array (``len(order) * hidden`` along ``axis``) by gate letter."""
    if stacked is None:
        return dict.fromkeys(order, 0.0)
    if stacked.shape[axis] != len(order) * hidden:
        raise ExecutionError(f"expected {len(order)} gates of size {hidden}, got {stacked.shape[axis]}")
    return dict(zip(order, np.split(stacked, len(order), axis=axis)))


def _no_clip(v):
    return v


def _clipper(clip: float | None):
    return _no_clip if clip is None else (lambda v: np.clip(v, -clip, clip))


def _check_order(order: str, letters: str) -> None:
    if sorted(order) != sorted(letters):
        raise ExecutionError(f"gate order {order!r} must be a permutation of {letters!r}")


# ---------------------------------------------------------------- one step on projected inputs
#
# Each `_step` takes the input projection of one time step, `xw` (B, gates*H),
# already including b_w, and returns the new state tuple (H first).


class _RNNStep:
    def __init__(self, r, b_r, activations, clip):
        self.r, self.b_r = r, 0.0 if b_r is None else b_r
        self.f = activation(activations[0])
        self.clip = _clipper(clip)

    def __call__(self, xw, h):
        return (self.f(self.clip(xw + h @ self.r.T + self.b_r)),)


class _GRUStep:
    def __init__(self, r, b_r, activations, clip, linear_before_reset, order):
        _check_order(order, "zrh")
        hidden = r.shape[1]
        self.order, self.hidden = order, hidden
        self.r, self.rb = _gates(r, order, hidden), _gates(b_r, order, hidden)
        self.f, self.g = activation(activations[0]), activation(activations[1])
        self.clip = _clipper(clip)
        self.linear_before_reset = linear_before_reset

    def __call__(self, xw, h):
        x = _gates(xw, self.order, self.hidden, axis=1)
        z = self.f(self.clip(x["z"] + h @ self.r["z"].T + self.rb["z"]))
        reset = self.f(self.clip(x["r"] + h @ self.r["r"].T + self.rb["r"]))
        if self.linear_before_reset:
            candidate = x["h"] + reset * (h @ self.r["h"].T + self.rb["h"])
        else:
            candidate = x["h"] + (reset * h) @ self.r["h"].T + self.rb["h"]
        candidate = self.g(self.clip(candidate))
        return ((1 - z) * candidate + z * h,)


class _LSTMStep:
    def __init__(
        self, r, b_r, peepholes, activations, clip, input_forget, order, peephole_order, operand=None, r_t=None
    ):
        _check_order(order, "iofc")
        hidden = r.shape[1]
        self.hidden = hidden
        for stacked in (r, b_r):
            _gates(stacked, order, hidden)  # checks the sizes
        # One product for the four gates: h @ R^T is (B, 4H), stacked as the projected input is.
        self.r = r
        self._r_t: np.ndarray | None = r_t  # R^T, C-contiguous, when a session keeps one (keep_transposed)
        self.rb = 0.0 if b_r is None else b_r
        self.slices = {g: slice(k * hidden, (k + 1) * hidden) for k, g in enumerate(order)}
        _check_order(peephole_order, "iof")
        self.p = _gates(peepholes, peephole_order, hidden)
        self.f, self.g, self.h = (activation(a) for a in activations[:3])
        self.clip = _clipper(clip)
        self.input_forget = input_forget
        # Without peepholes the three f-gates i, o, f (adjacent in ONNX's order) take f in one call.
        c_at = order.index("c")
        self.sigmoid_block = (
            (slice(hidden, None) if c_at == 0 else slice(0, 3 * hidden))
            if (c_at in (0, 3) and peepholes is None and not input_forget)
            else None
        )
        if self.sigmoid_block is not None:  # where i, f and o lie within that block
            start = self.sigmoid_block.start or 0
            self.block_slices = tuple(slice(self.slices[g].start - start, self.slices[g].stop - start) for g in "ifo")
        # The default activations unclipped (nearly every exported LSTM): computed in place on the gates.
        self.plain = (
            self.sigmoid_block is not None
            and clip is None
            and [_plain_name(a) for a in activations[:3]] == ["sigmoid", "tanh", "tanh"]
        )
        self.operand = operand  # maps H before it multiplies R (a dynamically quantized LSTM rounds it)

    @property
    def r_t(self) -> np.ndarray:
        if self._r_t is None:
            self._r_t = np.ascontiguousarray(self.r.T)
        return self._r_t

    def __call__(self, xw, h, c):
        h = h if self.operand is None else self.operand(h)
        pre = xw + h @ self.r_t
        pre += self.rb
        if self.sigmoid_block is not None:
            return self._without_peepholes(pre, c)
        x = {g: pre[:, s] for g, s in self.slices.items()}
        i = self.f(self.clip(x["i"] + self.p["i"] * c if _takes_part(self.p["i"]) else x["i"]))
        if self.input_forget:
            forget = 1 - i
        else:
            forget = self.f(self.clip(x["f"] + self.p["f"] * c if _takes_part(self.p["f"]) else x["f"]))
        candidate = self.g(self.clip(x["c"]))
        c_new = forget * c + i * candidate
        o = self.f(self.clip(x["o"] + self.p["o"] * c_new if _takes_part(self.p["o"]) else x["o"]))
        return o * self.h(c_new), c_new

    def run_plain(self, xw, h, c, reverse: bool):
        """The whole sequence of a plain layer (default activations, no clip, no peepholes; see ``plain``), every
        step of every batch entry taken: ``(Y (T, B, H), (H, C))``.

        Per step: one product, one sum, one tanh over the four gates and an affine map of three of them, the
        state updates in preallocated buffers (about ten numpy calls).  The sigmoid gates use
        ``sigmoid(x) = 0.5 + 0.5 tanh(x / 2)``, the halving folded into the input projection and into a copy of
        R (scaling by 0.5 is exact, so the pre-activations are exactly half those of the other form).
        """
        steps, batch = xw.shape[:2]
        hidden = self.hidden
        gated, cell = self.sigmoid_block, self.slices["c"]
        half = np.ones(4 * hidden, xw.dtype)
        half[gated] = 0.5
        xw = xw * half  # a new array: the caller's projection is left alone
        if isinstance(self.rb, np.ndarray):
            xw += self.rb * half
        # (H, 4H): C-contiguous (the layout a vector-matrix product reads fastest) when kept transposed
        r_t = (self.r.T if self._r_t is None else self._r_t) * half
        y = np.empty((steps, batch, hidden), xw.dtype)
        c = np.array(c, dtype=xw.dtype)  # updated in place
        if batch == 1:  # vectors: numpy's vector-matrix product costs less than a (1, H) matrix's
            xw, rows, c_rows, h = xw[:, 0], y[:, 0], c[0], h[0]
        else:
            rows, c_rows = y, c
        pre = np.empty(xw.shape[1:], xw.dtype)
        sigmoids = pre[..., gated]
        i, forget, o = (sigmoids[..., s] for s in self.block_slices)
        candidate = pre[..., cell]
        product = np.empty_like(c_rows)
        one_half = np.array(0.5, xw.dtype)  # a 0-d array of the type: numpy converts a Python float on each call
        dot, add, multiply, tanh = np.dot, np.add, np.multiply, np.tanh
        order = list(reversed(range(steps))) if reverse else list(range(steps))
        # the time steps' rows as views made at once (indexing in the loop makes one per call)
        for projected, h_out in zip([xw[t] for t in order], [rows[t] for t in order]):
            dot(h, r_t, out=pre)
            add(pre, projected, out=pre)
            tanh(pre, out=pre)
            multiply(sigmoids, one_half, out=sigmoids)
            add(sigmoids, one_half, out=sigmoids)
            multiply(c_rows, forget, out=c_rows)
            multiply(i, candidate, out=product)
            add(c_rows, product, out=c_rows)
            h = h_out
            tanh(c_rows, out=h)
            multiply(h, o, out=h)
        return y, (y[order[-1]], c)

    def _without_peepholes(self, pre, c):
        if self.plain:
            gated = pre[:, self.sigmoid_block]  # exp(-x) = inf for x < -88 gives the limit, 0 (see _run)
            np.reciprocal(np.add(np.exp(np.negative(gated, out=gated), out=gated), 1, out=gated), out=gated)
            candidate = np.tanh(pre[:, self.slices["c"]], out=pre[:, self.slices["c"]])
        else:
            gated = self.f(self.clip(pre[:, self.sigmoid_block]))
            candidate = self.g(self.clip(pre[:, self.slices["c"]]))
        i, forget, o = (gated[:, s] for s in self.block_slices)
        c_new = forget * c
        c_new += i * candidate
        if self.plain:
            h_new = np.tanh(c_new)
            h_new *= o
            return h_new, c_new
        return o * self.h(c_new), c_new


def _plain_name(spec) -> str | None:
    """The activation's name when it takes its default parameters (a bare name), else None."""
    if isinstance(spec, str):
        return spec.lower()
    if isinstance(spec, tuple) and spec and isinstance(spec[0], str) and all(v is None for v in spec[1:]):
        return spec[0].lower()
    return None


def _takes_part(p) -> bool:
    """Whether a peephole weight takes part (an absent one is the number 0)."""
    return not (isinstance(p, float) and p == 0.0)


# ---------------------------------------------------------------- cells


def _project(x, w, b_w, w_t=None):
    """``x @ w.T + b_w``; ``w_t``: ``w.T`` C-contiguous, when kept (a faster product)."""
    w_t = w.T if w_t is None else w_t
    # A sequence (T, B, I) as one (T * B, I) matrix: one matrix product, not one per time step.
    xw = (x.reshape(-1, x.shape[-1]) @ w_t).reshape(x.shape[:-1] + w_t.shape[1:]) if x.ndim > 2 else x @ w_t
    return xw if b_w is None else xw + b_w


def _cell(step, x, w, b_w, states):
    dtype = np.asarray(x).dtype
    out = step(_project(upcast(x), upcast(w), None if b_w is None else upcast(b_w)), *(upcast(s) for s in states))
    return tuple(downcast(o, dtype) for o in out)


def rnn_cell(
    x, h, w, r, b_w=None, b_r=None, activations: Sequence[ActivationSpec] = ("tanh",), clip: float | None = None
) -> np.ndarray:
    """One simple-RNN step: ``x`` ``(B, I)``, ``h`` ``(B, H)`` -> new ``h``."""
    step = _RNNStep(upcast(r), None if b_r is None else upcast(b_r), activations, clip)
    return _cell(step, x, w, b_w, (h,))[0]


def gru_cell(
    x,
    h,
    w,
    r,
    b_w=None,
    b_r=None,
    activations: Sequence[ActivationSpec] = ("sigmoid", "tanh"),
    clip: float | None = None,
    linear_before_reset: bool = False,
    gate_order: str = "zrh",
) -> np.ndarray:
    """One GRU step: ``x`` ``(B, I)``, ``h`` ``(B, H)`` -> new ``h``."""
    step = _GRUStep(upcast(r), None if b_r is None else upcast(b_r), activations, clip, linear_before_reset, gate_order)
    return _cell(step, x, w, b_w, (h,))[0]


def lstm_cell(
    x,
    h,
    c,
    w,
    r,
    b_w=None,
    b_r=None,
    peepholes=None,
    activations: Sequence[ActivationSpec] = ("sigmoid", "tanh", "tanh"),
    clip: float | None = None,
    input_forget: bool = False,
    gate_order: str = "iofc",
    peephole_order: str = "iof",
) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step: ``x`` ``(B, I)``, ``h``/``c`` ``(B, H)`` -> ``(h, c)``."""
    step = _LSTMStep(
        upcast(r),
        None if b_r is None else upcast(b_r),
        None if peepholes is None else upcast(peepholes),
        activations,
        clip,
        input_forget,
        gate_order,
        peephole_order,
    )
    return _cell(step, x, w, b_w, (h, c))


# ---------------------------------------------------------------- sequences

_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


def _run(step, xw, states, lengths, reverse):
    """Run ``step`` over time; returns ``(Y (T, B, H), final states)``."""
    steps = xw.shape[0]
    every_step = bool(np.all(lengths >= steps))  # no sequence ends early: no masking
    if every_step and isinstance(step, _LSTMStep) and step.plain and step.operand is None and steps:
        return step.run_plain(xw, *states, reverse)
    y = np.zeros((steps,) + states[0].shape, dtype=states[0].dtype)
    with np.errstate(over="ignore"):  # a sigmoid taken as 1 / (1 + exp(-x)) overflows to its limit
        for t in reversed(range(steps)) if reverse else range(steps):
            new = step(xw[t], *states)
            if every_step:
                states = new
                y[t] = new[0]
                continue
            active = (t < lengths)[:, None]
            states = tuple(np.where(active, n, s) for n, s in zip(new, states))
            y[t] = np.where(active, new[0], 0)
    return y, states


def _split_activations(activations, per_direction: int, directions: int) -> list:
    activations = list(activations)
    if len(activations) == per_direction:
        return [activations] * directions
    if len(activations) == per_direction * directions:
        return [activations[d * per_direction : (d + 1) * per_direction] for d in range(directions)]
    raise ExecutionError(
        f"expected {per_direction} or {per_direction * directions} activations, got {len(activations)}"
    )


def _sequence(kind, make_step, x, w, b_w, initial_states, sequence_lens, direction, activations, layout, operand=None):
    """Shared driver of :func:`rnn`, :func:`gru` and :func:`lstm`; ``operand`` maps X to the left operand of
    its projection."""
    try:
        reverses = _DIRECTIONS[direction.lower()]
    except KeyError:
        raise ExecutionError(f"unknown RNN direction {direction!r}") from None
    dtype = np.asarray(x).dtype
    x = upcast(x)
    if layout:
        x = x.transpose(1, 0, 2)
        initial_states = [None if s is None else np.swapaxes(s, 0, 1) for s in initial_states]
    steps, batch = x.shape[:2]
    w = upcast(w)
    hidden = w.shape[1] // {"rnn": 1, "gru": 3, "lstm": 4}[kind]
    lengths = np.full(batch, steps) if sequence_lens is None else np.asarray(sequence_lens).astype(np.int64)
    per_direction = _split_activations(
        activations or DEFAULT_ACTIVATIONS[kind], len(DEFAULT_ACTIVATIONS[kind]), len(reverses)
    )
    ys, finals = [], []
    for d, reverse in enumerate(reverses):
        states = tuple(np.zeros((batch, hidden), x.dtype) if s is None else upcast(s[d]) for s in initial_states)
        w_t = _kept_transposed(w)
        b_d = None if b_w is None else upcast(b_w[d])
        xw = _project(x if operand is None else operand(x), w[d], b_d, None if w_t is None else w_t[d])
        y, final = _run(make_step(d, per_direction[d]), xw, states, lengths, reverse)
        ys.append(y)
        finals.append(final)
    y = np.stack(ys, axis=1)  # (T, D, B, H)
    outputs = [y] + [np.stack([f[k] for f in finals]) for k in range(len(initial_states))]  # states (D, B, H)
    if layout:
        outputs = [outputs[0].transpose(2, 0, 1, 3)] + [np.swapaxes(s, 0, 1) for s in outputs[1:]]
    return tuple(downcast(o, dtype) for o in outputs)


def _per_direction(array, d):
    return None if array is None else upcast(array[d])


def rnn(
    x,
    w,
    r,
    b_w=None,
    b_r=None,
    initial_h=None,
    sequence_lens=None,
    direction: str = "forward",
    activations: Sequence[ActivationSpec] | None = None,
    clip: float | None = None,
    layout: int = 0,
):
    """Simple RNN over a sequence; returns ``(Y, Y_h)``."""

    def make_step(d, acts):
        return _RNNStep(upcast(r[d]), _per_direction(b_r, d), acts, clip)

    return _sequence("rnn", make_step, x, w, b_w, [initial_h], sequence_lens, direction, activations, layout)


def gru(
    x,
    w,
    r,
    b_w=None,
    b_r=None,
    initial_h=None,
    sequence_lens=None,
    direction: str = "forward",
    activations: Sequence[ActivationSpec] | None = None,
    clip: float | None = None,
    linear_before_reset: bool = False,
    gate_order: str = "zrh",
    layout: int = 0,
):
    """GRU over a sequence; returns ``(Y, Y_h)``."""

    def make_step(d, acts):
        return _GRUStep(upcast(r[d]), _per_direction(b_r, d), acts, clip, linear_before_reset, gate_order)

    return _sequence("gru", make_step, x, w, b_w, [initial_h], sequence_lens, direction, activations, layout)


def lstm(
    x,
    w,
    r,
    b_w=None,
    b_r=None,
    initial_h=None,
    initial_c=None,
    peepholes=None,
    sequence_lens=None,
    direction: str = "forward",
    activations: Sequence[ActivationSpec] | None = None,
    clip: float | None = None,
    input_forget: bool = False,
    gate_order: str = "iofc",
    peephole_order: str = "iof",
    layout: int = 0,
    operand=None,
):
    """LSTM over a sequence; returns ``(Y, Y_h, Y_c)``.

    ``operand`` (default: none) transforms X and each step's H before they multiply W and R: a dynamically
    quantized LSTM rounds them to 8 bits there.
    """

    r_t = _kept_transposed(r)

    def make_step(d, acts):
        return _LSTMStep(
            upcast(r[d]),
            _per_direction(b_r, d),
            _per_direction(peepholes, d),
            acts,
            clip,
            input_forget,
            gate_order,
            peephole_order,
            operand,
            None if r_t is None else r_t[d],
        )

    return _sequence(
        "lstm", make_step, x, w, b_w, [initial_h, initial_c], sequence_lens, direction, activations, layout, operand
    )


# ---------------------------------------------------------------- LSTM wrapped in Bahdanau attention
#
# Each step feeds [x_t, A_{t-1}] to the LSTM cell (A_0 = 0); the new H queries the memory:
# scores = v . tanh(memory @ MW + H @ QW) over each row's first memory_lengths steps, softmaxed (the others weigh
# 0), context = weights @ memory; A_t is the context, or [H, context] @ AW with an attention layer.


def bahdanau_context(query, keys, memory, v, query_weights, memory_lengths):
    """The context ``(B, memory_depth)`` of queries ``(B, Q)`` over ``keys = memory @ MW`` ``(B, M, A)``."""
    scores = np.tanh(keys + (query @ query_weights)[:, None, :]) @ v  # (B, M)
    valid = np.arange(memory.shape[1]) < memory_lengths[:, None]
    weights = np.where(valid, np.exp(np.where(valid, scores, 0)), 0)
    weights = weights / weights.sum(axis=-1, keepdims=True, dtype=np.float64).astype(weights.dtype)
    return np.einsum("bm,bmd->bd", weights, memory)


def attention_lstm(
    x,
    w,
    r,
    b_w,
    b_r,
    initial_h,
    initial_c,
    peepholes,
    sequence_lens,
    direction,
    activations,
    clip,
    input_forget,
    memory,
    memory_lengths,
    query_weights,
    memory_weights,
    v,
    attention_weights=None,
):
    """A one-layer LSTM whose cell input carries the previous step's attention (see above); returns
    ``(Y (T, D, B, H), Y_h, Y_c)``.  ``w`` is ``(D, 4H, I + attention size)``; the attention arrays carry the
    direction first (``memory``, ``memory_lengths`` are shared)."""
    try:
        reverses = _DIRECTIONS[direction.lower()]
    except KeyError:
        raise ExecutionError(f"unknown RNN direction {direction!r}") from None
    dtype = np.asarray(x).dtype
    x, memory = upcast(x), upcast(memory)
    steps, batch, inputs = x.shape
    hidden = r.shape[-1]
    lengths = np.full(batch, steps) if sequence_lens is None else np.asarray(sequence_lens).astype(np.int64)
    memory_lengths = (
        np.full(batch, memory.shape[1]) if memory_lengths is None else np.asarray(memory_lengths).astype(np.int64)
    )
    per_direction = _split_activations(activations or DEFAULT_ACTIVATIONS["lstm"], 3, len(reverses))
    ys, finals = [], []
    for d, reverse in enumerate(reverses):
        step = _LSTMStep(
            upcast(r[d]),
            _per_direction(b_r, d),
            _per_direction(peepholes, d),
            per_direction[d],
            clip,
            input_forget,
            "iofc",
            "iof",
        )
        w_d = upcast(w[d])
        xw = _project(x, w_d[:, :inputs], _per_direction(b_w, d))
        w_attention = w_d[:, inputs:].T
        keys = memory @ upcast(memory_weights[d])
        layer = _per_direction(attention_weights, d)
        h, c = (np.zeros((batch, hidden), x.dtype) if s is None else upcast(s[d]) for s in (initial_h, initial_c))
        attention = np.zeros((batch, w_attention.shape[0]), x.dtype)
        y = np.zeros((steps, batch, hidden), x.dtype)
        with np.errstate(over="ignore"):
            for t in reversed(range(steps)) if reverse else range(steps):
                new_h, new_c = step(xw[t] + attention @ w_attention, h, c)
                context = bahdanau_context(new_h, keys, memory, upcast(v[d]), upcast(query_weights[d]), memory_lengths)
                new_attention = context if layer is None else np.concatenate([new_h, context], axis=-1) @ layer
                active = (t < lengths)[:, None]  # a row past its length keeps its state; its Y step is 0
                h, c = np.where(active, new_h, h), np.where(active, new_c, c)
                attention = np.where(active, new_attention, attention)
                y[t] = np.where(active, new_h, 0)
        ys.append(y)
        finals.append((h, c))
    outputs = (np.stack(ys, axis=1), np.stack([f[0] for f in finals]), np.stack([f[1] for f in finals]))
    return tuple(downcast(o, dtype) for o in outputs)
