"""LSTMSequence, DeformableConvolution, BinaryConvolution and TensorIterator against OpenVINO's CPU plugin.

Single-op cases reuse the harness of ``tests/test_openvino_executor.py``: the
same layer is built with OpenVINO's Python API (run by the CPU plugin in f32)
and as an opconv model (run by opconv's opset1 executor) and both outputs are
compared.  TensorIterator is also checked through the IR files: OpenVINO
writes one with ``save_model`` and opconv reads and runs it, and opconv
writes one that OpenVINO reads and runs.
"""

from __future__ import annotations

import importlib

import numpy as np
import openvino as ov
import pytest
from openvino import opset1 as ops
from openvino import opset5

import opconv
from opconv.compare import compare_arrays
from opconv.dialects.openvino import executor as ov_executor
from opconv.dialects.openvino.executor import Session
from opconv.errors import ModelReadError, ModelWriteError
from opconv.schemas import dialect_schemas
from opconv.types import TensorType, from_numpy
from tests.test_openvino_executor import CORE, C, Case, P, _opconv_model, _r, check  # sets CI=true first

# ---------------------------------------------------------------- LSTMSequence


def _lstm_sequence_cases():
    batch, steps, inputs, hidden = 3, 5, 4, 6
    cases = []
    for direction, d in (("forward", 1), ("reverse", 1), ("bidirectional", 2)):
        for tag, lengths, attrs in (
            ("", [5, 5, 5], {}),
            ("-lengths", [5, 2, 4], {}),
            ("-clip-acts", [4, 5, 1], {"clip": 0.7, "activations": ["tanh", "sigmoid", "relu"]}),
            # The CPU plugin accepts only sigmoid, tanh and relu (no alpha/beta activations).
            ("-relu", [5, 3, 5], {"activations": ["sigmoid", "relu", "tanh"]}),
        ):
            ports = [
                P(_r(batch, steps, inputs, seed=1)),
                P(_r(batch, d, hidden, seed=2)),
                P(_r(batch, d, hidden, seed=3)),
                C(np.array(lengths, np.int32)),
                C(_r(d, 4 * hidden, inputs, seed=4)),
                C(_r(d, 4 * hidden, hidden, seed=5)),
                C(_r(d, 4 * hidden, seed=6)),
            ]

            def build(*nodes, direction=direction, ov_attrs=attrs):
                # OpenVINO no longer builds the opset1 version; opset5's has the same inputs and semantics
                # without the peephole input.
                return opset5.lstm_sequence(*nodes, hidden, direction, **ov_attrs)

            cases.append(
                Case(
                    f"LSTMSequence-{direction}{tag}",
                    "LSTMSequence",
                    ports,
                    {"hidden_size": hidden, "direction": direction, **attrs},
                    build,
                    outputs=3,
                )
            )
    return cases


@pytest.mark.parametrize("case", _lstm_sequence_cases(), ids=lambda c: c.id)
def test_lstm_sequence_matches_openvino(case):
    check(case)


# ---------------------------------------------------------------- DeformableConvolution


