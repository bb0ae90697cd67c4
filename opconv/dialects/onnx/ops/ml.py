"""The ai.onnx.ml domain: classic machine-learning operators.

Feature preparation (ArrayFeatureExtractor, Binarizer, CastMap, CategoryMapper,
DictVectorizer, FeatureVectorizer, Imputer, LabelEncoder, Normalizer,
OneHotEncoder, Scaler), linear models (LinearClassifier, LinearRegressor),
support vector machines (SVMClassifier, SVMRegressor), tree ensembles
(TreeEnsemble and the older TreeEnsembleClassifier / TreeEnsembleRegressor)
and ZipMap.

Conventions of this domain the kernels share:

* string tensors are numpy ``object`` arrays of ``str``; maps are ``dict``;
  ZipMap's sequence of maps is a ``list`` of ``dict``;
* the "models" (linear, SVM, trees) take ``[N, F]`` or ``[F]`` inputs, score
  in float64 and return float32 scores, except TreeEnsemble-5 whose scores
  keep the input's type;
* ``post_transform`` names a transform applied to each row of scores
  (:data:`_POST_TRANSFORMS`); classifiers pick their label from the scores
  *before* the transform.

Tree traversal is vectorized over the (row, tree) pairs and iterates over the
depth of the trees.
"""

from __future__ import annotations

import numpy as np

from ....errors import ExecutionError
from ....kernels import elementwise, norm
from ....types import TensorType, element_type
from ..executor import onnx_op

ML = "ai.onnx.ml"


def ml_op(name: str, since):
    """Register a kernel of the ai.onnx.ml domain."""
    return onnx_op(name, since=since, domain=ML)


# -- shared helpers -------------------------------------------------------------------------------------------


def _rows(x) -> np.ndarray:
    """The models' input as a 2-D ``[N, F]`` array: a 1-D input is one row."""
    x = np.asarray(x)
    if x.ndim == 1:
        return x[None, :]
    if x.ndim != 2:
        raise ExecutionError(f"expected a [N, F] or [F] input, got shape {list(x.shape)}")
    return x


def _is_string(a: np.ndarray) -> bool:
    return a.dtype == object or a.dtype.kind in "US"


def _as_str(a) -> np.ndarray:
    """A string tensor as a fixed-width unicode array, which numpy can sort and search."""
    a = np.asarray(a)
    if a.dtype.kind == "U":
        return a
    return a.astype(str) if a.size else np.zeros(a.shape, dtype="U1")


def _lookup(x: np.ndarray, keys: np.ndarray, values: np.ndarray, default) -> np.ndarray:
    """``values[i]`` where ``x == keys[i]``, else ``default``; the last of repeated keys wins, NaN matches NaN."""
    if len(keys) != len(values):
        raise ExecutionError(f"{len(keys)} keys but {len(values)} values")
    x = np.asarray(x)
    if _is_string(keys) != _is_string(x):
        raise ExecutionError(f"the keys ({keys.dtype}) do not have the input's type ({x.dtype})")
    if _is_string(keys):
        keys, x = _as_str(keys), _as_str(x)
    # np.unique over the reversed keys keeps each key's last occurrence (NaNs collapse into one key, sorted last).
    unique, first = np.unique(keys[::-1], return_index=True)
    chosen = values[::-1][first]
    out = np.full(x.shape, default, dtype=values.dtype)
    if unique.size:
        pos = np.minimum(np.searchsorted(unique, x), unique.size - 1)
        candidate = unique[pos]
        hit = candidate == x
        if unique.dtype.kind == "f":
            hit |= np.isnan(candidate) & np.isnan(x)
        out[hit] = chosen[pos[hit]]
    return out


def _labels(ints, strings) -> np.ndarray:
    """Class labels from a pair of ``*_ints`` / ``*_strings`` attributes (int64 or object array)."""
    if strings:
        return np.asarray(list(strings), dtype=object)
    return np.asarray(list(ints or []), dtype=np.int64)


def _floats(values, tensor=None) -> np.ndarray | None:
    """A float attribute given as a list or (the ``*_as_tensor`` form) as a tensor; None when neither is set."""
    if tensor is not None:
        return np.asarray(tensor, dtype=np.float64).reshape(-1)
    if values is None:
        return None
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def _erfinv(y: np.ndarray) -> np.ndarray:
    """The inverse error function: a central/tail starting guess refined by Newton steps on erf."""
    y = np.asarray(y, dtype=np.float64)
    w = -np.log(np.maximum((1.0 - y) * (1.0 + y), np.finfo(np.float64).tiny))
    # Winitzki's closed form is within 2e-3 everywhere; three Newton steps take it to double precision.
    a = 0.147
    t = 2 / (np.pi * a) - w / 2
    x = np.sign(y) * np.sqrt(np.sqrt(t * t + w / a) - t)
    for _ in range(3):
        x = x - (elementwise.erf(x) - y) / (2 / np.sqrt(np.pi) * np.exp(-x * x))
    return np.where(np.abs(y) >= 1, np.sign(y) * np.inf, x)


