"""The OpenVINO opset1 reference executor: binds IR layers to numpy kernels and runs models.

Kernels live in ``ops/<family>.py`` and register with :data:`ov_op`::

    @ov_op("SoftMax")
    def softmax(ctx, data, *, axis):
        return norm.softmax(data, axis)

Every node of an OpenVINO model is an opset1 operation (domain ``opset1``,
version 1; see ``docs/openvino-dialect.md``).  Parameters are graph inputs and
Consts initializers, so a kernel only ever sees numpy arrays.  The binder
(:class:`opconv.executor.DialectExecutor`) passes every attribute the op's
schema declares as a keyword argument (names made Python-safe: ``exclude-pad``
-> ``exclude_pad``), taking the schema's default, or ``None``, when the node
does not set it: a required attribute missing from a hand-built graph is left
to the kernel, which knows whether it can do without (OpenVINO itself infers
some, e.g. pads under ``auto_pad``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import ExecutionError
from ...executor import DialectExecutor, DialectSession
from ...ir import Graph, Model
from ...plan_fusion import fuse_relu_named, materialize_broadcast_constants
from ...types import element_type

DOMAIN = "opset1"


#: layers that hand their operands to BLAS, which cannot read a broadcast view (a stored uniform fill)
_PRODUCTS = (
    "MatMul",
    "Convolution",
    "GroupConvolution",
    "ConvolutionBackpropData",
    "GroupConvolutionBackpropData",
    "DeformableConvolution",
)


def _fuse(graph: Graph, plan) -> None:
    from .fusion import pack_conv_scale_shift

    materialize_broadcast_constants(graph, plan, _PRODUCTS)
    pack_conv_scale_shift(graph, plan)
    fuse_relu_named(graph, plan, ("Convolution", "GroupConvolution", "Add"), "ReLU")


EXECUTOR = DialectExecutor(
    "openvino",
    "OpenVINO",
    domains=(DOMAIN, ""),
    kernels=f"{__package__}.ops",
    noun="layer",
    strict_attributes=False,
    fuse=_fuse,
)
REGISTRY = EXECUTOR.registry


def ov_op(op: str, *, deterministic: bool = True):
    """Decorator registering an opset1 kernel: ``@ov_op("ReLU")``."""
    return REGISTRY.register(op, 1, DOMAIN, deterministic=deterministic)


class Session(DialectSession):
    """An OpenVINO model prepared to run many times (see :class:`opconv.executor.Session`)."""

    executor = EXECUTOR


def run_model(model: Model, feeds: Mapping[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Run an OpenVINO model once on ``feeds``."""
    return Session(model, seed=seed).run(feeds)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a canonical element-type name (``destination_type``, ``index_element_type``)."""
    et = element_type(str(name))
    if et.numpy is None:
        raise ExecutionError(f"element type {name} has no numpy dtype")
    return np.dtype(et.numpy)
