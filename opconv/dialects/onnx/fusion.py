"""Session-time fusion of the ONNX executor: inference BatchNormalization folded into the Conv before it.

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
initializer as an input) gets weights folded from what it fed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...executor import BoundNode
from ...ir import Graph, _free_inputs

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fuse_conv_batch_norm(graph: Graph, plan) -> int:
    """Rewrite ``plan`` (the interpreter's plan of ``graph``) so each Conv -> BatchNormalization pair runs as one
    convolution; returns how many pairs were fused."""
    uses_by_id: dict[int, int] = {}
    for node in graph.nodes:
        for v in _free_inputs(node):
            uses_by_id[id(v)] = uses_by_id.get(id(v), 0) + 1
    outputs = {id(v) for v in graph.outputs}
    initializers = {id(v): v for v in graph.initializers.values()}
    producer_step = {id(v): i for i, step in enumerate(plan.steps) for v in step.node.outputs if v is not None}
    fused = 0
    for j, bn in enumerate(plan.steps):
        node = bn.node
        if node.op != "BatchNormalization" or node.domain not in ("", "ai.onnx") or not _is_inference(bn):
            continue
        x = node.inputs[0]
        i = producer_step.get(id(x))
        if i is None or uses_by_id.get(id(x)) != 1 or id(x) in outputs or len(node.inputs) != 5 or None in node.inputs:
            continue
        conv = plan.steps[i]
        if conv.node.op != "Conv" or conv.node.domain not in ("", "ai.onnx") or len(conv.node.outputs) != 1:
            continue
        if any(producer_step.get(id(v), -1) >= i for v in node.inputs[1:]):
            continue  # a parameter computed after the Conv (or recomputed when a run overrides it) is not there yet
        fused_conv = _FusedConv(conv.fn, bn.attrs.get("epsilon", 1e-5))
        conv_inputs = list(plan.inputs[i]) + [None] * (3 - len(plan.inputs[i]))
        param_ids = conv_inputs[1:3] + plan.inputs[j][1:]
        constants = [None if vid is None else _constant(vid, initializers, plan) for vid in param_ids]
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
        plan.steps[j] = BoundNode(node, _pass_through, {}, bn.label)
        fused += 1
    return fused


def _constant(vid: int, initializers: dict, plan) -> Any:
    """The value no run can change: folded from constants alone, or an initializer no feed overrides."""
    if plan.folded is not None and vid in plan.folded and vid not in plan.volatile:
        return plan.folded[vid]
    if vid in initializers and vid not in plan.overridable:
        return initializers[vid].const.numpy()
    return None


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


def _pass_through(ctx, x, *_params, **_attrs):
    return x


class _FusedConv:
    """A Conv kernel applying the following BatchNormalization through its weights and bias."""

    def __init__(self, conv, epsilon: float):
        self.conv = conv
        self.epsilon = epsilon
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
        if len(sources) != len(self._sources) or any(s is not t for s, t in zip(sources, self._sources)):
            self._folded = self._fold(*sources)
            self._sources = sources

    def _fold(self, w, b, scale, bias, mean, var):
        arrays = [np.asarray(t) for t in (w, scale, bias, mean, var)] + ([] if b is None else [np.asarray(b)])
        if any(a.dtype not in _FLOATS for a in arrays) or len({a.dtype for a in arrays}) != 1:
            return None, None
        w = np.asarray(w)
        channels = w.shape[0]
        if any(np.asarray(t).shape != (channels,) for t in (scale, bias, mean, var)) or (
                b is not None and np.asarray(b).shape != (channels,)):
            return None, None
        a = np.asarray(scale, np.float64) / np.sqrt(np.asarray(var, np.float64) + np.float64(np.float32(self.epsilon)))
        shift = np.asarray(bias, np.float64) - np.asarray(mean, np.float64) * a
        if b is not None:
            shift = shift + np.asarray(b, np.float64) * a
        w_folded = (w.astype(np.float64) * a.reshape((channels,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        return w_folded, shift.astype(w.dtype)
