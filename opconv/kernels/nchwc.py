"""onnxruntime's blocked NCHWc layout (the ``com.microsoft.nchwc`` operators its level-3 optimizer writes).

A blocked tensor keeps ONNX's 4-D shape ``(N, C_padded, H, W)`` but its elements are stored as
``(N, C_padded / block, H, W, block)``: channels are split into blocks of ``block`` (the padding channels,
up to a multiple of ``block``, are zeros at reorder time).  Conv weights are reordered the same way, keeping
their ``(O_padded, I, kH, kW)`` shape: ``OIHWBiBo`` (``(O/b, I/b, kH, kW, b_in, b_out)``) when the input is
blocked, ``OIHWBo`` (``(O/b, I, kH, kW, b_out)``) for depthwise convolutions and for a first convolution that
reads a plain NCHW input of fewer than ``block`` channels.

The block size is MLAS's (onnxruntime's math library) for the CPU that optimized the model: 16 with
AVX-512F, 8 otherwise on x86 (AVX2, SSE).  The model does not record it, so :func:`block_size` takes it from
the model when only one of MLAS's sizes fits it (a padded channel count of the node's tensors or of any nchwc
Conv's weights that is a multiple of 8 but not 16, a channel count padded past its multiple of 8, a plain Conv
input of 8 or more channels), else from this CPU as MLAS would choose it.  A model optimized on another kind of
CPU may thus need its block size given (``OPCONV_NCHWC_BLOCK``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import numpy as np

from ..errors import ExecutionError

MLAS_BLOCK_SIZES = (16, 8)
NCHWC = "com.microsoft.nchwc"


@functools.cache
def cpu_block_size() -> int:
    """The block MLAS picks on this CPU: 16 when it has AVX-512F, else 8 (``OPCONV_NCHWC_BLOCK`` overrides)."""
    given = os.environ.get("OPCONV_NCHWC_BLOCK")
    if given:
        if int(given) not in MLAS_BLOCK_SIZES:
            raise ExecutionError(f"OPCONV_NCHWC_BLOCK={given}; MLAS's block sizes are {list(MLAS_BLOCK_SIZES)}")
        return int(given)
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        flags = ""
    return 16 if "avx512f" in flags.split() else 8


def block_size(*fits: Callable[[int], bool]) -> int:
    """The block size: the only one of MLAS's sizes that all ``fits`` allow (the node's tensors, the graph's
    weights), else this CPU's."""
    candidates = [b for b in MLAS_BLOCK_SIZES if all(fit(b) for fit in fits)]
    if len(candidates) == 1:
        return candidates[0]
    if cpu_block_size() in candidates:
        return cpu_block_size()
    raise ExecutionError(f"no NCHWc block size of {list(MLAS_BLOCK_SIZES)} fits this node's channel counts")


def fits_graph(graph) -> Callable[[int], bool]:
    """Whether a block size fits every nchwc Conv of ``graph`` with constant weights (their padded output
    channel counts are multiples of it): the model's own evidence, whichever node asks."""
    counts = graph.meta.get("nchwc_conv_outputs")
    if counts is None:
        counts = {
            int(n.inputs[1].const.shape[0])
            for n in graph.walk()
            if n.domain == NCHWC
            and n.op == "Conv"
            and len(n.inputs) > 1
            and n.inputs[1] is not None
            and n.inputs[1].const is not None
        }
        graph.meta["nchwc_conv_outputs"] = counts
    return lambda b: all(c % b == 0 for c in counts)


def padded(channels: int, b: int) -> int:
    return -(-channels // b) * b


def block(x: np.ndarray, b: int, channels_last: bool = False) -> np.ndarray:
    """NCHW (or NHWC) to blocked NCHWc, channels zero-padded up to a multiple of ``b``."""
    if channels_last:
        x = np.moveaxis(x, -1, 1)
    n, c, *spatial = x.shape
    cp = padded(c, b)
    if cp != c:
        x = np.concatenate([x, np.zeros((n, cp - c, *spatial), x.dtype)], axis=1)
    stored = x.reshape(n, cp // b, b, *spatial)
    return np.ascontiguousarray(np.moveaxis(stored, 2, -1)).reshape(n, cp, *spatial)


def unblock(x: np.ndarray, b: int, channels: int | None = None, channels_last: bool = False) -> np.ndarray:
    """Blocked NCHWc to NCHW (or NHWC), keeping the first ``channels`` (all when None)."""
    n, cp, *spatial = x.shape
    if cp % b:
        raise ExecutionError(f"a blocked NCHWc tensor has {cp} channels, not a multiple of the block {b}")
    y = np.moveaxis(np.asarray(x).reshape(n, cp // b, *spatial, b), -1, 2).reshape(n, cp, *spatial)
    y = y[:, :channels] if channels is not None else y
    return np.ascontiguousarray(np.moveaxis(y, 1, -1) if channels_last else y)


def unblock_filter(w: np.ndarray, b: int, input_blocked: bool) -> np.ndarray:
    """Reordered Conv weights back to OIHW (``OIHWBiBo`` when ``input_blocked``, else ``OIHWBo``)."""
    o, i, *kernel = w.shape
    if input_blocked:
        stored = np.asarray(w).reshape(o // b, i // b, *kernel, b, b)  # (Ob, Ib, kH, kW, bi, bo)
        return np.moveaxis(np.moveaxis(stored, -1, 1), -1, 3).reshape(o, i, *kernel)
    stored = np.asarray(w).reshape(o // b, i, *kernel, b)  # (Ob, I, kH, kW, bo)
    return np.moveaxis(stored, -1, 1).reshape(o, i, *kernel)
