"""opconv's light access to onnx (``opconv/dialects/onnx/proto.py``) against onnx's own functions.

The module decodes tensors and runs shape inference without importing the onnx
package; these tests hold it to what ``onnx.numpy_helper`` and
``onnx.shape_inference`` give, and check in a fresh interpreter that a
conversion really leaves the package unimported and that a later ``import onnx``
shares the same message classes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from opconv.dialects.onnx import proto

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_DTYPES = [
    np.float32,
    np.float64,
    np.float16,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
    np.complex64,
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.int4,
    ml_dtypes.uint4,
]


def _sample(dtype, shape=(2, 3)) -> np.ndarray:
    rng = np.random.default_rng(7)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu" or dt in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        low = 0 if dt.kind == "u" or dt == np.dtype(ml_dtypes.uint4) else -7
        return rng.integers(low, 8, shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(
        a.view(np.uint8) if a.dtype.itemsize == 1 and a.dtype.kind == "V" else a,
        b.view(np.uint8) if b.dtype.itemsize == 1 and b.dtype.kind == "V" else b,
        equal_nan=a.dtype.kind == "f",
    )


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_raw_data_decodes_like_numpy_helper(dtype):
    t = numpy_helper.from_array(_sample(dtype), "t")
    _same(proto.to_array(t), numpy_helper.to_array(t))


@pytest.mark.parametrize("dtype", _DTYPES, ids=lambda d: np.dtype(d).name)
def test_typed_fields_decode_like_numpy_helper(dtype):
    array = _sample(dtype)
    code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    t = helper.make_tensor("t", code, array.shape, array.flatten().tolist(), raw=False)
    assert not t.HasField("raw_data")
    _same(proto.to_array(t), numpy_helper.to_array(t))


def test_empty_and_scalar_tensors():
    for array in (np.zeros((0, 3), np.float32), np.array(5, np.int64), np.array(True)):
        for raw in (True, False):
            code = helper.np_dtype_to_tensor_dtype(array.dtype)
            t = (
                helper.make_tensor("t", code, array.shape, array.flatten().tolist(), raw=raw)
                if not raw
                else numpy_helper.from_array(array, "t")
            )
            _same(proto.to_array(t), numpy_helper.to_array(t))


def test_shape_inference_matches_onnx():
    model = onnx.load(os.path.join(ROOT, "fixtures", "transformer.onnx"))
    ours = proto.infer_shapes(model, data_prop=True)
    theirs = onnx.shape_inference.infer_shapes(model, data_prop=True)
    assert len(theirs.graph.value_info) > 0
    assert ours.SerializeToString() == theirs.SerializeToString()


def test_conversion_leaves_onnx_unimported_and_classes_shared(tmp_path):
    """A fresh `opconv onnx-to-ir` never runs onnx/__init__.py; importing onnx afterwards reuses the classes
    and finds them as attributes of the package, as after a normal import."""
    script = f"""
import sys
sys.path.insert(0, {ROOT!r})
import opconv
model = opconv.load({os.path.join(ROOT, "fixtures", "cnn.onnx")!r})
ir = opconv.convert(model, to="openvino", input_shapes={{"image": (1, 3, 32, 32)}})
opconv.save(ir, {str(tmp_path / "cnn.xml")!r})
assert "onnx" not in sys.modules and "onnx.helper" not in sys.modules, sorted(m for m in sys.modules if "onnx" in m)
from opconv.dialects.onnx.proto import messages
import onnx
assert onnx.ModelProto is messages.ModelProto
assert onnx.onnx_ml_pb2 is messages and onnx.onnx_cpp2py_export is sys.modules["onnx.onnx_cpp2py_export"]
from onnx import checker, helper, numpy_helper  # onnx's own modules work on the shared classes
checker.check_model(onnx.load({os.path.join(ROOT, "fixtures", "cnn.onnx")!r}))
assert onnx.load({os.path.join(ROOT, "fixtures", "cnn.onnx")!r}).graph.node
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ, CI="true"), timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")
    assert (tmp_path / "cnn.bin").stat().st_size > 0
