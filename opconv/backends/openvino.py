"""The ``openvino`` backend: OpenVINO IR (read from its files) and ONNX models (through OpenVINO's own ONNX
frontend) compiled for the CPU plugin; intermediates become extra Results.

The plugin computes in float32 unless told otherwise: on a CPU with bf16 its default is bf16, which moves a
resnet18's outputs by ~0.02 where float32 gives ~3e-6, so a verification would judge the plugin's precision
choice, not the model.  ``precision="default"`` (``--openvino-precision default``) tests what it does by default.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import ExecutionError, OpconvError
from ..ir import Model
from .base import Backend, import_runtime, split_computed, values_by_name

#: --openvino-precision -> the plugin's INFERENCE_PRECISION_HINT (None: the plugin's own default)
PRECISIONS = {"f32": "f32", "bf16": "bf16", "f16": "f16", "default": None}


def compile_config(precision: str) -> dict:
    """The CPU plugin's compile configuration for ``precision`` (a key of :data:`PRECISIONS`)."""
    if precision not in PRECISIONS:
        raise OpconvError(f"unknown OpenVINO precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    hint = PRECISIONS[precision]
    return {} if hint is None else {"INFERENCE_PRECISION_HINT": hint}


def host_array(ov, port, value) -> np.ndarray:
    """A result as numpy; bf16 results come out of the Python API as float16 arrays of the same bits."""
    value = np.asarray(value)
    if port.get_element_type() == ov.Type.bf16 and value.dtype == np.float16:
        import ml_dtypes

        value = value.view(ml_dtypes.bfloat16)
    return value


class OpenVinoBackend(Backend):
    name = "openvino"
    dialects = ("openvino", "onnx")
    reads_files = True

    def __init__(self, precision: str = "f32"):
        compile_config(precision)  # an unknown precision fails here, before anything runs
        self.precision = precision

    def describe(self) -> str:
        if self.precision == "default":
            return f"openvino CPU default ({self.compute_precision() or 'float32'})"
        return f"openvino CPU {self.precision}"

    def compute_precision(self) -> str | None:
        hint = PRECISIONS[self.precision]
        if hint is None:  # the plugin's own choice on this CPU
            ov = import_runtime("openvino", "openvino", self.name)
            hint = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()  # f32, bf16 ...
        return {"bf16": "bfloat16", "f16": "float16"}.get(hint)

    def run(self, model: Any, feeds: Mapping[str, Any], extra_outputs: Iterable[str] = ()) -> dict[str, Any]:
        ov = import_runtime("openvino", "openvino", self.name)
        loaded = self.load(model)
        requested = values_by_name(loaded, extra_outputs)
        names = [v.name for v in loaded.graph.outputs]
        known, extra = split_computed([v for v in requested if v.name not in names], feeds)
        core = ov.Core()
        try:
            with tempfile.TemporaryDirectory(prefix="opconv-openvino-") as folder:
                ov_model = _read(core, model, loaded, folder)
                declared_count = len(ov_model.outputs)
                added = ov_model.add_outputs([_port(ov_model, loaded, v) for v in extra]) if extra else []
                # two values on one port share one Result: find each value's by position among the model's
                positions = [list(ov_model.outputs).index(port) for port in added]
                compiled = core.compile_model(ov_model, "CPU", compile_config(self.precision))
                results = compiled(_feeds(compiled, loaded, feeds))
        except OpconvError:
            raise
        except Exception as e:  # noqa: BLE001 - OpenVINO raises RuntimeError with multi-line texts
            raise ExecutionError(f"openvino: {_first_line(e)}", where=loaded.path) from None
        ports = list(compiled.outputs)
        declared = ports[:declared_count]
        out = {}
        for i, name in enumerate(names):
            port = next((p for p in declared if name in p.get_names()), declared[i] if i < len(declared) else None)
            if port is None:
                raise ExecutionError(f"openvino: the compiled model has no output {name!r}", where=loaded.path)
            out[name] = host_array(ov, port, results[port])
        for v, position in zip(extra, positions):
            out[v.name] = host_array(ov, ports[position], results[ports[position]])
        out.update((name, data) for name, data in known.items() if name not in out)
        return {name: out[name] for name in dict.fromkeys(names + [v.name for v in requested])}


def _read(core, source: Any, loaded: Model, folder: str):
    """The OpenVINO model of ``source``: its own files when it is a path (what a deployment reads), else what
    opconv writes for it."""
    if isinstance(source, (str, os.PathLike)):
        return core.read_model(os.fspath(source))
    if loaded.dialect == "onnx":
        from ..dialects.onnx.io import to_proto

        return core.read_model(to_proto(loaded).SerializeToString(), b"")
    import opconv

    path = os.path.join(folder, "model.xml")
    opconv.save(loaded, path)
    return core.read_model(path)


def _port(ov_model, loaded: Model, value):
    """The OpenVINO output of ``value``: the tensor of that name, else output k of the op named after the node
    producing it (an IR layer keeps its name; its output ports are in the node's order)."""
    try:
        return ov_model.output(value.name)
    except RuntimeError:
        pass
    node = value.producer
    ops = {op.get_friendly_name(): op for op in ov_model.get_ops()}
    if node is None or node.name not in ops:
        raise OpconvError(f"OpenVINO's model has no tensor or layer for value {value.name!r}", where=loaded.path)
    return ops[node.name].output(next(i for i, v in enumerate(node.outputs) if v is value))


def _feeds(compiled, loaded: Model, feeds: Mapping[str, Any]) -> dict:
    """``feeds`` keyed by the compiled model's input ports: by tensor name, else by position."""
    order = [v.name for v in loaded.graph.inputs if v.const is None]
    out = {}
    for i, port in enumerate(compiled.inputs):
        name = next((n for n in port.get_names() if n in feeds), order[i] if i < len(order) else None)
        if name is None or name not in feeds:
            raise OpconvError(f"no value given for OpenVINO's input {port.get_any_name()!r}", where=loaded.path)
        out[port] = np.asarray(feeds[name])
    return out


def _first_line(e: Exception) -> str:
    """OpenVINO's message in one line: its "Exception from <source file>" lines say nothing to a user; what the
    plugin checked (first) and why it failed (last) do."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    told = [line for line in lines if not line.startswith("Exception from ")] or lines
    if not told:
        return type(e).__name__
    return told[0] if len(told) == 1 else f"{told[0]} ... {told[-1]}"


BACKEND = OpenVinoBackend
