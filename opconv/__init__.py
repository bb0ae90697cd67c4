"""opconv: convert neural-network models between ONNX, OpenVINO IR (opset1) and HLO,
and prove each conversion numerically.

The Python API (stable)::

    import opconv
    model = opconv.load("model.onnx")            # a path, bytes, ModelProto, or torch's ONNXProgram
    problems = opconv.check(model)               # [] when valid
    ir = opconv.convert(model, to="openvino", input_shapes={"x": (1, 3, 224, 224)})  # | "hlo" | "onnx"
    opconv.save(ir, "model.xml")
    compiled = openvino.Core().compile_model(opconv.to_openvino(ir), "CPU",
                                             {"INFERENCE_PRECISION_HINT": "f32"})  # no file; f32 even on bf16 CPUs
    outputs = opconv.run(model, {"x": array})     # reference executor; any array-like input
    session = opconv.prepare(model)               # ...or bind once, run many times
    report = opconv.verify(model, ir)             # an opconv.VerifyReport: report.ok, report.outputs
    proto21 = opconv.convert_version(proto, 21)   # a ModelProto in gives a ModelProto out
    standard = opconv.decompose(model)           # onnxruntime's contrib ops -> ai.onnx ops
    proto = opconv.to_onnx(model)                 # for onnx.checker / onnxruntime

Every error a caller can cause is an :class:`opconv.OpconvError`; a refused conversion is a
:class:`opconv.ConversionError` whose ``refused`` lists each node (node, op, domain, reason).
"""

from __future__ import annotations

from typing import Any

from .api import (
    DIALECTS,
    check,
    convert,
    convert_version,
    decompose,
    load,
    prepare,
    run,
    save,
    to_onnx,
    to_openvino,
    verify,
)
from .errors import (
    ConversionError,
    ExecutionError,
    ModelReadError,
    ModelWriteError,
    NotImplementedFeature,
    OpconvError,
    RefusedNode,
    SchemaError,
    ValidationError,
)
from .ir import Attr, Function, Graph, Model, Node, Tensor, Value

__version__ = "0.1.0"

__all__ = [
    "load",
    "save",
    "check",
    "prepare",
    "run",
    "convert",
    "convert_version",
    "decompose",
    "verify",
    "to_onnx",
    "to_openvino",
    "DIALECTS",
    "VerifyReport",
    "Model",
    "Graph",
    "Node",
    "Value",
    "Tensor",
    "Attr",
    "Function",
    "OpconvError",
    "ModelReadError",
    "ModelWriteError",
    "SchemaError",
    "ValidationError",
    "ExecutionError",
    "ConversionError",
    "RefusedNode",
    "NotImplementedFeature",
]


def __getattr__(name: str) -> Any:
    # VerifyReport lives with verification, loaded on first use: a conversion never needs it.
    if name == "VerifyReport":
        from .verification import VerifyReport

        return VerifyReport
    raise AttributeError(f"module 'opconv' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__ + ["__version__"])
