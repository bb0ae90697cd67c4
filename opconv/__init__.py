"""opconv: convert neural-network models between ONNX, OpenVINO IR (opset1) and HLO,
and prove each conversion numerically.

The Python API (stable)::

    import opconv
    model = opconv.load("model.onnx")            # or a ModelProto
    problems = opconv.check(model)               # [] when valid
    ir = opconv.convert(model, to="openvino")     # "openvino" | "hlo" | "onnx"
    opconv.save(ir, "model.xml")
    outputs = opconv.run(model, {"x": array})     # reference executor
    session = opconv.prepare(model)               # ...or bind once, run many times
    report = opconv.verify(model, ir)             # report.ok, report.outputs
    model21 = opconv.convert_version(model, 21)
    standard = opconv.decompose(model)           # onnxruntime's contrib ops -> ai.onnx ops

Every error a caller can cause is an :class:`opconv.OpconvError`.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any

from .errors import (
    ConversionError, ExecutionError, ModelReadError, ModelWriteError, NotImplementedFeature, OpconvError,
    SchemaError, ValidationError,
)
from .ir import Attr, Function, Graph, Model, Node, Tensor, Value


class _Package(ModuleType):
    """The ``opconv`` package, whose ``verify`` stays the function below.

    Importing the submodule opconv/verify.py sets the package attribute ``verify`` to that module.
    The submodule is loaded on the first verification only (a conversion never needs it), so the
    package keeps its function when that happens.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "verify" and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__version__ = "0.1.0"

__all__ = [
    "load", "save", "check", "prepare", "run", "convert", "convert_version", "decompose", "verify",
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
    from .validation import check_model

    return check_model(load(model))


def prepare(model: Any, *, seed: int = 0):
    """Prepare ``model`` to run many times: returns a session with ``.run(inputs) -> dict``.

    Kernels are bound and constant subgraphs folded once, as a runtime's session
    does; make a new session after changing the model.
    """
    from . import dialects

    if not (hasattr(seed, "__index__") and seed.__index__() >= 0):
        raise OpconvError(f"the seed must be a non-negative integer, got {seed!r}")
    from .validation import require_valid

    model = require_valid(load(model))
    d = dialects.get(model.dialect)
    if d.prepare is None:
        raise NotImplementedFeature(f"the {model.dialect} reference executor")
    return d.prepare(model, seed=seed)


def run(model: Any, inputs: dict, *, seed: int = 0) -> dict:
    """Run ``model`` once with opconv's reference executor; returns {output name: numpy array}.

    ``inputs`` maps graph input names to numpy arrays (lists for sequences);
    random ops draw from generators seeded by ``seed`` (or their own seed attribute).
    """
    return prepare(model, seed=seed).run(inputs)


def convert(model: Any, to: str, *, input_shapes: dict | None = None, dims: dict | None = None,
            **options) -> Model:
    """Convert to another dialect: ``to`` is 'onnx', 'openvino' or 'hlo'.

    From ONNX to 'openvino' or 'hlo', every input shape must be static: ``input_shapes``
    ({name: shape}, e.g. ``{"input_ids": (2, 12)}``) fixes inputs declared with symbolic or
    unknown dims and binds those dims' symbols for every other input (``attention_mask``
    declared ``[batch,seq]`` too); ``dims`` ({symbol: size}, e.g. ``{"batch": 1, "seq": 128}``)
    fixes symbols everywhere.  Shape computations then fold to constants until nothing changes.
    An input left open is a ConversionError naming every such input.  Other ``options`` go to
    the direction's converter (e.g. ``opset`` for 'onnx').
    """
    from . import converters

    if input_shapes is not None:
        options["input_shapes"] = input_shapes
    if dims is not None:
        options["dims"] = dims
    return converters.convert(load(model), to, **options)


def convert_version(model: Any, opset: int, **options) -> Model:
    """Move an ONNX model to another ai.onnx opset, up or down."""
    from .converters.onnx_versions import convert

    return convert(model, opset, **options)


def decompose(model: Any, domains=("com.microsoft",)) -> Model:
    """Rewrite the contrib operators of ``domains`` (and onnxruntime's ai.onnx-domain ones) into standard
    ai.onnx operators at the model's opset; raises ConversionError naming every node it cannot rewrite."""
    from .converters.decompose import decompose as decompose_model

    return decompose_model(load(model, "onnx") if not isinstance(model, Model) else model, domains)


def verify(a: Any, b: Any = None, inputs: dict | None = None, rtol: float | dict | None = None,
           atol: float | dict | None = None, *, seed: int = 0, input_shapes: dict | None = None,
           dims: dict | None = None, backends: str | tuple | None = None, openvino_precision: str = "f32",
           expected: Any = None, save_outputs: str | os.PathLike | None = None, progress=None,
           bisect: bool = False, histograms: bool = False):
    """Run both models on the same inputs and compare every output; returns a report with ``.ok``.

    ``a`` and ``b`` are paths or models of any dialect; inputs and outputs pair by name, or by
    position when the names differ.  Without ``inputs``, seeded random inputs are generated
    (``seed``, default 0, also seeds random ops) with these shapes: ``input_shapes``
    ({name: shape}) fixes inputs and binds the symbols of their declared dims, ``dims``
    ({symbol: size}) fixes symbols, without either an input of A with symbolic dims takes
    B's static shape, and any dim still open is 1 (said in ``report.notes``).

    ``backends`` runs the sides on deployed runtimes: one name or (A's, B's) of ``opconv`` (the
    reference executors, default), ``onnxruntime``, ``openvino`` (CPU at ``openvino_precision``,
    default f32) and ``iree``.  ``rtol``/``atol`` override the per-dtype tolerance table: a number for
    every output, a dict {output: value} per output ("*" for the rest); by default a float16 model is
    compared at float16 tolerance.  ``expected`` (an .npz of ``input:NAME``/``output:NAME`` arrays, or a
    dict) replaces B: ``a`` is then compared with those stored outputs; ``save_outputs`` writes the inputs
    and A's outputs in that layout.  ``progress(side, what, seconds)`` hears when each side starts
    (seconds None) and ends.  Returns an :class:`opconv.verify.VerifyReport` (per output: max, mean,
    median, p99 of absolute and relative errors, mismatch count); raises ExecutionError naming model A
    or B when one cannot run.  ``bisect=True``: when outputs differ, ``report.bisect.divergence`` is the
    first node of A whose output B does not reproduce, run on the same backends (:mod:`opconv.bisect`);
    ``histograms=True`` keeps each output's error histogram for :func:`opconv.html_report.render`.
    """
    from .verify import verify as compare_models

    return compare_models(a, b, inputs, rtol, atol, seed=seed, input_shapes=input_shapes, dims=dims,
                          backends=backends, openvino_precision=openvino_precision, expected=expected,
                          save_outputs=save_outputs, progress=progress, bisect=bisect, histograms=histograms)
