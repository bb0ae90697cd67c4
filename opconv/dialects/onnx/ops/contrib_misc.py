"""ONNX Runtime's small tensor operators (com.microsoft): ExpandDims, Range, Trilu, Unique, Inverse, CDist,
GatherND, Pad, GridSample, CropAndResize, UnfoldTensor, ScaledSiLU, NhwcMaxPool, ConvTransposeWithDynamicPads,
HyperConnectionPreMix/PostMix, MaxpoolWithMask, NGramRepeatBlock, DynamicTimeWarping, MurmurHash3, WordConvEmbedding,
NGramHashMapping, VarlenNGramHashMapping, SampleOp.

Most are older or narrower forms of ONNX operators and share their kernels:

* GatherND has no ``batch_dims`` (ONNX's version 11); Pad takes ``pads`` as an input, 1-D or
  ``(1, 2 * rank)`` (ONNX's version 11); Trilu is ONNX's Trilu-14; GridSample is PyTorch's grid_sample (4-D,
  modes bilinear/nearest/bicubic), like ONNX's GridSample-16 except that bicubic border
  padding clamps each tap, not the sampling location.
* Unique is 1-D, unsorted (values in order of first occurrence); its outputs are the values,
  each element's index into them, and their counts.
* CDist is the pairwise distance between the rows of ``A`` ``(M, K)`` and ``B`` ``(N, K)``,
  ``euclidean`` or squared (``sqeuclidean``).
* CropAndResize crops boxes ``(y1, x1, y2, x2)`` (normalized: 0..1 spans the image) of image ``batch_indices[i]``
  and resizes each to ``crop_size``; samples outside the image take ``extrapolation_value``.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise as E
from ....kernels import pool as P
from ....kernels import sort
from ....kernels import vision as V
from ....kernels._common import downcast, upcast
from ..executor import onnx_op
from .conv import conv_pads, conv_transpose_1
from .indexing import gather_nd_11
from .pool import max_pool
from .shape import pad_11, range_11, trilu_14

MS = "com.microsoft"


@onnx_op("ExpandDims", since=1, domain=MS)
def expand_dims(ctx, x, axis):
    x = np.asarray(x)
    where = int(np.asarray(axis).reshape(-1)[0])
    if not -x.ndim - 1 <= where <= x.ndim:
        raise ExecutionError(f"axis {where} is out of range for a rank-{x.ndim} input")
    return np.expand_dims(x, where)


@onnx_op("Range", since=1, domain=MS)
def range_1(ctx, start, limit, delta=None):
    return range_11(ctx, start, limit, np.ones((), np.asarray(start).dtype) if delta is None else delta)


@onnx_op("Trilu", since=1, domain=MS)
def trilu_1(ctx, x, k=None, *, upper):
    return trilu_14(ctx, x, k, upper=upper)


@onnx_op("Unique", since=1, domain=MS)
def unique_1(ctx, x):
    values, _, inverse, counts = sort.unique(np.asarray(x).reshape(-1), None, False)
    return values, inverse.astype(np.int64), counts.astype(np.int64)


@onnx_op("Inverse", since=1, domain=MS)
def inverse(ctx, x):
    x = np.asarray(x)
    return downcast(np.linalg.inv(upcast(x)), x.dtype)


@onnx_op("CDist", since=1, domain=MS)
def cdist(ctx, a, b, *, metric):
    a, b = np.asarray(a), np.asarray(b)
    if metric not in ("sqeuclidean", "euclidean"):
        raise ExecutionError(f"unknown CDist metric {metric!r}; expected 'sqeuclidean' or 'euclidean'")
    ac, bc = upcast(a), upcast(b)
    squared = np.maximum(((ac[:, None, :] - bc[None, :, :]) ** 2).sum(axis=-1), 0)
    return downcast(np.sqrt(squared) if metric == "euclidean" else squared, a.dtype)


@onnx_op("GatherND", since=1, domain=MS)
def gather_nd_1(ctx, data, indices):
    return gather_nd_11(ctx, data, indices)


@onnx_op("Pad", since=1, domain=MS)
def pad_1(ctx, data, pads, value=None, *, mode):
    return pad_11(ctx, data, np.asarray(pads).reshape(-1), value, mode=mode)


_GRID_MODES = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}


@onnx_op("GridSample", since=1, domain=MS)
def grid_sample_1(ctx, x, grid, *, align_corners, mode, padding_mode):
    # PyTorch's grid_sample, which ONNX's GridSample-16 follows except for bicubic border padding.
    if np.ndim(x) != 4 or mode not in _GRID_MODES:
        raise ExecutionError(f"GridSample takes a 4-D input and a mode of {sorted(_GRID_MODES)}")
    return V.grid_sample(x, grid, _GRID_MODES[mode], padding_mode, bool(align_corners), cubic_border_taps_only=True)


@onnx_op("CropAndResize", since=1, domain=MS)
def crop_and_resize(ctx, x, rois, batch_indices, crop_size, *, extrapolation_value, mode):
    x = np.asarray(x)
    if mode not in ("bilinear", "nearest"):
        raise ExecutionError(f"unknown CropAndResize mode {mode!r}; expected 'bilinear' or 'nearest'")
    crop_h, crop_w = (int(v) for v in np.asarray(crop_size).reshape(-1)[:2])
    height, width = x.shape[2:]
    xc = upcast(x)
    out = np.empty((len(rois), x.shape[1], crop_h, crop_w), xc.dtype)
    for i, ((y1, x1, y2, x2), image) in enumerate(zip(upcast(rois), np.asarray(batch_indices).reshape(-1))):
        ys = _crop_positions(y1, y2, crop_h) * (height - 1)
        xs = _crop_positions(x1, x2, crop_w) * (width - 1)
        out[i] = _sample(xc[int(image)], ys, xs, mode, extrapolation_value, height, width)
    return downcast(out, x.dtype)


def _crop_positions(start, end, count: int) -> np.ndarray:
    # count samples from start to end inclusive (normalized); one sample sits at the middle
    if count == 1:
        return np.array([(start + end) / 2])
    return start + np.arange(count) * (end - start) / (count - 1)


def _sample(image, ys, xs, mode, fill, height, width):
    """``image`` ``(C, H, W)`` at the grid ``ys`` x ``xs`` (pixel coordinates); outside points are ``fill``."""
    inside = ((ys >= 0) & (ys <= height - 1))[:, None] & ((xs >= 0) & (xs <= width - 1))[None, :]
    if mode == "nearest":
        yi = np.clip(E.round_half_away(ys).astype(np.int64), 0, height - 1)
        xi = np.clip(E.round_half_away(xs).astype(np.int64), 0, width - 1)
        values = image[:, yi][:, :, xi]
    else:
        y0 = np.clip(np.floor(ys).astype(np.int64), 0, height - 1)
        x0 = np.clip(np.floor(xs).astype(np.int64), 0, width - 1)
        y1, x1 = np.minimum(y0 + 1, height - 1), np.minimum(x0 + 1, width - 1)
        dy, dx = (ys - y0)[:, None], (xs - x0)[None, :]
        top = image[:, y0][:, :, x0] * (1 - dx) + image[:, y0][:, :, x1] * dx
        bottom = image[:, y1][:, :, x0] * (1 - dx) + image[:, y1][:, :, x1] * dx
        values = top * (1 - dy) + bottom * dy
    return np.where(inside, values, image.dtype.type(fill))


@onnx_op("UnfoldTensor", since=1, domain=MS)
def unfold_tensor(ctx, x, *, dim, size, step):
    x = np.asarray(x)
    axis = dim % x.ndim
    windows = np.lib.stride_tricks.sliding_window_view(x, size, axis=axis)  # window dim last
    return np.ascontiguousarray(np.take(windows, np.arange(0, windows.shape[axis], step), axis=axis))


@onnx_op("ScaledSiLU", since=1, domain=MS)
def scaled_silu(ctx, x, scale=None, *, alpha):
    # Rounded to the input type after each step, as the schema specifies.
    x = np.asarray(x)
    factor = alpha if scale is None else np.asarray(scale).reshape(-1)[0]
    z = downcast(upcast(x) * upcast(np.asarray(factor)), x.dtype)
    s = downcast(E.sigmoid(upcast(z)), x.dtype)
    return downcast(upcast(z) * upcast(s), x.dtype)


# ---------------------------------------------------------------- hyper-connections
#
# C residual streams, grouped (..., C, H) or flattened (..., C * H) when num_branches gives C.


def _streams(x, num_branches):
    x = np.asarray(x)
    return x.reshape(x.shape[:-1] + (num_branches, -1)) if num_branches else x


def _per_stream(gates, streams):
    """Gates of shape (..., C), (..., C, 1), (..., C, H) or (..., C * H) as (..., C, 1 or H)."""
    gates = upcast(gates)
    channels, features = streams.shape[-2:]
    if gates.shape[-1] == channels and gates.ndim == streams.ndim - 1:
        return gates[..., None]
    if gates.ndim == streams.ndim - 1:  # flattened (..., C * H)
        return gates.reshape(gates.shape[:-1] + (channels, features))
    return gates


@onnx_op("HyperConnectionPreMix", since=1, domain=MS)
def hyper_connection_pre_mix(ctx, streams, pre_mix, *, num_branches, reduction_scale):
    x = _streams(streams, num_branches)
    y = reduction_scale * (upcast(x) * _per_stream(pre_mix, x)).sum(axis=-2)
    return downcast(y, x.dtype)


@onnx_op("HyperConnectionPostMix", since=1, domain=MS)
def hyper_connection_post_mix(ctx, streams, block_output, post_mix, stream_mix=None, *, num_branches):
    shape = np.shape(streams)
    x = _streams(streams, num_branches)
    xc = upcast(x)
    mixed = xc if stream_mix is None else np.einsum("...ck,...ch->...kh", upcast(stream_mix), xc)
    y = mixed + _per_stream(post_mix, x) * upcast(block_output)[..., None, :]
    return downcast(y, x.dtype).reshape(shape)


@onnx_op("SampleOp", since=1, domain=MS)
def sample_op(ctx, x):
    # ORT's example of a contrib kernel: an echo.
    return x


# ---------------------------------------------------------------- layout variants of ONNX ops


@onnx_op("NhwcMaxPool", since=1, domain=MS)
def nhwc_max_pool(ctx, x, *, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides):
    # MaxPool on channels-last images: (N, *S, C) <-> (N, C, *S) around ONNX's kernel.
    x = np.asarray(x)
    channels_first = np.moveaxis(x, -1, 1)
    y = max_pool(
        ctx,
        channels_first,
        auto_pad=auto_pad,
        kernel_shape=kernel_shape,
        pads=pads,
        strides=strides,
        ceil_mode=ceil_mode,
        dilations=dilations,
    )
    return np.ascontiguousarray(np.moveaxis(y, 1, -1))


@onnx_op("MaxpoolWithMask", since=1, domain=MS)
def maxpool_with_mask(ctx, x, mask, *, auto_pad, kernel_shape, pads, storage_order, strides):
    # onnxruntime's own kernel for one model: MaxPool's windows, each scan cut short by the mask (see the kernel)
    x = np.asarray(x)
    if kernel_shape is None or len(kernel_shape) != x.ndim - 2:
        raise ExecutionError(f"MaxpoolWithMask needs a kernel_shape of one size per spatial dim of {list(x.shape)}")
    kernel = [int(k) for k in kernel_shape]
    strides = [int(s) for s in strides] if strides else [1] * len(kernel)
    begin, end = conv_pads(x.shape, kernel, strides, None, pads, auto_pad)
    return P.masked_max_pool(x, mask, kernel, strides, begin, end)


@onnx_op("ConvTransposeWithDynamicPads", since=1, domain=MS)
def conv_transpose_with_dynamic_pads(
    ctx, x, w, pads=None, b=None, *, auto_pad, dilations, group, kernel_shape, output_padding, strides
):
    return conv_transpose_1(
        ctx,
        x,
        w,
        b,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        kernel_shape=kernel_shape,
        output_padding=output_padding,
        output_shape=None,
        pads=None if pads is None else np.asarray(pads).reshape(-1).tolist(),
        strides=strides,
    )


# ---------------------------------------------------------------- generation helpers


@onnx_op("NGramRepeatBlock", since=1, domain=MS)
def ngram_repeat_block(ctx, input_ids, scores, *, ngram_size):
    # A token that would repeat an n-gram already in the sequence gets a score of -inf.
    ids, out = np.asarray(input_ids), np.array(scores, copy=True)
    length = ids.shape[1]
    if ngram_size < 1 or length + 1 < ngram_size:
        return out
    for b in range(ids.shape[0]):
        prefix = ids[b, length - ngram_size + 1 :]
        for start in range(length - ngram_size + 1):
            if np.array_equal(ids[b, start : start + ngram_size - 1], prefix):
                out[b, ids[b, start + ngram_size - 1]] = -np.inf
    return out


@onnx_op("DynamicTimeWarping", since=1, domain=MS)
def dynamic_time_warping(ctx, input):
    """The cheapest monotonic path through a cost matrix, as (2, K) (row, column) pairs from (0, 0)."""
    cost = upcast(input)
    rows, cols = cost.shape[-2:]
    total = np.full((rows + 1, cols + 1), np.inf)
    total[0, 0] = 0
    step = np.zeros((rows + 1, cols + 1), np.int8)  # 0: diagonal, 1: from above, 2: from the left
    for j in range(1, cols + 1):
        for i in range(1, rows + 1):
            candidates = (total[i - 1, j - 1], total[i - 1, j], total[i, j - 1])
            # the diagonal wins only when strictly cheapest, then the cell above; ties go left
            if candidates[0] < candidates[1] and candidates[0] < candidates[2]:
                choice = 0
            elif candidates[1] < candidates[0] and candidates[1] < candidates[2]:
                choice = 1
            else:
                choice = 2
            total[i, j] = cost[..., i - 1, j - 1].reshape(-1)[0] + candidates[choice]
            step[i, j] = choice
    step[0, :], step[:, 0] = 2, 1
    path, i, j = [], rows, cols
    while i > 0 or j > 0:
        path.append((i - 1, j - 1))
        move = step[i, j]
        i, j = (i - 1, j - 1) if move == 0 else (i - 1, j) if move == 1 else (i, j - 1)
    return np.array(path[::-1], np.int32).T.copy()


# ---------------------------------------------------------------- MurmurHash3

_MASK32 = 0xFFFFFFFF


def _rotl32(v: int, r: int) -> int:
    return ((v << r) | (v >> (32 - r))) & _MASK32


def _murmur3_mix(k: int) -> int:
    return (_rotl32((k * 0xCC9E2D51) & _MASK32, 15) * 0x1B873593) & _MASK32


def murmur3_x86_32(data: bytes, seed: int) -> int:
    """MurmurHash3's 32-bit x86 variant of ``data``."""
    h = seed & _MASK32
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        h ^= _murmur3_mix(int.from_bytes(data[i : i + 4], "little"))
        h = (_rotl32(h, 13) * 5 + 0xE6546B64) & _MASK32
    if len(data) > whole:
        h ^= _murmur3_mix(int.from_bytes(data[whole:], "little"))
    h ^= len(data)
    for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = ((h ^ (h >> shift)) * factor) & _MASK32
    return h ^ (h >> 16)


