"""Time opconv's ONNX reference executor against onnx.reference and onnxruntime.

    python benchmarks/bench_onnx_executor.py                       # every suite, 5 rounds
    python benchmarks/bench_onnx_executor.py --suites light --models resnet50,squeezenet --rounds 9 --json b.json
    python benchmarks/bench_onnx_executor.py --suites small,transformer

Suites: ``light``, the constant-folded classic CNNs shipped in the onnx package
(``opconv.testdata.light_cases()``), which get a seeded random input; ``small``
(tiny BERT, GPT-2 and LLaMA-with-KV-cache exports, a MobileNetV2-style CNN, an
LSTM) and ``transformer`` (BERT-base-, GPT-2-small- and LLaMA-shaped models at
sequence 128), built with torch by ``benchmarks/model_builder.py`` on first
use and cached in ``benchmarks/models/`` (skipped when torch is not
installed), with the feeds built beside them.  onnx.reference runs on the
light models only (it cannot run the torch exports).  For opconv, the
per-node overhead is the wall time of a run minus the time spent inside the
kernels, per step run (``Session.profile``; median over ``--rounds`` extra runs).

Each round also records the CPU time of the calling thread (``time.thread_time``):
opconv (numpy's BLAS on one thread) and onnxruntime (one intra-op thread, which
runs its kernels on the calling thread) compute on that thread, so the CPU-time
ratio ("cpu opconv/ort") is what a loaded machine disturbs least.  Session creation (opconv: loading the model;
onnx.reference: building the evaluator; onnxruntime: the InferenceSession, one
intra-op and one inter-op thread) is timed separately from the runs, and
warm-up runs are not timed.  numpy's BLAS runs on one thread, as
onnxruntime does, unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS
are set.  Rounds alternate between the runtimes, rotating
their order each round, and the median is reported.  onnx.reference is slow, so
it runs fewer rounds (``--reference-rounds``).

Peak memory is the peak resident set size above the resident size just before a
run: the kernel's high-water mark (``VmHWM``), reset through
``/proc/self/clear_refs`` (after ``malloc_trim`` hands memory freed by earlier
runs back to the system), maximum over the warm-up runs and one extra untimed
run of that runtime (so onnxruntime's arena growth counts).  Timed runs reset
nothing: a run after a trim would page memory in afresh, which a session run
again and again does not pay.  Where that
reset is not possible, it is tracemalloc's peak of one extra untimed run, which
sees Python and numpy allocations only (not onnxruntime's); the output says
which.

Targets (see benchmarks/README.md): opconv >= 10x faster than onnx.reference on
every light model, and <= 3x onnxruntime single-threaded on light_resnet50;
<= 1.5x onnxruntime on each transformer model and a median <= 3x on the small
models (issue 16).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("CI", "true")  # `import openvino` (via opconv's dialects) otherwise waits on telemetry
# numpy's BLAS on one thread, as onnxruntime's session is (set the variables to measure otherwise, e.g.
# OPENBLAS_NUM_THREADS=2). On a shared machine, BLAS threads waiting for a busy core also cost far more
# than they bring. Must be set before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # model_builder beside this file

import model_builder  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402

import opconv  # noqa: E402
from opconv import testdata  # noqa: E402
from opconv.compare import compare_arrays  # noqa: E402
from opconv.verification import random_inputs  # noqa: E402

RUNTIMES = ("opconv", "reference", "onnxruntime")
TARGET_SPEEDUP_VS_REFERENCE = 10.0
TARGET_RATIO_VS_ORT = 3.0
TARGET_RATIO_MODEL = "light_resnet50"
TARGET_TRANSFORMER_RATIO = 1.5  # each transformer model, opconv / onnxruntime
TARGET_SMALL_MEDIAN_RATIO = 3.0  # median over the small models
SUITES = ("light", "small", "transformer")
MiB = 1024 * 1024


# ---------------------------------------------------------------------------
# runtimes: each setup returns a function running the model once on the feeds
# ---------------------------------------------------------------------------


def setup_opconv(path: str, feeds: dict) -> Callable[[], list]:
    model = opconv.load(path)
    session = opconv.prepare(model)  # like an InferenceSession: binds kernels and folds constant subgraphs
    names = [v.name for v in model.graph.outputs]

    def run() -> list:
        out = session.run(feeds)
        return [out[n] for n in names]

    run.profile = lambda: session.profile(feeds) if hasattr(session, "profile") else None  # type: ignore[attr-defined]
    return run


def setup_reference(path: str, feeds: dict) -> Callable[[], list]:
    from onnx.reference import ReferenceEvaluator

    session = ReferenceEvaluator(onnx.load(path))
    return lambda: session.run(None, feeds)


def setup_onnxruntime(path: str, feeds: dict) -> Callable[[], list]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds)


SETUPS = {"opconv": setup_opconv, "reference": setup_reference, "onnxruntime": setup_onnxruntime}


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------


class PeakMemory:
    """Peak memory of one call: VmHWM above the pre-call VmRSS, or tracemalloc's peak as a fallback."""

    def __init__(self):
        self.uses_rss = self._can_reset_hwm()
        self._trim = self._malloc_trim()
        self.method = (
            "peak RSS above the pre-run RSS (VmHWM reset via /proc/self/clear_refs)"
            if self.uses_rss
            else "tracemalloc peak of one extra untimed run (Python/numpy allocations only)"
        )

    @staticmethod
    def _can_reset_hwm() -> bool:
        try:
            PeakMemory._reset_hwm()
            return PeakMemory._status("VmHWM") is not None
        except OSError:
            return False

    @staticmethod
    def _malloc_trim() -> Callable[[], Any] | None:
        # Memory freed by an earlier run stays resident in malloc's heap and would be reused without
        # raising the RSS; giving it back to the system first makes each run's peak its own.
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6")
            return lambda: libc.malloc_trim(0)
        except (OSError, AttributeError):
            return None

    @staticmethod
    def _reset_hwm() -> None:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # 5: reset the peak resident set size to the current one

    @staticmethod
    def _status(field: str) -> int | None:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return None

    def before(self) -> int:
        if not self.uses_rss:
            return 0
        if self._trim is not None:
            self._trim()
        self._reset_hwm()
        return self._status("VmRSS")

    def after(self, base: int) -> int:
        return self._status("VmHWM") - base if self.uses_rss else 0

    def traced_peak(self, run: Callable[[], Any]) -> int:
        tracemalloc.start()
        try:
            run()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


