"""opconv.kernels.rnn against onnxruntime (RNN, GRU, LSTM), plus gate-order and
cell-versus-sequence consistency checks."""

from __future__ import annotations

import numpy as np
import pytest

from opconv.kernels import rnn as K

from .test_kernels_helpers import assert_close, rng, run_ort

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
T, B, I, H = 5, 3, 4, 6


def _inputs(op, directions, seed, layout=0, with_bias=True, with_states=True, with_lens=False, peepholes=False):
    r = rng(seed)
    g = GATES[op]
    x = r.standard_normal((B, T, I) if layout else (T, B, I)).astype(np.float32)
    w = (r.standard_normal((directions, g * H, I)) * 0.5).astype(np.float32)
    rec = (r.standard_normal((directions, g * H, H)) * 0.5).astype(np.float32)
    b = (r.standard_normal((directions, 2 * g * H)) * 0.5).astype(np.float32) if with_bias else None
    lens = np.array([5, 2, 4], np.int32) if with_lens else None
    state_shape = (B, directions, H) if layout else (directions, B, H)
    h0 = r.standard_normal(state_shape).astype(np.float32) if with_states else None
    c0 = r.standard_normal(state_shape).astype(np.float32) if with_states and op == "LSTM" else None
    p = (r.standard_normal((directions, 3 * H)) * 0.5).astype(np.float32) if peepholes else None
    return x, w, rec, b, lens, h0, c0, p


def _split_bias(b, g):
    return (None, None) if b is None else (b[:, : g * H], b[:, g * H :])


def _onnx_activation_attrs(activations):
    if activations is None:
        return {}
    names = [a if isinstance(a, str) else a[0] for a in activations]
    alphas = [a[1] for a in activations if not isinstance(a, str) and a[1] is not None]
    betas = [a[2] for a in activations if not isinstance(a, str) and len(a) > 2 and a[2] is not None]
    attrs = {"activations": names}
    if alphas:
        attrs["activation_alpha"] = alphas
    if betas:
        attrs["activation_beta"] = betas
    return attrs


def _run_both(
    op,
    direction,
    seed=0,
    layout=0,
    with_bias=True,
    with_states=True,
    with_lens=False,
    activations=None,
    clip=None,
    peepholes=False,
    **extra,
):
    directions = 2 if direction == "bidirectional" else 1
    x, w, rec, b, lens, h0, c0, p = _inputs(op, directions, seed, layout, with_bias, with_states, with_lens, peepholes)
    attrs = {"hidden_size": H, "direction": direction, **_onnx_activation_attrs(activations)}
    if clip is not None:
        attrs["clip"] = clip
    attrs.update({k: int(v) for k, v in extra.items()})
    # onnxruntime only implements layout 0: feed it time-major data and
    # bring its outputs back to the batch-major layout 1.
    swap = (lambda a: None if a is None else np.swapaxes(a, 0, 1)) if layout else (lambda a: a)
    inputs = [swap(x), w, rec, b, lens, swap(h0)] + ([swap(c0), p] if op == "LSTM" else [])
    expected = run_ort(op, inputs, attrs, n_outputs=3 if op == "LSTM" else 2, opset=14)
    if layout:
        expected = [expected[0].transpose(2, 0, 1, 3)] + [swap(e) for e in expected[1:]]
    b_w, b_r = _split_bias(b, GATES[op])
    common = dict(
        b_w=b_w,
        b_r=b_r,
        initial_h=h0,
        sequence_lens=lens,
        direction=direction,
        activations=activations,
        clip=clip,
        layout=layout,
    )
    if op == "RNN":
        got = K.rnn(x, w, rec, **common)
    elif op == "GRU":
        got = K.gru(x, w, rec, linear_before_reset=bool(extra.get("linear_before_reset", 0)), **common)
    else:
        got = K.lstm(x, w, rec, initial_c=c0, peepholes=p, input_forget=bool(extra.get("input_forget", 0)), **common)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("with_lens", [False, True])
def test_sequence_matches_ort(op, direction, layout, with_lens):
    _run_both(op, direction, layout=layout, with_lens=with_lens)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_sequence_without_bias_or_states_matches_ort(op):
    _run_both(op, "bidirectional", seed=1, with_bias=False, with_states=False)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("clip", [0.3, 2.0])
def test_clip_matches_ort(op, clip):
    _run_both(op, "bidirectional", seed=2, clip=clip)


