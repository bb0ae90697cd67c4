"""String ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch, TfIdfVectorizer.

ONNX string tensors are numpy ``object`` arrays of Python ``str``; every
kernel returns that form.  Case mapping uses Python's Unicode default case
rules, which do not depend on the platform's installed locales; the only
locale-specific rule applied on top is the Turkic dotted/dotless i.
"""

from __future__ import annotations

import re

import numpy as np

from ....errors import ExecutionError
from ..executor import onnx_op


def _as_str(x) -> np.ndarray:
    """A string tensor as a fixed-width unicode array (what np.char works on)."""
    x = np.asarray(x)
    if x.dtype.kind == "U":
        return x
    if x.dtype == object and x.size and isinstance(x.flat[0], bytes):
        x = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(x)
    return x.astype(str) if x.size else np.zeros(x.shape, dtype="U1")


def _as_object(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(object)


# -- StringNormalizer ---------------------------------------------------------

# Locales whose case mapping of i differs from Unicode's default (Turkish and Azerbaijani: i <-> İ, ı <-> I).
_TURKIC = ("tr", "az")


def _change_case(x: np.ndarray, action: str, locale: str | None) -> np.ndarray:
    turkic = bool(locale) and locale is not None and locale.replace("-", "_").split("_")[0].lower() in _TURKIC
    if action == "LOWER":
        return np.char.lower(np.char.replace(x, "I", "ı") if turkic else x)
    if action == "UPPER":
        return np.char.upper(np.char.replace(x, "i", "İ") if turkic else x)
    if action == "NONE":
        return x
    raise ExecutionError(f"case_change_action must be LOWER, UPPER or NONE, got {action!r}")


@onnx_op("StringNormalizer", since=10)
def string_normalizer_10(ctx, X, *, case_change_action, is_case_sensitive, locale, stopwords):
    x = _as_str(X)
    if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
        raise ExecutionError(f"StringNormalizer takes a [C] or [1, C] tensor, got shape {list(x.shape)}")
    flat = x.reshape(-1)
    if stopwords:
        words = np.asarray(list(stopwords), dtype=str)
        if is_case_sensitive:
            keep = ~np.isin(flat, words)
        else:
            keep = ~np.isin(np.char.lower(flat), np.char.lower(words))
        flat = flat[keep]
    if flat.size == 0:
        # Everything was dropped: ONNX returns one empty string rather than an empty tensor.
        flat = np.array([""])
    out = _change_case(flat, case_change_action, locale)
    return _as_object(out if x.ndim == 1 else out.reshape(1, -1))


# -- StringConcat ---------------------------------------------------------------


@onnx_op("StringConcat", since=20)
def string_concat_20(ctx, X, Y):
    return _as_object(np.char.add(_as_str(X), _as_str(Y)))


# -- StringSplit ----------------------------------------------------------------


@onnx_op("StringSplit", since=20)
def string_split_20(ctx, X, *, delimiter, maxsplit):
    """Split each string; the result gains a last axis padded with "" to the longest split.

    An unset or empty delimiter means runs of whitespace, ignoring leading and trailing whitespace,
    which is exactly ``str.split(None)``.
    """
    x = _as_str(X)
    parts = np.char.split(x, sep=delimiter or None, maxsplit=-1 if maxsplit is None else maxsplit)
    counts = np.array([len(p) for p in parts.reshape(-1)], dtype=np.int64).reshape(x.shape)
    width = int(counts.max()) if counts.size else 0
    out = np.full((parts.size, width), "", dtype=object)
    for row, pieces in zip(out, parts.reshape(-1)):
        row[: len(pieces)] = pieces
    return out.reshape(*x.shape, width), counts


# -- RegexFullMatch -----------------------------------------------------------------

# RE2 constructs Python's re has no equivalent for (RE2 rejects backreferences and lookarounds itself).
_RE2_ESCAPES = {"z": r"\Z"}
_UNSUPPORTED = re.compile(r"\\(?:[pP]|C|Q|E)|\(\?<?[=!]")


def _re2_to_python(pattern: str) -> str:
    """Translate the RE2 syntax that differs from Python's; refuse what cannot be translated."""
    if _UNSUPPORTED.search(re.sub(r"\\\\", "", pattern)):
        raise ExecutionError(
            f"pattern {pattern!r} uses RE2 syntax opconv does not support "
            r"(\p{..} classes, \C, \Q..\E) or lookarounds RE2 rejects"
        )
    return re.sub(r"\\(.)", lambda m: _RE2_ESCAPES.get(m.group(1), m.group(0)), pattern)


@onnx_op("RegexFullMatch", since=20)
def regex_full_match_20(ctx, X, *, pattern):
    try:
        regex = re.compile(_re2_to_python(pattern or ""))
    except re.error as e:
        raise ExecutionError(f"invalid pattern {pattern!r}: {e}") from None
    x = _as_str(X)
    if x.size == 0:
        return np.zeros(x.shape, dtype=bool)
    return np.vectorize(lambda s: regex.fullmatch(s) is not None, otypes=[bool])(x)


# -- TfIdfVectorizer ------------------------------------------------------------------


def _token_ids(x: np.ndarray, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Input tokens and pool entries as integers of one shared vocabulary (strings compare as ids)."""
    _, ids = np.unique(np.concatenate([pool.reshape(-1), x.reshape(-1)]), return_inverse=True)
    return ids[pool.size :].reshape(x.shape), ids[: pool.size]


def _ngram_counts(tokens: np.ndarray, pool_ngrams: np.ndarray, n: int, max_skip: int) -> np.ndarray:
    """How often each pool n-gram ([P, n]) occurs in each row of ``tokens`` ([B, C]), over every skip."""
    batch, length = tokens.shape
    counts = np.zeros((batch, len(pool_ngrams)), dtype=np.int64)
    # A 1-gram is the same whatever the skip: count it once.
    for skip in range(max_skip + 1 if n > 1 else 1):
        span = (n - 1) * (skip + 1) + 1
        if span > length:
            break
        starts = np.arange(length - span + 1)
        positions = starts[:, None] + (skip + 1) * np.arange(n)  # [S, n]
        grams = tokens[:, positions]  # [B, S, n]
        hits = (grams[:, :, None, :] == pool_ngrams[None, None, :, :]).all(axis=-1)  # [B, S, P]
        counts += hits.sum(axis=1)
    return counts


@onnx_op("TfIdfVectorizer", since=9)
def tfidf_vectorizer_9(
    ctx,
    X,
    *,
    max_gram_length,
    max_skip_count,
    min_gram_length,
    mode,
    ngram_counts,
    ngram_indexes,
    pool_int64s,
    pool_strings,
    weights,
):
    if (pool_int64s is None) == (pool_strings is None):
        raise ExecutionError("exactly one of pool_int64s and pool_strings must be set")
    if mode not in ("TF", "IDF", "TFIDF"):
        raise ExecutionError(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    x = np.asarray(X)
    if x.ndim not in (1, 2):
        raise ExecutionError(f"TfIdfVectorizer takes a [C] or [N, C] tensor, got shape {list(x.shape)}")
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    if pool_strings is not None:
        tokens, pool = _token_ids(_as_str(rows), np.asarray(list(pool_strings), dtype=str))
    else:
        tokens, pool = rows.astype(np.int64), np.asarray(pool_int64s, dtype=np.int64)
    indexes = np.asarray(ngram_indexes, dtype=np.int64)
    # ngram_counts[k] is where the (k+1)-grams start in the pool; the pool is the CSR-like concatenation.
    starts = list(ngram_counts) + [len(pool)]
    counts = np.zeros((rows.shape[0], len(indexes)), dtype=np.int64)
    first = 0  # the pool's k-th n-gram overall is entry k of ngram_indexes; 1-grams come first
    for n in range(1, min(max_gram_length, len(ngram_counts)) + 1):
        gram_rows = pool[starts[n - 1] : starts[n]].reshape(-1, n)
        if n >= min_gram_length and len(gram_rows):
            counts[:, first : first + len(gram_rows)] = _ngram_counts(tokens, gram_rows, n, max_skip_count)
        first += len(gram_rows)
    values = counts.astype(np.float32)
    w = np.ones(len(indexes), np.float32) if weights is None else np.asarray(weights, np.float32)
    if mode == "IDF":
        values = np.minimum(values, 1) * w
    elif mode == "TFIDF":
        values = values * w
    out = np.zeros((rows.shape[0], int(indexes.max()) + 1 if indexes.size else 0), dtype=np.float32)
    out[:, indexes] = values
    return out[0] if x.ndim == 1 else out
