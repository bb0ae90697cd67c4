"""Coverage matrix of the ONNX version converter: every node case to every target opset, up and down.

Each (case, target) pair is converted by opconv (and, for comparison, by
``onnx.version_converter``), then judged three ways: ``onnx.checker`` with
full_check, every ai.onnx op existing at the target, and opconv's executor
against the case's expected outputs (the values ONNX ships, not computed here).

    python scripts/version_matrix.py                        # targets 1..21, both converters
    python scripts/version_matrix.py -k softmax --targets 9,12,21 --details out.json
    python scripts/version_matrix.py --only opconv --jobs 2

Totals per converter and direction: attempted, converted, verified, wrong
(outputs differ), checker (fails onnx.checker or holds an op invalid at the
target), refused (the converter raised), unrunnable (converted and valid but
the executor cannot run it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import warnings
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

CONVERTERS = ("opconv", "onnx")
OUTCOMES = ("converted", "verified", "wrong", "checker", "refused", "unrunnable")


def source_opset(model: onnx.ModelProto) -> int | None:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    return None


def convert_with(converter: str, model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    if converter == "onnx":
        from onnx import version_converter

        return version_converter.convert_version(model, target)
    import opconv

    return opconv.convert_version(model, target)  # a ModelProto in gives a ModelProto out


def ops_invalid_at(model: onnx.ModelProto, target: int) -> list[str]:
    """ai.onnx ops (also in subgraphs) that have no schema at ``target``."""
    from opconv.schemas import dialect_schemas

    schemas = dialect_schemas("onnx")
    bad = []

    def walk(graph):
        for n in graph.node:
            if n.domain in ("", "ai.onnx") and schemas.find(n.op_type, target) is None:
                bad.append(n.op_type)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for g in a.graphs:
                    walk(g)

    walk(model.graph)
    return bad


def judge(case, converted: onnx.ModelProto, target: int) -> tuple[str, str]:
    """One outcome for a converted model, with a message."""
    import opconv
    from opconv.compare import compare_arrays

    try:
        onnx.checker.check_model(converted, full_check=True)
    except Exception as e:  # noqa: BLE001 - any checker complaint is the outcome
        return "checker", f"checker: {str(e).splitlines()[0][:200]}"
    bad = ops_invalid_at(converted, target)
    if bad:
        return "checker", f"ops invalid at {target}: {sorted(set(bad))}"
    try:
        model = opconv.load(converted)
        names = [v.name for v in model.graph.outputs]
        input_names = [
            i.name for i in converted.graph.input if i.name not in {t.name for t in converted.graph.initializer}
        ]
        for inputs, expected in case.datasets:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                actual = opconv.run(model, dict(zip(input_names, inputs)))
            for name, e in zip(names, expected):
                cmp = compare_arrays(name, e, actual[name])
                if not cmp.ok:
                    return "wrong", f"output {name!r}: {cmp.message}"
    except Exception as e:  # noqa: BLE001
        return "unrunnable", f"{type(e).__name__}: {str(e)[:200]}"
    return "verified", ""


_BASELINE: dict[int, bool] = {}


def _runs_at_source(index: int) -> bool:
    """Whether the case verifies unconverted (Bernoulli's unseeded draws and missing codecs do not)."""
    if index not in _BASELINE:
        from opconv.testdata import node_cases

        case = node_cases()[index]
        model = case.load_model()
        _BASELINE[index] = judge(case, model, source_opset(model))[0] == "verified"
    return _BASELINE[index]


def run_pair(args) -> list[tuple]:
    index, target, converters = args
    from opconv.testdata import node_cases

    case = node_cases()[index]
    model = case.load_model()
    source = source_opset(model)
    direction = "up" if target > source else "down"
    if not _runs_at_source(index):
        return [(case.name, target, c, direction, "skipped", "fails at its own opset") for c in converters]
    rows = []
    for converter in converters:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                converted = convert_with(converter, model, target)
        except Exception as e:  # noqa: BLE001 - a refusal (or a crash of the reference converter)
            rows.append(
                (
                    case.name,
                    target,
                    converter,
                    direction,
                    "refused",
                    str(e).splitlines()[0][:300] if str(e) else type(e).__name__,
                )
            )
            continue
        outcome, message = judge(case, converted, target)
        rows.append((case.name, target, converter, direction, outcome, message))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default="1-21", help="opsets: '1-21' or '7,13,21'")
    ap.add_argument("-k", default="", help="only cases whose name contains this text")
    ap.add_argument("--only", choices=CONVERTERS, help="run one converter")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--details", help="write every pair's outcome to this JSON file")
    ap.add_argument("--show", default="wrong,checker", help="outcomes to list for opconv (comma separated)")
    args = ap.parse_args(argv)
    os.environ.setdefault("CI", "true")
    if "-" in args.targets:
        lo, hi = args.targets.split("-")
        targets = list(range(int(lo), int(hi) + 1))
    else:
        targets = [int(t) for t in args.targets.split(",")]
    converters = (args.only,) if args.only else CONVERTERS

    from opconv.testdata import node_cases

    cases = node_cases()
    work = []
    for i, case in enumerate(cases):
        if args.k and args.k not in case.name:
            continue
        source = source_opset(case.load_model())
        if source is None:
            continue
        work.extend((i, t, converters) for t in targets if t != source)
    start = time.perf_counter()
    rows: list[tuple] = []
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            for r in pool.imap_unordered(run_pair, work, chunksize=16):
                rows.extend(r)
    else:
        for w in work:
            rows.extend(run_pair(w))
    elapsed = time.perf_counter() - start

    totals: dict[tuple[str, str], Counter] = {}
    skipped = {(name, target) for name, target, _, _, outcome, _ in rows if outcome == "skipped"}
    for _, _, converter, direction, outcome, _ in rows:
        if outcome == "skipped":
            continue
        c = totals.setdefault((converter, direction), Counter())
        c["attempted"] += 1
        c[outcome] += 1
        if outcome != "refused":
            c["converted"] += 1
    show = set(args.show.split(",")) if args.show else set()
    for name, target, converter, _direction, outcome, message in sorted(rows):
        if converter == "opconv" and outcome in show:
            print(f"  {outcome:10s} {name} -> {target}: {message}")
    print(
        f"\n{len(work)} (case, target) pairs, targets {targets[0]}..{targets[-1]}, {elapsed:.0f} s; "
        f"{len(skipped)} pairs skipped (the case fails unconverted: {len({n for n, _ in skipped})} cases)"
    )
    header = f"{'converter':10s} {'direction':9s} {'attempted':>9s} " + " ".join(f"{o:>10s}" for o in OUTCOMES)
    print(header)
    for (converter, direction), c in sorted(totals.items()):
        print(f"{converter:10s} {direction:9s} {c['attempted']:9d} " + " ".join(f"{c[o]:10d}" for o in OUTCOMES))
    if args.details:
        with open(args.details, "w") as f:
            json.dump(
                [dict(zip(("case", "target", "converter", "direction", "outcome", "message"), r)) for r in rows],
                f,
                indent=0,
            )
    bad = sum(c["wrong"] + c["checker"] + c["unrunnable"] for (conv, _), c in totals.items() if conv == "opconv")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