@pytest.mark.parametrize(
    "activation",
    [
        "Relu",
        "Sigmoid",
        "Softsign",
        "Softplus",
        ("LeakyRelu", 0.2),
        ("ThresholdedRelu", 0.1),
        ("ScaledTanh", 0.8, 1.3),
        ("HardSigmoid", 0.3, 0.4),
        ("Elu", 0.7),
        ("Affine", 0.5, 0.1),
    ],
)
def test_rnn_activations_match_ort(activation):
    _run_both("RNN", "forward", seed=3, activations=[activation])


def test_rnn_per_direction_activations_match_ort():
    _run_both("RNN", "bidirectional", seed=4, activations=[("LeakyRelu", 0.3), ("HardSigmoid", 0.25, 0.45)])


def test_gru_custom_activations_match_ort():
    _run_both("GRU", "forward", seed=5, activations=[("HardSigmoid", 0.3, 0.4), "Softsign"])


def test_lstm_custom_activations_match_ort():
    # Every activation that takes alpha/beta spells them out, so the ONNX
    # attribute lists built by the test are unambiguous.
    activations = [("HardSigmoid", 0.2, 0.5), ("ScaledTanh", 0.9, 1.1), "Softsign"] * 2
    _run_both("LSTM", "bidirectional", seed=6, activations=activations)


def test_activation_specs_read_onnx_lists_like_ort():
    x, w, rec, b, _, h0, _, _ = _inputs("GRU", 2, 14)
    names, alphas, betas = ["HardSigmoid", "LeakyRelu", "Sigmoid", "ScaledTanh"], [0.3, 0.05, 0.8], [0.45, 1.2]
    attrs = {
        "hidden_size": H,
        "direction": "bidirectional",
        "activations": names,
        "activation_alpha": alphas,
        "activation_beta": betas,
    }
    expected = run_ort("GRU", [x, w, rec, b, None, h0], attrs, n_outputs=2, opset=14)
    b_w, b_r = _split_bias(b, 3)
    got = K.gru(
        x, w, rec, b_w, b_r, h0, direction="bidirectional", activations=K.activation_specs(names, alphas, betas)
    )
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("with_lens", [False, True])
def test_gru_linear_before_reset_matches_ort(direction, with_lens):
    _run_both("GRU", direction, seed=7, with_lens=with_lens, linear_before_reset=1)


