"""Benchmark: ``opconv onnx-to-ir`` against ``openvino.convert_model`` + ``openvino.save_model``.

Two measurements (see benchmarks/README.md):

1. **Time per light model** (the onnx package's ``light_*.onnx``): one
   conversion to IR written to disk, by opconv (``opconv.load`` +
   ``opconv.convert(to="openvino")`` + ``opconv.save``) and by OpenVINO
   (``convert_model`` + ``save_model``), in alternating rounds; medians and the
   ratio opconv / OpenVINO.  ``--processes`` times each conversion as a fresh
   Python process instead (interpreter start, imports and exit included), as a
   user running the command line sees it: opconv's child runs the command
   ``opconv onnx-to-ir MODEL -o OUT.xml`` (children may write ``.pyc`` files, to a
   private pycache, as an installed package has them, even under
   ``PYTHONDONTWRITEBYTECODE``; one untimed run per converter fills it).
2. **Peak memory** converting a generated model with about 1 GiB of float32
   weights in external data (a stack of MatMul + Add layers), each converter in
   a child process: the child's own peak resident set size (``VmHWM`` of
   ``/proc/self/status`` at its end), next to the peak of a child that only
   imports the same modules.  Target: opconv below 512 MiB.

Run ``CI=true python benchmarks/bench_onnx_to_ir.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("CI", "true")  # `import openvino` otherwise waits on telemetry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
TARGET_PEAK_MIB = 512


# ---------------------------------------------------------------------------
# the conversions, as functions of (model path, output .xml)
# ---------------------------------------------------------------------------


def convert_opconv(model: str, xml: str) -> None:
    import opconv

    opconv.save(opconv.convert(opconv.load(model, "onnx"), to="openvino"), xml)


def convert_openvino(model: str, xml: str) -> None:
    import openvino as ov

    ov.save_model(ov.convert_model(model), xml)


def convert_openvino_f32(model: str, xml: str) -> None:
    """OpenVINO writing float32 weights as opconv does (save_model's default halves them to float16)."""
    import openvino as ov

    ov.save_model(ov.convert_model(model), xml, compress_to_fp16=False)


CONVERTERS = {"opconv": convert_opconv, "openvino": convert_openvino, "openvino-f32": convert_openvino_f32}

# What a child process runs: one conversion (or only the imports, as the baseline of the memory measurement),
# then its peak resident set size in KiB on the last line of stdout.  opconv's child runs the command line
# (`opconv onnx-to-ir MODEL -o XML`, the command the target names), OpenVINO's calls convert_model +
# save_model; neither imports this module, so a child does nothing but the conversion.  VmHWM belongs to the
# child's own address space; ru_maxrss would also count the parent's size at fork time.
_CHILD_CONVERT = {
    "opconv": (
        "from opconv.cli import main\n"
        "try:\n"
        "    main(['onnx-to-ir', model, '-o', xml])\n"
        "except SystemExit as e:\n"
        "    if e.code:\n"
        "        raise\n"
    ),
    "openvino": "import openvino as ov\nov.save_model(ov.convert_model(model), xml)\n",
    "openvino-f32": "import openvino as ov\nov.save_model(ov.convert_model(model), xml, compress_to_fp16=False)\n",
}
#: the modules each converter converts with (what a child imports for the memory baseline)
IMPORTS = {
    "opconv": ("opconv.cli", "opconv.converters.onnx_to_openvino", "opconv.dialects.openvino.io"),
    "openvino": ("openvino",),
    "openvino-f32": ("openvino",),
}
_CHILD = """
import os, sys
sys.path.insert(0, {root!r})
os.environ.setdefault("CI", "true")
model, xml = {model!r}, {xml!r}
{body}
peak = None
if os.path.exists("/proc/self/status"):
    with open("/proc/self/status") as f:
        peak = next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), None)
if peak is None:
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(peak)
"""


def _import_only(which: str) -> None:
    """Import what ``which`` converts with (before in-process rounds)."""
    import importlib

    for name in IMPORTS[which]:
        importlib.import_module(name)


_PYCACHE = os.path.join(tempfile.gettempdir(), "bench-onnx-to-ir-pycache")


def run_child(which: str, model: str | None, xml: str | None) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of one conversion in a fresh Python process."""
    body = _CHILD_CONVERT[which] if model else f"import {', '.join(IMPORTS[which])}\n"
    code = _CHILD.format(root=ROOT, model=model or "", xml=xml or "", body=body)
    env = dict(os.environ, PYTHONPYCACHEPREFIX=_PYCACHE)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled modules are reused, as in an installed package
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit code {done.returncode}"
        raise RuntimeError(f"{which} failed on {model}: {last}")
    return seconds, int(done.stdout.strip().splitlines()[-1]) * 1024


# ---------------------------------------------------------------------------
# 1. time per light model
# ---------------------------------------------------------------------------


def light_models(names: list[str] | None) -> list[tuple[str, str]]:
    sys.path.insert(0, ROOT)
    from opconv.testdata import light_cases

    cases = [(c.name, c.path) for c in light_cases()]
    if names:
        cases = [c for c in cases if any(n in c[0] for n in names)]
    return cases


def time_light_models(cases, rounds: int, processes: bool, folder: str) -> list[dict]:
    rows = []
    if processes and cases:  # an untimed run each compiles the modules into the shared pycache
        for which in CONVERTERS:
            try:
                run_child(which, cases[0][1], os.path.join(folder, f"warmup.{which}.xml"))
            except RuntimeError:
                pass
    for name, path in cases:
        times: dict[str, list[float]] = {which: [] for which in CONVERTERS}
        errors: dict[str, str] = {}
        order = list(times)
        for r in range(rounds):
            for which in order[r % len(order) :] + order[: r % len(order)]:  # rotate who goes first
                if which in errors:
                    continue
                xml = os.path.join(folder, f"{name}.{which}.xml")
                try:
                    if processes:
                        seconds, _ = run_child(which, path, xml)
                    else:
                        start = time.perf_counter()
                        CONVERTERS[which](path, xml)
                        seconds = time.perf_counter() - start
                    times[which].append(seconds)
                except Exception as e:  # noqa: BLE001 - a converter that fails on a model is a result
                    errors[which] = str(e).splitlines()[0][:160]
        row = {
            "model": name,
            **{f"{w}_s": statistics.median(t) if t else None for w, t in times.items()},
            "errors": errors,
        }
        o, v, v32 = row["opconv_s"], row["openvino_s"], row["openvino-f32_s"]
        row["ratio"] = o / v if o and v else None
        row["ratio_f32"] = o / v32 if o and v32 else None
        rows.append(row)
        _print_time_row(row)
    return rows


def _print_time_row(row: dict) -> None:
    def fmt(x):
        return f"{x:8.3f}" if x is not None else "       -"

    def ratio(x):
        return f"{x:6.2f}" if x is not None else "     -"

    print(
        f"{row['model']:<22} {fmt(row['opconv_s'])} {fmt(row['openvino_s'])} {ratio(row['ratio'])} "
        f"{fmt(row['openvino-f32_s'])} {ratio(row['ratio_f32'])}"
        + (f"  ({'; '.join(f'{k}: {v}' for k, v in row['errors'].items())})" if row["errors"] else ""),
        flush=True,
    )


# ---------------------------------------------------------------------------
# 2. peak memory on a generated ~1 GiB model
# ---------------------------------------------------------------------------


def generate_big_model(folder: str, gib: float = 1.0, width: int = 4096) -> tuple[str, int]:
    """An MLP of MatMul + Add layers with ``gib`` GiB of float32 weights in ``model.onnx.data``.

    Weights are random (seeded) and written straight to the data file in
    chunks, so generating the model never holds more than one chunk.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    layers = max(1, round(gib * (1 << 30) / (width * width * 4)))
    data_name = "model.onnx.data"
    rng = np.random.default_rng(0)
    initializers, nodes = [], []
    offset = 0
    with open(os.path.join(folder, data_name), "wb") as f:

        def external(name, shape):
            nonlocal offset
            count = int(np.prod(shape))
            start = offset
            for begin in range(0, count, 1 << 22):
                chunk = rng.standard_normal(min(1 << 22, count - begin), dtype=np.float32) / np.sqrt(width)
                f.write(chunk.tobytes())
            offset += count * 4
            t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=shape)
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(start)), ("length", str(count * 4))):
                t.external_data.add(key=k, value=v)
            return t

        x = "x"
        for i in range(layers):
            initializers += [external(f"w{i}", [width, width]), external(f"b{i}", [width])]
            nodes += [
                helper.make_node("MatMul", [x, f"w{i}"], [f"mm{i}"]),
                helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"]),
            ]
            x = f"add{i}"
            if i + 1 < layers:
                nodes.append(helper.make_node("Relu", [x], [f"relu{i}"]))
                x = f"relu{i}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        nodes,
        "big_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(folder, "model.onnx")
    onnx.save(model, path)
    return path, offset


