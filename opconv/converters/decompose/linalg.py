"""Fused products of com.microsoft: FusedMatMul, TransposeMatMul, FusedGemm, FusedConv, MoE / QMoE and
MoEGroupRouter.

Each fused product becomes its standard product (MatMul with Transposes of the last two axes, Gemm, Conv)
followed by the activation onnxruntime fused into it, named by the node's ``activation`` attribute.  MoE runs
every expert on every token (stacked MatMuls over the expert axis) and keeps, per token, the k routed experts'
outputs weighted by their routing weights (the others are selected away, not multiplied by 0, so an expert's
overflow elsewhere cannot reach a token it does not serve).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .registry import Emitter, Refusal, decomposes


def _transpose_last(e: Emitter, x):
    rank = e.rank(x)
    if rank is None:
        raise Refusal("a transposed operand of unknown rank")
    if rank < 2:
        return x
    return e("Transpose", x, perm=list(range(rank - 2)) + [rank - 1, rank - 2])


@decomposes("FusedMatMul")
@decomposes("TransposeMatMul")
def fused_matmul(e: Emitter):
    if e.attr("transBatchA", 0) or e.attr("transBatchB", 0):
        raise Refusal("transBatchA/transBatchB are not decomposed")
    a, b = e.input(0), e.input(1)
    if e.attr("transA", 0):
        a = _transpose_last(e, a)
    if e.attr("transB", 0):
        b = _transpose_last(e, b)
    product = e("MatMul", a, b)
    alpha = float(e.attr("alpha", 1.0))
    return [product if alpha == 1.0 else e("Mul", product, e.scalar(alpha, e.dtype(e.input(0))))]


# activation name -> (emitter, x, its float parameters) -> value
ACTIVATIONS: dict[str, Callable] = {
    "Relu": lambda e, x, p: e("Relu", x),
    "Tanh": lambda e, x, p: e("Tanh", x),
    "Sigmoid": lambda e, x, p: e("Sigmoid", x),
    "LeakyRelu": lambda e, x, p: e("LeakyRelu", x, alpha=float(p[0]) if p else 0.01),
    "HardSigmoid": lambda e, x, p: e(
        "HardSigmoid", x, alpha=float(p[0]) if p else 0.2, beta=float(p[1]) if len(p) > 1 else 0.5
    ),
    "Elu": lambda e, x, p: e("Elu", x, alpha=float(p[0]) if p else 1.0),
    "Clip": lambda e, x, p: _clip(e, x, p),
}


def _clip(e: Emitter, x, params):
    if len(params) < 2:
        raise Refusal("a Clip activation needs its min and max in activation_params")
    if e.opset >= 11:
        dtype = e.dtype(x)
        return e("Clip", x, e.scalar(params[0], dtype), e.scalar(params[1], dtype))
    return e("Clip", x, min=float(params[0]), max=float(params[1]))


def activate(e: Emitter, x, name: str, params):
    if not name:
        return x
    fn = ACTIVATIONS.get(name)
    if fn is None:
        raise Refusal(f"activation {name!r} is not decomposed")
    return fn(e, x, list(params or []))


@decomposes("FusedGemm")
def fused_gemm(e: Emitter):
    inputs = [e.input(i) for i in range(3)]
    gemm = e(
        "Gemm",
        *[v for v in inputs if v is not None],
        alpha=float(e.attr("alpha", 1.0)),
        beta=float(e.attr("beta", 1.0)),
        transA=int(e.attr("transA", 0)),
        transB=int(e.attr("transB", 0)),
    )
    name = e.attr("activation", "")
    params = [e.attr(f"activation_{k}") for k in ("alpha", "beta", "gamma")]
    params = [p for p in params if p is not None]
    return [activate(e, gemm, name, params)]


#: the attributes a fused or quantized Conv passes on to ai.onnx Conv / QLinearConv
CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


@decomposes("FusedConv")
def fused_conv(e: Emitter):
    inputs = [v for v in (e.input(0), e.input(1), e.input(2)) if v is not None]
    y = e("Conv", *inputs, **e.copy_attrs(CONV_ATTRS))
    if e.input(3) is not None:  # Z, added before the activation
        y = e("Add", y, e.input(3))
    return [activate(e, y, e.attr("activation", ""), np.asarray(e.attr("activation_params", []) or [], float).tolist())]


def _experts(e: Emitter, x, weights, bias, per_expert: bool = False):
    """``x @ weights[expert]^T + bias[expert]`` for every expert: x ``(T, in)`` (or ``(E, T, in)``,
    ``per_expert``), weights ``(E, out, in)`` -> ``(E, T, out)``."""
    y = e("MatMul", x if per_expert else e.unsqueeze(x, [0]), e("Transpose", weights, perm=[0, 2, 1]))
    return y if bias is None else e("Add", y, e.unsqueeze(bias, [1]))


_MOE_ACTIVATIONS = {
    "relu": lambda e, x: e("Relu", x),
    "silu": lambda e, x: e("Mul", x, e("Sigmoid", x)),
    "identity": lambda e, x: x,
}


def _moe_activation(e: Emitter, kind: str, rows, hidden, width: int, fc3, b3):
    """The experts' inner activation on FC1's output ``hidden`` ``(E, T, width)``."""
    if kind == "swiglu":
        fusion = int(e.attr("swiglu_fusion", 0) or 0)
        if fusion == 1:
            gate = e.slice(hidden, [0], [np.iinfo(np.int64).max], [2], [2])
            linear = e.slice(hidden, [1], [np.iinfo(np.int64).max], [2], [2])
        elif fusion == 2:
            gate, linear = e.split(hidden, [width // 2, width // 2], axis=2)
        else:
            if fc3 is None:
                raise Refusal("swiglu_fusion=0 needs fc3_experts_weights")
            gate, linear = hidden, _experts(e, rows, fc3, b3)
        limit = e.attr("swiglu_limit")
        if limit is not None:
            gate = e("Min", gate, e.scalar(float(limit), e.dtype(gate)))
            linear = e("Clip", linear, e.scalar(-float(limit), e.dtype(gate)), e.scalar(float(limit), e.dtype(gate)))
        alpha, beta = float(e.attr("activation_alpha", 1.0)), float(e.attr("activation_beta", 0.0))
        dtype = e.dtype(gate)
        activated = e("Mul", gate, e("Sigmoid", e("Mul", gate, e.scalar(alpha, dtype))))
        return e("Mul", activated, e("Add", linear, e.scalar(beta, dtype)))
    if kind == "gelu":
        from .activation import gelu

        activated = gelu(e, hidden, "tanh")  # onnxruntime's CPU kernel: the tanh approximation
    elif kind in _MOE_ACTIVATIONS:
        activated = _MOE_ACTIVATIONS[kind](e, hidden)
    else:
        raise Refusal(f"activation_type {kind!r}")
    return activated if fc3 is None else e("Mul", activated, _experts(e, rows, fc3, b3))


@decomposes("MoE")
def moe(e: Emitter):
    x, router, w1, b1, w2, b2, w3, b3 = (e.input(i) for i in range(8))
    return [mixture_of_experts(e, x, router, w1, b1, w2, b2, w3, b3)]


@decomposes("QMoE")
def qmoe(e: Emitter):
    """MoE on the experts' integer weights dequantized once (constants, with the kernel's decoder)."""
    from ...kernels.quant import moe_expert_weights

    if e.attr("quant_type", "int") != "int" or any(e.input(i) is not None for i in range(14, 21)):
        raise Refusal("float weight formats, global/activation scales and router_weights are not decomposed")
    if e.attr("weights_prepacked", 0) == 1:
        raise Refusal("weights_prepacked=1 holds weights in an execution provider's layout")
    default_bits = int(e.attr("expert_weight_bits", 4))
    layers = []
    for weights, scales, zeros, bits in (
        (2, 3, 11, "fc1_expert_weight_bits"),
        (5, 6, 12, "fc2_expert_weight_bits"),
        (8, 9, 13, "fc3_expert_weight_bits"),
    ):
        packed, scale, zero = e.input(weights), e.input(scales), e.input(zeros)
        if packed is None:
            layers.append(None)
            continue
        if any(v is not None and v.const is None for v in (packed, scale, zero)) or scale is None:
            raise Refusal("the experts' weights, scales and zero points must be constants")
        layers.append(
            e.const(
                moe_expert_weights(
                    packed.const.numpy(),
                    scale.const.numpy(),
                    None if zero is None else zero.const.numpy(),
                    int(e.attr(bits, 0) or default_bits),
                    e.attr("block_size"),
                )
            )
        )
    return [
        mixture_of_experts(
            e, e.input(0), e.input(1), layers[0], e.input(4), layers[1], e.input(7), layers[2], e.input(10)
        )
    ]


def mixture_of_experts(e: Emitter, x, router, w1, b1, w2, b2, w3, b3):
    """onnxruntime's MoE on expert weights ``(E, out, in)`` (see the module docstring)."""
    if e.attr("use_sparse_mixer", 0) or e.attr("swiglu_limit_after_activation", 0):
        raise Refusal("use_sparse_mixer and swiglu_limit_after_activation are not decomposed")
    e.require_opset(11, "TopK with k as an input, ScatterElements")
    dtype = e.dtype(x)
    wide = "float32" if dtype in ("float16", "bfloat16") else dtype  # the experts compute as the kernel does

    def widened(v):
        return None if v is None or e.dtype(v) == wide else e.cast(v, wide)

    x_w, router_w = widened(x) or x, widened(router) or router
    w1, b1, w2, b2, w3, b3 = ((widened(v) or v) if v is not None else None for v in (w1, b1, w2, b2, w3, b3))
    experts = e.static_shape(w1)
    if experts is None:
        raise Refusal("the experts' weights must have a known shape")
    rows = e(
        "Reshape", x_w, e("Concat", e.ints([-1]), e.slice(e("Shape", x), [-1], [np.iinfo(np.int64).max], [0]), axis=0)
    )
    probs = e("Softmax", e("Reshape", router_w, e.ints([-1, experts[0]])), axis=1)
    weights, chosen = e("TopK", probs, e.ints([int(e.attr("k", 1))]), outputs=2, axis=1)
    if e.attr("normalize_routing_weights", 0):
        weights = e("Div", weights, e.reduce("ReduceSum", weights, [1]))
    zeros = e("Mul", probs, e.scalar(0.0, wide))
    dense = e("ScatterElements", zeros, chosen, weights, axis=1)  # (T, E): the routed experts' weights
    served = e(
        "ScatterElements",
        e.cast(zeros, "bool"),
        chosen,
        e("Expand", e.const(np.array(True)), e("Shape", chosen)),
        axis=1,
    )
    route = e.unsqueeze(e("Transpose", dense, perm=[1, 0]), [2])  # (E, T, 1)
    keep = e.unsqueeze(e("Transpose", served, perm=[1, 0]), [2])
    hidden = _moe_activation(
        e, str(e.attr("activation_type", "relu")), rows, _experts(e, rows, w1, b1), experts[1], w3, b3
    )
    outputs = _experts(e, hidden, w2, b2, per_expert=True)  # (E, T, H)
    chosen_outputs = e("Where", keep, outputs, e.scalar(0.0, wide))
    y = e.reduce("ReduceSum", e("Mul", chosen_outputs, route), [0], keepdims=0)
    y = e("Reshape", y, e("Shape", x))
    return y if wide == dtype else e.cast(y, dtype)