@pytest.mark.parametrize("input_forget", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_lstm_peepholes_and_input_forget_match_ort(input_forget, direction):
    _run_both("LSTM", direction, seed=8, peepholes=True, input_forget=input_forget, with_lens=True)


def _reorder(stacked, source, target, hidden, axis):
    blocks = dict(zip(source, np.split(stacked, len(source), axis=axis)))
    return np.concatenate([blocks[g] for g in target], axis=axis)


def test_lstm_openvino_gate_order_gives_same_result():
    x, w, rec, b, lens, h0, c0, p = _inputs("LSTM", 1, 9, with_lens=True, peepholes=True)
    b_w, b_r = _split_bias(b, 4)
    onnx = K.lstm(x, w, rec, b_w, b_r, h0, c0, p, lens)
    fico = [_reorder(a, "iofc", "fico", H, axis=1) for a in (w, rec, b_w + b_r)]
    openvino = K.lstm(
        x,
        fico[0],
        fico[1],
        fico[2],
        None,
        h0,
        c0,
        _reorder(p, "iof", "fio", H, 1),
        lens,
        gate_order="fico",
        peephole_order="fio",
    )
    for a, b_ in zip(onnx, openvino):
        assert_close(a, b_, rtol=1e-5, atol=1e-6)


def test_cells_match_one_step_sequences():
    x, w, rec, b, _, h0, c0, p = _inputs("LSTM", 1, 10, peepholes=True)
    b_w, b_r = _split_bias(b, 4)
    _, y_h, y_c = K.lstm(x[:1], w, rec, b_w, b_r, h0, c0, p)
    h, c = K.lstm_cell(x[0], h0[0], c0[0], w[0], rec[0], b_w[0], b_r[0], p[0], clip=None)
    assert_close(h, y_h[0])
    assert_close(c, y_c[0])
    x, w, rec, b, _, h0, _, _ = _inputs("GRU", 1, 11)
    b_w, b_r = _split_bias(b, 3)
    _, y_h = K.gru(x[:1], w, rec, b_w, b_r, h0, linear_before_reset=True)
    assert_close(K.gru_cell(x[0], h0[0], w[0], rec[0], b_w[0], b_r[0], linear_before_reset=True), y_h[0])
    x, w, rec, b, _, h0, _, _ = _inputs("RNN", 1, 12)
    b_w, b_r = _split_bias(b, 1)
    _, y_h = K.rnn(x[:1], w, rec, b_w, b_r, h0, activations=["Relu"])
    assert_close(K.rnn_cell(x[0], h0[0], w[0], rec[0], b_w[0], b_r[0], ["relu"]), y_h[0])


def test_activation_specs_consume_alphas_in_order():
    specs = K.activation_specs(["Sigmoid", "LeakyRelu", "HardSigmoid"], [0.1, 0.2], [0.6])
    assert specs == [("Sigmoid", None, None), ("LeakyRelu", 0.1, None), ("HardSigmoid", 0.2, 0.6)]


def test_float16_lstm_computes_in_float32():
    x, w, rec, b, _, h0, c0, _ = _inputs("LSTM", 1, 13)
    b_w, b_r = _split_bias(b, 4)
    y32 = K.lstm(x, w, rec, b_w, b_r, h0, c0)[0]
    y16 = K.lstm(*(a.astype(np.float16) for a in (x, w, rec, b_w, b_r, h0, c0)))[0]
    assert y16.dtype == np.float16
    assert_close(y16.astype(np.float32), y32, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_plain_lstm_of_one_batch_entry_matches_ort(direction, with_bias):
    # One batch entry and the default activations: the loop of vector products (an exported LSTM's case).
    r = rng(14)
    d, t, i, h = (2 if direction == "bidirectional" else 1), 16, 8, 32
    x = r.standard_normal((t, 1, i)).astype(np.float32)
    w = (r.standard_normal((d, 4 * h, i)) * 0.3).astype(np.float32)
    rec = (r.standard_normal((d, 4 * h, h)) * 0.3).astype(np.float32)
    b = (r.standard_normal((d, 8 * h)) * 0.3).astype(np.float32) if with_bias else None
    h0, c0 = (r.standard_normal((d, 1, h)).astype(np.float32) for _ in range(2))
    expected = run_ort("LSTM", [x, w, rec, b, None, h0, c0], {"hidden_size": h, "direction": direction}, 3, 14)
    b_w, b_r = (None, None) if b is None else (b[:, : 4 * h], b[:, 4 * h :])
    got = K.lstm(x, w, rec, b_w, b_r, h0, c0, direction=direction)
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=1e-5, atol=1e-5)
    assert not np.shares_memory(got[0], got[1])  # Y_h is a copy of Y's last step, not a view of it


def test_plain_lstm_in_openvino_gate_order_gives_same_result():
    x, w, rec, b, _, h0, c0, _ = _inputs("LSTM", 1, 15)
    b_w, b_r = _split_bias(b, 4)
    onnx = K.lstm(x, w, rec, b_w, b_r, h0, c0)
    fico = [_reorder(a, "iofc", "fico", H, axis=1) for a in (w, rec, b_w, b_r)]
    openvino = K.lstm(x, *fico, h0, c0, gate_order="fico")
    for a, b_ in zip(onnx, openvino):
        assert_close(a, b_, rtol=1e-5, atol=1e-6)


def test_kept_transposed_weights_give_the_same_sequence_and_die_with_the_weights():
    r = rng(16)
    t, i, h = 8, 5, 16
    x = r.standard_normal((t, 2, i)).astype(np.float32)
    w = (r.standard_normal((1, 4 * h, i)) * 0.3).astype(np.float32)
    rec = (r.standard_normal((1, 4 * h, h)) * 0.3).astype(np.float32)
    expected = run_ort("LSTM", [x, w, rec], {"hidden_size": h}, 3, 14)
    K.keep_transposed(w)  # writable: not kept (a caller could change it)
    assert K._kept_transposed(w) is None
    w.flags.writeable = rec.flags.writeable = False
    K.keep_transposed(w)
    K.keep_transposed(rec)
    assert np.array_equal(K._kept_transposed(w)[0], w[0].T) and K._kept_transposed(rec)[0].flags.c_contiguous
    for g, e in zip(K.lstm(x, w, rec), expected):
        assert_close(g, e, rtol=1e-5, atol=1e-5)
    kept = len(K._KEPT_TRANSPOSED)
    del w, rec
    assert len(K._KEPT_TRANSPOSED) == kept - 2
