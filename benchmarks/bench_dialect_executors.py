"""Time opconv's OpenVINO-IR and HLO executors on converted models against its ONNX executor on the original.

    python benchmarks/bench_dialect_executors.py                          # every suite, 5 rounds
    python benchmarks/bench_dialect_executors.py --suites light --models vgg19,resnet50 --rounds 9

Each benchmark model of ``bench_onnx_executor.py`` (the same suites and feeds) is converted once with
opconv's library API (``opconv.convert(model, "openvino")`` and ``opconv.convert(model, "hlo")``, the input
shapes fixed to the feeds'), then the three prepared sessions (``opconv.prepare``) run the same input in
alternating rounds, the order rotated per round, one BLAS thread; wall and calling-thread CPU time, medians.
Conversion and session preparation are timed once, apart from the runs.  A conversion opconv refuses is
printed and the model goes on with the executors that have a model.  The ratios are each dialect executor's
median time over the ONNX executor's; the target (issue 16) is <= 1.2x on every model, and "outputs" says
whether each converted model's outputs equal the original's within the float32 tolerances of
``opconv.compare`` (what ``opconv verify`` checks).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

# bench_onnx_executor sets the BLAS threads and the import path before numpy loads: import it first.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_onnx_executor as base  # noqa: E402  isort: skip
import numpy as np  # noqa: E402

import opconv  # noqa: E402
from opconv.compare import compare_arrays  # noqa: E402
from opconv.verification import random_inputs  # noqa: E402

EXECUTORS = ("onnx", "openvino", "hlo")
TARGET_RATIO = 1.2  # each dialect executor on the converted model / the ONNX executor on the original


def _session(model: opconv.Model, feeds: dict) -> Callable[[], list]:
    """A function running ``model``'s prepared session on ``feeds`` (by name, else by position)."""
    session = opconv.prepare(model)
    inputs = [v.name for v in model.graph.inputs if v.const is None]
    if set(feeds) != set(inputs):
        feeds = dict(zip(inputs, feeds.values()))
    names = [v.name for v in model.graph.outputs]

    def run() -> list:
        out = session.run(feeds)
        return [out[n] for n in names]

    return run


def bench_model(case: Any, suite: str, args: argparse.Namespace) -> dict:
    feeds = case.feeds if suite != "light" else random_inputs(case.path, seed=args.seed)
    source = opconv.load(case.path)
    result: dict[str, Any] = {"model": case.name, "suite": suite, "executors": {}}
    runs: dict[str, Callable[[], list]] = {}
    outputs: dict[str, list] = {}
    for name in EXECUTORS:
        entry = result["executors"][name] = {"error": None, "convert_ms": None, "setup_ms": None, "rounds_ms": []}
        entry["cpu_rounds_ms"] = []
        try:
            start = time.perf_counter()
            model = (
                source
                if name == "onnx"
                else opconv.convert(source, name, input_shapes={k: v.shape for k, v in feeds.items()})
            )
            entry["convert_ms"] = (time.perf_counter() - start) * 1e3 if name != "onnx" else None
            start = time.perf_counter()
            run = _session(model, feeds)
            entry["setup_ms"] = (time.perf_counter() - start) * 1e3
            for _ in range(args.warmup):
                outputs[name] = run()
            runs[name] = run
        except Exception as e:  # noqa: BLE001 - a refused conversion or a failing run must not stop the benchmark
            entry["error"] = str(e).splitlines()[0] if isinstance(e, opconv.OpconvError) else f"{type(e).__name__}: {e}"
            print(f"  {name}: {entry['error']}", flush=True)
    for round_index in range(args.rounds):
        order = list(runs)
        order = order[round_index % len(order) :] + order[: round_index % len(order)]
        for name in order:
            start, cpu_start = time.perf_counter(), time.thread_time()
            out = runs[name]()
            elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
            result["executors"][name]["rounds_ms"].append(elapsed * 1e3)
            result["executors"][name]["cpu_rounds_ms"].append(cpu * 1e3)
            outputs.setdefault(name, out)
    for entry in result["executors"].values():
        entry["median_ms"] = statistics.median(entry["rounds_ms"]) if entry["rounds_ms"] else None
        entry["median_cpu_ms"] = statistics.median(entry["cpu_rounds_ms"]) if entry["cpu_rounds_ms"] else None
    for name in EXECUTORS[1:]:
        result[f"{name}_ratio"] = _ratio(result, name, "median_ms")
        result[f"{name}_cpu_ratio"] = _ratio(result, name, "median_cpu_ms")
        result[f"{name}_matches"] = _matches(outputs.get("onnx"), outputs.get(name))
    return result


