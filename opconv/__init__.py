"""opconv: convert neural-network models between ONNX, OpenVINO IR (opset1) and HLO,
and prove each conversion numerically.

The Python API (stable)::

    import opconv
    model = opconv.load("model.onnx")            # or a ModelProto
    problems = opconv.check(model)               # [] when valid
    ir = opconv.convert(model, to="openvino")     # "openvino" | "hlo" | "onnx"
    opconv.save(ir, "model.xml")
    outputs = opconv.run(model, {"x": array})     # reference executor
    report = opconv.verify(model, ir)             # report.ok, report.outputs
    model21 = opconv.convert_version(model, 21)

Every error a caller can cause is an :class:`opconv.OpconvError`.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import (
    ConversionError, ExecutionError, ModelReadError, ModelWriteError, NotImplementedFeature, OpconvError,
    SchemaError, ValidationError,
)
from .ir import Attr, Function, Graph, Model, Node, Tensor, Value

__version__ = "0.1.0"

__all__ = [
    "load", "save", "check", "run", "convert", "convert_version", "verify",
    "Model", "Graph", "Node", "Value", "Tensor", "Attr", "Function",
    "OpconvError", "ModelReadError", "ModelWriteError", "SchemaError", "ValidationError",
    "ExecutionError", "ConversionError", "NotImplementedFeature",
]


def load(source: Any, dialect: str | None = None, **options) -> Model:
    """Load a model from a path (dialect from suffix or content) or an ``onnx.ModelProto``."""
    from . import dialects

    if isinstance(source, Model):
        return source
    if not isinstance(source, (str, os.PathLike)):
        import onnx

        if isinstance(source, onnx.ModelProto):
            return dialects.get("onnx").load(source, **options)
        raise OpconvError(f"cannot load a {type(source).__name__}; pass a path or an onnx.ModelProto")
    return dialects.load_model(source, dialect, **options)


def save(model: Model, path: str | os.PathLike, **options) -> None:
    """Save ``model`` in its dialect's file format (atomically: nothing is left on failure)."""
    from . import dialects

    dialects.save_model(model, path, **options)


def check(model: Any) -> list:
    """Validate against the dialect's schemas; returns the list of problems (empty when valid)."""
    from .check import check_model

    return check_model(load(model))


def run(model: Any, inputs: dict, **options) -> dict:
    """Run ``model`` with opconv's reference executor; returns {output name: numpy array}."""
    raise NotImplementedFeature("opconv.run (the reference executors)")


def convert(model: Any, to: str, **options) -> Model:
    """Convert to another dialect: ``to`` is 'onnx', 'openvino' or 'hlo'."""
    from . import converters

    return converters.convert(load(model), to, **options)


def convert_version(model: Any, opset: int, **options) -> Model:
    """Move an ONNX model to another ai.onnx opset, up or down."""
    raise NotImplementedFeature("opconv.convert_version (the ONNX version converter)")


def verify(a: Any, b: Any, inputs: dict | None = None, rtol: float | None = None,
           atol: float | None = None, **options):
    """Run both models on the same inputs and compare every output; returns a report with ``.ok``."""
    raise NotImplementedFeature("opconv.verify (needs the reference executors)")
