"""ONNX Runtime's fused products (com.microsoft): FusedMatMul, TransposeMatMul, FusedGemm, FusedConv, MoE,
SparseToDenseMatMul.

* FusedMatMul is ``alpha * op(A) @ op(B)``: ``transA``/``transB`` swap the last two dims;
  ``transBatchA``/``transBatchB`` say the operand is stored ``(M, batch..., K)`` -- its first
  dim moves behind the batch dims (before ``trans*`` applies).  TransposeMatMul is the same
  op without the batch transposition.
* SparseToDenseMatMul is ``alpha * op(A) @ op(B)`` with A a 2-D sparse tensor: it arrives as an
  :class:`opconv.ir.SparseTensor` (COO, the only layout ONNX's SparseTensorProto has; onnxruntime also takes
  CSR) and is densified -- the product is the same, only the memory differs.
* FusedGemm is Gemm then the named activation (``activation_alpha/beta/gamma`` its
  parameters); FusedConv is ``activation(Conv(X, W, B) + Z)`` with ``activation_params``.
"""

from __future__ import annotations

import numpy as np

from ....attributes import densify
from ....errors import ExecutionError
from ....ir import SparseTensor
from ....kernels import attention as A
from ....kernels import elementwise as E
from ....kernels import linalg as L
from ....kernels._common import downcast, upcast
from ..executor import onnx_op
from .contrib_activation import fused_activation
from .conv import conv_1

MS = "com.microsoft"


def _operand(x, transpose: bool, transpose_batch: bool, name: str):
    x = np.asarray(x)
    if x.ndim < 2:
        if transpose or transpose_batch:
            raise ExecutionError(f"{name} of shape {list(x.shape)} cannot be transposed")
        return x
    if transpose_batch and x.ndim > 2:
        x = np.moveaxis(x, 0, -2)
    return np.swapaxes(x, -1, -2) if transpose else x


def _scaled_matmul(a, b, alpha):
    y = L.matmul(a, b)
    return y if alpha == 1 else (y * np.asarray(alpha, y.dtype)).astype(y.dtype, copy=False)


@onnx_op("FusedMatMul", since=1, domain=MS)
def fused_matmul(ctx, a, b, *, alpha, transA, transB, transBatchA, transBatchB):
    return _scaled_matmul(_operand(a, transA, transBatchA, "A"), _operand(b, transB, transBatchB, "B"), alpha)


@onnx_op("TransposeMatMul", since=1, domain=MS)
def transpose_matmul(ctx, a, b, *, alpha, transA, transB):
    return _scaled_matmul(_operand(a, transA, False, "A"), _operand(b, transB, False, "B"), alpha)


@onnx_op("SparseToDenseMatMul", since=1, domain=MS)
def sparse_to_dense_matmul(ctx, a, b, *, alpha, transA, transB):
    if not isinstance(a, SparseTensor):
        raise ExecutionError(f"input A must be a sparse tensor, got {type(a).__name__}")
    dense = densify(a)
    if dense.ndim != 2:
        raise ExecutionError(f"sparse input A must be 2-D, got dims {list(a.dims)}")
    y = L.matmul(dense.T if transA else dense, _operand(b, transB, False, "B"))
    # onnxruntime's CPU kernel scales by alpha only for float32 (float64 and the integers come out unscaled)
    return y if alpha == 1 or y.dtype != np.float32 else (y * np.float32(alpha)).astype(np.float32, copy=False)


@onnx_op("FusedGemm", since=1, domain=MS)
def fused_gemm(
    ctx, a, b, c=None, *, activation, activation_alpha, activation_beta, activation_gamma, alpha, beta, transA, transB
):
    params = [p for p in (activation_alpha, activation_beta, activation_gamma) if p is not None]
    y = L.gemm(a, b, c, alpha, beta, bool(transA), bool(transB))
    return fused_activation(activation, params)(y)


@onnx_op("FusedConv", since=1, domain=MS)
def fused_conv(
    ctx, x, w, b=None, z=None, *, activation, activation_params, auto_pad, dilations, group, kernel_shape, pads, strides
):
    y = conv_1(
        ctx,
        x,
        w,
        b,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        kernel_shape=kernel_shape,
        pads=pads,
        strides=strides,
    )
    if z is not None:
        y = (y + np.asarray(z)).astype(y.dtype, copy=False)
    return fused_activation(activation, activation_params or ())(y)


# ---------------------------------------------------------------- MoE
#
# Each token row is routed to the k experts of highest softmax(router_probs) (their weights renormalized to sum
# to 1 with normalize_routing_weights); an expert is FC2(act(FC1 x)), weights stored (expert, out, in).  With
# swiglu, act takes the gate g and the linear part l: from FC1 and FC3, or both from FC1, interleaved
# (swiglu_fusion=1) or as halves (2); swiglu = G sigmoid(alpha G) (L + beta) with G = min(g, limit) and
# L = clip(l, -limit, limit).  gelu is the tanh approximation, as onnxruntime's CPU kernel computes it.