def _ratio(result: dict, name: str, key: str) -> float | None:
    a, b = result["executors"][name][key], result["executors"]["onnx"][key]
    return a / b if a and b else None


def _matches(original: list | None, converted: list | None) -> bool | None:
    if original is None or converted is None:
        return None
    return len(original) == len(converted) and all(
        compare_arrays(str(i), o, c).ok for i, (o, c) in enumerate(zip(original, converted))
    )


def print_table(results: list[dict]) -> None:
    def cell(value: float | None, fmt: str, suffix: str = "") -> str:
        return "-" if value is None else format(value, fmt) + suffix

    def ms(res: dict, name: str) -> str:
        entry = res["executors"][name]
        return "error" if entry["error"] else cell(entry["median_ms"], ".1f")

    header = ["model", "onnx ms", "ir ms", "hlo ms", "ir/onnx", "hlo/onnx", "cpu ir/onnx", "cpu hlo/onnx"]
    header += ["within 1.2x", "outputs ir", "outputs hlo", "convert ms ir", "convert ms hlo", "setup ms o/i/h"]
    rows = [header]
    for res in results:
        ratios = [res["openvino_ratio"], res["hlo_ratio"]]
        cpu = [res["openvino_cpu_ratio"], res["hlo_cpu_ratio"]]
        within = "-" if None in cpu else ("yes" if max(cpu) <= TARGET_RATIO else "NO")
        ex = res["executors"]
        rows.append(
            [res["model"], ms(res, "onnx"), ms(res, "openvino"), ms(res, "hlo")]
            + [cell(r, ".2f", "x") for r in ratios + cpu]
            + [within]
            + ["-" if m is None else ("yes" if m else "NO") for m in (res["openvino_matches"], res["hlo_matches"])]
            + [cell(ex[n]["convert_ms"], ".0f") for n in ("openvino", "hlo")]
            + ["/".join(cell(ex[n]["setup_ms"], ".0f") for n in EXECUTORS)]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    slow = [
        f"{r['model']} ({n} {r[f'{n}_cpu_ratio']:.2f}x)"
        for r in results
        for n in EXECUTORS[1:]
        if r[f"{n}_cpu_ratio"] is not None and r[f"{n}_cpu_ratio"] > TARGET_RATIO
    ]
    unmeasured = [f"{r['model']} ({n})" for r in results for n in EXECUTORS[1:] if r[f"{n}_cpu_ratio"] is None]
    verdict = "NOT MET" if slow else ("MET" if not unmeasured else "MET where measured")
    print(f"\ntarget IR and HLO executors <= {TARGET_RATIO:g}x the ONNX executor (CPU time) on every model: {verdict}")
    if slow:
        print(f"  above: {', '.join(slow)}")
    if unmeasured:
        print(f"  not measured: {', '.join(unmeasured)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--suites", default=",".join(base.SUITES), help="comma-separated, of light,small,transformer")
    p.add_argument("--models", help="comma-separated substrings of model names")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per executor, median reported (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs per executor before timing (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the light models' random input (default 0)")
    p.add_argument("--json", dest="json_path", help="also write the results as JSON to this file")
    args = p.parse_args(argv)
    args.suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    if not args.suites or set(args.suites) - set(base.SUITES):
        p.error(f"--suites: choose from {', '.join(base.SUITES)}")
    if args.rounds < 1 or args.warmup < 1:
        p.error("--rounds and --warmup must be at least 1 (the warm-up run also gives the outputs compared)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = base.benchmark_cases(args.suites, args.models)
    if not cases:
        print("no model matches --suites / --models", file=sys.stderr)
        return 2
    threads = ", ".join(f"{v}={os.environ[v]}" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if v in os.environ)
    print(f"opconv {opconv.__version__}, numpy {np.__version__}; numpy threads: {threads}; rounds {args.rounds}")
    results = []
    for suite, case in cases:
        print(f"{case.name} ...", flush=True)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            results.append(bench_model(case, suite, args))
    print()
    print_table(results)
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as f:
            json.dump({"rounds": args.rounds, "warmup": args.warmup, "models": results}, f, indent=1)
        print(f"wrote {args.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
