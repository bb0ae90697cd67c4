"""Signal-processing kernels: discrete Fourier transforms, STFT, windows, mel filter banks.

Conventions
-----------
Kernels work on numpy real or complex arrays; a dialect that packs complex
numbers into a trailing ``[re, im]`` axis (ONNX) converts with
:func:`unpack_complex` / :func:`pack_complex`.  Transforms are unnormalized
forward and ``1/n``-normalized inverse, as numpy's.  Complex results keep the
precision of the input: complex64 for float32 and the narrow floats (computed
in float32), complex128 for float64.

Windows are the generalized cosine family
``w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)``, ``n = 0 .. size-1``,
with ``N = size`` for a periodic window and ``N = size - 1`` for a symmetric
one.
"""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ._common import compute_dtype, normalize_axis

#: (a0, a1, a2) of the cosine windows; Hamming uses the exact 25/46 of the original paper.
WINDOW_COEFFICIENTS = {
    "hann": (0.5, 0.5, 0.0),
    "hamming": (25 / 46, 21 / 46, 0.0),
    "blackman": (0.42, 0.5, 0.08),
}


def _complex_dtype(dtype) -> np.dtype:
    return np.dtype(np.complex128 if compute_dtype(dtype) == np.float64 else np.complex64)


def unpack_complex(x: np.ndarray) -> np.ndarray:
    """``[..., 1]`` (real) or ``[..., 2]`` (re, im) -> a real or complex array without the last axis."""
    x = np.asarray(x)
    if x.ndim == 0 or x.shape[-1] not in (1, 2):
        raise ExecutionError(
            f"the last axis must hold 1 (real) or 2 (real, imaginary) values, got shape {list(x.shape)}"
        )
    real = x[..., 0].astype(compute_dtype(x.dtype))
    if x.shape[-1] == 1:
        return real
    return (real + 1j * x[..., 1].astype(real.dtype)).astype(_complex_dtype(x.dtype))


def pack_complex(y: np.ndarray, dtype) -> np.ndarray:
    """A complex array -> ``[..., 2]`` of ``dtype``; a real one -> ``[..., 1]``."""
    y = np.asarray(y)
    parts = (y.real, y.imag) if np.iscomplexobj(y) else (y,)
    return np.stack(parts, axis=-1).astype(dtype)


def dft(
    x: np.ndarray, axis: int, length: int | None = None, inverse: bool = False, onesided: bool = False
) -> np.ndarray:
    """The DFT of ``x`` (real or complex) along ``axis``, zero-padded or truncated to ``length``.

    ``onesided`` with a forward transform keeps the ``length // 2 + 1`` unique
    bins of a real signal (an error for complex input); with ``inverse`` it
    reads ``x`` as such one-sided bins and returns the real signal of
    ``length`` samples (default ``2 * (bins - 1)``).
    """
    x = np.asarray(x)
    axis = normalize_axis(axis, x.ndim)
    if length is not None and length < 1:
        raise ExecutionError(f"dft_length must be positive, got {length}")
    out_dtype = _complex_dtype(x.real.dtype)
    if onesided and inverse:
        real_dtype = np.float64 if out_dtype == np.complex128 else np.float32
        return np.fft.irfft(x, n=length, axis=axis).astype(real_dtype)
    if onesided:
        if np.iscomplexobj(x):
            raise ExecutionError("a one-sided forward DFT needs a real input")
        return np.fft.rfft(x, n=length, axis=axis).astype(out_dtype)
    transform = np.fft.ifft if inverse else np.fft.fft
    return transform(x, n=length, axis=axis).astype(out_dtype)