def measure_memory(folder: str, gib: float, converters: list[str]) -> list[dict]:
    path, weight_bytes = generate_big_model(folder, gib)
    print(f"\ngenerated {path}: {weight_bytes / MIB:,.0f} MiB of float32 weights in external data", flush=True)
    rows = []
    for which in converters:
        _, baseline = run_child(which, None, None)
        xml = os.path.join(folder, f"big.{which}.xml")
        try:
            seconds, peak = run_child(which, path, xml)
        except RuntimeError as e:
            print(f"{which:<9} failed: {e}", flush=True)
            continue
        bin_size = os.path.getsize(os.path.splitext(xml)[0] + ".bin")
        row = {
            "converter": which,
            "peak_mib": peak / MIB,
            "import_peak_mib": baseline / MIB,
            "seconds": seconds,
            "bin_mib": bin_size / MIB,
            "weights_mib": weight_bytes / MIB,
        }
        rows.append(row)
        print(
            f"{which:<9} peak RSS {row['peak_mib']:8,.0f} MiB (imports alone {row['import_peak_mib']:5,.0f} MiB)"
            f"  {seconds:6.1f} s  .bin {row['bin_mib']:,.0f} MiB",
            flush=True,
        )
        for suffix in (".xml", ".bin"):
            if os.path.exists(os.path.splitext(xml)[0] + suffix):
                os.unlink(os.path.splitext(xml)[0] + suffix)  # keep the temp folder's disk use bounded
    return rows


