"""StableHLO export of the HLO ops without a plain StableHLO counterpart: MaxRoiPool, CTCLoss, PartialReduce.

Every case is one function of ONE IREE module compiled once per session, and its IREE outputs are compared
with opconv's HLO executor and with an oracle opconv did not write: onnxruntime's MaxRoiPool, a numpy
transcription of Caffe's ROI pooling loop, a per-sequence CTC forward algorithm written here from the
definition (and, for tiny inputs, the sum over every alignment), and numpy's sort for the top-k.  The HLO ops
that cannot be exported (data-dependent result shapes) are checked to say why.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import helper

import opconv
from opconv.dialects.hlo.build import OPSETS, hlo_node
from opconv.dialects.hlo.stablehlo import (
    NO_STATIC_FORM,
    StableHloExportError,
    export,
    export_function,
    exportable_ops,
    module_text,
)
from opconv.ir import Graph, Model
from opconv.schemas import dialect_schemas
from opconv.types import TensorType, from_numpy
from tests.runtimes import run_ort

iree_runtime = pytest.importorskip("tests.iree_runtime")

RNG = np.random.default_rng(5)
# The ops exported by the emitters this file covers (tests/test_hlo_stablehlo.py covers the others).
EXTRA_OPS = {"MaxRoiPool", "CTCLoss", "PartialReduce"}


@dataclass
class Case:
    id: str
    model: Model
    feeds: list  # in the order of the graph inputs
    expected: list  # an independent oracle's outputs
    oracle: str
    rtol: float
    atol: float


CASES: list[Case] = []


def _tensor_type(a: np.ndarray) -> TensorType:
    return TensorType(from_numpy(a.dtype).name, tuple(a.shape))


def add_case(case_id, op, args, expected, oracle, *, rtol=1e-6, atol=1e-7, regions=None, **attrs):
    """One HLO node ``op`` on the fed ``args``; its outputs are typed like ``expected``.

    ``regions``: name -> function(graph) building a region attribute inside the case's graph."""
    graph = Graph(case_id)
    values = [graph.add_input(f"x{i}", _tensor_type(np.asarray(a))) for i, a in enumerate(args)]
    for name, build in (regions or {}).items():
        attrs[name] = build(graph)
    expected = [np.asarray(e) for e in expected]
    produced = hlo_node(graph, op, *values, _outputs=len(expected), **attrs)
    produced = produced if isinstance(produced, list) else [produced]
    for value, e in zip(produced, expected):
        value.type = _tensor_type(e)
    graph.outputs = produced
    CASES.append(
        Case(case_id, Model(graph, "hlo", dict(OPSETS)), [np.asarray(a) for a in args], expected, oracle, rtol, atol)
    )


# -- MaxRoiPool -----------------------------------------------------------------------------------


