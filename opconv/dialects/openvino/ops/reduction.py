"""Reduce* over an axes input, with keep_dims (an empty axes list reduces nothing)."""

from __future__ import annotations

import numpy as np

from ....kernels import reduce as kr
from ..executor import ov_op
from ._common import axes_of

_KINDS = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}
_LOGICAL = {"ReduceLogicalAnd": np.all, "ReduceLogicalOr": np.any}


def _numeric(kind):
    def kernel(ctx, x, axes, *, keep_dims=False):
        return kr.reduce(x, kind, axes_of(axes, x.ndim), keepdims=keep_dims, noop_with_empty_axes=True)

    return kernel


def _logical(function):
    def kernel(ctx, x, axes, *, keep_dims=False):
        return np.asarray(function(np.asarray(x, dtype=bool), axis=tuple(axes_of(axes, x.ndim)), keepdims=keep_dims))

    return kernel


for _name, _kind in _KINDS.items():
    ov_op(_name)(_numeric(_kind))
for _name, _function in _LOGICAL.items():
    ov_op(_name)(_logical(_function))