@onnx_op("MurmurHash3", since=1, domain=MS)
def murmur_hash3(ctx, x, *, positive, seed):
    # Numbers hash their little-endian bytes, strings their UTF-8 bytes.
    x = np.asarray(x)
    if x.dtype.kind in "OUS":
        items = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in x.reshape(-1)]
    else:
        items = [v.tobytes() for v in x.astype(x.dtype.newbyteorder("<")).reshape(-1)]
    hashes = np.array([murmur3_x86_32(b, seed) for b in items], np.uint32).reshape(x.shape)
    return hashes if positive else hashes.view(np.int32)


@onnx_op("WordConvEmbedding", since=1, domain=MS)
def word_conv_embedding(ctx, sequence, w, b, c, *, char_embedding_size, conv_window_size, embedding_size):
    """Each word (a row of char ids, 0-padded) -> max over its windows of tanh(conv(char embeddings) + B).

    As onnxruntime's kernel: a word's length is its number of nonzero ids, and its windows cover its first
    max(length, window) ids; a word whose first id is 0 is skipped (onnxruntime leaves its output as the buffer
    held it; here it is zeros)."""
    chars = np.asarray(sequence)
    words = chars.reshape(-1, chars.shape[-1])
    table, kernel, bias = upcast(c), upcast(w), upcast(b)
    window = conv_window_size or kernel.shape[2]
    kernel = kernel.reshape(kernel.shape[0], window, -1)  # (embedding, window, char_embedding)
    out = np.zeros((words.shape[0], kernel.shape[0]), table.dtype)
    for i, word in enumerate(words):
        length = int(np.count_nonzero(word)) if word[0] else 0
        if not length:
            continue
        embedded = table[word[: max(length, window)]]
        windows = np.lib.stride_tricks.sliding_window_view(embedded, window, axis=0)  # (n, char_emb, window)
        out[i] = np.tanh(np.einsum("nci,eic->ne", windows, kernel) + bias).max(axis=0)
    return downcast(out.reshape(chars.shape[:-1] + (kernel.shape[0],)), np.asarray(c).dtype)