def _deformable_cases():
    cases = []
    for tag, (n, c, size, o, k), attrs in (
        ("basic", (1, 4, 6, 3, 3), {}),
        ("stride-pad", (2, 4, 7, 4, 3), {"strides": [2, 2], "pads_begin": [1, 0], "pads_end": [1, 2]}),
        ("dilation", (1, 2, 8, 2, 2), {"dilations": [2, 3]}),
        ("group2", (1, 4, 6, 6, 3), {"group": 2}),
        ("defgroup2", (2, 4, 6, 2, 3), {"deformable_group": 2}),
        ("groups-both", (1, 8, 5, 4, 2), {"group": 2, "deformable_group": 4, "pads_begin": [1, 1], "pads_end": [0, 0]}),
        ("same_upper", (1, 3, 5, 2, 2), {"auto_pad": "same_upper", "strides": [2, 2]}),
        ("valid", (1, 3, 5, 2, 3), {"auto_pad": "valid", "pads_begin": [1, 1], "pads_end": [1, 1]}),
    ):
        # Every attribute set, as OpenVINO writes them (its IR reader takes a missing group as 0).
        full = {
            "strides": [1, 1],
            "pads_begin": [0, 0],
            "pads_end": [0, 0],
            "dilations": [1, 1],
            "auto_pad": "explicit",
            "group": 1,
            "deformable_group": 1,
            **attrs,
        }
        group, dgroup, mode = full["group"], full["deformable_group"], full["auto_pad"]
        pads = (full["pads_begin"], full["pads_end"]) if mode == "explicit" else None
        out = []
        for d in range(2):
            extent = (k - 1) * full["dilations"][d] + 1
            if mode == "same_upper":
                out.append(-(-size // full["strides"][d]))
            else:
                padded = size + (sum(p[d] for p in pads) if pads else 0)
                out.append((padded - extent) // full["strides"][d] + 1)
        # Offsets up to +-2.5 pixels push many taps across the border and between pixels.
        offsets = _r(n, dgroup * k * k * 2, *out, seed=7, low=-2.5, high=2.5)
        inputs = [P(_r(n, c, size, size, seed=8)), P(offsets), C(_r(o, c // group, k, k, seed=9))]

        def build(x, off, w, full=full):
            return ops.deformable_convolution(
                x,
                off,
                w,
                full["strides"],
                full["pads_begin"],
                full["pads_end"],
                full["dilations"],
                full["auto_pad"],
                full["group"],
                full["deformable_group"],
            )

        cases.append(Case(f"DeformableConvolution-{tag}", "DeformableConvolution", inputs, full, build))
    return cases


@pytest.mark.parametrize("case", _deformable_cases(), ids=lambda c: c.id)
def test_deformable_convolution_matches_openvino(case):
    check(case)


# ---------------------------------------------------------------- BinaryConvolution


def _ov_binary_filters(bits: np.ndarray):
    # The Python API packs u1 constants most significant bit first (the reference implementation's order),
    # while the CPU plugin reads each byte least significant bit first: reversing the bits of every byte makes
    # the plugin see the same filter as opconv.  The plugin is only right for channel counts divisible by 8.
    flipped = bits.astype(np.uint8).reshape(-1, 8)[:, ::-1].reshape(bits.shape)
    return ops.constant(flipped, dtype=ov.Type.u1)


def _binary_cases():
    cases = []
    for tag, (n, c, h, w_, o, k), attrs in (
        ("basic", (1, 8, 5, 6, 3, 3), {}),
        ("pad1", (2, 8, 4, 5, 4, 3), {"pads_begin": [1, 0], "pads_end": [1, 2], "pad_value": 1.0}),
        ("pad-neg", (1, 16, 5, 5, 2, 3), {"pads_begin": [2, 1], "pads_end": [0, 1], "pad_value": -1.0}),
        ("stride-dilation", (1, 8, 9, 8, 3, 2), {"strides": [2, 1], "dilations": [2, 3]}),
        ("same_upper", (1, 8, 5, 5, 2, 3), {"auto_pad": "same_upper", "pad_value": 1.0}),
        ("valid", (1, 24, 4, 4, 2, 2), {"auto_pad": "valid", "pads_begin": [1, 1], "pads_end": [1, 1]}),
        ("real-input", (1, 8, 4, 4, 2, 3), {}),
    ):
        full = {
            "strides": [1, 1],
            "pads_begin": [0, 0],
            "pads_end": [0, 0],
            "dilations": [1, 1],
            "mode": "xnor-popcount",
            "pad_value": 0.0,
            **attrs,
        }
        data = (
            _r(n, c, h, w_, seed=10)
            if tag == "real-input"
            else _r(n, c, h, w_, seed=10, dtype=np.int32, low=0, high=2).astype(np.float32)
        )
        bits = _r(o, c, k, k, seed=11, dtype=np.int32, low=0, high=2).astype(np.uint8)
        opconv_case = Case(f"BinaryConvolution-{tag}", "BinaryConvolution", [P(data), C(bits)], full, None)

        def build(x, _filters, full=full, bits=bits):
            return ops.binary_convolution(
                x,
                _ov_binary_filters(bits),
                full["strides"],
                full["pads_begin"],
                full["pads_end"],
                full["dilations"],
                full["mode"],
                full["pad_value"],
                full.get("auto_pad", "explicit"),
            )

        opconv_case.build = build
        cases.append(opconv_case)
    return cases


@pytest.mark.parametrize("case", _binary_cases(), ids=lambda c: c.id)
def test_binary_convolution_matches_openvino(case):
    check(case)


@pytest.mark.parametrize("pad_value", [0.0, 1.0])
def test_binary_convolution_matches_spec_formula(pad_value):
    # The spec's algorithm, bit by bit: 2 * popcount(XNOR(patch, filter)) - bits per window, with the pad
    # area filled with pad_value (0 meaning -1).  The CPU plugin skips the taps of pad_value 0 instead.
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, (1, 3, 4, 5)).astype(np.float32)
    bits = rng.integers(0, 2, (2, 3, 3, 3)).astype(np.uint8)
    padded = np.pad(x, [(0, 0), (0, 0), (1, 1), (2, 0)], constant_values=pad_value).astype(np.uint8)
    out_h, out_w = padded.shape[2] - 2, padded.shape[3] - 2
    expected = np.zeros((1, 2, out_h, out_w), np.float32)
    for oc, i, j in np.ndindex(2, out_h, out_w):
        patch = padded[0, :, i : i + 3, j : j + 3]
        popcount = int(np.sum(~(patch ^ bits[oc]) & 1))
        expected[0, oc, i, j] = 2 * popcount - patch.size
    model = _opconv_model(
        Case(
            "b",
            "BinaryConvolution",
            [P(x), C(bits)],
            {
                "strides": [1, 1],
                "pads_begin": [1, 2],
                "pads_end": [1, 0],
                "dilations": [1, 1],
                "mode": "xnor-popcount",
                "pad_value": pad_value,
            },
            None,
        )
    )
    np.testing.assert_array_equal(Session(model).run({"in0": x})["out0"], expected)


# ---------------------------------------------------------------- TensorIterator


def _ti_recurrent(x_slice, y_slice, steps=6, part=1):
    """A TensorIterator running a tanh RNN over X (2, steps, 3): H carried by a back edge, W invariant.

    Each iteration takes ``part`` steps of X (their sum, scaled by a body constant); the outputs are the last
    H and every H concatenated.  ``x_slice`` / ``y_slice``: (start, stride, part_size, end).
    """
    params = [
        ops.parameter([2, steps, 3], np.float32, name="X"),
        ops.parameter([2, 3], np.float32, name="H0"),
        ops.parameter([3, 3], np.float32, name="W"),
    ]
    xb = ops.parameter([2, part, 3], np.float32, name="xb")
    hb = ops.parameter([2, 3], np.float32, name="hb")
    wb = ops.parameter([3, 3], np.float32, name="wb")
    x = ops.reduce_sum(
        ops.multiply(xb, ops.constant(np.float32([[[0.75, -0.5, 1.25]]]))), ops.constant(np.array([1], np.int64)), False
    )
    h = ops.tanh(ops.add(ops.matmul(hb, wb, False, False), x))
    ho = ops.result(h)
    yo = ops.result(ops.unsqueeze(h, ops.constant(np.array([1], np.int64))))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([ho, yo], [xb, hb, wb], "body"))
    ti.set_sliced_input(xb, params[0].output(0), *x_slice, 1)
    ti.set_merged_input(hb, params[1].output(0), ho.output(0))
    ti.set_invariant_input(wb, params[2].output(0))
    outputs = [ti.get_iter_value(ho.output(0), -1), ti.get_concatenated_slices(yo.output(0), *y_slice, 1)]
    return ov.Model(outputs, params, "ti"), {
        "X": _r(2, steps, 3, seed=20),
        "H0": _r(2, 3, seed=21),
        "W": _r(3, 3, seed=22) * 0.5,
    }


def _ti_two_sliced():
    """Two sliced inputs (one reversed along axis 0), no back edge; a reversed concatenated output."""
    a = ops.parameter([4, 3], np.float32, name="A")
    b = ops.parameter([4, 3], np.float32, name="B")
    ab = ops.parameter([1, 3], np.float32, name="ab")
    bb = ops.parameter([1, 3], np.float32, name="bb")
    out = ops.result(ops.subtract(ops.multiply(ab, bb), ops.constant(np.float32([[1.0, 2.0, 3.0]]))))
    body = ov.Model([out], [ab, bb], "body")
    ti = ops.tensor_iterator()
    ti.set_body(body)
    ti.set_sliced_input(ab, a.output(0), 0, 1, 1, -1, 0)
    ti.set_sliced_input(bb, b.output(0), -1, -1, 1, 0, 0)
    outputs = [
        ti.get_concatenated_slices(out.output(0), -1, -1, 1, 0, 0),
        ti.get_concatenated_slices(out.output(0), 0, 1, 1, -1, 0),
        ti.get_iter_value(out.output(0), -1),
    ]
    return ov.Model(outputs, [a, b], "ti2"), {"A": _r(4, 3, seed=23), "B": _r(4, 3, seed=24)}


TI_MODELS = {
    "forward": lambda: _ti_recurrent((0, 1, 1, -1), (0, 1, 1, -1)),
    "reverse": lambda: _ti_recurrent((-1, -1, 1, 0), (-1, -1, 1, 0)),
    "reverse-in-forward-out": lambda: _ti_recurrent((-1, -1, 1, 0), (0, 1, 1, -1)),
    "parts-of-2": lambda: _ti_recurrent((0, 2, 2, -1), (0, 1, 1, -1), part=2),
    "reverse-parts-of-2": lambda: _ti_recurrent((-1, -2, 2, 0), (-1, -1, 1, 0), part=2),
    "two-sliced": _ti_two_sliced,
}


def _run_openvino_file(path, feeds):
    compiled = CORE.compile_model(CORE.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled([feeds[p.get_any_name()] for p in compiled.inputs])
    return [result[compiled.output(k)] for k in range(len(compiled.outputs))]


def _run_opconv(model, feeds):
    return list(Session(model).run(feeds).values())


def _same(expected, actual, what):
    assert len(expected) == len(actual), what
    for k, (e, a) in enumerate(zip(expected, actual)):
        report = compare_arrays(f"{what}:{k}", np.asarray(e), np.asarray(a))
        assert report.ok, report.message


@pytest.mark.parametrize("compress", [False, True], ids=["f32", "fp16-weights"])
@pytest.mark.parametrize("kind", list(TI_MODELS))
def test_tensor_iterator_ir_matches_openvino(kind, compress, tmp_path):
    model, feeds = TI_MODELS[kind]()
    ov.save_model(model, str(tmp_path / "ti.xml"), compress_to_fp16=compress)
    expected = _run_openvino_file(tmp_path / "ti.xml", feeds)
    loaded = opconv.load(tmp_path / "ti.xml")
    _same(expected, _run_opconv(loaded, feeds), f"opconv on OpenVINO's {kind}")
    # opconv's writer: OpenVINO reads it back and computes the same, and so does opconv.
    opconv.save(loaded, tmp_path / "again.xml")
    _same(expected, _run_openvino_file(tmp_path / "again.xml", feeds), f"OpenVINO on opconv's {kind}")
    _same(expected, _run_opconv(opconv.load(tmp_path / "again.xml"), feeds), f"opconv on opconv's {kind}")


@pytest.mark.parametrize(
    "x_slice, steps", [((1, 1, 1, -2), [1, 2, 3, 4]), ((-2, -1, 1, 1), [4, 3, 2, 1]), ((0, 2, 1, -1), [0, 2, 4])]
)
def test_tensor_iterator_slice_bounds_follow_the_spec(x_slice, steps, tmp_path):
    # start/end select the slices (negative counting from the end, -1 past the last element).  The CPU plugin
    # uses only the iteration count they imply and always starts at the first (last) element, against the
    # spec, so the expected values come from the spec's loop in numpy.
    model, feeds = _ti_recurrent(x_slice, (0, 1, 1, -1))
    ov.save_model(model, str(tmp_path / "ti.xml"), compress_to_fp16=False)
    x, h, w = feeds["X"], feeds["H0"], feeds["W"]
    hs = []
    for t in steps:
        h = np.tanh(h @ w + x[:, t] * np.float32([0.75, -0.5, 1.25]))
        hs.append(h)
    _same([h, np.stack(hs, axis=1)], _run_opconv(opconv.load(tmp_path / "ti.xml"), feeds), f"slice {x_slice}")


# ---------------------------------------------------------------- IR files and coverage


def _typed_model(case: Case):
    """The case's opconv model with output types filled in from a run (IR ports need them), and its feeds."""
    model = _opconv_model(case)
    feeds = {f"in{k}": item.data for k, item in enumerate(case.inputs) if isinstance(item, P)}
    outputs = Session(model).run(feeds)
    for value in model.graph.outputs:
        value.type = TensorType(from_numpy(outputs[value.name].dtype).name, outputs[value.name].shape)
    return model, feeds, list(outputs.values())


@pytest.mark.parametrize("case", [_deformable_cases()[5], _deformable_cases()[6]], ids=lambda c: c.id)
def test_deformable_convolution_ir_round_trips_through_openvino(case, tmp_path):
    model, feeds, outputs = _typed_model(case)
    opconv.save(model, tmp_path / "dc.xml")
    _same(outputs, _run_openvino_file(tmp_path / "dc.xml", feeds), f"OpenVINO on opconv's {case.id}")
    # and OpenVINO's own file of the same layer read by opconv
    params = [ops.parameter(list(v.shape), v.dtype, name=k) for k, v in feeds.items()]
    ov_model = ov.Model([case.build(*params, ops.constant(case.inputs[2].data))], params)
    ov.save_model(ov_model, str(tmp_path / "ov.xml"), compress_to_fp16=False)
    _same(outputs, _run_opconv(opconv.load(tmp_path / "ov.xml"), feeds), f"opconv on OpenVINO's {case.id}")


@pytest.mark.parametrize("case", [_lstm_sequence_cases()[-1], _binary_cases()[1]], ids=lambda c: c.id)
def test_layers_openvino_cannot_read_back_round_trip_through_opconv(case, tmp_path):
    # OpenVINO 2026.4 no longer reads LSTMSequence as opset1, and takes BinaryConvolution filters only as u1
    # (opconv writes the 0/1 values as u8), so these round-trip through opconv's own reader.
    model, feeds, outputs = _typed_model(case)
    opconv.save(model, tmp_path / "m.xml")
    loaded = opconv.load(tmp_path / "m.xml")
    node = loaded.graph.nodes[0]
    schema = dialect_schemas("openvino").find(node.op, 1, "opset1")
    # The writer spells out every attribute the specification gives a default, set or not.
    defaults = {a.name: a.default for a in schema.attributes if a.default is not None}
    assert {k: a.value for k, a in node.attrs.items()} == {**defaults, **case.attrs}
    _same(outputs, _run_opconv(loaded, feeds), case.id)


def test_rnn_and_conv_variant_ops_have_kernels():
    ops_here = ["LSTMSequence", "DeformableConvolution", "BinaryConvolution", "TensorIterator"]
    assert set(ops_here) <= {s.name for s in dialect_schemas("openvino")}
    importlib.import_module("opconv.dialects.openvino.ops")  # registers every kernel
    assert [op for op in ops_here if ov_executor.REGISTRY.resolve(op, 1, ov_executor.DOMAIN) is None] == []


def test_tensor_iterator_port_map_errors_name_the_layer(tmp_path):
    model, _ = TI_MODELS["forward"]()
    ov.save_model(model, str(tmp_path / "ti.xml"), compress_to_fp16=False)
    text = (tmp_path / "ti.xml").read_text()
    # Point the sliced input's port map entry at a body MatMul instead of a Parameter.
    matmul_id = text[: text.index('type="MatMul"')].rsplit('layer id="', 1)[1].split('"')[0]
    broken = text.replace('internal_layer_id="0"', f'internal_layer_id="{matmul_id}"', 1)
    (tmp_path / "bad.xml").write_text(broken)
    (tmp_path / "bad.bin").write_bytes((tmp_path / "ti.bin").read_bytes())
    with pytest.raises(
        ModelReadError, match=f"TensorIterator.*port_map input.*body layer {matmul_id} is not a Parameter"
    ):
        opconv.load(tmp_path / "bad.xml")
    # A body graph without its port map cannot be written.
    loaded = opconv.load(tmp_path / "ti.xml")
    del loaded.graph.nodes[0].attrs["body"].value.meta["port_map"]
    with pytest.raises(ModelWriteError, match="no port map"):
        opconv.save(loaded, tmp_path / "again.xml")
    assert not (tmp_path / "again.xml").exists()