def _softmax_zero(s: np.ndarray) -> np.ndarray:
    """Softmax over each row's non-zero scores; zero scores stay zero."""
    e = np.where(s != 0, np.exp(s - s.max(axis=1, keepdims=True)), 0.0)
    total = e.sum(axis=1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


_POST_TRANSFORMS = {
    "NONE": lambda s: s,
    "SOFTMAX": lambda s: norm.softmax(s, axis=1),
    "LOGISTIC": elementwise.sigmoid,
    "SOFTMAX_ZERO": _softmax_zero,
    "PROBIT": lambda s: np.sqrt(2.0) * _erfinv(2 * s - 1),
}
# TreeEnsemble-5 encodes post_transform as an integer.
_POST_TRANSFORM_CODES = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def _post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    try:
        transform = _POST_TRANSFORMS[name]
    except KeyError:
        raise ExecutionError(f"post_transform must be one of {', '.join(_POST_TRANSFORMS)}, got {name!r}") from None
    return transform(scores)


def _output_dtype(ctx, index: int, fallback) -> np.dtype:
    """The element type the graph declares for output ``index`` (maps carry no dtype of their own)."""
    v = ctx.node.outputs[index] if index < len(ctx.node.outputs) else None
    t = getattr(v, "type", None)
    if isinstance(t, TensorType) and t.dtype is not None:
        return np.dtype(element_type(t.dtype).numpy)
    return np.dtype(fallback)


# -- element-wise feature ops ---------------------------------------------------------------------------------


@ml_op("ArrayFeatureExtractor", since=1)
def array_feature_extractor_1(ctx, X, Y):
    x = np.asarray(X)
    index = np.asarray(Y, dtype=np.int64).reshape(-1)
    if index.size and (index.min() < 0 or index.max() >= x.shape[-1]):
        raise ExecutionError(f"indices must be in [0, {x.shape[-1]}), got {index.min()}..{index.max()}")
    out = x[..., index]
    # A 1-D input is one row: the result is [1, len(Y)], as for [1, F].
    return out[None, :] if x.ndim == 1 else out


@ml_op("Binarizer", since=1)
def binarizer_1(ctx, X, *, threshold):
    x = np.asarray(X)
    return (x > threshold).astype(x.dtype)


@ml_op("CastMap", since=1)
def cast_map_1(ctx, X, *, cast_to, map_form, max_map):
    if not isinstance(X, dict):
        raise ExecutionError(f"CastMap takes a map, got {type(X).__name__}")
    casts = {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": object}
    if cast_to not in casts:
        raise ExecutionError(f"cast_to must be one of {', '.join(casts)}, got {cast_to!r}")
    keys = np.asarray(sorted(X), dtype=np.int64)
    values = np.asarray([X[k] for k in keys.tolist()])
    if casts[cast_to] is not object:
        values = values.astype(np.float64 if values.dtype.kind in "OU" else values.dtype).astype(casts[cast_to])
    elif values.dtype.kind == "f":
        # Numbers print as C's "%f" (six decimals), as onnxruntime's std::to_string does.
        values = np.asarray([f"{v:f}" for v in values.tolist()], dtype=object)
    else:
        values = values.astype(str).astype(object)
    if map_form == "DENSE":
        return values[None, :]
    if map_form != "SPARSE":
        raise ExecutionError(f"map_form must be DENSE or SPARSE, got {map_form!r}")
    if keys.size and (keys.min() < 0 or keys.max() >= max_map):
        raise ExecutionError(f"map keys must be in [0, max_map={max_map}) for a SPARSE cast")
    out = np.full((1, max_map), "0" if values.dtype == object else 0, dtype=values.dtype)
    out[0, keys] = values
    return out


@ml_op("CategoryMapper", since=1)
def category_mapper_1(ctx, X, *, cats_int64s, cats_strings, default_int64, default_string):
    ints = np.asarray(list(cats_int64s or []), dtype=np.int64)
    strings = np.asarray(list(cats_strings or []), dtype=object)
    if _is_string(np.asarray(X)):
        return _lookup(X, strings, ints, default_int64)
    return _lookup(np.asarray(X, dtype=np.int64), ints, strings, default_string)


@ml_op("DictVectorizer", since=1)
def dict_vectorizer_1(ctx, X, *, int64_vocabulary, string_vocabulary):
    if not isinstance(X, dict):
        raise ExecutionError(f"DictVectorizer takes a map, got {type(X).__name__}")
    vocabulary = _labels(int64_vocabulary, string_vocabulary)
    keys = np.asarray(list(X), dtype=vocabulary.dtype)
    values = np.asarray(list(X.values()))
    dtype = _output_dtype(ctx, 0, values.dtype if values.size else np.float32)
    zero = "" if np.dtype(dtype).kind == "O" else 0
    # Each vocabulary entry takes the map's value for it; entries the map lacks are zero.
    out = _lookup(vocabulary, keys, values.astype(dtype), zero)
    return out[None, :]


@ml_op("FeatureVectorizer", since=1)
def feature_vectorizer_1(ctx, *X, inputdimensions):
    dims = list(inputdimensions or [])
    if len(dims) != len(X):
        raise ExecutionError(f"{len(X)} inputs but {len(dims)} inputdimensions")
    parts = []
    for x, d in zip(X, dims):
        x = _rows(x).astype(np.float32)
        # Each input contributes exactly d columns: extra ones are dropped, missing ones are zero.
        part = np.zeros((x.shape[0], d), dtype=np.float32)
        part[:, : min(d, x.shape[1])] = x[:, :d]
        parts.append(part)
    return np.concatenate(parts, axis=1)


@ml_op("Imputer", since=1)
def imputer_1(ctx, X, *, imputed_value_floats, imputed_value_int64s, replaced_value_float, replaced_value_int64):
    x = np.asarray(X)
    if x.dtype.kind == "f":
        imputed, replaced = imputed_value_floats, replaced_value_float
    else:
        imputed, replaced = imputed_value_int64s, replaced_value_int64
    if not imputed:
        raise ExecutionError("Imputer needs imputed values of the input's kind (imputed_value_floats or _int64s)")
    fill = np.asarray(imputed).astype(x.dtype)
    if fill.size not in (1, x.shape[-1]):
        raise ExecutionError(f"{fill.size} imputed values for {x.shape[-1]} features (give 1 or one per feature)")
    missing = np.isnan(x) if np.isnan(replaced) else x == replaced
    return np.where(missing, fill, x)


def _label_encoder_default(values: np.ndarray, default_float, default_int64, default_string, default_tensor=None):
    """The value for keys not found: ``default_tensor`` if given, else the ``default_*`` of the values' kind."""
    if default_tensor is not None:
        return np.asarray(default_tensor).reshape(-1)[0]
    if values.dtype == object:
        return default_string
    return default_float if values.dtype.kind == "f" else default_int64


@ml_op("LabelEncoder", since=1)
def label_encoder_1(ctx, X, *, classes_strings, default_int64, default_string):
    # Version 1 maps strings to their position in classes_strings, and integers back to strings.
    classes = np.asarray(list(classes_strings or []), dtype=object)
    positions = np.arange(len(classes), dtype=np.int64)
    if _is_string(np.asarray(X)):
        return _lookup(X, classes, positions, default_int64)
    return _lookup(np.asarray(X, dtype=np.int64), positions, classes, default_string)


def _one_of(candidates: dict) -> np.ndarray:
    given = {name: v for name, v in candidates.items() if v is not None}
    if len(given) != 1:
        raise ExecutionError(f"exactly one of {', '.join(candidates)} must be set, got {', '.join(given) or 'none'}")
    return next(iter(given.values()))


def _label_encoder(
    X,
    keys_floats,
    keys_int64s,
    keys_strings,
    values_floats,
    values_int64s,
    values_strings,
    default_float,
    default_int64,
    default_string,
    keys_tensor=None,
    values_tensor=None,
    default_tensor=None,
):
    def listed(v, dtype):
        return None if v is None else np.asarray(list(v), dtype=dtype)

    keys = _one_of(
        {
            "keys_floats": listed(keys_floats, np.float32),
            "keys_int64s": listed(keys_int64s, np.int64),
            "keys_strings": listed(keys_strings, object),
            "keys_tensor": None if keys_tensor is None else np.asarray(keys_tensor).reshape(-1),
        }
    )
    values = _one_of(
        {
            "values_floats": listed(values_floats, np.float32),
            "values_int64s": listed(values_int64s, np.int64),
            "values_strings": listed(values_strings, object),
            "values_tensor": None if values_tensor is None else np.asarray(values_tensor).reshape(-1),
        }
    )
    default = _label_encoder_default(values, default_float, default_int64, default_string, default_tensor)
    return _lookup(X, keys, values, default)


@ml_op("LabelEncoder", since=2)
def label_encoder_2(
    ctx,
    X,
    *,
    default_float,
    default_int64,
    default_string,
    keys_floats,
    keys_int64s,
    keys_strings,
    values_floats,
    values_int64s,
    values_strings,
):
    return _label_encoder(
        X,
        keys_floats,
        keys_int64s,
        keys_strings,
        values_floats,
        values_int64s,
        values_strings,
        default_float,
        default_int64,
        default_string,
    )


@ml_op("LabelEncoder", since=4)
def label_encoder_4(
    ctx,
    X,
    *,
    default_float,
    default_int64,
    default_string,
    default_tensor,
    keys_floats,
    keys_int64s,
    keys_strings,
    keys_tensor,
    values_floats,
    values_int64s,
    values_strings,
    values_tensor,
):
    # Version 4 adds keys/values/default as tensors of any of its element types.
    return _label_encoder(
        X,
        keys_floats,
        keys_int64s,
        keys_strings,
        values_floats,
        values_int64s,
        values_strings,
        default_float,
        default_int64,
        default_string,
        keys_tensor,
        values_tensor,
        default_tensor,
    )


@ml_op("Normalizer", since=1)
def normalizer_1(ctx, X, *, norm):
    x = np.asarray(X)
    rows = _rows(x).astype(np.float64)
    divisors = {
        "MAX": lambda r: r.max(axis=1, keepdims=True),
        "L1": lambda r: np.abs(r).sum(axis=1, keepdims=True),
        "L2": lambda r: np.sqrt((r * r).sum(axis=1, keepdims=True)),
    }
    if norm not in divisors:
        raise ExecutionError(f"norm must be MAX, L1 or L2, got {norm!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        out = rows / divisors[norm](rows)
    return out.astype(np.float32).reshape(x.shape)


@ml_op("OneHotEncoder", since=1)
def one_hot_encoder_1(ctx, X, *, cats_int64s, cats_strings, zeros):
    x = np.asarray(X)
    if _is_string(x):
        cats = np.asarray(list(cats_strings or []), dtype=object)
        if not cats.size:
            raise ExecutionError("a string input needs cats_strings")
    else:
        cats = np.asarray(list(cats_int64s or []), dtype=np.int64)
        if not cats.size:
            raise ExecutionError("a numeric input needs cats_int64s")
        x = x.astype(np.int64)  # float inputs are matched by their integer value
    position = _lookup(x, cats, np.arange(cats.size, dtype=np.int64), -1)
    if not zeros and (position < 0).any():
        raise ExecutionError(f"value {x[position < 0].flat[0]!r} is not a category (and zeros=0)")
    return (position[..., None] == np.arange(cats.size)).astype(np.float32)


@ml_op("Scaler", since=1)
def scaler_1(ctx, X, *, offset, scale):
    x = np.asarray(X)
    features = x.shape[-1] if x.ndim else 1
    params = {}
    for name, given, neutral in (("offset", offset, 0.0), ("scale", scale, 1.0)):
        p = np.asarray(given if given else [neutral], dtype=np.float32)
        if p.size not in (1, features):
            raise ExecutionError(f"{p.size} {name} values for {features} features (give 1 or one per feature)")
        params[name] = p
    return ((x.astype(np.float32) - params["offset"]) * params["scale"]).astype(np.float32)


@ml_op("ZipMap", since=1)
def zip_map_1(ctx, X, *, classlabels_int64s, classlabels_strings):
    labels = _labels(classlabels_int64s, classlabels_strings).tolist()
    x = _rows(X)
    if x.shape[1] != len(labels):
        raise ExecutionError(f"{x.shape[1]} columns but {len(labels)} class labels")
    # One map per row: the output is a sequence of Python dicts, which has no array form.
    return [dict(zip(labels, row)) for row in x.astype(np.float32).tolist()]


# -- linear models ------------------------------------------------------------------------------------------------


def _linear_scores(X, coefficients, intercepts, outputs: int) -> np.ndarray:
    x = _rows(X).astype(np.float64)
    w = np.asarray(coefficients, dtype=np.float32).astype(np.float64)
    if outputs <= 0 or w.size != outputs * x.shape[1]:
        raise ExecutionError(f"{w.size} coefficients do not make {outputs} rows of {x.shape[1]} features")
    scores = x @ w.reshape(outputs, x.shape[1]).T
    if intercepts:
        b = np.asarray(intercepts, dtype=np.float32).astype(np.float64)
        if b.size != outputs:
            raise ExecutionError(f"{b.size} intercepts for {outputs} outputs")
        scores = scores + b
    return scores


@ml_op("LinearRegressor", since=1)
def linear_regressor_1(ctx, X, *, coefficients, intercepts, post_transform, targets):
    scores = _linear_scores(X, coefficients or [], intercepts, targets)
    return _post_transform(scores, post_transform).astype(np.float32)


def _binary_scores(raw: np.ndarray, post_transform: str, negate_raw: bool = False) -> np.ndarray:
    """Two columns from the single score s of a binary model: [1 - p, p] with p = LOGISTIC(s) or PROBIT(s);
    otherwise s untransformed (a softmax of one score is meaningless) as [1 - s, s], or [-s, s] with
    ``negate_raw``.

    The specification leaves the binary case open; this is onnxruntime's reading (the tree classifier negates,
    the linear classifier complements).
    """
    if post_transform in ("LOGISTIC", "PROBIT"):
        p = _post_transform(raw, post_transform)
        return np.concatenate([1 - p, p], axis=1)
    return np.concatenate([-raw if negate_raw else 1 - raw, raw], axis=1)


@ml_op("LinearClassifier", since=1)
def linear_classifier_1(
    ctx, X, *, classlabels_ints, classlabels_strings, coefficients, intercepts, multi_class, post_transform
):
    labels = _labels(classlabels_ints, classlabels_strings)
    features = _rows(X).shape[1]
    classes = len(coefficients) // features if features else 0
    raw = _linear_scores(X, coefficients, intercepts, classes)
    if classes == 1 and labels.size == 2:
        # A binary model scores the second class only: positive scores choose it.
        label = labels[(raw[:, 0] > 0).astype(np.int64)]
        return label, _binary_scores(raw, post_transform).astype(np.float32)
    if classes != labels.size:
        raise ExecutionError(f"{classes} rows of coefficients for {labels.size} class labels")
    return labels[raw.argmax(axis=1)], _post_transform(raw, post_transform).astype(np.float32)


# -- support vector machines --------------------------------------------------------------------------------------


def _svm_kernel(kernel_type: str, kernel_params, x: np.ndarray, sv: np.ndarray) -> np.ndarray:
    """The kernel matrix [N, S] between rows and support vectors; kernel_params are (gamma, coef0, degree)."""
    gamma, coef0, degree = (list(kernel_params or []) + [0.0, 0.0, 0.0])[:3]
    kernels = {
        "LINEAR": lambda: x @ sv.T,
        "POLY": lambda: (gamma * (x @ sv.T) + coef0) ** degree,
        "RBF": lambda: np.exp(-gamma * ((x[:, None, :] - sv[None, :, :]) ** 2).sum(axis=2)),
        "SIGMOID": lambda: np.tanh(gamma * (x @ sv.T) + coef0),
    }
    if kernel_type not in kernels:
        raise ExecutionError(f"kernel_type must be one of {', '.join(kernels)}, got {kernel_type!r}")
    return kernels[kernel_type]()


def _support_vectors(support_vectors, features: int) -> np.ndarray:
    sv = np.asarray(support_vectors or [], dtype=np.float32).astype(np.float64)
    if features == 0 or sv.size % features:
        raise ExecutionError(f"{sv.size} support-vector values are not rows of {features} features")
    return sv.reshape(-1, features)


@ml_op("SVMRegressor", since=1)
def svm_regressor_1(
    ctx, X, *, coefficients, kernel_params, kernel_type, n_supports, one_class, post_transform, rho, support_vectors
):
    x = _rows(X).astype(np.float64)
    coef = np.asarray(coefficients or [], dtype=np.float32).astype(np.float64)
    bias = float(np.float32((rho or [0.0])[0]))
    if n_supports > 0:
        sv = _support_vectors(support_vectors, x.shape[1])
        scores = _svm_kernel(kernel_type, kernel_params, x, sv) @ coef[: sv.shape[0]] + bias
    else:
        # Without support vectors the coefficients are the weights of a linear model.
        scores = x @ coef[: x.shape[1]] + bias
    if one_class:
        scores = np.where(scores > 0, 1.0, -1.0)
    return _post_transform(scores[:, None], post_transform).astype(np.float32)


def _sigmoid_probability(score, a, b):
    """Platt scaling: 1 / (1 + exp(a * score + b))."""
    return elementwise.sigmoid(-(a * score + b))


def _pairwise_coupling(r: np.ndarray, classes: int) -> np.ndarray:
    """Class probabilities [N, K] from pairwise ones [N, K, K] (``r[:, i, j]`` = P(i | i or j)).

    Wu, Lin and Weng's second method, the fixed-point iteration of libsvm: minimise p'Qp with
    Q[t, t] = sum_{j != t} r[j, t]^2 and Q[t, j] = -r[j, t] r[t, j], one class at a time, vectorized over rows
    (rows that have converged stop changing).
    """
    off = ~np.eye(classes, dtype=bool)
    rt = r.transpose(0, 2, 1)
    q = np.where(off, -rt * r, 0.0)
    q[:, np.arange(classes), np.arange(classes)] = (rt * rt * off).sum(axis=2)
    p = np.full(r.shape[:2], 1.0 / classes)
    eps = 0.005 / classes
    for _ in range(max(100, classes)):
        qp = np.einsum("nij,nj->ni", q, p)
        pqp = (p * qp).sum(axis=1)
        active = np.abs(qp - pqp[:, None]).max(axis=1) >= eps
        if not active.any():
            break
        for t in range(classes):
            diff = np.where(active, (pqp - qp[:, t]) / q[:, t, t], 0.0)
            p[:, t] += diff
            pqp = (pqp + diff * (diff * q[:, t, t] + 2 * qp[:, t])) / (1 + diff) ** 2
            qp = (qp + diff[:, None] * q[:, t, :]) / (1 + diff[:, None])
            p /= 1 + diff[:, None]
    return p


@ml_op("SVMClassifier", since=1)
def svm_classifier_1(
    ctx,
    X,
    *,
    classlabels_ints,
    classlabels_strings,
    coefficients,
    kernel_params,
    kernel_type,
    post_transform,
    prob_a,
    prob_b,
    rho,
    support_vectors,
    vectors_per_class,
):
    labels = _labels(classlabels_ints, classlabels_strings)
    x = _rows(X).astype(np.float64)
    classes = labels.size
    coef = np.asarray(coefficients or [], dtype=np.float32).astype(np.float64)
    rho = np.asarray(rho or [], dtype=np.float32).astype(np.float64)
    if not vectors_per_class:
        # A linear SVM: one weight row (and rho) per class, one-vs-rest.
        scores = x @ coef.reshape(classes, x.shape[1]).T + rho
        return labels[scores.argmax(axis=1)], _post_transform(scores, post_transform).astype(np.float32)
    sv = _support_vectors(support_vectors, x.shape[1])
    counts = np.asarray(vectors_per_class, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    k = _svm_kernel(kernel_type, kernel_params, x, sv)  # [N, S]
    coef = coef.reshape(classes - 1, sv.shape[0])
    # One-vs-one: the decision of pair (i, j), i < j, uses the dual coefficients of both classes' vectors.
    pairs = [(i, j) for i in range(classes) for j in range(i + 1, classes)]
    decisions = np.empty((x.shape[0], len(pairs)))
    for p, (i, j) in enumerate(pairs):
        si = slice(starts[i], starts[i] + counts[i])
        sj = slice(starts[j], starts[j] + counts[j])
        decisions[:, p] = k[:, si] @ coef[j - 1, si] + k[:, sj] @ coef[i, sj] + rho[p]
    first = np.asarray([i for i, _ in pairs])
    second = np.asarray([j for _, j in pairs])
    votes = np.zeros((x.shape[0], classes))
    winner = np.where(decisions > 0, first, second)
    np.add.at(votes, (np.arange(x.shape[0])[:, None], winner), 1)
    if prob_a:
        r = np.zeros((x.shape[0], classes, classes))
        pa = np.asarray(prob_a, dtype=np.float32).astype(np.float64)
        pb = np.asarray(prob_b, dtype=np.float32).astype(np.float64)
        pr = np.clip(_sigmoid_probability(decisions, pa, pb), 1e-7, 1 - 1e-7)
        r[:, first, second] = pr
        r[:, second, first] = 1 - pr
        scores = _pairwise_coupling(r, classes)
        # The label still comes from the votes (as in onnxruntime), not from the probabilities.
        return labels[votes.argmax(axis=1)], _post_transform(scores, post_transform).astype(np.float32)
    if classes == 2:
        # A binary SVM reports its decision value: negative means the first class won the vote.
        label = labels[(decisions[:, 0] <= 0).astype(np.int64)]
        return label, _binary_scores(-decisions, post_transform, negate_raw=True).astype(np.float32)
    return labels[votes.argmax(axis=1)], _post_transform(decisions, post_transform).astype(np.float32)


# -- tree ensembles -------------------------------------------------------------------------------------------------

_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER")
_COMPARE = (np.less_equal, np.less, np.greater_equal, np.greater, np.equal, np.not_equal)
_MEMBER = _MODES.index("BRANCH_MEMBER")
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # TreeEnsemble-5's integer codes, in order


def _traverse(
    x,
    roots,
    start_done,
    features,
    splits,
    modes,
    nan_true,
    true_next,
    true_leaf,
    false_next,
    false_leaf,
    member_sets=None,
    member_index=None,
) -> np.ndarray:
    """The leaf each row reaches in each tree: an int array [N, trees] of the leaf indices the branches name.

    Every (row, tree) pair walks one level per iteration, so the loop runs as many times as the deepest path.
    """
    n = x.shape[0]
    at = np.repeat(np.asarray(roots, dtype=np.int64)[None, :], n, axis=0)
    done = np.repeat(np.asarray(start_done, dtype=bool)[None, :], n, axis=0)
    for _ in range(len(features) + 1):  # a path visits each node at most once
        rows, trees = np.nonzero(~done)
        if rows.size == 0:
            return at
        node = at[rows, trees]
        value = x[rows, features[node]]
        mode = modes[node]
        go_true = np.zeros(node.size, dtype=bool)
        for code, compare in enumerate(_COMPARE):
            sel = mode == code
            go_true[sel] = compare(value[sel], splits[node[sel]])
        sel = mode == _MEMBER
        if sel.any():
            members = member_sets[member_index[node[sel]]]  # [k, largest set], NaN-padded
            go_true[sel] = (members == value[sel, None]).any(axis=1)
        go_true = np.where(np.isnan(value), nan_true[node], go_true)
        at[rows, trees] = np.where(go_true, true_next[node], false_next[node])
        done[rows, trees] = np.where(go_true, true_leaf[node], false_leaf[node])
    raise ExecutionError("the trees contain a cycle")


def _aggregate(shape, rows, targets, weights, how: str, trees: int) -> np.ndarray:
    """Scores [N, targets] from the leaf weights each row reached; targets no leaf reached score 0."""
    if how not in _AGGREGATES:
        raise ExecutionError(f"aggregate_function must be one of {', '.join(_AGGREGATES)}, got {how!r}")
    if how in ("SUM", "AVERAGE"):
        out = np.zeros(shape)
        np.add.at(out, (rows, targets), weights)
        return out / trees if how == "AVERAGE" and trees else out
    ufunc, start = (np.minimum, np.inf) if how == "MIN" else (np.maximum, -np.inf)
    out = np.full(shape, start)
    ufunc.at(out, (rows, targets), weights)
    count = np.zeros(shape, dtype=np.int64)
    np.add.at(count, (rows, targets), 1)
    return np.where(count > 0, out, 0.0)


def _member_sets(modes: np.ndarray, membership_values) -> tuple[np.ndarray, np.ndarray]:
    """The BRANCH_MEMBER sets as a NaN-padded matrix, and each node's row in it (NaN delimits the sets)."""
    is_member = modes == _MEMBER
    member_index = np.cumsum(is_member) - 1
    if not is_member.any():
        return np.full((1, 1), np.nan), np.zeros(modes.size, dtype=np.int64)
    if membership_values is None:
        raise ExecutionError("BRANCH_MEMBER nodes need membership_values")
    values = np.asarray(membership_values, dtype=np.float64).reshape(-1)
    delimiters = np.flatnonzero(np.isnan(values))
    bounds = np.concatenate([[-1], delimiters, [values.size]])
    # One set per BRANCH_MEMBER node, in node order; a NaN after the last set leaves nothing after it.
    sets = [values[a + 1 : b] for a, b in zip(bounds[:-1], bounds[1:])][: int(is_member.sum())]
    if len(sets) < is_member.sum():
        raise ExecutionError(f"{is_member.sum()} BRANCH_MEMBER nodes but {len(sets)} sets in membership_values")
    width = max(1, max(s.size for s in sets))
    matrix = np.full((len(sets), width), np.nan)
    for i, s in enumerate(sets):  # one row per set (an attribute, not per element)
        matrix[i, : s.size] = s
    return matrix, member_index


@ml_op("TreeEnsemble", since=5)
def tree_ensemble_5(
    ctx,
    X,
    *,
    aggregate_function,
    leaf_targetids,
    leaf_weights,
    membership_values,
    n_targets,
    nodes_falseleafs,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_hitrates,
    nodes_missing_value_tracks_true,
    nodes_modes,
    nodes_splits,
    nodes_trueleafs,
    nodes_truenodeids,
    post_transform,
    tree_roots,
):
    x = _rows(X)
    modes = np.asarray(nodes_modes, dtype=np.int64).reshape(-1)
    nodes = modes.size
    if modes.size and (modes.min() < 0 or modes.max() >= len(_MODES)):
        raise ExecutionError(f"nodes_modes must be in [0, {len(_MODES)})")
    nan_true = np.asarray(nodes_missing_value_tracks_true or [0] * nodes, dtype=bool)
    member_sets, member_index = _member_sets(modes, membership_values)
    leaf = _traverse(
        x.astype(np.float64),
        tree_roots,
        np.zeros(len(tree_roots), bool),
        np.asarray(nodes_featureids, np.int64),
        np.asarray(nodes_splits, dtype=np.float64).reshape(-1),
        modes,
        nan_true,
        np.asarray(nodes_truenodeids, np.int64),
        np.asarray(nodes_trueleafs, bool),
        np.asarray(nodes_falsenodeids, np.int64),
        np.asarray(nodes_falseleafs, bool),
        member_sets,
        member_index,
    )
    targets = np.asarray(leaf_targetids, dtype=np.int64)
    n_targets = n_targets if n_targets is not None else int(targets.max()) + 1 if targets.size else 1
    rows = np.repeat(np.arange(x.shape[0]), leaf.shape[1])
    weights = np.asarray(leaf_weights, dtype=np.float64).reshape(-1)
    scores = _aggregate(
        (x.shape[0], n_targets),
        rows,
        targets[leaf.reshape(-1)],
        weights[leaf.reshape(-1)],
        _AGGREGATES[aggregate_function],
        len(tree_roots),
    )
    out_dtype = x.dtype if x.dtype.kind == "f" else np.float32
    return _post_transform(scores, _POST_TRANSFORM_CODES[post_transform]).astype(out_dtype)


def _legacy_tree_scores(
    X,
    nodes_treeids,
    nodes_nodeids,
    nodes_featureids,
    nodes_modes,
    nodes_values,
    nodes_truenodeids,
    nodes_falsenodeids,
    nodes_missing_value_tracks_true,
    entry_treeids,
    entry_nodeids,
    entry_ids,
    entry_weights,
    outputs: int,
    aggregate: str,
):
    """Scores [N, outputs] of a TreeEnsembleRegressor/Classifier (nodes named by (tree id, node id), mode LEAF for
    leaves, and leaf entries (tree id, node id, output, weight), several per leaf allowed)."""
    x = _rows(X).astype(np.float64)
    tree_ids = np.asarray(nodes_treeids, dtype=np.int64)
    node_ids = np.asarray(nodes_nodeids, dtype=np.int64)
    mode_names = list(nodes_modes)
    is_leaf = np.asarray([m == "LEAF" for m in mode_names], dtype=bool)
    unknown = set(mode_names) - set(_MODES[:_MEMBER]) - {"LEAF"}
    if unknown:
        raise ExecutionError(f"unknown nodes_modes {', '.join(sorted(unknown))}")
    modes = np.asarray([_MODES.index(m) if m != "LEAF" else 0 for m in mode_names], dtype=np.int64)

    # Positions of (tree id, node id) pairs, through one sorted integer key.
    span = int(node_ids.max()) + 1 if node_ids.size else 1
    key = tree_ids * span + node_ids
    order = np.argsort(key, kind="stable")

    def position(trees, ids):
        k = np.asarray(trees, dtype=np.int64) * span + np.asarray(ids, dtype=np.int64)
        pos = order[np.minimum(np.searchsorted(key[order], k), key.size - 1)]
        if k.size and (key[pos] != k).any():
            raise ExecutionError("a node or leaf entry refers to a (tree, node) that does not exist")
        return pos

    internal = ~is_leaf
    true_next = np.zeros(key.size, dtype=np.int64)
    false_next = np.zeros(key.size, dtype=np.int64)
    true_next[internal] = position(tree_ids[internal], np.asarray(nodes_truenodeids, np.int64)[internal])
    false_next[internal] = position(tree_ids[internal], np.asarray(nodes_falsenodeids, np.int64)[internal])
    # Each tree starts at the node of that tree that no branch leads to.
    child = np.zeros(key.size, dtype=bool)
    child[true_next[internal]] = True
    child[false_next[internal]] = True
    roots = np.flatnonzero(~child)
    roots = roots[np.argsort(tree_ids[roots], kind="stable")]
    if np.unique(tree_ids[roots]).size != roots.size:
        raise ExecutionError("each tree must have exactly one root")

    nan_true = np.asarray(nodes_missing_value_tracks_true or [0] * key.size, dtype=bool)
    splits = np.zeros(key.size) if nodes_values is None else nodes_values
    reached = _traverse(
        x,
        roots,
        is_leaf[roots],
        np.asarray(nodes_featureids, np.int64),
        splits,
        modes,
        nan_true,
        true_next,
        is_leaf[true_next],
        false_next,
        is_leaf[false_next],
    )
    # Which leaf nodes each row reached, then every leaf entry of those nodes contributes.
    hit_node = np.zeros((x.shape[0], key.size), dtype=bool)
    hit_node[np.arange(x.shape[0])[:, None], reached] = True
    entry_pos = position(entry_treeids, entry_nodeids)
    rows, entries = np.nonzero(hit_node[:, entry_pos])
    ids = np.asarray(entry_ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= outputs):
        raise ExecutionError(f"leaf entries name outputs outside [0, {outputs})")
    return _aggregate(
        (x.shape[0], outputs), rows, ids[entries], np.asarray(entry_weights)[entries], aggregate, roots.size
    )


def _add_base(scores: np.ndarray, base_values) -> np.ndarray:
    if base_values is None or base_values.size == 0:
        return scores
    if base_values.size != scores.shape[1]:
        raise ExecutionError(f"{base_values.size} base_values for {scores.shape[1]} outputs")
    return scores + base_values


def _tree_ensemble_regressor(
    X,
    aggregate_function,
    base_values,
    n_targets,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_missing_value_tracks_true,
    nodes_modes,
    nodes_nodeids,
    nodes_treeids,
    nodes_truenodeids,
    nodes_values,
    post_transform,
    target_ids,
    target_nodeids,
    target_treeids,
    target_weights,
):
    if n_targets is None:
        n_targets = int(max(target_ids)) + 1 if target_ids else 1
    scores = _legacy_tree_scores(
        X,
        nodes_treeids,
        nodes_nodeids,
        nodes_featureids,
        nodes_modes,
        nodes_values,
        nodes_truenodeids,
        nodes_falsenodeids,
        nodes_missing_value_tracks_true,
        target_treeids,
        target_nodeids,
        target_ids,
        target_weights,
        n_targets,
        aggregate_function,
    )
    return _post_transform(_add_base(scores, base_values), post_transform).astype(np.float32)


@ml_op("TreeEnsembleRegressor", since=1)
def tree_ensemble_regressor_1(
    ctx,
    X,
    *,
    aggregate_function,
    base_values,
    n_targets,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_hitrates,
    nodes_missing_value_tracks_true,
    nodes_modes,
    nodes_nodeids,
    nodes_treeids,
    nodes_truenodeids,
    nodes_values,
    post_transform,
    target_ids,
    target_nodeids,
    target_treeids,
    target_weights,
):
    return _tree_ensemble_regressor(
        X,
        aggregate_function,
        _floats(base_values),
        n_targets,
        nodes_falsenodeids,
        nodes_featureids,
        nodes_missing_value_tracks_true,
        nodes_modes,
        nodes_nodeids,
        nodes_treeids,
        nodes_truenodeids,
        _floats(nodes_values),
        post_transform,
        target_ids,
        target_nodeids,
        target_treeids,
        _floats(target_weights),
    )


# Version 3 adds double-precision *_as_tensor forms of the float attributes; 5 only deprecates the op.
@ml_op("TreeEnsembleRegressor", since=[3, 5])
def tree_ensemble_regressor_3(
    ctx,
    X,
    *,
    aggregate_function,
    base_values,
    base_values_as_tensor,
    n_targets,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_hitrates,
    nodes_hitrates_as_tensor,
    nodes_missing_value_tracks_true,
    nodes_modes,
    nodes_nodeids,
    nodes_treeids,
    nodes_truenodeids,
    nodes_values,
    nodes_values_as_tensor,
    post_transform,
    target_ids,
    target_nodeids,
    target_treeids,
    target_weights,
    target_weights_as_tensor,
):
    return _tree_ensemble_regressor(
        X,
        aggregate_function,
        _floats(base_values, base_values_as_tensor),
        n_targets,
        nodes_falsenodeids,
        nodes_featureids,
        nodes_missing_value_tracks_true,
        nodes_modes,
        nodes_nodeids,
        nodes_treeids,
        nodes_truenodeids,
        _floats(nodes_values, nodes_values_as_tensor),
        post_transform,
        target_ids,
        target_nodeids,
        target_treeids,
        _floats(target_weights, target_weights_as_tensor),
    )


def _tree_ensemble_classifier(
    X,
    base_values,
    class_ids,
    class_nodeids,
    class_treeids,
    class_weights,
    classlabels_int64s,
    classlabels_strings,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_missing_value_tracks_true,
    nodes_modes,
    nodes_nodeids,
    nodes_treeids,
    nodes_truenodeids,
    nodes_values,
    post_transform,
):
    labels = _labels(classlabels_int64s, classlabels_strings)
    scores = _legacy_tree_scores(
        X,
        nodes_treeids,
        nodes_nodeids,
        nodes_featureids,
        nodes_modes,
        nodes_values,
        nodes_truenodeids,
        nodes_falsenodeids,
        nodes_missing_value_tracks_true,
        class_treeids,
        class_nodeids,
        class_ids,
        class_weights,
        labels.size,
        "SUM",
    )
    if labels.size == 2 and set(class_ids or []) == {0} and (base_values is None or base_values.size < 2):
        # A binary ensemble whose leaves all score the first class: that score s decides, s > 0 choosing the
        # second class (onnxruntime's reading; leaves scoring the second class are an ordinary two-class case).
        s = scores[:, :1] + (base_values[0] if base_values is not None and base_values.size else 0.0)
        z = _binary_scores(s, post_transform, negate_raw=True)
        return labels[(s[:, 0] > 0).astype(np.int64)], z.astype(np.float32)
    scores = _add_base(scores, base_values)
    return labels[scores.argmax(axis=1)], _post_transform(scores, post_transform).astype(np.float32)


@ml_op("TreeEnsembleClassifier", since=1)
def tree_ensemble_classifier_1(
    ctx,
    X,
    *,
    base_values,
    class_ids,
    class_nodeids,
    class_treeids,
    class_weights,
    classlabels_int64s,
    classlabels_strings,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_hitrates,
    nodes_missing_value_tracks_true,
    nodes_modes,
    nodes_nodeids,
    nodes_treeids,
    nodes_truenodeids,
    nodes_values,
    post_transform,
):
    return _tree_ensemble_classifier(
        X,
        _floats(base_values),
        class_ids,
        class_nodeids,
        class_treeids,
        _floats(class_weights),
        classlabels_int64s,
        classlabels_strings,
        nodes_falsenodeids,
        nodes_featureids,
        nodes_missing_value_tracks_true,
        nodes_modes,
        nodes_nodeids,
        nodes_treeids,
        nodes_truenodeids,
        _floats(nodes_values),
        post_transform,
    )


# Version 3 adds double-precision *_as_tensor forms of the float attributes; 5 only deprecates the op.
@ml_op("TreeEnsembleClassifier", since=[3, 5])
def tree_ensemble_classifier_3(
    ctx,
    X,
    *,
    base_values,
    base_values_as_tensor,
    class_ids,
    class_nodeids,
    class_treeids,
    class_weights,
    class_weights_as_tensor,
    classlabels_int64s,
    classlabels_strings,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_hitrates,
    nodes_hitrates_as_tensor,
    nodes_missing_value_tracks_true,
    nodes_modes,
    nodes_nodeids,
    nodes_treeids,
    nodes_truenodeids,
    nodes_values,
    nodes_values_as_tensor,
    post_transform,
):
    return _tree_ensemble_classifier(
        X,
        _floats(base_values, base_values_as_tensor),
        class_ids,
        class_nodeids,
        class_treeids,
        _floats(class_weights, class_weights_as_tensor),
        classlabels_int64s,
        classlabels_strings,
        nodes_falsenodeids,
        nodes_featureids,
        nodes_missing_value_tracks_true,
        nodes_modes,
        nodes_nodeids,
        nodes_treeids,
        nodes_truenodeids,
        _floats(nodes_values, nodes_values_as_tensor),
        post_transform,
    )
