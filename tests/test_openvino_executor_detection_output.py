"""DetectionOutput-1 and Proposal-1 in opconv's OpenVINO executor against OpenVINO's CPU plugin.

Scores are distinct (a shuffled ramp) unless a case tests ties on purpose:
the plugin orders equal scores by index only within a class (DetectionOutput)
and not at all in Proposal, so ties across those would leave the order to the
implementation.
"""

from __future__ import annotations

import numpy as np
import pytest

import opconv  # noqa: E402
from opconv.dialects.openvino.executor import DOMAIN, REGISTRY, Session  # noqa: E402
from opconv.errors import ExecutionError  # noqa: E402
from opconv.kernels.detection import generate_anchors  # noqa: E402
from tests.test_openvino_executor import CONFIG, CORE, C, Case, P, _opconv_model, check, ops

CENTER = "caffe.PriorBoxParameter.CENTER_SIZE"
CORNER = "caffe.PriorBoxParameter.CORNER"


# ---------------------------------------------------------------------------
# DetectionOutput
# ---------------------------------------------------------------------------


def _distinct_scores(shape, seed, low=0.0, high=1.0):
    """Distinct values spread over [low, high), in random order."""
    count = int(np.prod(shape))
    ramp = np.random.default_rng(seed).permutation(count).astype(np.float64) / count
    return (low + (high - low) * ramp).reshape(shape).astype(np.float32)


def _prior_corners(count, seed):
    """Normalized (xmin, ymin, xmax, ymax) priors clustered so that many overlap."""
    rng = np.random.default_rng(seed)
    center = rng.uniform(0.25, 0.75, (count, 2))
    half = rng.uniform(0.08, 0.3, (count, 2))
    return np.concatenate([center - half, center + half], axis=1).astype(np.float32)


def _proposals(images, count, seed, normalized=True, variance_encoded=False, size=(1, 1), end=None):
    """The proposals input: [images, 1 or 2, count * (4 or 5)] (priors, then variances)."""
    rows = []
    for n in range(images):
        corners = _prior_corners(count, seed + n) * np.float32([size[1], size[0], size[1], size[0]])
        if not normalized:
            image_id = np.zeros((count, 1), np.float32)
            if end is not None:
                image_id[end] = -1  # marks the end of the valid priors
            corners = np.concatenate([image_id, corners], axis=1)
        row = [corners.reshape(-1)]
        if not variance_encoded:
            variances = np.random.default_rng(seed + 50 + n).uniform(0.1, 0.3, count * 4).astype(np.float32)
            row.append(np.pad(variances, (0, corners.size - variances.size)))
        rows.append(np.stack(row))
    return np.stack(rows)


def _detection_case(
    tag,
    *,
    images=2,
    priors=12,
    classes=4,
    seed=0,
    aux=False,
    prior_images=1,
    loc_scale=0.6,
    scores=None,
    priors_end=None,
    **attrs,
):
    attrs = {"num_classes": classes, "keep_top_k": [-1], "nms_threshold": 0.45, **attrs}
    normalized = attrs.get("normalized", False)
    encoded = attrs.get("variance_encoded_in_target", False)
    size = (attrs.get("input_height", 1), attrs.get("input_width", 1))
    loc_classes = 1 if attrs.get("share_location", True) else classes
    rng = np.random.default_rng(seed + 100)
    # Offsets are in units of the variance (about 0.2) unless the variance is encoded in them.
    scale = loc_scale * (0.2 if encoded else 1.0)
    inputs = [
        P(rng.normal(0, scale, (images, priors * loc_classes * 4)).astype(np.float32)),
        P(_distinct_scores((images, priors * classes), seed + 1) if scores is None else scores),
        C(_proposals(prior_images, priors, seed + 2, normalized, encoded, size, priors_end)),
    ]
    if aux:
        inputs += [
            P(_distinct_scores((images, priors * 2), seed + 3)),
            P(rng.normal(0, scale, (images, priors * loc_classes * 4)).astype(np.float32)),
        ]
    ov_attrs = dict(attrs, keep_top_k=np.int32(attrs["keep_top_k"]))
    return Case(
        f"DetectionOutput-{tag}",
        "DetectionOutput",
        inputs,
        attrs,
        lambda box, cls, prior, *aux, a=ov_attrs: ops.detection_output(box, cls, prior, a, *aux),
    )


