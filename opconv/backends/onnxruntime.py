"""The ``onnxruntime`` backend: ONNX models in onnxruntime's CPU execution provider (one thread, default graph
optimizations); intermediates are added as graph outputs."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .base import Backend, as_array, import_runtime, values_by_name


def session(model: bytes | str):
    """A one-thread CPU InferenceSession of a serialized ModelProto or an .onnx file."""
    ort = import_runtime("onnxruntime", "onnxruntime", "onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    dialects = ("onnx",)
    reads_files = True

    def run(self, model: Any, feeds: Mapping[str, Any], extra_outputs: Iterable[str] = ()) -> dict[str, Any]:
        from ..dialects.onnx.io import to_proto
        from ..errors import ExecutionError

        import_runtime("onnxruntime", "onnxruntime", self.name)
        source, model = model, self.load(model)
        extra = [v.name for v in values_by_name(model, extra_outputs)]
        declared = [v.name for v in model.graph.outputs]
        names = declared + [n for n in extra if n not in declared]
        if extra or not isinstance(source, (str, os.PathLike)):
            proto = to_proto(model)
            for name in names[len(declared) :]:
                proto.graph.output.add().name = name  # untyped: onnxruntime infers it
            source = proto.SerializeToString()
        try:
            results = session(source if isinstance(source, bytes) else os.fspath(source)).run(names, dict(feeds))
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own untyped errors
            raise ExecutionError(f"onnxruntime: {str(e).strip().splitlines()[0]}", where=model.path) from None
        return {name: as_array(value) for name, value in zip(names, results)}


BACKEND = OnnxRuntimeBackend
