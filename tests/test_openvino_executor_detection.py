"""The opset1 detection-head layers of opconv's IR executor against OpenVINO's CPU plugin.

ROIPooling, PSROIPooling, DeformablePSROIPooling, ReorgYolo, RegionYolo,
PriorBox and PriorBoxClustered, each over several attribute combinations, built
and compared as in ``tests/test_openvino_executor.py`` (whose helpers this file
reuses).  Rois reach past the image, collapse to single cells and straddle
cell boundaries, where the rounding conventions show.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import opconv
from opconv.compare import compare_arrays
from opconv.dialects.openvino import executor as ov_executor
from opconv.dialects.openvino.executor import Session
from opconv.errors import ExecutionError
from opconv.schemas import dialect_schemas
from tests.test_openvino_executor import CONFIG, CORE, C, Case, P, _opconv_model, _r, check, ops, opset2, ov

DETECTION_OPS = (
    "ROIPooling",
    "PSROIPooling",
    "DeformablePSROIPooling",
    "ReorgYolo",
    "RegionYolo",
    "PriorBox",
    "PriorBoxClustered",
)

# Image-coordinate rois (batch, x1, y1, x2, y2): inside, past the far edge, one cell, fractional corners.
PIXEL_ROIS = np.float32(
    [[0, 1, 1, 6, 5], [1, 0, 0, 12, 9], [0, 4, 2, 4, 2], [1, 2.4, 3.5, 8.6, 6.5], [0, 7, 1, 9.2, 7.7]]
)
# Normalized rois: inside, the whole image, a point, and one reaching past the far edge.
UNIT_ROIS = np.float32([[0, 0.1, 0.2, 0.7, 0.9], [1, 0, 0, 1, 1], [0, 0.5, 0.4, 0.5, 0.4], [1, 0.3, 0.6, 1.4, 1.2]])
# A batch index of -1 ends the list (Caffe's convention): it and every later roi give zeros.
ENDED_ROIS = np.concatenate([PIXEL_ROIS[:2], np.float32([[-1, 0, 0, 3, 3], [1, 1, 1, 5, 5]])])


def _roi_pooling_cases():
    x = _r(2, 3, 8, 10, seed=1)
    cases = []
    for (ph, pw), scale in (((3, 2), 1.0), ((2, 4), 0.5), ((1, 1), 0.75)):
        cases.append(
            Case(
                f"ROIPooling-max-{ph}x{pw}-s{scale}",
                "ROIPooling",
                [P(x), P(PIXEL_ROIS)],
                {"pooled_h": ph, "pooled_w": pw, "spatial_scale": scale, "method": "max"},
                lambda d, r, ph=ph, pw=pw, s=scale: opset2.roi_pooling(d, r, [ph, pw], s, "max"),
            )
        )
    cases.append(
        Case(
            "ROIPooling-max-ended",
            "ROIPooling",
            [P(x), P(ENDED_ROIS)],
            {"pooled_h": 2, "pooled_w": 2, "spatial_scale": 1.0, "method": "max"},
            lambda d, r: opset2.roi_pooling(d, r, [2, 2], 1.0, "max"),
        )
    )
    # Bilinear rois are normalized: spatial_scale (0.5 in the last case) plays no part.
    for ph, pw, scale in ((3, 3, 1.0), (1, 1, 1.0), (4, 2, 1.0), (1, 5, 1.0), (2, 3, 0.5)):
        cases.append(
            Case(
                f"ROIPooling-bilinear-{ph}x{pw}-s{scale}",
                "ROIPooling",
                [P(x), P(UNIT_ROIS)],
                {"pooled_h": ph, "pooled_w": pw, "spatial_scale": scale, "method": "bilinear"},
                lambda d, r, ph=ph, pw=pw, s=scale: opset2.roi_pooling(d, r, [ph, pw], s, "bilinear"),
            )
        )
    return cases


def _psroi_cases():
    cases = []
    for dim, group, scale in ((2, 3, 1.0), (3, 2, 0.5), (4, 1, 0.625)):
        x = _r(2, dim * group * group, 9, 11, seed=2)
        cases.append(
            Case(
                f"PSROIPooling-average-d{dim}-g{group}-s{scale}",
                "PSROIPooling",
                [P(x), P(PIXEL_ROIS)],
                {"output_dim": dim, "group_size": group, "spatial_scale": scale, "mode": "average"},
                lambda d, r, dim=dim, g=group, s=scale: ops.psroi_pooling(d, r, dim, g, s, 1, 1, "average"),
            )
        )
    x = _r(2, 8, 9, 11, seed=2)
    cases.append(
        Case(
            "PSROIPooling-average-ended",
            "PSROIPooling",
            [P(x), P(ENDED_ROIS)],
            {"output_dim": 2, "group_size": 2, "spatial_scale": 1.0, "mode": "average"},
            lambda d, r: ops.psroi_pooling(d, r, 2, 2, 1.0, 1, 1, "average"),
        )
    )
    # Corners at -0.5: the far corner is rounded after adding 1 (round(-0.5 + 1) = 1, not round(-0.5) + 1 = 0).
    negative = np.float32([[0, -3, -2, -0.5, -0.5], [1, -1.5, 0.5, 2.5, -0.5], [0, -0.5, -0.5, 1.5, 2.5]])
    cases.append(
        Case(
            "PSROIPooling-average-negative-corners",
            "PSROIPooling",
            [P(x), P(negative)],
            {"output_dim": 2, "group_size": 2, "spatial_scale": 1.0, "mode": "average"},
            lambda d, r: ops.psroi_pooling(d, r, 2, 2, 1.0, 1, 1, "average"),
        )
    )
    for dim, group, bx, by in ((3, 2, 2, 3), (2, 1, 1, 1), (2, 3, 3, 2)):
        x = _r(2, dim * bx * by, 7, 8, seed=3)
        cases.append(
            Case(
                f"PSROIPooling-bilinear-d{dim}-g{group}-b{bx}x{by}",
                "PSROIPooling",
                [P(x), P(UNIT_ROIS)],
                {
                    "output_dim": dim,
                    "group_size": group,
                    "spatial_scale": 1.0,
                    "mode": "bilinear",
                    "spatial_bins_x": bx,
                    "spatial_bins_y": by,
                },
                lambda d, r, dim=dim, g=group, bx=bx, by=by: ops.psroi_pooling(d, r, dim, g, 1.0, bx, by, "bilinear"),
            )
        )
    return cases


def _deformable_psroi_cases():
    rois = ENDED_ROIS
    cases = []
    for dim, group, scale, bx, by in ((2, 3, 1.0, 1, 1), (3, 2, 0.5, 2, 3)):
        x = _r(2, dim * group * group, 9, 11, seed=4)
        attrs = {
            "output_dim": dim,
            "group_size": group,
            "spatial_scale": scale,
            "spatial_bins_x": bx,
            "spatial_bins_y": by,
        }
        cases.append(
            Case(
                f"DeformablePSROIPooling-d{dim}-g{group}-b{bx}x{by}",
                "DeformablePSROIPooling",
                [P(x), P(rois)],
                attrs,
                lambda d, r, dim=dim, g=group, s=scale, bx=bx, by=by: ops.deformable_psroi_pooling(
                    d, r, dim, s, g, spatial_bins_x=bx, spatial_bins_y=by
                ),
            )
        )
    # Offsets: one class, then two classes (output channels split between them), coarse and fine parts.
    for dim, group, classes, part, std, bx, by in (
        (2, 3, 1, 3, 0.1, 2, 2),
        (4, 2, 2, 1, 0.5, 3, 1),
        (2, 4, 2, 2, 1.0, 1, 2),
    ):
        x = _r(2, dim * group * group, 9, 11, seed=5)
        offsets = _r(len(rois), 2 * classes, part, part, seed=6) * np.float32(0.5)
        cases.append(
            Case(
                f"DeformablePSROIPooling-offsets-c{classes}-p{part}-std{std}",
                "DeformablePSROIPooling",
                [P(x), P(rois), P(offsets)],
                {
                    "output_dim": dim,
                    "group_size": group,
                    "spatial_scale": 0.75,
                    "spatial_bins_x": bx,
                    "spatial_bins_y": by,
                    "trans_std": std,
                    "part_size": part,
                },
                lambda d, r, o, dim=dim, g=group, bx=bx, by=by, std=std, part=part: ops.deformable_psroi_pooling(
                    d, r, dim, 0.75, g, spatial_bins_x=bx, spatial_bins_y=by, trans_std=std, part_size=part, offsets=o
                ),
            )
        )
    return cases


def _reorg_cases():
    return [
        Case(
            "ReorgYolo-s2", "ReorgYolo", [P(_r(1, 8, 6, 4, seed=7))], {"stride": 2}, lambda x: opset2.reorg_yolo(x, [2])
        ),
        Case(
            "ReorgYolo-s3", "ReorgYolo", [P(_r(2, 9, 6, 9, seed=8))], {"stride": 3}, lambda x: opset2.reorg_yolo(x, [3])
        ),
        Case(
            "ReorgYolo-s2-int",
            "ReorgYolo",
            [P(_r(2, 4, 4, 6, dtype=np.int32, low=-50, high=50))],
            {"stride": 2},
            lambda x: opset2.reorg_yolo(x, [2]),
        ),
    ]


def _region_cases():
    cases = []
    # YOLO v2: softmax over the classes of every region, then axis..end_axis flattened.
    # (A mask, given in the last case, plays no part.)
    for coords, classes, num, axis, end_axis, mask in (
        (4, 3, 5, 1, 3, []),
        (4, 6, 2, 0, 1, []),
        (4, 2, 3, 2, -1, []),
        (4, 1, 3, 1, 2, [0, 1]),
    ):
        x = _r(2, num * (coords + classes + 1), 3, 4, seed=9) * np.float32(3)
        attrs = {
            "coords": coords,
            "classes": classes,
            "num": num,
            "axis": axis,
            "end_axis": end_axis,
            "do_softmax": True,
            "anchors": [1.0, 2.0] * num,
            "mask": mask,
        }
        cases.append(
            Case(
                f"RegionYolo-softmax-n{num}-axes{axis}..{end_axis}-mask{len(mask)}",
                "RegionYolo",
                [P(x)],
                attrs,
                lambda d, a=attrs: ops.region_yolo(
                    d, a["coords"], a["classes"], a["num"], True, a["mask"], a["axis"], a["end_axis"], a["anchors"]
                ),
            )
        )
    # YOLO v3: sigmoids over the first len(mask) regions, no flattening (axis 0..1 in the second case).  With
    # more regions in the input than the mask names, the CPU plugin reads batch n at n times the *output's*
    # batch size, so that case has one batch only.
    for coords, classes, num, mask, channels, batch, axes in (
        (4, 3, 9, [3, 4, 5], 3, 2, (1, 3)),
        (4, 5, 6, [0, 2], 2, 2, (0, 1)),
        (4, 2, 3, [1], 3, 1, (1, 3)),
    ):
        x = _r(batch, channels * (coords + classes + 1), 5, 3, seed=10) * np.float32(3)
        attrs = {
            "coords": coords,
            "classes": classes,
            "num": num,
            "axis": axes[0],
            "end_axis": axes[1],
            "do_softmax": False,
            "mask": mask,
        }
        cases.append(
            Case(
                f"RegionYolo-mask{''.join(map(str, mask))}-c{channels}",
                "RegionYolo",
                [P(x)],
                attrs,
                lambda d, a=attrs: ops.region_yolo(
                    d, a["coords"], a["classes"], a["num"], False, a["mask"], a["axis"], a["end_axis"]
                ),
            )
        )
    return cases


PRIOR_BOX_ATTRS = {
    "min": {"offset": 0.5, "min_size": [4.0]},
    "step0-offset-ignored": {"offset": 0.2, "min_size": [6.0], "aspect_ratio": [3.0], "variance": [0.2]},
    "min-max-ratios-flip": {
        "offset": 0.5,
        "min_size": [4.0, 9.0],
        "max_size": [7.0, 15.0],
        "aspect_ratio": [2.0, 3.0, 2.0],
        "flip": True,
        "variance": [0.1, 0.1, 0.2, 0.2],
    },
    "clip-step": {
        "offset": 0.3,
        "min_size": [10.0],
        "max_size": [20.0],
        "aspect_ratio": [0.5],
        "clip": True,
        "step": 6.0,
        "variance": [0.2],
    },
    "no-scale-all-sizes": {
        "offset": 0.5,
        "min_size": [0.2, 0.4],
        "aspect_ratio": [2.0],
        "flip": True,
        "scale_all_sizes": False,
        "step": 0.25,
    },
    "fixed-size-density": {
        "offset": 0.5,
        "fixed_size": [8.0, 16.0],
        "density": [2.0, 1.0],
        "aspect_ratio": [2.0],
        "clip": True,
    },
    "fixed-ratio": {"offset": 0.5, "fixed_size": [12.0], "fixed_ratio": [2.0], "density": [3.0]},
}

# OpenVINO's Python builder documents ``widths``/``step_widths`` keys but only the IR names take effect.
PRIOR_BOX_CLUSTERED_ATTRS = {
    "default-step": {"offset": 0.5, "width": [3.0, 8.5], "height": [4.0, 2.5]},
    "no-clip-step-variance": {
        "offset": 0.25,
        "width": [20.0],
        "height": [12.0],
        "clip": False,
        "step": 7.0,
        "variance": [0.1, 0.1, 0.2, 0.2],
    },
    "step-w-h": {
        "offset": 0.5,
        "width": [5.0, 9.0, 30.0],
        "height": [6.0, 3.0, 30.0],
        "step_w": 4.0,
        "step_h": 9.0,
        "variance": [0.3],
    },
}


def _prior_cases():
    layer, image = C(np.int64([3, 4])), C(np.int64([22, 30]))
    cases = []
    for tag, attrs in PRIOR_BOX_ATTRS.items():
        cases.append(
            Case(
                f"PriorBox-{tag}",
                "PriorBox",
                [layer, image],
                attrs,
                lambda a, b, attrs=attrs: ops.prior_box(a, b, attrs),
            )
        )
    for tag, attrs in PRIOR_BOX_CLUSTERED_ATTRS.items():
        cases.append(
            Case(
                f"PriorBoxClustered-{tag}",
                "PriorBoxClustered",
                [layer, image],
                attrs,
                lambda a, b, attrs=attrs: ops.prior_box_clustered(a, b, attrs),
            )
        )
    cases.append(
        Case(
            "PriorBoxClustered-int32-sizes",
            "PriorBoxClustered",
            [C(np.int32([2, 5])), C(np.int32([16, 40]))],
            PRIOR_BOX_CLUSTERED_ATTRS["step-w-h"],
            lambda a, b: ops.prior_box_clustered(a, b, PRIOR_BOX_CLUSTERED_ATTRS["step-w-h"]),
        )
    )
    return cases


CASES = (
    _roi_pooling_cases()
    + _psroi_cases()
    + _deformable_psroi_cases()
    + _reorg_cases()
    + _region_cases()
    + _prior_cases()
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_detection_op_matches_openvino(case):
    check(case)


@pytest.mark.parametrize(
    "attrs",
    [
        # The runtime's output holds fewer boxes than its kernel writes (it keeps a prefix of them).
        {"offset": 0.5, "min_size": [0.2, 0.4], "max_size": [0.6], "scale_all_sizes": False},
        {"offset": 0.5, "fixed_size": [12.0], "fixed_ratio": [1.0, 2.0], "density": [2.0]},
    ],
    ids=["max-size-without-scale-all-sizes", "two-fixed-ratios"],
)
def test_ill_defined_prior_boxes_are_refused(attrs):
    case = Case("PriorBox-ill-defined", "PriorBox", [C(np.int64([3, 4])), C(np.int64([22, 30]))], attrs, None)
    with pytest.raises(ExecutionError, match="boxes per cell"):
        Session(_opconv_model(case)).run({})


def test_detection_ops_have_kernels():
    declared = {s.name for s in dialect_schemas("openvino")}
    assert set(DETECTION_OPS) <= declared
    importlib.import_module("opconv.dialects.openvino.ops")  # registers every kernel
    missing = [op for op in DETECTION_OPS if ov_executor.REGISTRY.resolve(op, 1, ov_executor.DOMAIN) is None]
    assert not missing


def _openvino_model(case: Case) -> ov.Model:
    params, nodes = [], []
    for k, item in enumerate(case.inputs):
        if isinstance(item, P):
            params.append(ops.parameter(list(item.data.shape), item.data.dtype, name=f"in{k}"))
            nodes.append(params[-1])
        else:
            nodes.append(ops.constant(np.asarray(item.data)))
    return ov.Model([case.build(*nodes).output(0)], params, case.id)


# One case per op (both ROIPooling methods, both RegionYolo forms), with most attributes set.
ROUND_TRIP_IDS = (
    "ROIPooling-max-3x2-s1.0",
    "ROIPooling-bilinear-4x2-s1.0",
    "PSROIPooling-bilinear-d3-g2-b2x3",
    "DeformablePSROIPooling-offsets-c2-p1-std0.5",
    "ReorgYolo-s3",
    "RegionYolo-mask345-c3",
    "RegionYolo-softmax-n2-axes0..1-mask0",
    "PriorBox-min-max-ratios-flip",
    "PriorBoxClustered-step-w-h",
)
ROUND_TRIP_CASES = [c for c in CASES if c.id in ROUND_TRIP_IDS]
assert len(ROUND_TRIP_CASES) == len(ROUND_TRIP_IDS)


@pytest.mark.parametrize("case", ROUND_TRIP_CASES, ids=lambda c: c.id)
def test_detection_ir_round_trips(tmp_path, case):
    """OpenVINO's IR -> opconv -> IR v10 -> OpenVINO computes the same, and opconv runs both files."""
    feeds = {f"in{k}": item.data for k, item in enumerate(case.inputs) if isinstance(item, P)}
    original = str(tmp_path / "openvino.xml")
    ov.save_model(_openvino_model(case), original, compress_to_fp16=False)
    expected = CORE.compile_model(original, "CPU", CONFIG)(feeds)[0]
    loaded = opconv.load(original)
    written = str(tmp_path / "opconv.xml")
    opconv.save(loaded, written)
    again = CORE.compile_model(written, "CPU", CONFIG)(feeds)[0]
    for who, got in (
        ("OpenVINO on opconv's IR", again),
        ("opconv on OpenVINO's IR", opconv.run(loaded, feeds)),
        ("opconv on its own IR", opconv.run(opconv.load(written), feeds)),
    ):
        got = got if isinstance(got, np.ndarray) else next(iter(got.values()))
        report = compare_arrays(f"{case.id} ({who})", expected, got)
        assert report.ok, report.message
