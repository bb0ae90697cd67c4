"""Independent oracles: onnxruntime, falling back to onnx.reference, on a ModelProto; and a converted IR run in
OpenVINO's CPU plugin beside opconv's IR executor."""

from __future__ import annotations

import warnings

import numpy as np
import onnx


def ort_session(model: onnx.ModelProto):
    from opconv.backends.onnxruntime import session

    return session(model.SerializeToString())


def run_ort(model: onnx.ModelProto, feeds: dict) -> list:
    return ort_session(model).run(None, feeds)


def run_reference(model: onnx.ModelProto, feeds: dict) -> list:
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(model).run(None, feeds)


def run_any(model: onnx.ModelProto, feeds: dict):
    """(runtime name, runner) of the first oracle that runs ``model``; (None, None) when none does."""
    for name, runner in (("onnxruntime", run_ort), ("onnx.reference", run_reference)):
        try:
            runner(model, feeds)
            return name, runner
        except Exception:  # noqa: BLE001 - any failure means "this oracle cannot run it"
            continue
    return None, None


def convert_and_run_ir(tmp_path, model: onnx.ModelProto, feeds: dict):
    """Convert ``model`` to OpenVINO IR with opconv, save it, and run the IR in OpenVINO's CPU plugin (float32
    inference) and in opconv's IR executor.

    Returns ``(converted Model, {runtime: {output name: array}})``.  OpenVINO's results are named after the ONNX
    model's outputs by position (IR v10 keeps no output names of its own); opconv's carry the names it read.
    """
    import openvino as ov

    import opconv
    from opconv.backends.openvino import compile_config

    converted = opconv.convert(opconv.load(model), to="openvino")
    xml = str(tmp_path / "model.xml")
    opconv.save(converted, xml)
    core = ov.Core()
    compiled = core.compile_model(core.read_model(xml), "CPU", compile_config("f32"))
    names = [o.name for o in model.graph.output]
    with np.errstate(all="ignore"):
        mine = opconv.run(opconv.load(xml), feeds)
    return converted, {"OpenVINO CPU": dict(zip(names, compiled(feeds).values())), "opconv IR executor": mine}


def openvino_frontend_outputs(model, feeds: dict) -> list:
    """OpenVINO's own ONNX frontend on the *source* model (a path or ModelProto), compiled for the CPU plugin at
    float32: what the plugin computes for the original, whoever wrote the IR.

    Where opconv's IR gives the plugin's result and both differ from the expected one, the plugin departs from
    ONNX on this CPU (seen here: light squeezenet's last 8 of 1,000 classes are 0 on an AVX-512 machine, with
    OpenVINO's frontend and with opconv's IR alike), not the conversion.
    """
    import openvino as ov

    from opconv.backends.openvino import compile_config, host_array

    core = ov.Core()
    source = model if isinstance(model, str) else model.SerializeToString()
    read = core.read_model(source) if isinstance(source, str) else core.read_model(source, b"")
    compiled = core.compile_model(read, "CPU", compile_config("f32"))
    results = compiled(feeds)
    return [host_array(ov, port, results[port]) for port in compiled.outputs]


def same(a, b) -> bool:
    """Bitwise-equal results (NaN equal to NaN), recursing into sequences and optionals."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == object:
        return bool(np.array_equal(a, b))
    # Compare bits: also right for NaN and for ml_dtypes types (float8, bfloat16, int4).
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