def stft(
    signal: np.ndarray,
    frame_step: int,
    frame_length: int | None = None,
    window: np.ndarray | None = None,
    onesided: bool = True,
) -> np.ndarray:
    """Short-time Fourier transform of ``signal`` ``(batch, length)`` -> ``(batch, frames, bins)`` complex.

    Frames start every ``frame_step`` samples; ``frames = (length - frame_length) // frame_step + 1``.
    ``frame_length`` defaults to the window's length, else to the whole signal;
    the window defaults to a rectangular one.  ``onesided`` keeps the
    ``frame_length // 2 + 1`` unique bins of a real signal; a complex signal
    has no such symmetry and always gets every bin.
    """
    signal = np.asarray(signal)
    if signal.ndim != 2:
        raise ExecutionError(f"STFT expects a (batch, length) signal, got shape {list(signal.shape)}")
    if frame_length is None:
        frame_length = signal.shape[1] if window is None else len(window)
    if window is not None and len(window) != frame_length:
        raise ExecutionError(f"the window has {len(window)} samples but frame_length is {frame_length}")
    if frame_step < 1 or not 1 <= frame_length <= signal.shape[1]:
        raise ExecutionError(
            f"invalid STFT framing: frame_step {frame_step}, frame_length {frame_length}, "
            f"signal length {signal.shape[1]}"
        )
    frames = np.lib.stride_tricks.sliding_window_view(signal, frame_length, axis=1)[:, ::frame_step]
    if window is not None:
        frames = frames * np.asarray(window).astype(compute_dtype(np.asarray(window).dtype))
    return dft(frames, axis=-1, onesided=onesided and not np.iscomplexobj(frames))


def cosine_window(size: int, kind: str, periodic: bool = True) -> np.ndarray:
    """A Hann, Hamming or Blackman window of ``size`` samples (float64)."""
    a0, a1, a2 = WINDOW_COEFFICIENTS[kind]
    if size < 0:
        raise ExecutionError(f"window size must be >= 0, got {size}")
    period = size if periodic else size - 1
    # A symmetric window of one sample has period 0; ONNX's definition then divides 0 by 0 and yields NaN.
    with np.errstate(divide="ignore", invalid="ignore"):
        angle = 2 * np.pi * np.arange(size) / np.float64(period)
    return a0 - a1 * np.cos(angle) + a2 * np.cos(2 * angle)


def hz_to_mel(hz):
    """The HTK mel scale: ``2595 log10(1 + f / 700)``."""
    return 2595 * np.log10(1 + np.asarray(hz, dtype=np.float64) / 700)


def mel_to_hz(mel):
    return 700 * (10 ** (np.asarray(mel, dtype=np.float64) / 2595) - 1)


def mel_weight_matrix(
    num_mel_bins: int, dft_length: int, sample_rate: float, lower_edge_hertz: float, upper_edge_hertz: float
) -> np.ndarray:
    """Triangular mel filters, ``(dft_length // 2 + 1, num_mel_bins)`` float64, each peaking at 1.

    Band edges are ``num_mel_bins + 2`` points spaced evenly on the mel scale
    from ``lower_edge_hertz`` with a step of ``(mel(upper) - mel(lower)) /
    (num_mel_bins + 2)`` (ONNX's definition), mapped to spectrogram bins
    ``floor((dft_length + 1) * f / sample_rate)``.  Filter ``i`` rises
    linearly from edge ``i`` to edge ``i + 1`` and falls to edge ``i + 2``; a
    filter whose rising edge has zero width is 1 at its centre.
    """
    if num_mel_bins < 1 or dft_length < 1 or sample_rate <= 0:
        raise ExecutionError(
            f"invalid mel parameters: num_mel_bins {num_mel_bins}, dft_length {dft_length}, sample_rate {sample_rate}"
        )
    low, high = hz_to_mel(lower_edge_hertz), hz_to_mel(upper_edge_hertz)
    edges_mel = np.arange(num_mel_bins + 2) * ((high - low) / (num_mel_bins + 2)) + low
    edges = np.floor((dft_length + 1) * mel_to_hz(edges_mel) / sample_rate).astype(np.int64)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    j = np.arange(dft_length // 2 + 1)[:, None]
    rise_width, fall_width = center - left, right - center
    rising = (j >= left) & (j <= center)
    rise = np.where(rise_width > 0, (j - left) / np.maximum(rise_width, 1), 1.0)
    falling = (j >= center) & (j < right)
    fall = (right - j) / np.maximum(fall_width, 1)
    return np.where(falling, fall, np.where(rising, rise, 0.0))