# ---------------------------------------------------------------------------
# one model
# ---------------------------------------------------------------------------


def bench_model(case, args, runtimes: list[str], memory: PeakMemory, suite: str = "light") -> dict:
    # The built models bring their feeds (token ids within the vocabulary); the light models get random ones.
    feeds = case.feeds if isinstance(case, model_builder.ModelCase) else random_inputs(case.path, seed=args.seed)
    if suite != "light":  # onnx.reference cannot run the torch exports (GatherElements, among others)
        runtimes = [r for r in runtimes if r != "reference"]
    result: dict[str, Any] = {
        "model": case.name,
        "suite": suite,
        "inputs": {k: list(v.shape) for k, v in feeds.items()},
        "runtimes": {},
    }
    runs: dict[str, Callable[[], list]] = {}
    outputs: dict[str, list] = {}
    for name in runtimes:
        entry = result["runtimes"][name] = {
            "error": None,
            "setup_ms": None,
            "rounds_ms": [],
            "median_ms": None,
            "cpu_rounds_ms": [],
            "median_cpu_ms": None,
            "peak_memory_mb": None,
        }
        try:
            start = time.perf_counter()
            run = SETUPS[name](case.path, feeds)
            entry["setup_ms"] = (time.perf_counter() - start) * 1e3
            peak = 0
            # Warm-up runs (none for onnx.reference, which is slow); also where a missing op shows up.
            for _ in range(0 if name == "reference" else args.warmup):
                base = memory.before()
                outputs[name] = run()
                peak = max(peak, memory.after(base))
            entry["peak_memory_mb"] = peak / MiB
            runs[name] = run
        except Exception as e:  # noqa: BLE001 - one runtime failing must not stop the benchmark
            entry["error"] = f"{type(e).__name__}: {e}" if not isinstance(e, opconv.OpconvError) else str(e)
            print(f"  {name}: {entry['error']}", flush=True)

    wanted = {name: min(args.rounds, args.reference_rounds) if name == "reference" else args.rounds for name in runs}
    for round_index in range(max(wanted.values(), default=0)):
        order = list(runs)
        order = order[round_index % len(order) :] + order[: round_index % len(order)]
        for name in order:
            entry = result["runtimes"][name]
            if len(entry["rounds_ms"]) >= wanted[name] or entry["error"]:
                continue
            try:
                start, cpu_start = time.perf_counter(), time.thread_time()
                out = runs[name]()
                elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
            except Exception as e:  # noqa: BLE001
                entry["error"] = f"{type(e).__name__}: {e}"
                print(f"  {name}: {entry['error']}", flush=True)
                continue
            entry["rounds_ms"].append(elapsed * 1e3)
            entry["cpu_rounds_ms"].append(cpu * 1e3)
            outputs.setdefault(name, out)

    if "opconv" in runs and not result["runtimes"]["opconv"]["error"]:
        profiles = [runs["opconv"].profile() for _ in range(args.rounds)]  # type: ignore[attr-defined]
        if None not in profiles:  # (an opconv before Session.profile has none)
            result["runtimes"]["opconv"]["steps"] = profiles[0].steps
            result["runtimes"]["opconv"]["overhead_us_per_step"] = (
                statistics.median(p.overhead_per_step for p in profiles) * 1e6
            )
    for name, entry in result["runtimes"].items():
        if entry["rounds_ms"]:
            entry["median_ms"] = statistics.median(entry["rounds_ms"])
            entry["median_cpu_ms"] = statistics.median(entry["cpu_rounds_ms"])
            if not memory.uses_rss:
                entry["peak_memory_mb"] = memory.traced_peak(runs[name]) / MiB
            else:  # one more, untimed run: resetting the peak hands freed memory back, which a timed run would pay
                base = memory.before()
                runs[name]()
                entry["peak_memory_mb"] = max(entry["peak_memory_mb"] or 0, memory.after(base) / MiB)
    result["speedup_vs_reference"] = _ratio(result, "reference", "opconv")
    result["ratio_vs_onnxruntime"] = _ratio(result, "opconv", "onnxruntime")
    result["cpu_ratio_vs_onnxruntime"] = _ratio(result, "opconv", "onnxruntime", "median_cpu_ms")
    result["opconv_matches_onnxruntime"] = _matches(outputs.get("opconv"), outputs.get("onnxruntime"))
    result["differences_from_onnxruntime"] = _differences(outputs.get("opconv"), outputs.get("onnxruntime"))
    return result


