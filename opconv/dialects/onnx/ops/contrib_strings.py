"""ONNX Runtime's string operators (com.microsoft): Tokenizer.

Tokenizer splits each string of a ``[C]`` or ``[N, C]`` tensor into tokens along a new last axis,
padded with ``pad_value`` to the longest count.  Tokens come either from splitting at any of the
``separators`` (regular expressions; one empty separator splits into characters) or as the
successive non-overlapping matches of ``tokenexp`` (``"."``: characters).  Tokens shorter than
``mincharnum`` characters are dropped; ``mark`` frames each row's tokens with U+0002 and U+0003.
The expressions are RE2's; Python's ``re`` reads the common subset alike.
"""

from __future__ import annotations

import re

import numpy as np

from ....errors import ExecutionError
from ..executor import onnx_op

MS = "com.microsoft"
_START, _END = "\x02", "\x03"


def _tokens(text: str, separators, tokenexp) -> list[str]:
    if tokenexp is not None:
        return [m.group(0) for m in re.finditer(tokenexp, text) if m.group(0)]
    if list(separators) == [""]:
        return list(text)
    pattern = "|".join(f"(?:{s})" for s in separators)
    return [t for t in re.split(pattern, text) if t]


@onnx_op("Tokenizer", since=1, domain=MS)
def tokenizer(ctx, x, *, mark, mincharnum, pad_value, separators, tokenexp):
    if (separators is None) == (tokenexp is None):
        raise ExecutionError("Tokenizer needs exactly one of separators and tokenexp")
    strings = np.asarray(x, dtype=object)
    if strings.ndim not in (1, 2):
        raise ExecutionError(f"Tokenizer takes a [C] or [N, C] input, got shape {list(strings.shape)}")
    rows = []
    for text in strings.reshape(-1):
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        found = [t for t in _tokens(text, separators, tokenexp) if len(t) >= mincharnum]
        rows.append([_START] + found + [_END] if mark else found)
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), pad_value, dtype=object)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out.reshape(strings.shape + (width,))