def _tied_scores(images, priors, classes, across_classes=False):
    """Few distinct values, so that many scores tie.

    The plugin breaks ties by prior index within a class, and (MXNet style, one class per prior) by class, then
    prior; across classes of the same prior its global sort is unstable, so Caffe-style cases give every class its
    own values (``across_classes=False``).
    """
    levels = np.random.default_rng(7).integers(1, 5, (images, priors, classes)).astype(np.float32) / 5
    if not across_classes:
        levels += np.arange(classes, dtype=np.float32) * 0.01
    return levels.reshape(images, priors * classes)


DETECTION_CASES = [
    _detection_case("corner", normalized=True),
    _detection_case(
        "center_size", normalized=True, code_type=CENTER, top_k=5, keep_top_k=[8], confidence_threshold=0.2
    ),
    _detection_case(
        "center_size-no_share-bg1",
        normalized=True,
        code_type=CENTER,
        share_location=False,
        background_label_id=1,
        keep_top_k=[10],
        nms_threshold=0.3,
    ),
    _detection_case("no_background", normalized=True, background_label_id=-1, top_k=4, nms_threshold=0.5),
    _detection_case("top_k-only", normalized=True, code_type=CENTER, top_k=3, confidence_threshold=0.1),
    _detection_case("variance_encoded-corner", normalized=True, variance_encoded_in_target=True, keep_top_k=[9]),
    _detection_case(
        "variance_encoded-center",
        normalized=True,
        code_type=CENTER,
        variance_encoded_in_target=True,
        share_location=False,
        keep_top_k=[7],
    ),
    _detection_case("unnormalized", code_type=CENTER, input_height=30, input_width=40, keep_top_k=[10]),
    _detection_case(
        "unnormalized-end_marker",
        input_height=20,
        input_width=10,
        priors_end=9,
        keep_top_k=[12],
        confidence_threshold=0.05,
    ),
    _detection_case(
        "clip",
        normalized=True,
        code_type=CENTER,
        loc_scale=2.0,
        clip_before_nms=True,
        clip_after_nms=True,
        keep_top_k=[10],
    ),
    _detection_case("clip_after", normalized=True, loc_scale=2.0, clip_after_nms=True, keep_top_k=[10]),
    _detection_case("priors_per_image", normalized=True, code_type=CENTER, prior_images=2, keep_top_k=[6]),
    _detection_case(
        "mxnet", normalized=True, code_type=CENTER, decrease_label_id=True, keep_top_k=[6], confidence_threshold=0.3
    ),
    _detection_case(
        "mxnet-top_k-no_share",
        normalized=True,
        decrease_label_id=True,
        share_location=False,
        top_k=6,
        nms_threshold=0.3,
    ),
    _detection_case("aux", normalized=True, code_type=CENTER, aux=True, objectness_score=0.4, keep_top_k=[10]),
    _detection_case(
        "aux-no_share-unnormalized",
        code_type=CENTER,
        aux=True,
        share_location=False,
        objectness_score=0.5,
        input_height=2,
        input_width=3,
        keep_top_k=[10],
    ),
    _detection_case(
        "aux-mxnet",
        normalized=True,
        code_type=CENTER,
        aux=True,
        decrease_label_id=True,
        objectness_score=0.3,
        confidence_threshold=0.2,
        keep_top_k=[8],
    ),
    # Threshold 0: priors the objectness rejects still enter, as class 1 with score 0.
    _detection_case(
        "aux-mxnet-zero_threshold", normalized=True, aux=True, decrease_label_id=True, objectness_score=0.6
    ),
    # Class 0 (not background here) holds scores equal to the threshold: they are below it ("above" is strict).
    _detection_case(
        "ties",
        normalized=True,
        code_type=CENTER,
        scores=_tied_scores(2, 12, 4),
        top_k=5,
        keep_top_k=[7],
        background_label_id=3,
        confidence_threshold=0.4,
    ),
    _detection_case(
        "ties-mxnet",
        normalized=True,
        code_type=CENTER,
        scores=_tied_scores(2, 12, 4, True),
        decrease_label_id=True,
        top_k=6,
    ),
    # MXNet style keeps scores equal to the threshold.
    _detection_case(
        "ties-mxnet-threshold",
        normalized=True,
        scores=_tied_scores(2, 12, 4, True),
        decrease_label_id=True,
        confidence_threshold=0.6,
    ),
]