def _ratio(result: dict, numerator: str, denominator: str, key: str = "median_ms") -> float | None:
    a = result["runtimes"].get(numerator, {}).get(key)
    b = result["runtimes"].get(denominator, {}).get(key)
    return a / b if a and b else None


def _matches(ours: list | None, theirs: list | None) -> bool | None:
    """Whether opconv's outputs equal onnxruntime's within the float32 tolerance table."""
    if ours is None or theirs is None:
        return None
    return all(compare_arrays(str(i), t, o).ok for i, (o, t) in enumerate(zip(ours, theirs)))


def _differences(ours: list | None, theirs: list | None) -> list[str]:
    """One line per output of opconv's that differs from onnxruntime's: the figures, for the reader to judge."""
    lines = []
    for i, (o, t) in enumerate(zip(ours or [], theirs or [])):
        c = compare_arrays(str(i), t, o)
        if not c.ok:
            lines.append(
                f"output {i}: {c.mismatches} of {c.total} values differ, max abs error {c.max_abs_error:.3g}, "
                f"max rel error {c.max_rel_error:.3g}"
            )
    return lines


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------


def _ms(entry: dict | None) -> str:
    if entry is None:
        return "-"
    if entry["error"]:
        return "error"
    return f"{entry['median_ms']:.1f}" if entry["median_ms"] is not None else "-"