@decomposes("MoEGroupRouter")
def moe_group_router(e: Emitter):
    """DeepSeek-V3's group-limited router, in float32: ``s = Sigmoid(logits)`` (projected first when a
    projection is given), ``biased = s + expert_bias``; the ``topk_group`` groups of highest sum of their
    ``group_topk`` best biased scores stay (TopK, ScatterElements), the ``top_k`` best biased experts in them
    get ``Log(Max(s, 1e-20))`` and every other expert ``router_sentinel`` (TopK breaks ties by the lower
    index, as onnxruntime's kernel does)."""
    logits, bias, projection = e.input(0), e.input(1), e.input(2)
    e.require_opset(11, "TopK with k as an input, ScatterElements")
    experts = e.static_shape(bias)
    if experts is None:
        raise Refusal("the number of experts (expert_bias's size) is unknown")
    experts = int(np.prod(experts))
    x = e.cast(logits, "float32") if e.dtype(logits) != "float32" else logits
    if projection is not None:
        weight = e.cast(projection, "float32") if e.dtype(projection) != "float32" else projection
        x = e("MatMul", x, e("Transpose", weight, perm=[1, 0]))
    scores = e("Sigmoid", e("Reshape", x, e.ints([-1, experts])))
    biased = e("Add", scores, bias)
    if not e.output_used(0):
        return [None, biased, scores]
    groups = int(e.attr("n_group", 1))
    per_group = experts // groups
    grouped = e("Reshape", biased, e.ints([-1, groups, per_group]))
    best_in_group, _ = e("TopK", grouped, e.ints([min(int(e.attr("group_topk", 2)), per_group)]), outputs=2, axis=2)
    _, kept_groups = e(
        "TopK",
        e.reduce("ReduceSum", best_in_group, [2], keepdims=0),
        e.ints([int(e.attr("topk_group", 1))]),
        outputs=2,
        axis=1,
    )
    no_group = e("Mul", e.reduce("ReduceSum", grouped, [2], keepdims=0), e.scalar(0.0, "float32"))  # (rows, G)
    kept = e(
        "ScatterElements", no_group, kept_groups, e("Expand", e.scalar(1.0, "float32"), e("Shape", kept_groups)), axis=1
    )
    kept_experts = e("Reshape", e("Expand", e.unsqueeze(kept, [2]), e.ints([1, 1, per_group])), e.ints([-1, experts]))
    candidates = e("Where", e.cast(kept_experts, "bool"), biased, e.scalar(-np.inf, "float32"))
    _, chosen = e("TopK", candidates, e.ints([int(e.attr("top_k"))]), outputs=2, axis=1)
    sentinel = e("Expand", e.scalar(float(e.attr("router_sentinel", -10000.0)), "float32"), e("Shape", biased))
    picked = e("Log", e("Max", e("GatherElements", scores, chosen, axis=1), e.scalar(1e-20, "float32")))
    probs = e("ScatterElements", sentinel, chosen, picked, axis=1)
    return [probs if e.dtype(logits) == "float32" else e.cast(probs, e.dtype(logits)), biased, scores]