# ---------------------------------------------------------------- Engram n-gram hashing


def ngram_hashes(ids, history, multipliers, vocab_sizes, head_offsets, max_ngram_size: int, heads: int):
    """Hash ids ``(S, (max_n - 1) * heads)`` of one sequence after its right-aligned ``history``.

    For order n the token at t mixes ``ids[t - j] * multipliers[j]`` for j < n by xor (wrapping in the id
    type), then each head takes the mix modulo its vocabulary size (a non-negative remainder).
    """
    dtype = ids.dtype
    full = np.concatenate([history.astype(dtype), ids])
    back = max_ngram_size - 1
    seq = ids.shape[0]
    columns = []
    with np.errstate(over="ignore"):
        mix = np.zeros(seq, dtype)
        for j in range(max_ngram_size):
            mix = mix ^ (full[back - j : back - j + seq] * dtype.type(multipliers[j]))
            if j == 0:
                continue
            sizes = vocab_sizes[(j - 1) * heads : j * heads].astype(dtype)
            hashed = np.mod(mix[:, None], sizes[None, :])
            if head_offsets is not None:
                hashed = hashed + head_offsets[(j - 1) * heads : j * heads].astype(dtype)
            columns.append(hashed)
    return np.concatenate(columns, axis=1).astype(dtype), full[full.shape[0] - back :]


