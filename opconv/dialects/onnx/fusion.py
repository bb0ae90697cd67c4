"""Session-time fusion of the ONNX executor: inference BatchNormalization folded into the Conv before it,
Relu applied by the step that computes its input, channel shuffles copied by the next Conv, and transformer
patterns (Gelus, attention, bias adds) run as one step.

``y = BN(Conv(x, W, B))`` with per-channel ``a = scale / sqrt(var + eps)`` is
``Conv(x, W * a, (B - mean) * a + bias)``: the normalization costs nothing at
run time, where unfused it is two more passes over every activation of a CNN.
The folded weights differ from the two-step result by rounding only (they are
computed in float64).  The model itself is not changed; the session's plan is.

When every parameter is a constant no run can change, the weights are folded
once, here, and the unfused weights the session folded are let go (when
nothing else reads them), so the session holds one copy.  Otherwise the
parameters are read from each run's own values, and the folded weights are
cached for as long as those arrays are the same objects, so a run that feeds
an initializer the weights depend on (models before IR version 4 list every
initializer as an input) gets weights folded from what it fed.  Folded
weights are packed with their bias (``kernels.conv.pack_conv_weights``), so
that the convolution's matrix product adds the bias.

A Relu, or a Clip with constant bounds (MobileNet's ReLU6), that alone reads
the output of a Conv (BatchNormalization folded in or not), Add or Sum is
applied by that step to its fresh output, in place, while the output is still
in cache: one step fewer and no second trip through memory.

A channel shuffle (ShuffleNet's Reshape-Transpose-Reshape) that alone feeds a padded Conv is copied once, by
that convolution's padding, instead of once more by the last Reshape (``fuse_channel_shuffle``).

torch's exports of the erf and tanh Gelus, of attention's MatMul-Scale-Mask-
Softmax-MatMul, a MatMul followed by its bias Add, LLaMA's RMSNorm and rotary embedding
(``TRANSFORMER_PATTERNS``) run as one step that computes the same operations on the same values, in the
buffers it allocated: the same bits, with 2-8 fewer steps and kernel calls each (RMSNorm and the rotary
embedding of float32 as the numpy calls their nodes' kernels make, without a kernel call per node).

A Reshape, Transpose, Squeeze, Unsqueeze or Flatten with constant parameters that alone reads a step's output
is applied by that step to its result (``fuse_view_steps``): exports wrap every product in such views, each an
interpreter step of its own otherwise.  An LSTM's constant W and R are transposed once, at session time
(``keep_recurrent_weights``).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ...executor import BoundNode, as_outputs
from ...ir import Graph
from ...kernels import conv as conv_kernels
from ...kernels import elementwise
from ...kernels._common import normalize_axes
from ...plan_fusion import ThenActivation, Uses, constant_value, fuse_activations, pass_through

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _is_onnx(node, op: str) -> bool:
    return node.op == op and node.domain in ("", "ai.onnx")


def fuse_conv_batch_norm(graph: Graph, plan) -> int:
    """Rewrite ``plan`` (the interpreter's plan of ``graph``) so each Conv -> BatchNormalization pair runs as one
    convolution; returns how many pairs were fused."""
    uses = Uses(graph, plan)
    uses_by_id, producer_step = uses.readers, uses.producer
    initializers = {id(v): v for v in graph.initializers.values()}
    fused = 0
    for j, bn in enumerate(plan.steps):
        node = bn.node
        if not _is_onnx(node, "BatchNormalization") or not _is_inference(bn):
            continue
        i = uses.producer_of_sole_use(node.inputs[0])
        if i is None or len(node.inputs) != 5 or None in node.inputs:
            continue
        conv = plan.steps[i]
        if not _is_onnx(conv.node, "Conv") or len(conv.node.outputs) != 1:
            continue
        if any(producer_step.get(id(v), -1) >= i for v in node.inputs[1:]):
            continue  # a parameter computed after the Conv (or recomputed when a run overrides it) is not there yet
        fused_conv = _FusedConv(conv.fn, bn.attrs.get("epsilon", 1e-5), conv.attrs.get("group", 1))
        conv_inputs = list(plan.inputs[i]) + [None] * (3 - len(plan.inputs[i]))
        param_ids = conv_inputs[1:3] + plan.inputs[j][1:]
        constants = [None if vid is None else constant_value(vid, initializers, plan) for vid in param_ids]
        if all(c is not None or vid is None for c, vid in zip(constants, param_ids)):
            fused_conv.fold_now(*constants)
            plan.inputs[i] = conv_inputs[:1] + [None] * len(param_ids)
            plan.inputs[j] = plan.inputs[j][:1] + [None] * (len(plan.inputs[j]) - 1)
            for vid in param_ids:  # folded values only this pair read: the folded weights replace them
                if vid is not None and uses_by_id.get(vid) == 1 and vid in plan.folded:
                    del plan.folded[vid]
        else:
            plan.inputs[i] = conv_inputs[:1] + param_ids
            current = [None if vid is None else _current(vid, initializers, plan) for vid in param_ids]
            if all(c is not None or vid is None for c, vid in zip(current, param_ids)):
                fused_conv.prime(*current)  # folded now rather than in the first run; a feed refolds
        plan.steps[i] = BoundNode(conv.node, fused_conv, conv.attrs, conv.label + " with " + bn.label)
        plan.donors[i] = tuple(d for d in plan.donors[i] if d == 0)
        plan.steps[j] = BoundNode(node, pass_through, {}, bn.label)
        fused += 1
    plan.changed()
    return fused


#: ops whose step may apply a following Relu to its own fresh output
_RELU_PRODUCERS = ("Conv", "Add", "Sum")


def fuse_relu(graph: Graph, plan) -> int:
    """Rewrite ``plan`` so that each Relu (or Clip with constant bounds) alone reading a Conv, Add or Sum
    output runs inside that step; returns how many were fused.  A Conv whose BatchNormalization was folded
    in counts as the Conv."""
    initializers = {id(v): v for v in graph.initializers.values()}

    def activation_of(step, input_ids):
        if step.node.domain not in ("", "ai.onnx"):
            return None
        return _in_place_activation(step, input_ids, initializers, plan)

    return fuse_activations(graph, plan, _RELU_PRODUCERS, activation_of)


def _in_place_activation(step: BoundNode, input_ids: list, initializers: dict, plan):
    """``activation(y, out)`` for a Relu step, or a Clip step whose bounds no run can change; else None."""
    node = step.node
    if _is_onnx(node, "Relu"):
        return elementwise.relu
    if not _is_onnx(node, "Clip") or (node.version or 0) < 11:
        return None  # Clip-1/6 bounds are attributes of a float type; rare enough to leave unfused
    bounds = [None if vid is None else constant_value(vid, initializers, plan) for vid in input_ids[1:3]]
    if any(b is None and vid is not None for b, vid in zip(bounds, input_ids[1:3])):
        return None
    bounds += [None] * (2 - len(bounds))
    return functools.partial(_clip_into, low=bounds[0], high=bounds[1])


def _clip_into(y, out=None, *, low, high):
    return elementwise.clip(y, low, high, out=out)


def _current(vid: int, initializers: dict, plan) -> Any:
    """The array a run that feeds nothing will pass for this value (folded or initializer), if known now."""
    if plan.folded is not None and vid in plan.folded:
        return plan.folded[vid]
    return initializers[vid].const.numpy() if vid in initializers else None


def _is_inference(step: BoundNode) -> bool:
    """Whether this BatchNormalization node normalizes with its given statistics (see ops/normalization.py)."""
    node, attrs = step.node, step.attrs
    if any(v is not None for v in node.outputs[1:]):
        return False  # statistics outputs: training (or at least not a plain inference node)
    if attrs.get("training_mode"):
        return False
    return attrs.get("spatial", 1) == 1  # spatial=0 normalizes per activation, not per channel


class _FusedConv:
    """A Conv kernel applying the following BatchNormalization through its weights and bias."""

    def __init__(self, conv, epsilon: float, groups: int):
        self.conv = conv
        self.epsilon = epsilon
        self.groups = groups
        self._sources: tuple | None = ()  # None: folded once from constants (fold_now)
        self._folded: tuple[Any, Any] = (None, None)
        self._unfused: tuple = ()

    def fold_now(self, w, b, scale, bias, mean, var) -> None:
        """Fold constant parameters once; runs then pass none (see fuse_conv_batch_norm)."""
        self._folded = self._fold(w, b, scale, bias, mean, var)
        if self._folded[0] is None:  # not foldable: keep what the two steps need
            self._unfused = (w, b, scale, bias, mean, var)
        self._sources = None

    def prime(self, w, b, scale, bias, mean, var) -> None:
        """Fold from the arrays runs will pass unless a feed replaces one of them."""
        self._refold_if_changed(w, b, scale, bias, mean, var)

    def __call__(self, ctx, x, w=None, b=None, scale=None, bias=None, mean=None, var=None, **attrs):
        if self._sources is None:  # folded once from constants
            if self._folded[0] is None:
                w, b, scale, bias, mean, var = self._unfused
            else:
                return self.conv(ctx, x, *self._folded, **attrs)
        else:
            self._refold_if_changed(w, b, scale, bias, mean, var)
        w_folded, b_folded = self._folded
        if w_folded is None:  # types the fold does not cover: the two steps, as unfused
            from ...kernels import norm

            y = self.conv(ctx, x, w, b, **attrs)
            return norm.batch_norm(y, scale, bias, mean, var, self.epsilon, overwrite_input=True)
        return self.conv(ctx, x, w_folded, b_folded, **attrs)

    def _refold_if_changed(self, w, b, scale, bias, mean, var) -> None:
        sources = (w, b, scale, bias, mean, var)
        known = self._sources
        if known is None or len(sources) != len(known) or any(s is not t for s, t in zip(sources, known)):
            self._folded = self._fold(*sources)
            self._sources = sources

    def _fold(self, w, b, scale, bias, mean, var):
        arrays = [np.asarray(t) for t in (w, scale, bias, mean, var)] + ([] if b is None else [np.asarray(b)])
        if any(a.dtype not in _FLOATS for a in arrays) or len({a.dtype for a in arrays}) != 1:
            return None, None
        w = np.asarray(w)
        channels = w.shape[0]
        if any(np.asarray(t).shape != (channels,) for t in (scale, bias, mean, var)) or (
            b is not None and np.asarray(b).shape != (channels,)
        ):
            return None, None
        a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + np.float64(np.float32(self.epsilon)))
        shift = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
        if b is not None:
            shift = shift + np.asarray(b, np.float64) * a
        w_folded = (w.astype(np.float64) * a.reshape((channels,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        packed = conv_kernels.pack_conv_weights(w_folded, shift.astype(w.dtype), self.groups)
        return (w_folded, shift.astype(w.dtype)) if packed is None else (packed, None)


# ---------------------------------------------------------------- channel shuffle into the next convolution


def fuse_channel_shuffle(graph: Graph, plan) -> int:
    """Let each channel shuffle (ShuffleNet's Reshape to ``(N, g, C / g, *S)``, Transpose swapping axes 1 and 2,
    Reshape back to ``(N, C, *S)``) that alone feeds a padded Conv be copied once, by the convolution's padding,
    instead of twice (the shuffle's own copy, then the padding's); returns how many were fused.

    The last Reshape hands on the transposed view ``(N, C / g, g, *S)`` when its target merges axes 1 and 2 of
    it (else it reshapes as the node does), and the Conv writes that view into its zero-padded input: the same
    values in the same places, then the same convolution with no padding left to add."""
    uses = Uses(graph, plan)
    fused = 0
    for c, conv in enumerate(plan.steps):
        node = conv.node
        if not (
            _is_onnx(node, "Conv") and conv.attrs.get("auto_pad") in (None, "", "NOTSET") and conv.attrs.get("pads")
        ):
            continue
        back = uses.producer_of_sole_use(node.inputs[0])
        if back is None or not _is_onnx(plan.steps[back].node, "Reshape") or plan.foldable[back]:
            continue
        swap = uses.producer_of_sole_use(plan.steps[back].node.inputs[0])
        if swap is None or not _is_onnx(plan.steps[swap].node, "Transpose") or plan.foldable[swap]:
            continue
        split = uses.producer_of_sole_use(plan.steps[swap].node.inputs[0])
        if split is None or not _is_onnx(plan.steps[split].node, "Reshape"):
            continue
        if uses.producer_of_sole_use(plan.steps[split].node.inputs[0]) is None:
            continue  # the view reads this value after its step: no other step may overwrite it in place
        perm = plan.steps[swap].attrs.get("perm")
        if perm is None or list(perm) != [0, 2, 1, *range(3, len(perm))]:
            continue
        reshape = plan.steps[back]
        plan.steps[back] = BoundNode(reshape.node, _MergedAxesView(reshape.fn), reshape.attrs, reshape.label)
        plan.steps[c] = BoundNode(
            node, _PaddedFromView(conv.fn, len(perm)), conv.attrs, conv.label + " with a channel shuffle"
        )
        plan.donors[c] = tuple(d for d in plan.donors[c] if d != 0)  # its input is a view of another array
        fused += 1
    plan.changed()
    return fused


class _MergedAxesView:
    """A Reshape whose target merges axes 1 and 2 of its input hands the input on as it is (a view the next
    Conv reads, see :func:`fuse_channel_shuffle`); any other target reshapes as the node does."""

    def __init__(self, reshape):
        self.reshape = reshape

    def __call__(self, ctx, data, *rest, **attrs):
        data = np.asarray(data)
        # the node's own target shape (its checks, 0 and -1 resolved) from a view that costs no copy
        stand_in = np.ndarray(data.shape, data.dtype, np.zeros(1, data.dtype), strides=(0,) * data.ndim)
        target = self.reshape(ctx, stand_in, *rest, **attrs).shape
        if data.ndim > 3 and target == data.shape[:1] + (data.shape[1] * data.shape[2],) + data.shape[3:]:
            return data
        return self.reshape(ctx, data, *rest, **attrs)


class _PaddedFromView:
    """A Conv whose input may arrive as ``(N, C / g, g, *S)`` (from :class:`_MergedAxesView`, ``rank`` dims): it
    copies that view into its zero-padded ``(N, C, *S)`` input and convolves with no padding left."""

    def __init__(self, conv, rank: int):
        self.conv = conv
        self.rank = rank

    def __call__(self, ctx, x, *params, pads, **attrs):
        if np.ndim(x) != self.rank:
            return self.conv(ctx, x, *params, pads=pads, **attrs)
        n = self.rank - 3  # spatial dims
        begin, end = pads[:n], pads[n:]
        if min(pads) < 0:
            return self.conv(ctx, x.reshape(x.shape[:1] + (-1,) + x.shape[3:]), *params, pads=pads, **attrs)
        spatial = tuple(s + b + e for s, b, e in zip(x.shape[3:], begin, end))
        padded = np.zeros(x.shape[:1] + (x.shape[1] * x.shape[2],) + spatial, dtype=x.dtype)
        inside = (Ellipsis,) + tuple(slice(b, b + s) for b, s in zip(begin, x.shape[3:]))
        padded.reshape(x.shape[:3] + spatial)[inside] = x
        return self.conv(ctx, padded, *params, pads=[0] * len(pads), **attrs)


# ---------------------------------------------------------------- transformer patterns
#
# A pattern is an expression tree: (op, operand, ...) for a node of the ONNX domain; a lower-case name for a
# value read from outside (each name one value); a float for a one-element constant of about that value,
# ``SCALAR`` for any one-element constant, ``BIAS`` for a 1-D constant; (SHARED, name, pattern) for a value
# read twice inside the pattern (both places name it).  The operands of Add and Mul match in either order.

X, W, Q, K, V, MASK, COS, SIN = "x", "w", "q", "k", "v", "mask", "cos", "sin"
SCALAR, BIAS, SHARED, CONST = "SCALAR", "BIAS", "SHARED", "CONST"  # CONST: any constant (a Slice's bounds)
_SQRT2, _SQRT_2_OVER_PI = 2**0.5, (2 / 3.141592653589793) ** 0.5
_ERF_GELU = ("Add", ("Erf", ("Div", X, _SQRT2)), 1.0)
_TANH_GELU = ("Add", ("Tanh", ("Mul", ("Add", X, ("Mul", ("Pow", X, 3.0), 0.044715)), _SQRT_2_OVER_PI)), 1.0)
_SCORES = [
    ("Mul", ("MatMul", Q, K), SCALAR),
    ("Div", ("MatMul", Q, K), SCALAR),
    ("MatMul", ("Mul", Q, SCALAR), ("Mul", K, SCALAR)),
]  # the last: torch's scaled_dot_product_attention
_SOFTMAX = [("Softmax", s) for scores in _SCORES for s in (("Add", scores, MASK), scores)]
# scaled_dot_product_attention's export also zeroes the NaN of a fully masked row
_WEIGHTS = _SOFTMAX + [("Where", ("IsNaN", (SHARED, "p", p)), 0.0, (SHARED, "p", p)) for p in _SOFTMAX]
TRANSFORMER_PATTERNS: dict[str, list[tuple[Any, ...]]] = {
    # torch's exports of nn.GELU / BERT's gelu: x * (1 + erf(x / sqrt 2)) * 0.5, or 0.5 x first
    "Gelu": [("Mul", ("Mul", X, _ERF_GELU), 0.5), ("Mul", ("Mul", X, 0.5), _ERF_GELU)],
    # GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    "Gelu (tanh)": [("Mul", ("Mul", X, 0.5), _TANH_GELU), ("Mul", ("Mul", X, _TANH_GELU), 0.5)],
    # attention: softmax(q k * scale [+ mask]) v, the weights maybe Cast (to their own type) first
    "Attention": [("MatMul", w, V) for weights in _WEIGHTS for w in (weights, ("Cast", weights))],
    # a linear layer's product and its bias
    "MatMul + bias": [("Add", ("MatMul", X, W), BIAS)],
    # LLaMA's RMSNorm as torch exports it: w * Cast(x * (1 / sqrt(mean(x^2) + eps))), or without the Cast
    "RMSNorm": [
        ("Mul", W, inner)
        for normalized in [("Mul", X, ("Div", 1.0, ("Sqrt", ("Add", ("ReduceMean", ("Pow", X, 2.0)), SCALAR))))]
        for inner in (("Cast", normalized), normalized)
    ],
    # LLaMA's rotary embedding as torch exports it: x * cos + cat(-x[..., h:], x[..., :h]) * sin
    "Rotary": [
        ("Add", ("Mul", X, COS), ("Mul", ("Concat", ("Neg", ("Slice", X, *bounds)), ("Slice", X, *bounds)), SIN))
        for bounds in ((CONST,) * 4, (CONST,) * 3)
    ],
}

#: ops a fused pattern computes with numpy directly: the kernels' own arithmetic for two operands of one
#: float32/float64 type
_UFUNCS = {"Add": np.add, "Mul": np.multiply, "Div": np.divide}


def fuse_transformer_patterns(graph: Graph, plan) -> dict[str, int]:
    """Run each match of :data:`TRANSFORMER_PATTERNS` as one step computing the same operations on the same
    values (the same bits), in place and without a kernel call per node; returns the count per pattern.

    A match's inner values have one reader each, no step of it is folded, and its constants are float32 or
    float64 (so, the model being well typed, are its other values: numpy's arithmetic on two operands of
    one such type is what the nodes' kernels compute).
    """
    uses = Uses(graph, plan)
    initializers = {id(v): v for v in graph.initializers.values()}
    taken: set[int] = set()
    matches = []
    for root in range(len(plan.steps) - 1, -1, -1):
        if root in taken:
            continue
        for name, patterns in TRANSFORMER_PATTERNS.items():
            match = next(
                (
                    m
                    for p in patterns
                    if (m := _match(p, root, plan, uses, initializers, taken, {}, top=True))
                    and _shared_values_stay_inside(m, plan, uses)
                ),
                None,
            )
            if match is not None:
                taken.update(match.steps)
                matches.append((name, root, match))
                break
    counts: dict[str, int] = {}
    for name, root, match in matches:
        _fuse_match(plan, root, match, _EVALUATORS.get(name, _FusedPattern))
        counts[name] = counts.get(name, 0) + 1
    gone = taken - {root for _, root, _ in matches}
    for field_name in ("steps", "inputs", "drops", "donors", "foldable", "overrides", "outputs", "declared"):
        setattr(plan, field_name, [x for i, x in enumerate(getattr(plan, field_name)) if i not in gone])
    plan.changed()
    return counts


def _plain_kernel(step: BoundNode) -> bool:
    """Whether the step runs its node's own kernel (not a fusion of this module)."""
    fused = (ThenActivation, _FusedConv, _FusedPattern, ThenViews)
    return not isinstance(step.fn, fused) and step.fn is not pass_through


def _shared_values_stay_inside(match, plan, uses) -> bool:
    """Whether every reader of a value the pattern reads twice (SHARED) is a step of the match."""
    inside = [vid for i in match.steps for vid in plan.inputs[i]]
    return all(inside.count(vid) == uses.readers.get(vid) for vid in match.shared)


class _Match:
    def __init__(self, steps: list[int], tree, outside: dict[str, int], constants: dict, shared: list[int]):
        self.steps = steps  # step indices of the matched nodes
        self.shared = shared  # value ids of the SHARED sub-patterns
        self.tree = tree  # the pattern with each node's bound step: (op, step, operand...)
        self.outside = outside  # X / W -> value id
        self.constants = constants  # id(pattern leaf) -> array


def _match(pattern, vid_or_step, plan, uses, initializers, taken, bound, top=False, shared=False):
    """Match ``pattern`` at step ``vid_or_step`` (``top``) or at the value id (``shared``: whatever reads
    it); a _Match, or None."""
    if top:
        step = vid_or_step
    elif shared:
        step = None if vid_or_step in uses.outputs else uses.producer.get(vid_or_step)
    else:
        step = uses.producer_of_sole_use_id(vid_or_step)
    if step is None or step in taken or plan.foldable[step] or not isinstance(pattern, tuple):
        return None
    node = plan.steps[step].node
    op, operands = pattern[0], pattern[1:]
    if (
        not _is_onnx(node, op)
        or not _plain_kernel(plan.steps[step])
        or len(node.outputs) != 1
        or len(plan.inputs[step]) != len(operands)
        or None in plan.inputs[step]
    ):
        return None
    ids = plan.inputs[step]
    orders = [ids, ids[::-1]] if op in ("Add", "Mul") else [ids]
    for order in orders:
        trial = dict(bound)
        parts = [_match_operand(p, vid, plan, uses, initializers, taken, trial) for p, vid in zip(operands, order)]
        if all(part is not None for part in parts):
            bound.clear()
            bound.update(trial)
            steps = [step] + [s for part in parts if isinstance(part, _Match) for s in part.steps]
            tree = (op, plan.steps[step]) + tuple(part.tree if isinstance(part, _Match) else part for part in parts)
            outside = {k: v for k, v in bound.items() if isinstance(k, str)}
            constants = {k: v for k, v in bound.items() if isinstance(k, int)}
            shared = [v for k, v in bound.items() if isinstance(k, tuple)]
            return _Match(steps, tree, outside, constants, shared)
    return None


def _match_operand(pattern, vid, plan, uses, initializers, taken, bound):
    """A matched operand: a _Match for a sub-pattern, else the leaf (bound in ``bound``); None: no match."""
    if isinstance(pattern, tuple) and pattern[0] == SHARED:  # (SHARED, name, pattern): read more than once
        name = (SHARED, pattern[1])
        if name in bound:
            return ("ref", pattern[1]) if bound[name] == vid else None
        inner = _match(pattern[2], vid, plan, uses, initializers, taken, bound, shared=True)
        if inner is None:
            return None
        bound[name] = vid
        inner.tree = (SHARED, pattern[1], inner.tree)
        return inner
    if isinstance(pattern, tuple):
        return _match(pattern, vid, plan, uses, initializers, taken, bound)
    if isinstance(pattern, str) and pattern.islower():
        return pattern if bound.setdefault(pattern, vid) == vid else None
    constant = constant_value(vid, initializers, plan)
    if pattern == CONST:
        if constant is None:
            return None
        key = len([k for k in bound if isinstance(k, int)])
        bound[key] = constant
        return ("const", key)
    if constant is None or not isinstance(constant, np.ndarray) or constant.dtype not in _FLOATS:
        return None
    if pattern == BIAS:
        if constant.ndim != 1:
            return None
    elif constant.size != 1 or (
        pattern != SCALAR and not np.isclose(float(constant.reshape(-1)[0]), pattern, rtol=1e-6, atol=0)
    ):
        return None
    key = len([k for k in bound if isinstance(k, int)])  # leaves numbered in matching order
    bound[key] = constant
    return ("const", key)


def _fuse_match(plan, root: int, match: _Match, evaluator: type[_FusedPattern]) -> None:
    """Make step ``root`` compute ``match``; values read by its steps live until ``root``."""
    outside = list(match.outside.values())
    steps = sorted(match.steps)
    members = set(steps)
    drops = list(plan.drops[root])
    for k in range(steps[0], root):
        moving = [vid for vid in plan.drops[k] if vid in outside or k in members]
        if moving:
            plan.drops[k] = [vid for vid in plan.drops[k] if vid not in moving]
            plan.donors[k] = tuple(d for d in plan.donors[k] if plan.inputs[k][d] not in moving)
            drops.extend(vid for vid in moving if vid in outside)
    last = plan.steps[root]
    kernel = evaluator(match.tree, list(match.outside), match.constants)
    plan.steps[root] = BoundNode(
        last.node, kernel, {}, last.label + f" with {len(steps) - 1} more nodes", last.deterministic
    )
    plan.inputs[root] = outside
    plan.drops[root] = drops
    plan.donors[root] = ()


def _holds(shape: tuple, other: tuple) -> bool:
    """Whether an array of ``shape`` can hold the result of broadcasting it with ``other``."""
    if shape == other or not other:
        return True
    return len(other) <= len(shape) and all(o == 1 or o == d for o, d in zip(reversed(other), reversed(shape)))


class _FusedPattern:
    """Computes a matched pattern tree: Add, Mul and Div as numpy's ufuncs (what their kernels compute for
    two float32 or float64 operands), in the buffers of values it computed, and other nodes by their kernels."""

    def __init__(self, tree, leaves: list[str], constants: dict):
        self.tree = tree
        self.leaves = leaves
        self.constants = constants
        self.program: list[tuple] = []  # the tree in postfix order, run on a stack (see _compile)
        self._compile(tree)

    def _compile(self, node) -> None:
        """Append ``node``'s instructions: (_LEAF, name), (_CONST, array), (_SHARE, name) after its subtree,
        (_UFUNC, ufunc) or (_KERNEL, step, operand count) after their operands."""
        if isinstance(node, str):
            self.program.append((_LEAF, node))
        elif node[0] == "const":
            self.program.append((_CONST, self.constants[node[1]]))
        elif node[0] == SHARED:  # computed once, read again by a ("ref", name) leaf: not to be overwritten
            self._compile(node[2])
            self.program.append((_SHARE, (SHARED, node[1])))
        elif node[0] == "ref":
            self.program.append((_LEAF, (SHARED, node[1])))
        else:
            for operand in node[2:]:
                self._compile(operand)
            op, step = node[0], node[1]
            self.program.append((_UFUNC, _UFUNCS[op]) if op in _UFUNCS else (_KERNEL, step, len(node) - 2))

    def __call__(self, ctx, *values):
        """The pattern's value; each stack entry is (value, fresh), ``fresh`` when the value is this call's own
        buffer, which later operations reuse."""
        named = dict(zip(self.leaves, values))
        stack: list[tuple[Any, bool]] = []
        for instruction in self.program:
            kind = instruction[0]
            if kind is _LEAF:
                stack.append((named[instruction[1]], False))
            elif kind is _CONST:
                stack.append((instruction[1], False))
            elif kind is _UFUNC:
                (b, b_fresh), (a, a_fresh) = stack.pop(), stack.pop()
                ufunc = instruction[1]
                if a_fresh and _holds(a.shape, b.shape):
                    stack.append((ufunc(a, b, out=a), True))
                elif b_fresh and _holds(b.shape, a.shape):
                    stack.append((ufunc(a, b, out=b), True))
                else:
                    stack.append((ufunc(a, b), True))
            elif kind is _SHARE:
                named[instruction[1]] = value = stack.pop()[0]
                stack.append((value, False))
            else:
                stack.append(self._kernel(ctx, instruction[1], stack, instruction[2]))
        return stack[0][0]

    @staticmethod
    def _kernel(ctx, step, stack: list, count: int) -> tuple[Any, bool]:
        """Run a node's kernel on the top ``count`` stack entries (popped); it may overwrite the fresh ones."""
        args, owned, kept = [], [], []  # kept: an outside value or constant, never overwritten
        for i, (value, fresh) in enumerate(stack[-count:]):
            args.append(value)
            if fresh:
                owned.append(i)
            else:
                kept.append(value)
        del stack[-count:]
        # The run's context, pointed at this node while its kernel runs, then back at the fused step's.
        node, owned_before = ctx.node, ctx.owned
        ctx.node, ctx.owned = step.node, tuple(owned)
        try:
            result = step.fn(ctx, *args, **step.attrs)
        finally:
            ctx.node, ctx.owned = node, owned_before
        if type(result) is not np.ndarray:
            result = as_outputs(result, step.node)[0]
        for value in kept:
            if _may_share(result, value):
                return result, False
        return result, True


_LEAF, _CONST, _SHARE, _UFUNC, _KERNEL = "leaf", "const", "share", "ufunc", "kernel"


def _may_share(result, value) -> bool:
    """np.may_share_memory, answered without it for an array owning its memory (a kernel's new buffer)."""
    if type(result) is np.ndarray and result.base is None and type(value) is np.ndarray:
        return result is value or value.base is result
    return bool(np.may_share_memory(result, value))


class _FusedRMSNorm(_FusedPattern):
    """RMSNorm of float32 values in nine numpy calls: the calls its nodes' kernels make (``Pow(x, 2)`` is
    ``x * x``, ReduceMean numpy's float32 sum over the axes divided by the count, the Cast to float32 hands its
    input on), in one buffer; other types, or other constants, run the nodes' kernels as the pattern does."""

    def __init__(self, tree, leaves: list[str], constants: dict):
        super().__init__(tree, leaves, constants)
        _, _, _, inner = tree  # ("Mul", step, "w", inner)
        cast = inner[0] == "Cast"
        normalized = inner[2] if cast else inner  # ("Mul", step, "x", ("Div", step, one, root))
        _, _, one, root = normalized[3]
        _, _, (_, _, (_, mean_step, (_, _, _, two)), eps) = root  # Sqrt(Add(ReduceMean(Pow(x, two)), eps))
        one, two, eps = (self.constants[c[1]] for c in (one, two, eps))
        self.fast = (
            all(c.dtype == np.float32 for c in (one, two, eps))
            and float(two.reshape(-1)[0]) == 2.0
            and (not cast or inner[1].attrs.get("to") == 1)  # FLOAT
            and mean_step.attrs.get("axes") is not None
        )
        self.one, self.eps = one, eps
        self.axes, self.keepdims = mean_step.attrs.get("axes"), bool(mean_step.attrs.get("keepdims", 1))

    def __call__(self, ctx, *values):
        named = dict(zip(self.leaves, values))
        x, w = named["x"], named["w"]
        if not (self.fast and type(x) is np.ndarray and x.dtype == np.float32 and getattr(w, "dtype", None) == x.dtype):
            return super().__call__(ctx, *values)
        axes = normalize_axes(self.axes, x.ndim)
        count = math.prod(x.shape[a] for a in axes)
        if not count:
            return super().__call__(ctx, *values)
        with np.errstate(over="ignore", under="ignore"):
            square = np.multiply(x, x)
        mean = np.add.reduce(square, axis=axes, keepdims=self.keepdims, dtype=np.float32)
        mean = mean / np.asarray(count, dtype=np.float32)
        if _holds(mean.shape, self.eps.shape):
            np.add(mean, self.eps, out=mean)
        else:
            mean = mean + self.eps
        np.sqrt(mean, out=mean)
        np.divide(self.one, mean, out=mean)
        y = np.multiply(x, mean)
        return np.multiply(w, y, out=y) if _holds(y.shape, np.shape(w)) else np.multiply(w, y)


class _FusedRotary(_FusedPattern):
    """The rotary embedding of float32 or float64 values in five numpy calls and a copy: ``x * cos``, the
    rotated halves written into one buffer (the Neg and the Concat), ``* sin`` and the sum, the operations of
    the nodes' kernels on the same values; a Slice pair that does not cut one axis in halves, or other types,
    run the nodes' kernels as the pattern does."""

    def __init__(self, tree, leaves: list[str], constants: dict):
        super().__init__(tree, leaves, constants)
        concat = tree[3][2]  # ("Add", step, ("Mul", step, x, cos), ("Mul", step, concat, sin))
        second, first = concat[2][2], concat[3]  # Concat(Neg(Slice(x, ...)), Slice(x, ...))
        self.axis = concat[1].attrs.get("axis")
        self.bounds = [self._bounds(s[2:]) for s in (first, second)]

    def _bounds(self, operands) -> tuple[int, int, int] | None:
        """(start, end, axis) of a Slice taking one axis with step 1, else None."""
        values = [self.constants[c[1]].reshape(-1).tolist() for c in operands[1:]]
        starts, ends, axes = values[0], values[1], values[2]
        steps = values[3] if len(values) > 3 else [1]
        if not (len(starts) == len(ends) == len(axes) == len(steps) == 1) or steps[0] != 1:
            return None
        return int(starts[0]), int(ends[0]), int(axes[0])

    def __call__(self, ctx, *values):
        named = dict(zip(self.leaves, values))
        x, cos, sin = named["x"], named["cos"], named["sin"]
        half = self._half(x)
        if half is None or not (
            x.dtype in _FLOATS and getattr(cos, "dtype", None) == getattr(sin, "dtype", 0) == x.dtype
        ):
            return super().__call__(ctx, *values)
        axis, h = half
        ahead = (slice(None),) * axis
        y = np.multiply(x, cos)
        rotated = np.empty(x.shape, x.dtype)
        np.negative(x[ahead + (slice(h, None),)], out=rotated[ahead + (slice(None, h),)])
        rotated[ahead + (slice(h, None),)] = x[ahead + (slice(None, h),)]
        rotated = np.multiply(rotated, sin, out=rotated) if _holds(rotated.shape, sin.shape) else rotated * sin
        return np.add(y, rotated, out=y) if _holds(y.shape, rotated.shape) else y + rotated

    def _half(self, x) -> tuple[int, int] | None:
        """(axis, h) when the first Slice takes ``[0, h)`` and the second ``[h, n)`` of one axis of n = 2h, the
        Concat joining them on that axis; else None."""
        if type(x) is not np.ndarray or None in self.bounds or self.axis is None or not x.ndim:
            return None
        (start1, end1, axis1), (start2, end2, axis2) = self.bounds  # type: ignore[misc]
        axis = axis1 + x.ndim if axis1 < 0 else axis1
        if (axis2 + x.ndim if axis2 < 0 else axis2) != axis or (self.axis + x.ndim) % x.ndim != axis:
            return None
        n = x.shape[axis]

        def clamped(i):
            return min(max(i + n if i < 0 else i, 0), n)

        h = n // 2
        if n % 2 or (clamped(start1), clamped(end1), clamped(start2), clamped(end2)) != (0, h, h, n):
            return None
        return axis, h


#: the evaluators of patterns with one of their own (the others: _FusedPattern)
_EVALUATORS: dict[str, type[_FusedPattern]] = {"RMSNorm": _FusedRMSNorm, "Rotary": _FusedRotary}


# ---------------------------------------------------------------- view steps
#
# Exports wrap their products in Reshapes and Transposes with constant shapes (GPT-2: a Reshape before and after
# each Gemm, 31 in two layers).  Each costs an interpreter step and a kernel call to make a view.

#: ops that make a view of their first input, their other inputs constant; and Cast, which hands its input on
#: when it has the type already (LLaMA's float32 -> float32 before each norm) or converts it
_VIEW_OPS = ("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Cast")


def fuse_view_steps(graph: Graph, plan) -> int:
    """Rewrite ``plan`` so that a Reshape, Transpose, Squeeze, Unsqueeze, Flatten (constant parameters) or Cast,
    alone reading an output of a step, is applied by that step to its result (the same view of the same
    array, the same cast); the view's step is left out.  Returns how many were absorbed.  Chains (Reshape ->
    Transpose -> Reshape) end up in the first producer."""
    uses = Uses(graph, plan)
    initializers = {id(v): v for v in graph.initializers.values()}
    gone: set[int] = set()
    for j, step in enumerate(plan.steps):
        node, ids = step.node, plan.inputs[j]
        if (
            node.op not in _VIEW_OPS
            or node.domain not in ("", "ai.onnx")
            or not _plain_kernel(step)
            or plan.foldable[j]
            or not ids
            or ids[0] is None
            or len(plan.outputs[j]) != 1
            or plan.outputs[j][0] is None
        ):
            continue
        parameters = [None if vid is None else constant_value(vid, initializers, plan) for vid in ids[1:]]
        if any(c is None and vid is not None for c, vid in zip(parameters, ids[1:])):
            continue  # a shape computed at run time
        i = uses.producer_of_sole_use_id(ids[0])
        if i is None or plan.foldable[i] or plan.steps[i].fn is pass_through:
            continue
        producer = plan.steps[i]
        position = plan.outputs[i].index(ids[0])
        views = producer.fn if isinstance(producer.fn, ThenViews) else ThenViews(producer.fn)
        views.add(position, _view(step, parameters))
        label = producer.label + " with " + step.label
        plan.steps[i] = BoundNode(producer.node, views, producer.attrs, label, producer.deterministic)
        outputs = list(plan.outputs[i])
        outputs[position] = plan.outputs[j][0]
        plan.outputs[i] = tuple(outputs)
        uses.producer[plan.outputs[j][0]] = i
        # Step j's inputs: the producer's output, now never stored, and constants no drop frees.
        gone.add(j)
    for field_name in ("steps", "inputs", "drops", "donors", "foldable", "overrides", "outputs", "declared"):
        setattr(plan, field_name, [x for i, x in enumerate(getattr(plan, field_name)) if i not in gone])
    plan.changed()
    return len(gone)


def _view(step: BoundNode, parameters: list):
    """``view(ctx, y)``: what ``step``'s kernel makes of ``y`` with its constant ``parameters``; Reshapes to a
    shape with no 0 (copy-a-dim) entry and Transposes straight through numpy's view methods."""
    op, attrs, kernel = step.node.op, step.attrs, step.fn
    if op == "Reshape" and parameters and parameters[0] is not None:
        target = tuple(int(d) for d in np.asarray(parameters[0]).reshape(-1).tolist())
        if 0 not in target and target.count(-1) <= 1 and min(target, default=0) >= -1:
            # numpy's reshape fills a -1 and refuses a wrong size as the kernel does
            return functools.partial(_reshaped, target=target, kernel=kernel, parameters=parameters, attrs=attrs)
    if op == "Transpose":
        perm = attrs.get("perm")
        return functools.partial(_transposed, perm=None if perm is None else tuple(perm), kernel=kernel, attrs=attrs)
    return functools.partial(_kernel_view, kernel=kernel, parameters=parameters, attrs=attrs)


def _kernel_view(ctx, y, *, kernel, parameters, attrs):
    return kernel(ctx, y, *parameters, **attrs)


def _reshaped(ctx, y, *, target, kernel, parameters, attrs):
    return y.reshape(target) if type(y) is np.ndarray else kernel(ctx, y, *parameters, **attrs)


def _transposed(ctx, y, *, perm, kernel, attrs):
    if type(y) is np.ndarray and (perm is None or len(perm) == y.ndim):
        return y.transpose(perm)
    return kernel(ctx, y, **attrs)


class ThenViews:
    """A kernel whose outputs are re-viewed (reshaped, transposed ...) by the view steps that alone read them."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.views: dict[int, list] = {}  # output position -> views, applied in order
        # a view or cast of a Shape's result still depends on its input's shape alone (executor._ShapeCache)
        self.reads_shape_only = getattr(kernel, "reads_shape_only", False)

    def add(self, position: int, view) -> None:
        self.views.setdefault(position, []).append(view)

    def __call__(self, ctx, *inputs, **attrs):
        result = self.kernel(ctx, *inputs, **attrs)
        if len(self.views) == 1 and 0 in self.views and type(result) is np.ndarray:
            for view in self.views[0]:
                result = view(ctx, result)
            return result
        outputs = list(as_outputs(result, ctx.node))
        for position, views in self.views.items():
            for view in views:
                outputs[position] = view(ctx, outputs[position])
        return tuple(outputs)


# ---------------------------------------------------------------- recurrent weights


def keep_recurrent_weights(graph: Graph, plan) -> int:
    """Have the LSTM kernel keep its constant W and R transposed (``kernels.rnn.keep_transposed``), made now,
    at session time, rather than transposed on each run; returns how many weights are kept."""
    from ...kernels import rnn

    initializers = {id(v): v for v in graph.initializers.values()}
    kept = 0
    for step, ids in zip(plan.steps, plan.inputs):
        if _is_onnx(step.node, "LSTM") and not isinstance(step.fn, ThenViews):
            for vid in ids[1:3]:
                weights = None if vid is None else constant_value(vid, initializers, plan)
                if weights is not None:
                    rnn.keep_transposed(weights)
                    kept += 1
    return kept
