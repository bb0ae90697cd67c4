"""ai.onnx RotaryEmbedding (opset 23) decomposed, once for every target, by the rotation of onnxruntime's
RotaryEmbedding (:func:`.rotary.rotate_by`: the definition's products, in an order that gives the same floats).

A 3-D input (B, S, H*D) is viewed as (B, S, H, D) (``num_heads``), a 4-D one (B, H, S, D) is rotated in place;
the cos / sin rows are gathered by ``position_ids`` or given as (B, S, d/2); the channels past
``rotary_embedding_dim`` pass through.  The version converter's downgrade below opset 23 is this function.
"""

from __future__ import annotations

from .registry import Emitter, Refusal, decomposes
from .rotary import rotate_by


def _rows(e: Emitter, cache, position_ids):
    """The (B, S, d/2) cos or sin rows of ``cache``."""
    return cache if position_ids is None else e("Gather", cache, position_ids, axis=0)


@decomposes("RotaryEmbedding", domain="", since=23, composite=True)
def rotary_embedding_23(e: Emitter):
    x, cos_cache, sin_cache, position_ids = (e.input(i) for i in range(4))
    shape = e.static_shape(x)
    if shape is None or len(shape) not in (3, 4):
        raise Refusal("the input's shape must be static, of rank 3 or 4")
    if len(shape) == 4:
        work, head_axis, head_size = x, 1, shape[3]
    else:
        heads = int(e.attr("num_heads", 0) or 0)
        if heads <= 0 or shape[2] % heads:
            raise Refusal(f"num_heads={heads} does not split a hidden size of {shape[2]}")
        head_size = shape[2] // heads
        work, head_axis = e("Reshape", x, e.ints([0, 0, heads, head_size])), 2
    rotary_dim = int(e.attr("rotary_embedding_dim", 0) or 0) or head_size
    if rotary_dim > head_size or rotary_dim % 2:
        raise Refusal(f"rotary_embedding_dim={rotary_dim} for heads of {head_size} channels")
    result = rotate_by(
        e,
        work,
        head_axis,
        _rows(e, cos_cache, position_ids),
        _rows(e, sin_cache, position_ids),
        rotary_dim,
        bool(e.attr("interleaved", 0)),
        head_size,
    )
    return [result if len(shape) == 4 else e("Reshape", result, e.ints(list(shape)))]