_MOE_ACTIVATIONS = {
    "relu": E.relu,
    "gelu": lambda x: E.gelu(x, approximate="tanh"),
    "silu": lambda x: x * E.sigmoid(x),
    "identity": lambda x: x,
}


def _expert_layer(x, weights, bias, expert):
    y = x @ weights[expert].T
    return y if bias is None else y + bias[expert]


@onnx_op("MoE", since=1, domain=MS)
def moe(
    ctx,
    input,
    router_probs,
    fc1_experts_weights,
    fc1_experts_bias=None,
    fc2_experts_weights=None,
    fc2_experts_bias=None,
    fc3_experts_weights=None,
    fc3_experts_bias=None,
    *,
    activation_alpha,
    activation_beta,
    activation_type,
    k,
    normalize_routing_weights,
    swiglu_fusion,
    swiglu_limit,
    swiglu_limit_after_activation,
    use_sparse_mixer,
):
    if use_sparse_mixer or swiglu_limit_after_activation:
        raise ExecutionError(
            "MoE with use_sparse_mixer or swiglu_limit_after_activation is not supported by opconv's kernel"
        )
    if activation_type != "swiglu" and activation_type not in _MOE_ACTIVATIONS:
        raise ExecutionError(f"unknown MoE activation {activation_type!r}")
    x = np.asarray(input)
    rows = upcast(x).reshape(-1, x.shape[-1])
    w1, w2 = upcast(fc1_experts_weights), upcast(fc2_experts_weights)
    b1, b2 = (None if b is None else upcast(b) for b in (fc1_experts_bias, fc2_experts_bias))
    w3, b3 = (None if t is None else upcast(t) for t in (fc3_experts_weights, fc3_experts_bias))
    probs = A.masked_softmax(upcast(router_probs).reshape(rows.shape[0], -1))
    chosen = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    gates = np.take_along_axis(probs, chosen, axis=-1)
    if normalize_routing_weights:
        gates = gates / gates.sum(axis=-1, keepdims=True)
    out = np.zeros_like(rows)
    for expert in np.unique(chosen):
        token, slot = np.nonzero(chosen == expert)
        hidden = _expert_layer(rows[token], w1, b1, expert)
        if activation_type == "swiglu":
            if swiglu_fusion == 1:
                g, lin = hidden[:, 0::2], hidden[:, 1::2]
            elif swiglu_fusion == 2:
                g, lin = np.split(hidden, 2, axis=-1)
            else:
                g, lin = hidden, _expert_layer(rows[token], w3, b3, expert)
            if swiglu_limit is not None:
                g, lin = np.minimum(g, swiglu_limit), np.clip(lin, -swiglu_limit, swiglu_limit)
            hidden = g * E.sigmoid(activation_alpha * g) * (lin + activation_beta)
        else:
            hidden = _MOE_ACTIVATIONS[activation_type](hidden)
            if w3 is not None:  # a gated expert: act(FC1 x) * FC3 x
                hidden = hidden * _expert_layer(rows[token], w3, b3, expert)
        out[token] += gates[token, slot][:, None] * _expert_layer(hidden, w2, b2, expert)
    return downcast(out.reshape(x.shape), x.dtype)


@onnx_op("MoEGroupRouter", since=1, domain=MS)
def moe_group_router(
    ctx, logits, expert_bias, projection_weight=None, *, group_topk, n_group, router_sentinel, top_k, topk_group
):
    """DeepSeek-V3's group-limited sigmoid router.

    ``s = sigmoid(logits)`` and ``biased = s + expert_bias``.  Router_probs: the ``topk_group`` groups of
    highest sum of their ``group_topk`` best biased scores are kept, the ``top_k`` best biased experts in them
    get ``log(max(s, 1e-20))``, every other expert ``router_sentinel``.  Selection_scores and router_weights
    are ``biased`` and ``s`` for every expert (the consumer selects).
    """
    x = upcast(logits).astype(np.float32)
    if projection_weight is not None:
        x = x @ upcast(projection_weight).astype(np.float32).T
    x = x.reshape(-1, x.shape[-1])
    scores = E.sigmoid(x)
    biased = scores + upcast(expert_bias).astype(np.float32)
    if not ctx.output_used(0):
        return None, biased, scores
    rows, experts = biased.shape
    grouped = biased.reshape(rows, n_group, experts // n_group)
    per_group = min(group_topk, grouped.shape[2])
    group_score = -np.sort(-grouped, axis=-1)[..., :per_group].sum(axis=-1)
    kept_groups = np.argsort(-group_score, axis=-1, kind="stable")[:, :topk_group]
    in_kept = np.zeros((rows, n_group), bool)
    np.put_along_axis(in_kept, kept_groups, True, axis=-1)
    candidates = np.where(np.repeat(in_kept, experts // n_group, axis=-1), biased, -np.inf)
    chosen = np.argsort(-candidates, axis=-1, kind="stable")[:, :top_k]
    probs = np.full((rows, experts), np.float32(router_sentinel))
    np.put_along_axis(probs, chosen, np.log(np.maximum(np.take_along_axis(scores, chosen, -1), 1e-20)), axis=-1)
    return downcast(probs, np.asarray(logits).dtype), biased, scores