@pytest.mark.parametrize("case", DETECTION_CASES, ids=lambda c: c.id)
def test_detection_output_matches_openvino(case):
    check(case)


# ---------------------------------------------------------------------------
# Proposal
# ---------------------------------------------------------------------------

RATIOS, SCALES = [0.5, 1.0, 2.0], [1.0, 2.0]


def _proposal_case(tag, *, images=1, rows=5, cols=6, image=(40, 48, 1.0), tiny_every=0, seed=0, **attrs):
    """``tiny_every``: every that many-th box gets strongly negative size deltas (far below min_size)."""
    attrs = {
        "base_size": 8,
        "pre_nms_topn": 40,
        "post_nms_topn": 12,
        "nms_thresh": 0.6,
        "feat_stride": 8,
        "min_size": 3,
        "ratio": RATIOS,
        "scale": SCALES,
        **attrs,
    }
    anchors = len(attrs["ratio"]) * len(attrs["scale"])
    rng = np.random.default_rng(seed)
    deltas = rng.normal(0, 0.3, (images, anchors, 4, rows, cols)).astype(np.float32)
    if tiny_every:
        # The others stay at least about 4 pixels wide and high.
        np.clip(deltas, -0.3, 0.3, out=deltas)
        deltas.reshape(images, anchors, 4, -1)[:, :, 2:, ::tiny_every] = -4.0
    probs = _distinct_scores((images, 2 * anchors, rows, cols), seed + 1, 0.05, 1.0)
    ov_attrs = {k: np.uint32(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in attrs.items()}
    ov_attrs.update(ratio=np.float32(attrs["ratio"]), scale=np.float32(attrs["scale"]))
    return Case(
        f"Proposal-{tag}",
        "Proposal",
        [P(probs), P(deltas.reshape(images, anchors * 4, rows, cols)), C(np.float32(image))],
        attrs,
        lambda *nodes, a=ov_attrs: ops.proposal(*nodes, a),
    )


PROPOSAL_CASES = [
    _proposal_case("caffe"),
    _proposal_case("caffe-batch", images=2, image=(36, 50, 1.0, 1.5), nms_thresh=0.4),
    _proposal_case("no_clip", clip_before_nms=False, image=(30, 36, 1.0)),
    _proposal_case(
        "clip_after-normalize", clip_before_nms=False, clip_after_nms=True, normalize=True, image=(30, 36, 1.0)
    ),
    _proposal_case("delta_scales", box_size_scale=2.0, box_coordinate_scale=5.0, nms_thresh=0.5),
    # min_size 1 at scale 2 rejects the boxes shrunk on purpose (a third of them), and only those: more survive
    # than pre_nms_topn takes, so no zero score (ties the plugin orders arbitrarily) reaches NMS.
    _proposal_case("min_size", min_size=1, image=(40, 48, 2.0), tiny_every=3, pre_nms_topn=100, post_nms_topn=40),
    # pre_nms_topn below post_nms_topn: the output is padded after the marker row.
    _proposal_case("padded", pre_nms_topn=10, post_nms_topn=15, nms_thresh=0.3),
    # A low threshold: boxes less than a pixel apart do not overlap (the +1 pixel convention notwithstanding).
    _proposal_case("low_nms_thresh", nms_thresh=0.01, post_nms_topn=40),
    _proposal_case("tensorflow", framework="tensorflow", base_size=16, image=(44, 40, 1.0)),
    _proposal_case(
        "tensorflow-batch",
        framework="tensorflow",
        images=2,
        rows=4,
        cols=7,
        image=(30, 52, 1.0, 0.5),
        clip_after_nms=True,
        normalize=True,
        nms_thresh=0.5,
        ratio=[0.7, 1.6],
        scale=[0.5, 1.0, 1.5],
    ),
]


@pytest.mark.parametrize("case", PROPOSAL_CASES, ids=lambda c: c.id)
def test_proposal_matches_openvino(case):
    check(case)


def _float16(case: Case) -> Case:
    inputs = [type(item)(item.data.astype(np.float16)) for item in case.inputs]
    return Case(f"{case.id}-f16", case.op, inputs, case.attrs, case.build)


@pytest.mark.parametrize("case", [_float16(DETECTION_CASES[1]), _float16(PROPOSAL_CASES[1])], ids=lambda c: c.id)
def test_float16_matches_openvino(case):
    check(case)


def test_anchors_match_faster_rcnn():
    # The anchors py-faster-rcnn documents for base 16, ratios (0.5, 1, 2), scales (8, 16, 32).
    expected = [
        [-84, -40, 99, 55],
        [-176, -88, 191, 103],
        [-360, -184, 375, 199],
        [-56, -56, 71, 71],
        [-120, -120, 135, 135],
        [-248, -248, 263, 263],
        [-36, -80, 51, 95],
        [-80, -168, 95, 183],
        [-168, -344, 183, 359],
    ]
    np.testing.assert_array_equal(generate_anchors(16, [0.5, 1, 2], [8, 16, 32]), np.float32(expected))


# ---------------------------------------------------------------------------
# coverage, errors, IR round trip
# ---------------------------------------------------------------------------


def test_detection_ops_have_kernels():
    assert [op for op in ("DetectionOutput", "Proposal") if REGISTRY.resolve(op, 1, DOMAIN) is None] == []


def test_unsupported_code_type_names_it():
    # CORNER_SIZE appears in some OpenVINO documents but neither the CPU plugin nor the reference runs it.
    case = _detection_case("bad", normalized=True, code_type="caffe.PriorBoxParameter.CORNER_SIZE")
    model = _opconv_model(case)
    feeds = {f"in{k}": item.data for k, item in enumerate(case.inputs) if isinstance(item, P)}
    with pytest.raises(ExecutionError, match="CORNER_SIZE"):
        Session(model).run(feeds)


def test_proposal_rejects_bad_image_shape():
    case = _proposal_case("bad", image=(0, 48, 1.0))
    feeds = {f"in{k}": item.data for k, item in enumerate(case.inputs) if isinstance(item, P)}
    with pytest.raises(ExecutionError, match="positive height and width"):
        Session(_opconv_model(case)).run(feeds)


@pytest.mark.parametrize("case", [DETECTION_CASES[1], PROPOSAL_CASES[-1]], ids=lambda c: c.id)
def test_ir_round_trip(tmp_path, case):
    # OpenVINO writes the layer, opconv reads and rewrites it; the rewritten IR runs the same in both.
    import openvino as ov

    params = [
        ops.parameter(list(item.data.shape), item.data.dtype, name=f"in{k}")
        for k, item in enumerate(case.inputs)
        if isinstance(item, P)
    ]
    it = iter(params)
    nodes = [next(it) if isinstance(item, P) else ops.constant(item.data) for item in case.inputs]
    original = str(tmp_path / "original.xml")
    ov.save_model(ov.Model([case.build(*nodes).output(0)], params, "m"), original, compress_to_fp16=False)
    model = opconv.load(original)
    written = str(tmp_path / "opconv.xml")
    opconv.save(model, written)
    feeds = {f"in{k}": item.data for k, item in enumerate(case.inputs) if isinstance(item, P)}
    results = []
    for path in (original, written):
        compiled = CORE.compile_model(CORE.read_model(path), "CPU", CONFIG)
        results.append(compiled(feeds)[compiled.output(0)])
    results.append(next(iter(Session(opconv.load(written)).run(feeds).values())))
    for got in results[1:]:
        np.testing.assert_allclose(got, results[0], rtol=1e-3, atol=1e-4)