def _refuse_ngram_options(op: str, reset_on_eos, segment_ids):
    if reset_on_eos or segment_ids is not None:
        raise ExecutionError(f"{op} with reset_on_eos or segment_ids is not supported by opconv's kernel")


def _ngram_history(past_ids, eos_token_id, pad_id, batch: int, back: int, dtype):
    if past_ids is not None:
        return np.asarray(past_ids).astype(dtype)
    fill = pad_id if eos_token_id is None else np.asarray(eos_token_id).reshape(-1)[0]
    return np.full((batch, back), fill, dtype)


@onnx_op("NGramHashMapping", since=1, domain=MS)
def ngram_hash_mapping(
    ctx,
    input_ids,
    multipliers,
    vocab_sizes,
    past_ids=None,
    head_offsets=None,
    eos_token_id=None,
    segment_ids=None,
    *,
    max_ngram_size,
    n_head_per_ngram,
    pad_id,
    reset_on_eos,
):
    _refuse_ngram_options("NGramHashMapping", reset_on_eos, segment_ids)
    ids = np.asarray(input_ids)
    history = _ngram_history(past_ids, eos_token_id, pad_id, ids.shape[0], max_ngram_size - 1, ids.dtype)
    rows = [
        ngram_hashes(
            ids[b],
            history[b],
            np.asarray(multipliers),
            np.asarray(vocab_sizes),
            None if head_offsets is None else np.asarray(head_offsets),
            max_ngram_size,
            n_head_per_ngram,
        )
        for b in range(ids.shape[0])
    ]
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


