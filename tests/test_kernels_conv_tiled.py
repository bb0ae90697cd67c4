"""The banded im2col path of the convolution kernel (taken for large column matrices) against a
direct float64 sum over kernel offsets written here with numpy."""

from __future__ import annotations

import numpy as np
import pytest

from opconv.kernels import conv as K


def direct_conv(x, w, strides, pads, dilations, groups):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n_sp = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pads])
    out = [(s - (k - 1) * d - 1) // st + 1 for s, k, d, st in zip(x.shape[2:], w.shape[2:], dilations, strides)]
    o, cg = w.shape[:2]
    og = o // groups
    y = np.zeros((x.shape[0], o) + tuple(out))
    for offset in np.ndindex(*w.shape[2:]):
        window = x[
            (slice(None), slice(None))
            + tuple(slice(k * d, k * d + (m - 1) * st + 1, st) for k, d, m, st in zip(offset, dilations, out, strides))
        ]
        for g in range(groups):
            part = window[:, g * cg : (g + 1) * cg]
            taps = w[(slice(g * og, (g + 1) * og), slice(None)) + offset]
            y[:, g * og : (g + 1) * og] += np.tensordot(part, taps, axes=([1], [1])).transpose(
                (0, 1 + n_sp) + tuple(range(1, 1 + n_sp))
            )
    return y


@pytest.mark.parametrize(
    "x_shape, w_shape, strides, pads, dilations, groups",
    [
        ((2, 6, 30, 31), (8, 3, 3, 3), (1, 2), (1, 0), (1, 2), 2),
        ((1, 4, 50), (5, 4, 3), (2,), (1,), (1,), 1),
        ((1, 3, 9, 10, 11), (4, 3, 2, 3, 2), (1, 1, 2), (0, 1, 1), (1, 1, 1), 1),
        ((1, 16, 40, 40), (32, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ],
)
@pytest.mark.parametrize("packed", [False, True])  # packed: the bias rides in the product (a row of ones)
def test_banded_im2col_matches_a_direct_sum(monkeypatch, x_shape, w_shape, strides, pads, dilations, groups, packed):
    monkeypatch.setattr(K, "_TILED_IM2COL_BYTES", 0)  # every convolution takes the banded path
    monkeypatch.setattr(K, "_TILE_BYTES", 4096)  # several bands, the last one partial
    monkeypatch.setattr(K, "_TILE_MIN_POSITIONS", 1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    if packed:
        y = K.conv(x, K.pack_conv_weights(w, b, groups), None, strides, pads, pads, dilations, groups)
    else:
        y = K.conv(x, w, b, strides, pads, pads, dilations, groups)
    expected = direct_conv(x, w, strides, pads, dilations, groups) + b.reshape((1, -1) + (1,) * (x.ndim - 2))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
