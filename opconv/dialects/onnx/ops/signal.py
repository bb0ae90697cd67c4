"""Signal processing: DFT, STFT, the cosine windows and MelWeightMatrix.

ONNX packs complex numbers into a trailing axis of size 2 (real, imaginary);
a real signal has a trailing axis of size 1.  The numerics are in
:mod:`opconv.kernels.signal`.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import signal as S
from ..executor import onnx_dtype, onnx_op


def _scalar_int(x, name: str) -> int:
    if np.size(x) != 1:
        raise ExecutionError(f"{name} must be a scalar, got shape {list(np.shape(x))}")
    return int(np.asarray(x).reshape(()))


def _dft(x, dft_length, axis: int, inverse: int, onesided: int):
    x = np.asarray(x)
    rank = x.ndim
    # The axis counts over the whole input, whose last axis holds the complex parts and cannot be transformed.
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise ExecutionError(
            f"DFT axis {axis} is out of range for an input of rank {rank} (allowed: [{-rank}, -2] or [0, {rank - 2}])"
        )
    axis %= rank
    length = None if dft_length is None else _scalar_int(dft_length, "dft_length")
    y = S.dft(S.unpack_complex(x), axis, length, inverse=bool(inverse), onesided=bool(onesided))
    return S.pack_complex(y, x.dtype)


@onnx_op("DFT", since=17)
def dft_17(ctx, input, dft_length=None, *, axis, inverse, onesided):
    return _dft(input, dft_length, axis, inverse, onesided)


@onnx_op("DFT", since=20)
def dft_20(ctx, input, dft_length=None, axis=None, *, inverse, onesided):
    # Opset 20 moved the axis from an attribute (default 1) to an optional input (default -2).
    return _dft(input, dft_length, -2 if axis is None else _scalar_int(axis, "axis"), inverse, onesided)


@onnx_op("STFT", since=17)
def stft_17(ctx, signal, frame_step, window=None, frame_length=None, *, onesided):
    signal = np.asarray(signal)
    if signal.ndim != 3:
        raise ExecutionError(f"STFT expects a [batch, length, 1 or 2] signal, got shape {list(signal.shape)}")
    length = None if frame_length is None else _scalar_int(frame_length, "frame_length")
    y = S.stft(S.unpack_complex(signal), _scalar_int(frame_step, "frame_step"), length, window, onesided=bool(onesided))
    return S.pack_complex(y, signal.dtype)


def _window(kind: str):
    def window_17(ctx, size, *, output_datatype, periodic):
        w = S.cosine_window(_scalar_int(size, "size"), kind, periodic=bool(periodic))
        # ONNX defines the windows as float32 arithmetic followed by a Cast to output_datatype.
        return w.astype(np.float32).astype(onnx_dtype(output_datatype))

    window_17.__name__ = f"{kind}_window_17"
    return window_17


for _op, _kind in {"HannWindow": "hann", "HammingWindow": "hamming", "BlackmanWindow": "blackman"}.items():
    onnx_op(_op, since=17)(_window(_kind))


@onnx_op("MelWeightMatrix", since=17)
def mel_weight_matrix_17(
    ctx, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, *, output_datatype
):
    w = S.mel_weight_matrix(
        _scalar_int(num_mel_bins, "num_mel_bins"),
        _scalar_int(dft_length, "dft_length"),
        float(np.asarray(sample_rate).reshape(())),
        float(np.asarray(lower_edge_hertz).reshape(())),
        float(np.asarray(upper_edge_hertz).reshape(())),
    )
    return w.astype(onnx_dtype(output_datatype))
