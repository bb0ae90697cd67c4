"""onnxruntime's GatherPacked (rows of a table stored in GGML's block formats, dequantized while gathered):
opconv's kernel against onnxruntime's CPU execution provider, for every format both read."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from opconv.kernels.ggml import FORMATS

pytest.importorskip("onnxruntime")
import opconv  # noqa: E402
from opconv.compare import compare_arrays  # noqa: E402

from .runtimes import run_ort  # noqa: E402
from .test_contrib_kernels_nn import single_node_model  # noqa: E402

RNG = np.random.default_rng(1415)
#: byte offsets of each block's float16 scales, overwritten with finite values (random bytes may spell NaN)
SCALE_OFFSETS = {2: (0,), 6: (0,), 8: (0,), 20: (0,), 14: (208,), 13: (0, 2)}


def packed_table(packed_type: int, vocab: int, k: int) -> np.ndarray:
    _, per_block, size = FORMATS[packed_type]
    if packed_type in (0, 1, 30):
        values = RNG.normal(0, 2, (vocab, k)).astype(np.float32)
        if packed_type == 1:
            return values.astype("<f2").view(np.uint8)
        if packed_type == 30:
            return (values.view(np.uint32) >> 16).astype("<u2").view(np.uint8)
        return values.astype("<f4").view(np.uint8)
    blocks = RNG.integers(0, 256, (vocab, k // per_block, size)).astype(np.uint8)
    for at in SCALE_OFFSETS[packed_type]:
        scales = RNG.uniform(0.01, 0.5, blocks.shape[:2]).astype("<f2")
        blocks[..., at : at + 2] = scales[..., None].view(np.uint8)
    return blocks.reshape(vocab, -1)


@pytest.mark.parametrize("packed_type", sorted(FORMATS), ids=lambda t: FORMATS[t][0])
@pytest.mark.parametrize(
    "output_dtype,index_dtype",
    [(TensorProto.FLOAT, np.int64), (TensorProto.FLOAT16, np.int32), (TensorProto.BFLOAT16, np.int64)],
)
def test_gather_packed(packed_type, output_dtype, index_dtype):
    vocab, k = 5, 512
    indices = np.array([[3, 0, -1], [4, 7, 1]], index_dtype)  # -1 and 7 select row 0, as onnxruntime does
    inputs = {"data": packed_table(packed_type, vocab, k), "indices": indices}
    model = single_node_model(
        "GatherPacked", inputs, ("output",), K=k, packed_type=packed_type, output_dtype=output_dtype
    )
    # onnxruntime's Python API returns no bfloat16 array: every case reads the output through a Cast to float
    # (exact from bfloat16 and float16), appended to the graph both runtimes run
    cast = onnx.helper.make_node("Cast", ["output"], ["as_float"], to=TensorProto.FLOAT)
    model.graph.node.append(cast)
    model.graph.output[0].CopyFrom(onnx.helper.make_tensor_value_info("as_float", TensorProto.FLOAT, None))
    expected = run_ort(model, inputs)[0]
    actual = opconv.run(opconv.load(model), inputs)["as_float"]
    report = compare_arrays("output", expected, actual, 0.0, 0.0)
    assert report.ok, report.message


def test_code_book_formats_are_refused_with_the_reason():
    from opconv.errors import OpconvError

    inputs = {"data": np.zeros((2, 66), np.uint8), "indices": np.array([0], np.int64)}
    model = single_node_model("GatherPacked", inputs, ("output",), K=256, packed_type=16, output_dtype=1)
    with pytest.raises(OpconvError, match="IQ2_XXS.*code-book grids"):
        opconv.run(opconv.load(model), inputs)
