"""onnxruntime's blocked-layout operators (com.microsoft.nchwc) as standard operators.

Each node keeps its exact meaning, blocked tensors included (layout in :mod:`opconv.kernels.nchwc`): its blocked
inputs are unblocked by Reshape / Transpose / Reshape (to ``(N, C/b, H*W, b)``, swapped to ``(N, C/b, b, H*W)``,
back to the 4-D shape), the standard op runs (Conv, MaxPool, AveragePool, the global pools, Resize), and the
result is blocked by the inverse steps.  ReorderInput pads the channels with zeros up to a multiple of the block,
ReorderOutput slices them off; both transpose NHWC when ``channels_last``.  Conv's reordered weights must be
constants: they are put back to OIHW here.  Between two nchwc nodes the blocking and the unblocking cancel: the
consumer reads the producer's NCHW value, and the pass drops the blocking nobody reads, so a level-3 model
decomposes to about the nodes of the model onnxruntime optimized (a ResNet-like CNN: 26 nodes -> 49).

The block size is the one every nchwc Conv's padded output channel count allows among MLAS's (16, 8), else this
CPU's as MLAS picks it (:func:`opconv.kernels.nchwc.block_size`).
"""

from __future__ import annotations

import numpy as np

from ...kernels import nchwc as B
from .linalg import CONV_ATTRS, activate
from .registry import DROPPABLE, Emitter, Refusal, decomposes

NCHWC = B.NCHWC
POOL_ATTRS = (
    "auto_pad",
    "ceil_mode",
    "count_include_pad",
    "dilations",
    "kernel_shape",
    "pads",
    "storage_order",
    "strides",
)


def _block_size(e: Emitter) -> int:
    """The block size every nchwc Conv weight of the graph allows (the model's own evidence), else the CPU's."""
    return B.block_size(B.fits_graph(e.graph))


#: Node.meta key on the last node of a blocking: (the plain NCHW value it blocked, the block size)
BLOCKED_FROM = "nchwc_blocked_from"


def _swap_block(e: Emitter, x, b: int, to_blocked: bool):
    """``x`` (N, C, H, W) reordered between NCHW and blocked NCHWc (C a multiple of ``b``)."""
    e.require_opset(5, "a Reshape to a computed shape")
    shape = e("Shape", x)
    n = e.slice(shape, [0], [1], [0])
    blocks = e("Div", e.slice(shape, [1], [2], [0]), e.ints([b]))
    # blocked: (N, C/b, H*W, b); plain: (N, C/b, b, H*W)
    inner = [e.ints([b]), e.ints([-1])] if to_blocked else [e.ints([-1]), e.ints([b])]
    grouped = e("Reshape", x, e("Concat", n, blocks, *inner, axis=0))
    return e("Reshape", e("Transpose", grouped, perm=[0, 1, 3, 2]), shape)


def _unblock(e: Emitter, x, b: int):
    """The NCHW form of the blocked ``x``: the value an earlier decomposition blocked when there is one (between
    two nchwc nodes the blocking and unblocking cancel out; the unread blocking is dropped by the pass)."""
    blocked_from = x.producer.meta.get(BLOCKED_FROM) if x.producer is not None else None
    if blocked_from is not None and blocked_from[1] == b:
        return blocked_from[0]
    return _swap_block(e, x, b, to_blocked=False)


def _block(e: Emitter, x, b: int):
    first = len(e.nodes)
    y = _swap_block(e, x, b, to_blocked=True)
    for node in e.nodes[first:]:
        node.meta[DROPPABLE] = True
    y.producer.meta[BLOCKED_FROM] = (x, b)
    return y


@decomposes("ReorderInput", domain=NCHWC)
def reorder_input(e: Emitter):
    b = _block_size(e)
    e.require_opset(11, "ReorderInput's channel padding (Pad with computed pads)")
    x = e.input(0)
    if int(e.attr("channels_last", 0)):
        x = e("Transpose", x, perm=[0, 3, 1, 2])
    channels = e.slice(e("Shape", x), [1], [2], [0])
    size = e.ints([b])
    missing = e("Mod", e("Sub", size, e("Mod", channels, size)), size)
    zeros = e.ints([0, 0, 0, 0, 0])
    padded = e("Pad", x, e("Concat", zeros, missing, e.ints([0, 0]), axis=0))
    return [_block(e, padded, b)]


@decomposes("ReorderOutput", domain=NCHWC)
def reorder_output(e: Emitter):
    b = _block_size(e)
    y = _unblock(e, e.input(0), b)
    channels = int(e.attr("channels", 0) or 0)
    if channels:
        y = e.slice(y, [0], [channels], [1])
    if int(e.attr("channels_last", 0)):
        y = e("Transpose", y, perm=[0, 2, 3, 1])
    return [y]


@decomposes("Conv", domain=NCHWC)
def conv(e: Emitter):
    b = _block_size(e)
    x, w, bias, total = (e.input(i) for i in range(4))
    if w.const is None:
        raise Refusal("an nchwc Conv whose reordered weights are not a constant")
    filters = w.const.numpy()
    depthwise = int(e.attr("group", 1) or 1) > 1
    input_blocked = depthwise or filters.shape[1] >= b
    plain = e.const(B.unblock_filter(filters, b, input_blocked and not depthwise))
    y = e(
        "Conv",
        _unblock(e, x, b) if input_blocked else x,
        plain,
        *([bias] if bias is not None else []),
        **e.copy_attrs(CONV_ATTRS),
    )
    if total is not None:  # Sum, added before the activation
        y = e("Add", y, _unblock(e, total, b))
    params = np.asarray(e.attr("activation_params", []) or [], float).tolist()
    return [_block(e, activate(e, y, e.attr("activation", ""), params), b)]


def _around(e: Emitter, op: str, **attrs):
    """The standard ``op`` on the unblocked input, its result blocked again."""
    b = _block_size(e)
    return [_block(e, e(op, _unblock(e, e.input(0), b), **attrs), b)]


@decomposes("MaxPool", domain=NCHWC)
@decomposes("AveragePool", domain=NCHWC)
def pool(e: Emitter):
    e.require_opset(10, "an nchwc pool's ceil_mode")
    return _around(e, e.node.op, **e.copy_attrs(POOL_ATTRS))


@decomposes("GlobalMaxPool", domain=NCHWC)
@decomposes("GlobalAveragePool", domain=NCHWC)
def global_pool(e: Emitter):
    return _around(e, e.node.op)


@decomposes("Upsample", domain=NCHWC)
def upsample(e: Emitter):
    e.require_opset(11, "Upsample's coordinate_transformation_mode (Resize-11)")
    b = _block_size(e)
    mode = e.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise Refusal(f"Upsample mode {mode!r}")
    scales = e.const(np.asarray(e.attr("scales"), np.float32))
    transform = "asymmetric" if mode == "nearest" else e.attr("coordinate_transformation_mode", "asymmetric")
    y = e(
        "Resize",
        _unblock(e, e.input(0), b),
        e.const(np.zeros(0, np.float32)),
        scales,
        mode=mode,
        coordinate_transformation_mode=transform,
        nearest_mode="floor",
    )
    return [_block(e, y, b)]