@onnx_op("VarlenNGramHashMapping", since=1, domain=MS)
def varlen_ngram_hash_mapping(
    ctx,
    input_ids,
    multipliers,
    vocab_sizes,
    cumulative_sequence_length,
    past_ids=None,
    head_offsets=None,
    eos_token_id=None,
    segment_ids=None,
    past_segment_ids=None,
    capture_count=None,
    *,
    max_ngram_size,
    n_head_per_ngram,
    pad_id,
    reset_on_eos,
    state_update_capacity,
):
    # NGramHashMapping of each packed request [cu[i], cu[i + 1]) after its own history.
    _refuse_ngram_options("VarlenNGramHashMapping", reset_on_eos, segment_ids)
    if state_update_capacity:
        raise ExecutionError("VarlenNGramHashMapping with state_update_capacity is not supported by opconv's kernel")
    ids, bounds = np.asarray(input_ids), np.asarray(cumulative_sequence_length, np.int64)
    history = _ngram_history(past_ids, eos_token_id, pad_id, bounds.size - 1, max_ngram_size - 1, ids.dtype)
    rows = [
        ngram_hashes(
            ids[start:end],
            history[b],
            np.asarray(multipliers),
            np.asarray(vocab_sizes),
            None if head_offsets is None else np.asarray(head_offsets),
            max_ngram_size,
            n_head_per_ngram,
        )
        for b, (start, end) in enumerate(zip(bounds[:-1], bounds[1:]))
    ]
    return np.concatenate([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _find(haystack: np.ndarray, needle: np.ndarray, start: int = 0) -> int:
    """Index of the first occurrence of ``needle`` in ``haystack`` at or after ``start``; -1 when absent."""
    n = needle.size
    for i in range(start, haystack.size - n + 1):
        if np.array_equal(haystack[i : i + n], needle):
            return i
    return -1


@onnx_op("BifurcationDetector", since=1, domain=MS)
def bifurcation_detector(
    ctx, src_tokens, cur_tokens, prev_suffix_match_idx, pred_tokens=None, *, max_ngram_size, min_ngram_size
):
    """One step of aggressive decoding (1-D int64 token lists).

    The predicted tokens are appended up to and including the first that departs from the source (read from
    the previous match index on).  Then n-grams of growing size (min..max) ending the output are looked up in
    the source: each one found exactly once sets the match index to just after it; one found several times
    gives -1 and the search goes on; one not found (or ending the source) stops it.
    """
    src, tokens = np.asarray(src_tokens), np.asarray(cur_tokens)
    if pred_tokens is not None:
        pred, start = np.asarray(pred_tokens), int(np.asarray(prev_suffix_match_idx).reshape(-1)[0])
        agree = 0
        while agree < src.size - start and pred[agree] == src[start + agree]:
            agree += 1
        tokens = np.concatenate([tokens, pred[: agree + 1]])
    match = -1
    for size in range(min_ngram_size, max_ngram_size + 1):
        if size > tokens.size:
            break
        suffix = tokens[tokens.size - size :]
        first = _find(src, suffix)
        if first < 0:
            break
        match = first + size
        if match >= src.size:
            break
        if _find(src, suffix, match - size + 1) >= 0:
            match = -1
    return tokens.astype(np.int64), np.full(np.shape(prev_suffix_match_idx), match, np.int64)
