"""Runs a batch of models in an older OpenVINO (2023.0), inside that OpenVINO's own environment.

Executed as ``python ov2023_runner.py JOBS.json RESULTS.jsonl`` by ``tests/openvino_2023.py`` with the
interpreter of the venv that holds OpenVINO 2023.0 and numpy 1.x: it must import nothing but the standard
library, numpy and openvino (not opconv, not the tests).  One process runs the whole list so the start-up
cost (~0.3 s) is paid once.

``JOBS.json`` is a list of ``{"name", "model", "inputs", "outputs"}``: ``model`` an IR ``.xml`` or an
``.onnx`` file (read by 2023.0's own ONNX frontend), ``inputs`` an ``.npz`` of feeds by input name,
``outputs`` the ``.npz`` to write (``out0``, ``out1`` ... by output position).  A feed whose key ends in
``@bf16`` holds bfloat16 bit patterns as uint16 (numpy 1.x without ml_dtypes has no bfloat16); an output
OpenVINO returns as bf16 is written the same way.  Each job appends one JSON line to ``RESULTS.jsonl`` as
soon as it finishes (flushed), so a crash of the plugin loses only the job that crashed: the caller resumes
after it.
"""

import json
import sys
import traceback

import numpy as np
import openvino.runtime as ov

BF16_SUFFIX = "@bf16"
CONFIG = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1", "NUM_STREAMS": "1"}


def _feed(request, path):
    """Write each feed into the request's own input tensor: it has the model's shape (a 0-d input stays 0-d,
    which a Tensor made from a numpy scalar array is not in 2023.0) and the plugin's precision for it (IR v10
    inputs of f16 are f32 there), to which numpy casts on assignment."""
    with np.load(path) as data:
        for key in data.files:
            value = data[key]
            name = key[: -len(BF16_SUFFIX)] if key.endswith(BF16_SUFFIX) else key
            tensor = request.get_tensor(name)
            if key.endswith(BF16_SUFFIX):
                if tensor.element_type == ov.Type.bf16:
                    bits = np.ascontiguousarray(value)
                    request.set_tensor(name, ov.Tensor(bits, list(bits.shape), ov.Type.bf16))
                    continue
                value = (value.astype(np.uint32) << 16).view(np.float32)  # bf16 widens to f32 exactly
            if value.size:
                tensor.data[...] = value.reshape(tuple(tensor.shape))


def _output(tensor):
    if tensor.element_type == ov.Type.bf16:
        bits = np.frombuffer(bytes(memoryview(tensor.data).cast("B")), dtype=np.uint16)
        return BF16_SUFFIX, bits.reshape(tuple(tensor.shape))
    return "", np.array(tensor.data, copy=True).reshape(tuple(tensor.shape))


def run_job(core, job):
    model = core.read_model(job["model"])
    compiled = core.compile_model(model, "CPU", CONFIG)
    request = compiled.create_infer_request()
    _feed(request, job["inputs"])
    request.infer()
    arrays = {}
    for i in range(len(compiled.outputs)):
        suffix, array = _output(request.get_output_tensor(i))
        arrays[f"out{i}{suffix}"] = array
    np.savez(job["outputs"], **arrays)


def main(jobs_path, results_path):
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    core = ov.Core()
    with open(results_path, "a", encoding="utf-8") as results:
        results.write(json.dumps({"version": ov.get_version()}) + "\n")
        for job in jobs:
            try:
                run_job(core, job)
                line = {"name": job["name"], "ok": True}
            except Exception as error:  # noqa: BLE001 - every failure is a result to report, not a crash
                message = f"{type(error).__name__}: {error}".strip()
                line = {"name": job["name"], "ok": False, "error": message[:2000] or traceback.format_exc()[-2000:]}
            results.write(json.dumps(line) + "\n")
            results.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