def ort_max_roi_pool(x, rois, pooled_shape, spatial_scale):
    node = helper.make_node(
        "MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=list(pooled_shape), spatial_scale=float(spatial_scale)
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape),
            helper.make_tensor_value_info("rois", onnx.TensorProto.FLOAT, rois.shape),
        ],
        [helper.make_empty_tensor_value_info("y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    return run_ort(model, {"x": x, "rois": rois})[0]


def caffe_roi_pool(x, rois, pooled_shape, spatial_scale):
    """Caffe's ROI pooling loop, element by element (NCHW): empty bins give 0."""
    ph, pw = pooled_shape
    _, channels, height, width = x.shape
    out = np.zeros((len(rois), channels, ph, pw), x.dtype)

    def round_half_away(v):
        return math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)

    for r, roi in enumerate(np.asarray(rois, np.float64)):
        x1, y1, x2, y2 = (round_half_away(v * spatial_scale) for v in roi[1:])
        bin_h, bin_w = max(y2 - y1 + 1, 1) / ph, max(x2 - x1 + 1, 1) / pw
        for i, j in itertools.product(range(ph), range(pw)):
            h0 = min(max(math.floor(i * bin_h) + y1, 0), height)
            h1 = min(max(math.ceil((i + 1) * bin_h) + y1, 0), height)
            w0 = min(max(math.floor(j * bin_w) + x1, 0), width)
            w1 = min(max(math.ceil((j + 1) * bin_w) + x1, 0), width)
            if h1 > h0 and w1 > w0:
                out[r, :, i, j] = x[int(roi[0]), :, h0:h1, w0:w1].max(axis=(1, 2))
    return out


image = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
boxes = np.array([[0, 1, 1, 6, 7], [1, 0, 2, 7, 5], [1, 3.2, 3.7, 4.4, 8.1], [0, 5, 6, 2, 1]], np.float32)
add_case(
    "MaxRoiPool_NCHW",
    "MaxRoiPool",
    [image, boxes],
    [ort_max_roi_pool(image, boxes, (3, 2), 1.0)],
    "onnxruntime",
    layout="NCHW",
    pooled_shape=[3, 2],
)
scaled = np.array([[1, 2, 4, 13, 15], [0, -3, 1, 9, 20], [1, 6.6, 0.2, 7.4, 3]], np.float32)
add_case(
    "MaxRoiPool_NHWC_scaled",
    "MaxRoiPool",
    [image.transpose(0, 2, 3, 1).copy(), scaled],
    [ort_max_roi_pool(image, scaled, (2, 4), 0.5)],
    "onnxruntime",
    layout="NHWC",
    pooled_shape=[2, 4],
    spatial_scale=0.5,
)
# float64, and rois partly or wholly outside the image: clipped and empty bins.
image64 = RNG.standard_normal((1, 2, 6, 7))
outside = np.array([[0, -4, -4, 2, 2], [0, 5, 4, 12, 9], [0, 9, 9, 11, 12], [0, 0, 0, 6, 5]])
add_case(
    "MaxRoiPool_f64_outside",
    "MaxRoiPool",
    [image64, outside.astype(np.float64)],
    [caffe_roi_pool(image64, outside, (4, 3), 1.0)],
    "Caffe's loop",
    layout="NCHW",
    pooled_shape=[4, 3],
)
half = image[:1, :, :6, :6].astype(np.float16)
few = np.array([[0, 0.4, 1.6, 4.5, 5.2]], np.float16)
add_case(
    "MaxRoiPool_f16",
    "MaxRoiPool",
    [half, few],
    [caffe_roi_pool(half, few, (2, 2), 1.0)],
    "Caffe's loop",
    layout="NCHW",
    pooled_shape=[2, 2],
)


# -- CTCLoss --------------------------------------------------------------------------------------


def ctc_forward(log_probs, target, frames, blank, width):
    """(loss, alpha (T, 2 * width + 1)) of one sequence, from the definition: the blank-extended label
    sequence l', alpha_0 on its first two symbols, alpha_t(s) = (alpha_{t-1}(s) + alpha_{t-1}(s-1)
    [+ alpha_{t-1}(s-2) when l'_s is no blank and differs from l'_{s-2}]) * y_t(l'_s), in log space."""
    steps = log_probs.shape[0]
    ext = [blank]
    for label in target:
        ext += [int(label), blank]
    alpha = np.full((steps, 2 * width + 1), -np.inf)

    def log_sum(terms):
        terms = [v for v in terms if v > -np.inf]
        if not terms:
            return -np.inf
        top = max(terms)
        return top + math.log(sum(math.exp(v - top) for v in terms))

    for t in range(min(frames, steps)):
        for s, label in enumerate(ext):
            if t == 0:
                reach = 0.0 if s < 2 else -np.inf
            else:
                terms = [alpha[t - 1, s]] + ([alpha[t - 1, s - 1]] if s else [])
                if s >= 2 and label != blank and label != ext[s - 2]:
                    terms.append(alpha[t - 1, s - 2])
                reach = log_sum(terms)
            alpha[t, s] = reach + log_probs[t, label] if reach > -np.inf else -np.inf
    if frames == 0:
        return math.inf, alpha
    last = alpha[frames - 1]
    end = 2 * len(target)
    return -log_sum([last[end]] + ([last[end - 1]] if end else [])), alpha


def ctc_by_enumeration(log_probs, target, blank):
    """-log of the total probability of every frame-level path that collapses to ``target``."""
    total = 0.0
    for path in itertools.product(range(log_probs.shape[1]), repeat=log_probs.shape[0]):
        collapsed = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
        if collapsed == list(target):
            total += math.exp(sum(log_probs[t, c] for t, c in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def log_softmax(logits):
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def add_ctc_case(case_id, log_probs, targets, input_lengths, target_lengths, blank, *, rtol, atol, concatenated=False):
    """Expected values from ctc_forward per sequence; ``targets`` padded (N, S), fed concatenated if asked."""
    unbatched = log_probs.ndim == 2
    lp = log_probs[:, None] if unbatched else log_probs
    width = targets.shape[1]
    losses, alphas = [], []
    for n in range(lp.shape[1]):
        loss, alpha = ctc_forward(
            lp[:, n].astype(np.float64), targets[n, : target_lengths[n]], input_lengths[n], blank, width
        )
        losses.append(loss)
        alphas.append(alpha)
    loss, alpha = np.array(losses), np.array(alphas)
    fed = targets
    if concatenated or unbatched:
        fed = np.concatenate([targets[n, : target_lengths[n]] for n in range(len(targets))])
    lengths = [np.asarray(input_lengths), np.asarray(target_lengths)]
    if unbatched:
        loss, alpha = loss[0], alpha[0]
        lengths = [v.reshape(()) for v in lengths]
    dtype = log_probs.dtype
    add_case(
        case_id,
        "CTCLoss",
        [log_probs, fed] + lengths,
        [loss.astype(dtype), alpha.astype(dtype)],
        "the forward algorithm",
        rtol=rtol,
        atol=atol,
        blank=blank,
    )


logits = RNG.standard_normal((7, 6, 5))
# The last two sequences have no alignment (infinite loss): too few frames for a repeated label (which needs a
# blank between), and no frames at all.
padded = np.array([[1, 2, 2], [3, 1, 0], [4, 0, 0], [0, 0, 0], [1, 1, 0], [2, 3, 0]])
add_ctc_case(
    "CTCLoss_padded_f32",
    log_softmax(logits).astype(np.float32),
    padded.astype(np.int64),
    np.array([7, 6, 7, 3, 2, 0], np.int64),
    np.array([3, 2, 1, 0, 2, 2], np.int64),
    0,
    rtol=2e-5,
    atol=2e-5,
)
relabelled = np.array([[1, 0, 0], [3, 1, 4], [0, 0, 0], [4, 4, 3]])  # blank 2
add_ctc_case(
    "CTCLoss_concatenated_blank2_f64",
    log_softmax(logits[:, :4]),
    relabelled.astype(np.int32),
    np.array([5, 7, 2, 4], np.int32),
    np.array([2, 3, 0, 3], np.int32),
    2,
    rtol=1e-10,
    atol=1e-10,
    concatenated=True,
)
tiny = log_softmax(RNG.standard_normal((4, 3)))
add_ctc_case("CTCLoss_unbatched_f64", tiny, np.array([[1, 2]]), np.array([4]), np.array([2]), 0, rtol=1e-10, atol=1e-10)


def test_ctc_forward_oracle_matches_enumeration():
    """The test's own forward algorithm agrees with the sum over every alignment (a check of the oracle)."""
    for target, blank in (([1, 2], 0), ([1, 1], 0), ([0, 1], 2)):
        loss, _ = ctc_forward(tiny, target, 4, blank, len(target))
        assert math.isclose(loss, ctc_by_enumeration(tiny, target, blank), rel_tol=1e-12)


# -- PartialReduce --------------------------------------------------------------------------------


def comparator(directions, dtypes):
    """A region attribute builder: lhs/rhs scalar pairs, comparing the first pair in ``directions[0]``."""

    def build(graph):
        region = Graph("comparator", parent=graph)
        params = [region.add_input(f"p{i}", TensorType(d, ())) for i, d in enumerate(t for t in dtypes for _ in (0, 1))]
        out = hlo_node(region, "Compare", params[0], params[1], comparison_direction=directions)
        out.type = TensorType("bool", ())
        region.outputs = [out]
        return region

    return build


scores = RNG.permutation(3 * 37).reshape(3, 37).astype(np.float32) / 7  # distinct values: one right answer
positions = np.broadcast_to(np.arange(37, dtype=np.int32), (3, 37)).copy()
order = np.argsort(-scores, axis=1, kind="stable")[:, :5]
add_case(
    "PartialReduce_top5_with_payload",
    "PartialReduce",
    [scores, positions, np.float32(-np.inf), np.int32(-1)],
    [np.take_along_axis(scores, order, 1), order.astype(np.int32)],
    "numpy argsort",
    regions={"comparator": comparator("GT", ["float32", "int32"])},
    size=5,
    reduction_dim=1,
)
column = RNG.permutation(8 * 4).reshape(8, 4).astype(np.float64)
add_case(
    "PartialReduce_smallest3_dim0",
    "PartialReduce",
    [column, np.float64(np.inf)],
    [np.sort(column, axis=0)[:3]],
    "numpy sort",
    regions={"comparator": comparator("LT", ["float64"])},
    size=3,
    reduction_dim=0,
)
add_case(
    "PartialReduce_candidates",
    "PartialReduce",
    [scores, np.float32(-np.inf)],
    [-np.sort(-scores, axis=-1)[:, :8]],
    "numpy sort",
    regions={"comparator": comparator("GT", ["float32"])},
    size=2,
    aggregate_to_topk=False,
)


# -- tests ----------------------------------------------------------------------------------------

CASE_IDS = [c.id for c in CASES]


@pytest.fixture(scope="module")
def compiled():
    """Every case as ``@case_N`` of one module, compiled once."""
    functions = [export_function(case.model, f"case_{i}") for i, case in enumerate(CASES)]
    return iree_runtime.IreeModule(module_text(functions, "extra_ops"))


def _close(got, want, case: Case, oracle: str, index: int):
    got, want = np.asarray(got), np.asarray(want)
    assert (got.shape, got.dtype) == (want.shape, want.dtype), f"{case.id} output {index} vs {oracle}"
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=f"{case.id} output {index} vs {oracle}")
    else:  # equal infinities match; inf against a number does not
        np.testing.assert_allclose(
            got, want, rtol=case.rtol, atol=case.atol, err_msg=f"{case.id} output {index} vs {oracle}"
        )


@pytest.mark.parametrize("index", range(len(CASES)), ids=CASE_IDS)
def test_iree_matches_executor_and_oracle(compiled, index):
    case = CASES[index]
    got = compiled.call(f"case_{index}", *case.feeds)
    executed = opconv.run(case.model, {v.name: a for v, a in zip(case.model.graph.inputs, case.feeds)})
    executed = [executed[v.name] for v in case.model.graph.outputs]
    assert len(got) == len(case.expected) == len(executed)
    for i, (g, e, want) in enumerate(zip(got, executed, case.expected)):
        _close(g, want, case, case.oracle, i)
        _close(g, e, case, "opconv HLO executor", i)


def test_every_hlo_op_is_exported_or_documented():
    schema_ops = {schema.name for schema in dialect_schemas("hlo")}
    emitters = set(exportable_ops())
    assert EXTRA_OPS <= emitters
    assert set(NO_STATIC_FORM) & emitters == set()
    assert sorted(schema_ops - emitters - set(NO_STATIC_FORM)) == []
    covered = {node.op for case in CASES for node in case.model.graph.walk()}
    assert EXTRA_OPS <= covered


@pytest.mark.parametrize(
    "op,args,out",
    [
        ("NonZero", [np.ones(3, np.float32)], TensorType("int64", (3, 1))),
        ("NMS", [np.zeros((1, 3, 4), np.float32), np.zeros((1, 1, 3), np.float32)], TensorType("int64", (1, 3))),
    ],
)
def test_data_dependent_shapes_are_refused_with_the_reason(op, args, out):
    graph = Graph("refused")
    values = [graph.add_input(f"x{i}", _tensor_type(a)) for i, a in enumerate(args)]
    result = hlo_node(graph, op, *values)
    result.type = out
    graph.outputs = [result]
    with pytest.raises(StableHloExportError) as info:
        export(Model(graph, "hlo", dict(OPSETS)))
    message = str(info.value)
    assert graph.nodes[0].name in message and "known only from the data" in message


def test_partial_reduce_declared_size_is_checked():
    model = copy.deepcopy(next(c for c in CASES if c.id == "PartialReduce_smallest3_dim0").model)
    model.graph.outputs[0].type = TensorType("float64", (4, 4))
    with pytest.raises(StableHloExportError, match="keeps 4 elements along dim 0, size is 3 of 8"):
        export(model)
