"""The ai.onnx.ml kernels (opconv/dialects/onnx/ops/ml.py) against onnxruntime, one single-node model per case."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import opconv

from .runtimes import run_ort

F, D, I64, I32, S = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT32, TensorProto.STRING


def _tensor(name, elem):
    return helper.make_tensor_value_info(name, elem, None)


def _model(op, inputs, outputs, version=1, **attrs):
    """A model of one ai.onnx.ml node; ``inputs``/``outputs`` are value infos in node order."""
    node = helper.make_node(op, [v.name for v in inputs], [v.name for v in outputs], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph([node], op, inputs, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", version)], ir_version=10
    )


def _check(model, feeds, rtol=1e-5, atol=1e-6):
    expected = run_ort(model, feeds)
    got = opconv.run(opconv.load(model), feeds)
    for out, e in zip(model.graph.output, expected):
        a = got[out.name]
        if isinstance(e, list):  # a sequence of maps
            assert len(a) == len(e)
            for ea, aa in zip(e, a):
                assert ea.keys() == aa.keys()
                np.testing.assert_allclose(list(aa.values()), list(ea.values()), rtol=rtol, atol=atol)
            continue
        e, a = np.asarray(e), np.asarray(a)
        assert a.shape == e.shape, (out.name, a.shape, e.shape)
        assert a.dtype == e.dtype, (out.name, a.dtype, e.dtype)
        if e.dtype == object:
            assert a.tolist() == e.tolist()
        else:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def _x(shape=(5, 4), seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_binarizer_and_array_feature_extractor():
    _check(_model("Binarizer", [_tensor("X", F)], [_tensor("Y", F)], threshold=0.3), {"X": _x()})
    m = _model("ArrayFeatureExtractor", [_tensor("X", F), _tensor("I", I64)], [_tensor("Y", F)])
    _check(m, {"X": _x((2, 3, 4)), "I": np.array([3, 0, 3], np.int64)})
    _check(m, {"X": _x((4,)), "I": np.array([1, 2], np.int64)})


@pytest.mark.parametrize(
    "keys,values,x",
    [
        (
            {"keys_strings": ["a", "b"]},
            {"values_int64s": [1, 2], "default_int64": 7},
            np.array(["a", "b", "c"], dtype=object),
        ),
        ({"keys_int64s": [4, 5]}, {"values_strings": ["four", "five"]}, np.array([[4, 6], [5, 4]], np.int64)),
        (
            {"keys_floats": [0.5, 2.0]},
            {"values_floats": [1.5, 2.5], "default_float": -1.0},
            np.array([0.5, np.nan, 3.0], np.float32),
        ),
    ],
)
def test_label_encoder_2(keys, values, x):
    elem = {np.dtype(object): S, np.dtype(np.int64): I64, np.dtype(np.float32): F}
    out_elem = S if "values_strings" in values else I64 if "values_int64s" in values else F
    m = _model("LabelEncoder", [_tensor("X", elem[x.dtype])], [_tensor("Y", out_elem)], version=2, **keys, **values)
    _check(m, {"X": x})


def test_label_encoder_4_tensors():
    m = _model(
        "LabelEncoder",
        [_tensor("X", I64)],
        [_tensor("Y", D)],
        version=4,
        keys_tensor=helper.make_tensor("k", I64, [3], [1, 2, 3]),
        values_tensor=helper.make_tensor("v", D, [3], [0.5, 1.5, 2.5]),
        default_tensor=helper.make_tensor("d", D, [1], [9.0]),
    )
    _check(m, {"X": np.array([[3, 4], [1, 1]], np.int64)})
    # Float keys: NaN matches NaN (LabelEncoder-4's specification).
    m = _model(
        "LabelEncoder",
        [_tensor("X", F)],
        [_tensor("Y", I64)],
        version=4,
        keys_floats=[0.5, float("nan")],
        values_int64s=[1, 2],
    )
    got = opconv.run(opconv.load(m), {"X": np.array([np.nan, 0.5, 1.0], np.float32)})["Y"]
    assert got.tolist() == [2, 1, -1]


def test_label_encoder_repeated_key_last_wins():
    # The specification (LabelEncoder-4): "If a key is repeated, the last key takes precedence";
    # onnxruntime 1.32 keeps the first, so this checks the specification only.
    m = _model(
        "LabelEncoder",
        [_tensor("X", S)],
        [_tensor("Y", I64)],
        version=4,
        keys_strings=["a", "b", "a"],
        values_int64s=[1, 2, 3],
    )
    got = opconv.run(opconv.load(m), {"X": np.array(["a", "b", "c"], dtype=object)})["Y"]
    assert got.tolist() == [3, 2, -1]


def test_category_mapper():
    attrs = {"cats_strings": ["x", "y", "z"], "cats_int64s": [10, 20, 30]}
    _check(
        _model("CategoryMapper", [_tensor("X", S)], [_tensor("Y", I64)], **attrs),
        {"X": np.array([["y", "q"], ["z", "x"]], dtype=object)},
    )
    _check(
        _model("CategoryMapper", [_tensor("X", I64)], [_tensor("Y", S)], default_string="?", **attrs),
        {"X": np.array([30, 11, 10], np.int64)},
    )


def test_scaler_normalizer_imputer():
    _check(
        _model("Scaler", [_tensor("X", D)], [_tensor("Y", F)], offset=[0.5, -1.0, 2.0], scale=[2.0, 1.0, -0.5]),
        {"X": _x((4, 3), dtype=np.float64)},
    )
    for norm in ("MAX", "L1", "L2"):
        _check(_model("Normalizer", [_tensor("X", F)], [_tensor("Y", F)], norm=norm), {"X": _x() + 3})
    x = _x()
    x[1, 2] = x[3, 0] = np.nan
    _check(
        _model(
            "Imputer",
            [_tensor("X", F)],
            [_tensor("Y", F)],
            imputed_value_floats=[1.0, 2.0, 3.0, 4.0],
            replaced_value_float=float("nan"),
        ),
        {"X": x},
    )
    _check(
        _model("Imputer", [_tensor("X", I64)], [_tensor("Y", I64)], imputed_value_int64s=[9], replaced_value_int64=0),
        {"X": np.array([[0, 1], [2, 0]], np.int64)},
    )


def test_one_hot_encoder_and_feature_vectorizer():
    _check(
        _model("OneHotEncoder", [_tensor("X", S)], [_tensor("Y", F)], cats_strings=["a", "b", "c"]),
        {"X": np.array([["a", "c"], ["d", "b"]], dtype=object)},
    )
    _check(
        _model("OneHotEncoder", [_tensor("X", I64)], [_tensor("Y", F)], cats_int64s=[3, 1, 4]),
        {"X": np.array([1, 4, 3, 5], np.int64)},
    )
    m = _model("FeatureVectorizer", [_tensor("A", I64), _tensor("B", I64)], [_tensor("Y", F)], inputdimensions=[2, 3])
    _check(m, {"A": np.arange(12, dtype=np.int64).reshape(3, 4), "B": np.arange(6, dtype=np.int64).reshape(3, 2)})


def test_maps():
    dict_in = helper.make_value_info("X", helper.make_map_type_proto(S, helper.make_tensor_type_proto(F, None)))
    m = _model("DictVectorizer", [dict_in], [_tensor("Y", F)], string_vocabulary=["a", "b", "c", "d"])
    _check(m, {"X": {"b": 1.5, "d": -2.0, "e": 3.0}})
    zip_out = helper.make_value_info(
        "Z", helper.make_sequence_type_proto(helper.make_map_type_proto(S, helper.make_tensor_type_proto(F, None)))
    )
    _check(_model("ZipMap", [_tensor("X", F)], [zip_out], classlabels_strings=["p", "q", "r"]), {"X": _x((2, 3))})
    cast_in = helper.make_value_info("X", helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, None)))
    _check(_model("CastMap", [cast_in], [_tensor("Y", F)], map_form="SPARSE", max_map=6), {"X": {4: 1.5, 1: 2.0}})
    _check(_model("CastMap", [cast_in], [_tensor("Y", I64)], cast_to="TO_INT64"), {"X": {4: 1.5, 1: 2.0, 2: -3.0}})
    _check(_model("CastMap", [cast_in], [_tensor("Y", S)], cast_to="TO_STRING"), {"X": {4: 1.5, 1: 2.25}})


@pytest.mark.parametrize("post_transform", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_linear_models(post_transform):
    x = _x((6, 3))
    coef = _x((9,), seed=1).tolist()
    _check(
        _model(
            "LinearRegressor",
            [_tensor("X", F)],
            [_tensor("Y", F)],
            coefficients=coef[:6],
            intercepts=[0.5, -0.5],
            targets=2,
            post_transform=post_transform,
        ),
        {"X": x},
    )
    _check(
        _model(
            "LinearClassifier",
            [_tensor("X", F)],
            [_tensor("Y", I64), _tensor("Z", F)],
            coefficients=coef,
            intercepts=[0.1, 0.2, 0.3],
            classlabels_ints=[7, 8, 9],
            post_transform=post_transform,
        ),
        {"X": x},
    )
    _check(
        _model(
            "LinearClassifier",
            [_tensor("X", F)],
            [_tensor("Y", S), _tensor("Z", F)],
            coefficients=coef[:3],
            intercepts=[0.1],
            classlabels_strings=["no", "yes"],
            post_transform=post_transform,
        ),
        {"X": x},
    )


def _tree_attrs():
    # Two trees over 3 features: tree 0 splits twice, tree 1 is a single leaf-pair split.
    return dict(
        nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1],
        nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
        nodes_featureids=[0, 1, 0, 0, 0, 2, 0, 0],
        nodes_modes=["BRANCH_LEQ", "BRANCH_GT", "LEAF", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF"],
        nodes_values=[0.1, -0.3, 0, 0, 0, 0.5, 0, 0],
        nodes_truenodeids=[1, 2, 0, 0, 0, 1, 0, 0],
        nodes_falsenodeids=[4, 3, 0, 0, 0, 2, 0, 0],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0, 0],
    )


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
def test_tree_ensemble_regressor(aggregate):
    x = _x((8, 3))
    x[0, 0] = np.nan
    # Tree 1's leaves feed both targets: onnxruntime leaves a target no leaf reached at 0 without its base
    # value, a reading the specification does not share (opconv adds the base value to every target).
    leaves = dict(
        target_treeids=[0, 0, 0, 0, 1, 1, 1, 1],
        target_nodeids=[2, 3, 4, 4, 1, 1, 2, 2],
        target_ids=[0, 1, 0, 1, 0, 1, 0, 1],
        target_weights=[1.0, 2.0, -1.5, 0.5, 3.0, 0.75, 0.5, -2.0],
    )
    for version in (1, 3):
        m = _model(
            "TreeEnsembleRegressor",
            [_tensor("X", F)],
            [_tensor("Y", F)],
            version=version,
            n_targets=2,
            aggregate_function=aggregate,
            base_values=[0.25, -0.25],
            **_tree_attrs(),
            **leaves,
        )
        _check(m, {"X": x})


@pytest.mark.parametrize("post_transform", ["NONE", "SOFTMAX", "LOGISTIC"])
def test_tree_ensemble_classifier(post_transform):
    x = _x((8, 3), seed=3)
    classes = dict(
        class_treeids=[0, 0, 0, 1, 1, 1],
        class_nodeids=[2, 3, 4, 1, 2, 2],
        class_ids=[0, 1, 2, 2, 0, 1],
        class_weights=[0.5, 0.7, 0.2, 0.4, 0.3, 0.1],
    )
    m = _model(
        "TreeEnsembleClassifier",
        [_tensor("X", F)],
        [_tensor("Y", I64), _tensor("Z", F)],
        version=3,
        classlabels_int64s=[5, 6, 7],
        post_transform=post_transform,
        **_tree_attrs(),
        **classes,
    )
    _check(m, {"X": x})


@pytest.mark.parametrize("post_transform", ["NONE", "LOGISTIC"])
@pytest.mark.parametrize("scored_class", [0, 1])
def test_tree_ensemble_classifier_binary(post_transform, scored_class):
    x = _x((8, 3), seed=3)
    classes = dict(
        class_treeids=[0, 0, 0, 1, 1, 1],
        class_nodeids=[2, 3, 4, 1, 2, 2],
        class_ids=[scored_class] * 6,
        class_weights=[0.5, -0.7, 0.2, 0.4, -0.3, 0.1],
    )
    m = _model(
        "TreeEnsembleClassifier",
        [_tensor("X", F)],
        [_tensor("Y", I64), _tensor("Z", F)],
        version=3,
        classlabels_int64s=[5, 6],
        post_transform=post_transform,
        **_tree_attrs(),
        **classes,
    )
    _check(m, {"X": x})


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble_5(aggregate):
    attrs = dict(
        n_targets=2,
        aggregate_function=aggregate,
        tree_roots=[0, 2],
        nodes_featureids=[0, 1, 2],
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [3], [6, 3, 0]),
        nodes_splits=helper.make_tensor("s", F, [3], [0.0, 0.2, 0.7]),
        membership_values=helper.make_tensor("mv", F, [3], [1.0, 2.0, float("nan")]),
        nodes_truenodeids=[0, 1, 2],
        nodes_trueleafs=[1, 1, 1],
        nodes_falsenodeids=[1, 2, 3],
        nodes_falseleafs=[0, 1, 1],
        leaf_targetids=[0, 1, 0, 1],
        leaf_weights=helper.make_tensor("w", F, [4], [1.0, 2.0, 3.0, 4.0]),
    )
    x = np.array([[1, 0, 0], [2, 1, 1], [3, 0.1, 0.5], [np.nan, 5, 9]], np.float32)
    _check(_model("TreeEnsemble", [_tensor("X", F)], [_tensor("Y", F)], version=5, **attrs), {"X": x})
    # post_transform 1 is SOFTMAX in the specification; onnxruntime 1.32 reads 1 as LOGISTIC and 2 as SOFTMAX,
    # so the transforms are checked against the untransformed scores instead.
    raw = opconv.run(
        opconv.load(_model("TreeEnsemble", [_tensor("X", F)], [_tensor("Y", F)], version=5, **attrs)), {"X": x}
    )["Y"].astype(np.float64)
    for code, expected in ((1, np.exp(raw) / np.exp(raw).sum(1, keepdims=True)), (2, 1 / (1 + np.exp(-raw)))):
        m = _model("TreeEnsemble", [_tensor("X", F)], [_tensor("Y", F)], version=5, post_transform=code, **attrs)
        np.testing.assert_allclose(opconv.run(opconv.load(m), {"X": x})["Y"], expected, rtol=1e-6)


@pytest.mark.parametrize("kernel_type", ["LINEAR", "RBF", "POLY", "SIGMOID"])
def test_svm_regressor(kernel_type):
    x = _x((5, 3))
    m = _model(
        "SVMRegressor",
        [_tensor("X", F)],
        [_tensor("Y", F)],
        kernel_type=kernel_type,
        kernel_params=[0.3, 0.1, 2.0],
        n_supports=4,
        support_vectors=_x((12,), seed=2).tolist(),
        coefficients=[0.5, -1.0, 0.25, 0.75],
        rho=[0.2],
    )
    _check(m, {"X": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("probabilities", [False, True])
def test_svm_classifier(probabilities):
    x = _x((6, 3))
    attrs = dict(
        kernel_type="RBF",
        kernel_params=[0.4, 0.0, 3.0],
        classlabels_ints=[0, 1, 2],
        vectors_per_class=[2, 1, 2],
        support_vectors=_x((15,), seed=4).tolist(),
        coefficients=_x((10,), seed=5).tolist(),
        rho=[0.1, -0.2, 0.3],
    )
    if probabilities:
        attrs.update(prob_a=[-1.5, -0.8, -2.0], prob_b=[0.1, 0.0, -0.2])
    m = _model("SVMClassifier", [_tensor("X", F)], [_tensor("Y", I64), _tensor("Z", F)], **attrs)
    _check(m, {"X": x}, rtol=1e-4, atol=1e-5)
