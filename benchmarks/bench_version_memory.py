"""Peak memory of ``opconv upgrade`` / ``opconv downgrade`` on a model with ~1 GiB of external weights.

The model is a stack of MatMul + Add (+ Relu) layers at opset 17 whose float32 weights live in
``model.onnx.data`` (``bench_onnx_to_ir.generate_big_model``), with a Clip per layer whose bounds are
initializers.  Three conversions: upgrade 17 -> 21; downgrade 17 -> 14, the one downgrade of this model
that onnx.version_converter can do (it has no Add 14 -> 13 adapter); and downgrade 17 -> 10, where every
layer has work (Clip's bound inputs become attributes, read from the initializers; Add-14 -> 13 checks the
operand types, which runs shape inference; MatMul, Relu and Add step down several versions).

Each conversion runs in a fresh child process, and the child's own high-water mark (``VmHWM`` of
``/proc/self/status`` at its end) is the figure, next to a child that only imports the same modules.
The peer, measured in the same run, is ``onnx.version_converter`` as a user runs it: ``onnx.load``
(external data loaded), ``version_converter.convert_version``, ``onnx.save(..., save_as_external_data=True)``.

    CI=true python benchmarks/bench_version_memory.py                 # 1 GiB, opconv and onnx
    CI=true python benchmarks/bench_version_memory.py --gib 0.25 --converters opconv

Target (issue 17): opconv below 512 MiB on 1 GiB of weights, both ways.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("CI", "true")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
TARGET_PEAK_MIB = 512
CONVERSIONS = (("upgrade", 21), ("downgrade", 14), ("downgrade", 10))

_CHILD = """
import os, sys
sys.path.insert(0, {root!r})
os.environ.setdefault("CI", "true")
which, direction, opset, model, out = {args!r}
if model and which == "opconv":
    from opconv.cli import main
    try:
        main([direction, "--opset", str(opset), model, "-o", out])
    except SystemExit as e:
        if e.code:
            raise
elif model:
    import onnx
    from onnx import version_converter
    converted = version_converter.convert_version(onnx.load(model), opset)
    onnx.save(converted, out, save_as_external_data=True, location=os.path.basename(out) + ".data")
elif which == "opconv":
    import opconv.cli, opconv.converters.onnx_versions, opconv.dialects.onnx.io
else:
    import onnx, onnx.version_converter
with open("/proc/self/status") as f:
    print(next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")))
"""


def run_child(which: str, direction: str = "", opset: int = 0, model: str = "", out: str = "") -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of one conversion (or only the imports) in a fresh process."""
    code = _CHILD.format(root=ROOT, args=(which, direction, opset, model, out))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}"
        raise RuntimeError(last)
    return seconds, int(done.stdout.strip().splitlines()[-1]) * 1024


def add_clips(path: str) -> None:
    """Put a Clip with initializer bounds after every Relu of the generated model (in place), and drop its
    final Identity (onnx.version_converter has no Identity 16 -> 15 adapter: its downgrade would fail)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path, load_external_data=False)
    graph = model.graph
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(-6, np.float32), "clip_lo"),
            numpy_helper.from_array(np.array(6, np.float32), "clip_hi"),
        ]
    )
    nodes = []
    for node in graph.node:
        nodes.append(node)
        if node.op_type == "Relu":
            clipped = node.output[0] + "_clip"
            nodes.append(helper.make_node("Clip", [node.output[0], "clip_lo", "clip_hi"], [clipped]))
            for later in graph.node:
                for i, name in enumerate(later.input):
                    if name == node.output[0]:
                        later.input[i] = clipped
    last = nodes.pop()  # Identity(x) -> y: the node before it writes y itself
    nodes[-1].output[0] = last.output[0]
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="float32 weights of the generated model (GiB)")
    parser.add_argument("--converters", default="opconv,onnx", help="any of opconv,onnx")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    from bench_onnx_to_ir import generate_big_model

    converters = args.converters.split(",")
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="bench-version-memory-") as folder:
        path, weight_bytes = generate_big_model(folder, args.gib)
        add_clips(path)
        print(
            f"generated {path}: {weight_bytes / MIB:,.0f} MiB of float32 weights in external data, opset 17", flush=True
        )
        baseline = {which: run_child(which)[1] for which in converters}
        for direction, opset in CONVERSIONS:
            peaks = {}
            for which in converters:
                out = os.path.join(folder, f"{which}.{direction}.onnx")
                try:
                    seconds, peak = run_child(which, direction, opset, path, out)
                except RuntimeError as e:
                    print(f"{direction:<9} 17 -> {opset:<2} {which:<6} failed: {e}", flush=True)
                    continue
                peaks[which] = peak
                data = out + ".data"
                print(
                    f"{direction:<9} 17 -> {opset:<2} {which:<6} peak RSS {peak / MIB:7,.0f} MiB "
                    f"(imports alone {baseline[which] / MIB:4,.0f} MiB)  {seconds:6.1f} s  "
                    f"data file {os.path.getsize(data) / MIB if os.path.exists(data) else 0:,.0f} MiB",
                    flush=True,
                )
                for leftover in (out, data):
                    if os.path.exists(leftover):
                        os.unlink(leftover)  # keeps the temporary folder's disk use bounded
            if "opconv" in peaks and "onnx" in peaks:
                print(
                    f"{direction:<9} 17 -> {opset:<2} opconv/onnx peak ratio {peaks['opconv'] / peaks['onnx']:.2f}",
                    flush=True,
                )
            if "opconv" in peaks:
                verdicts.append((f"{direction} to {opset}", peaks["opconv"] / MIB))
    for direction, peak in verdicts:
        verdict = "MET" if peak < TARGET_PEAK_MIB else "NOT MET"
        print(
            f"target opconv {direction} peak < {TARGET_PEAK_MIB} MiB on {weight_bytes / MIB:,.0f} MiB of weights: "
            f"{verdict} ({peak:,.0f} MiB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