# ---------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="only light models whose name contains one of these (comma separated)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per converter (median reported)")
    parser.add_argument(
        "--processes", action="store_true", help="time each conversion as a fresh Python process (imports included)"
    )
    parser.add_argument("--memory-gib", type=float, default=1.0, help="weights of the generated model (GiB)")
    parser.add_argument("--skip-time", action="store_true", help="only the memory measurement")
    parser.add_argument("--skip-memory", action="store_true", help="only the light-model timings")
    parser.add_argument(
        "--memory-converters",
        default="opconv,openvino",
        help="converters measured for memory (OpenVINO needs about twice the weights in RAM)",
    )
    parser.add_argument("--json", help="also write every measurement to this JSON file")
    args = parser.parse_args(argv)

    sys.path.insert(0, ROOT)
    results: dict = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench-onnx-to-ir-") as folder:
        if not args.skip_time:
            cases = light_models(args.models.split(",") if args.models else None)
            mode = "fresh processes" if args.processes else "in-process"
            print(f"light models, {args.rounds} alternating rounds, {mode}; medians in seconds")
            print(
                f"{'model':<22} {'opconv':>8} {'openvino':>8} {'ratio':>6} {'ov-f32':>8} {'ratio':>6}   "
                "(ov-f32: save_model(compress_to_fp16=False), the same float32 weights opconv writes)"
            )
            if not args.processes:
                _import_only("opconv")
                _import_only("openvino")
            rows = time_light_models(cases, args.rounds, args.processes, folder)
            results["time"] = {"mode": mode, "rounds": args.rounds, "rows": rows}
            slower = [r["model"] for r in rows if r["ratio"] is None or r["ratio"] > 1.0]
            print(
                "target opconv no slower than OpenVINO on every light model: "
                + ("MET" if not slower else f"NOT MET ({', '.join(slower)})")
            )
            slower = [r["model"] for r in rows if r["ratio_f32"] is None or r["ratio_f32"] > 1.0]
            print(
                "  ... than OpenVINO writing the same float32 weights: "
                + ("MET" if not slower else f"NOT MET ({', '.join(slower)})")
            )
        if not args.skip_memory:
            rows = measure_memory(folder, args.memory_gib, args.memory_converters.split(","))
            results["memory"] = rows
            ours = next((r for r in rows if r["converter"] == "opconv"), None)
            if ours is not None:
                verdict = "MET" if ours["peak_mib"] < TARGET_PEAK_MIB else "NOT MET"
                print(
                    f"target opconv peak < {TARGET_PEAK_MIB} MiB on {ours['weights_mib']:,.0f} MiB of weights: "
                    f"{verdict} ({ours['peak_mib']:,.0f} MiB)"
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