def _cell(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def print_table(results: list[dict], runtimes: list[str]) -> None:
    header = (
        ["model"]
        + [f"{r} ms" for r in runtimes]
        + ["ref/opconv", "opconv/ort", "cpu opconv/ort"]
        + [f"setup ms {r}" for r in runtimes]
        + [f"peak MiB {r}" for r in runtimes]
        + ["matches ort"]
        + ["steps", "overhead us/step"]
    )
    rows = [header]
    for res in results:
        rt = res["runtimes"]
        match = res["opconv_matches_onnxruntime"]
        rows.append(
            [res["model"]]
            + [_ms(rt.get(r)) for r in runtimes]
            + [
                _cell(res["speedup_vs_reference"], ".1f") + ("x" if res["speedup_vs_reference"] else ""),
                _cell(res["ratio_vs_onnxruntime"], ".2f") + ("x" if res["ratio_vs_onnxruntime"] else ""),
                _cell(res["cpu_ratio_vs_onnxruntime"], ".2f") + ("x" if res["cpu_ratio_vs_onnxruntime"] else ""),
            ]
            + [_cell(rt[r]["setup_ms"], ".0f") if r in rt else "-" for r in runtimes]
            + [_cell(rt[r]["peak_memory_mb"], ".1f") if r in rt else "-" for r in runtimes]
            + ["-" if match is None else ("yes" if match else "NO")]
            + [
                _cell(rt.get("opconv", {}).get("steps"), "d"),
                _cell(rt.get("opconv", {}).get("overhead_us_per_step"), ".1f"),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    for res in results:
        for line in res.get("differences_from_onnxruntime", []):
            # e.g. light_squeezenet: its logits are ~7e9 and equal to 7 digits, so one float32 rounding
            # step anywhere (BLAS blocking, summation order) moves the softmax by 1e-3.
            print(f"{res['model']} vs onnxruntime: {line}")


def targets(results: list[dict]) -> dict:
    """Whether the performance targets are met (None when not measured)."""
    light = [r for r in results if r.get("suite", "light") == "light"]
    speedups = {r["model"]: r["speedup_vs_reference"] for r in light}
    measured = [v for v in speedups.values() if v is not None]
    slow = sorted(m for m, v in speedups.items() if v is not None and v < TARGET_SPEEDUP_VS_REFERENCE)
    ratio = next((r["ratio_vs_onnxruntime"] for r in light if r["model"] == TARGET_RATIO_MODEL), None)
    transformer = {r["model"]: r["ratio_vs_onnxruntime"] for r in results if r.get("suite") == "transformer"}
    small = [r["ratio_vs_onnxruntime"] for r in results if r.get("suite") == "small"]
    small_median = statistics.median(small) if small and None not in small else None
    return {
        "transformer_ratio_vs_onnxruntime": {
            "target": TARGET_TRANSFORMER_RATIO,
            "ratios": transformer,
            "met": None
            if not transformer or None in transformer.values()
            else all(v <= TARGET_TRANSFORMER_RATIO for v in transformer.values()),
        },
        "small_median_ratio_vs_onnxruntime": {
            "target": TARGET_SMALL_MEDIAN_RATIO,
            "median": small_median,
            "met": None if small_median is None else small_median <= TARGET_SMALL_MEDIAN_RATIO,
        },
        "speedup_vs_reference": {
            "target": TARGET_SPEEDUP_VS_REFERENCE,
            "met": (not slow) if measured else None,
            "below_target": slow,
            "unmeasured": sorted(m for m, v in speedups.items() if v is None),
        },
        "ratio_vs_onnxruntime": {
            "model": TARGET_RATIO_MODEL,
            "target": TARGET_RATIO_VS_ORT,
            "ratio": ratio,
            "met": None if ratio is None else ratio <= TARGET_RATIO_VS_ORT,
        },
    }


def print_targets(t: dict) -> None:
    s = t["speedup_vs_reference"]
    verdict = {True: "MET", False: "NOT MET", None: "not measured"}
    line = f"target >= {s['target']:g}x faster than onnx.reference on every light model: {verdict[s['met']]}"
    if s["below_target"]:
        line += f" (below: {', '.join(s['below_target'])})"
    if s["unmeasured"]:
        line += f" (not measured: {', '.join(s['unmeasured'])})"
    print(line)
    r = t["ratio_vs_onnxruntime"]
    shown = "" if r["ratio"] is None else f" ({r['ratio']:.2f}x)"
    print(f"target <= {r['target']:g}x onnxruntime single-thread on {r['model']}: {verdict[r['met']]}{shown}")
    tr = t["transformer_ratio_vs_onnxruntime"]
    shown = ", ".join(f"{m} {v:.2f}x" for m, v in tr["ratios"].items() if v is not None)
    print(
        f"target <= {tr['target']:g}x onnxruntime on each transformer model: {verdict[tr['met']]}"
        + (f" ({shown})" if shown else "")
    )
    sm = t["small_median_ratio_vs_onnxruntime"]
    shown = "" if sm["median"] is None else f" ({sm['median']:.2f}x)"
    print(f"target median <= {sm['target']:g}x onnxruntime on the small models: {verdict[sm['met']]}{shown}")


# ---------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time opconv.run against onnx.reference and onnxruntime (one thread) on the light models.",
        epilog="Targets: >=10x faster than onnx.reference on every light model; <=3x onnxruntime on "
        "light_resnet50.  numpy's BLAS runs on one thread unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS "
        "say otherwise.",
    )
    p.add_argument(
        "--suites",
        default=",".join(SUITES),
        help=f"comma-separated, of {','.join(SUITES)} (default: all; small and transformer need torch)",
    )
    p.add_argument(
        "--models", help="comma-separated substrings: only models whose name contains one (e.g. resnet50,squeezenet)"
    )
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per runtime, median reported (default 5)")
    p.add_argument(
        "--reference-rounds",
        type=int,
        default=2,
        help="timed rounds of onnx.reference, which is slow (default 2, at most --rounds)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed runs of opconv and onnxruntime before timing (default 1; onnx.reference: none)",
    )
    p.add_argument("--runtimes", default=",".join(RUNTIMES), help=f"which of {','.join(RUNTIMES)} to run")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--json", dest="json_path", help="also write the results as JSON to this file")
    args = p.parse_args(argv)
    args.runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    args.suites = [r.strip() for r in args.suites.split(",") if r.strip()]
    if not args.suites or set(args.suites) - set(SUITES):
        p.error(f"--suites: choose from {', '.join(SUITES)}")
    unknown = sorted(set(args.runtimes) - set(RUNTIMES))
    if unknown or not args.runtimes:
        p.error(f"--runtimes: choose from {', '.join(RUNTIMES)}" + (f" (not {', '.join(unknown)})" if unknown else ""))
    if args.rounds < 1 or args.reference_rounds < 1 or args.warmup < 0:
        p.error("--rounds and --reference-rounds must be at least 1, --warmup at least 0")
    return args


def benchmark_cases(suites: list[str], models: str | None) -> list[tuple[str, Any]]:
    """(suite, case) of every model of ``suites`` whose name contains one of the ``models`` substrings."""
    cases: list[tuple[str, Any]] = [("light", c) for c in testdata.light_cases()] if "light" in suites else []
    built = [s for s in ("small", "transformer") if s in suites]
    if built and not model_builder.torch_available():
        print(f"torch/transformers not installed: the {' and '.join(built)} suites are skipped", file=sys.stderr)
        built = []
    for suite in built:
        cases += [(suite, c) for c in model_builder.model_cases(suite)]
    if models:
        wanted = [w.strip() for w in models.split(",") if w.strip()]
        cases = [(s, c) for s, c in cases if any(w in c.name for w in wanted)]
    return cases


def main(argv=None) -> int:
    args = parse_args(argv)
    cases = benchmark_cases(args.suites, args.models)
    if not cases:
        print("no model matches --suites / --models", file=sys.stderr)
        return 2
    runtimes = [r for r in RUNTIMES if r in args.runtimes]
    memory = PeakMemory()
    threads = ", ".join(
        f"{v}={os.environ[v]}"
        for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        if v in os.environ
    )
    print(
        f"opconv {opconv.__version__}, onnx {onnx.__version__}, numpy {np.__version__}; "
        f"numpy threads: {threads or 'numpy default'}; onnxruntime: 1 intra-op, 1 inter-op thread"
    )
    print(
        f"rounds: {args.rounds} (onnx.reference {min(args.rounds, args.reference_rounds)}), warm-up "
        f"{args.warmup}, seed {args.seed}; memory: {memory.method}"
    )
    results = []
    for suite, case in cases:
        print(f"{case.name} ...", flush=True)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            results.append(bench_model(case, args, runtimes, memory, suite))
    print()
    print_table(results, runtimes)
    print()
    t = targets(results)
    print_targets(t)
    if args.json_path:
        report = {
            "config": {
                "suites": args.suites,
                "rounds": args.rounds,
                "reference_rounds": min(args.rounds, args.reference_rounds),
                "warmup": args.warmup,
                "seed": args.seed,
                "runtimes": runtimes,
                "numpy_threads": threads or "numpy default",
                "memory_method": memory.method,
            },
            "models": results,
            "targets": t,
        }
        with open(args.json_path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
