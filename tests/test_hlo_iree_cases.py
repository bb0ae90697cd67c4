"""ONNX -> HLO -> StableHLO -> IREE: node cases and light models converted to HLO, exported to StableHLO and
run in IREE's CPU runtime compute the outputs shipped with onnx.

The node cases are converted as ``tests/test_onnx_to_hlo.py`` converts them (its helpers are reused), each
exported as one ``func.func`` checked by MLIR's parser and verifier, identical functions compiled once, and
the functions packed into small modules compiled two at a time (IREE spends ~0.15 CPU-s per small function and
grows superlinearly with module size).  A module that IREE cannot compile is split until the failing function
is alone; such failures are counted per reason, and only the documented IREE limitations below are allowed.

Compiling all ~1,100 distinct functions takes ~5 CPU-minutes, beyond the CI budget, so by default the sweep
compiles, shortest first, the functions that together hold every (StableHLO op, result element types) pair the
node cases produce, and checks every case whose function is identical to a chosen one.  Set
``OPCONV_IREE_ALL_CASES=1`` for every case.
"""

from __future__ import annotations

import collections
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest

import opconv
from opconv import testdata
from opconv.compare import compare_arrays
from opconv.converters.onnx_to_hlo import onnx_to_hlo
from opconv.dialects.hlo.stablehlo import StableHloExportError, export, export_function, module_text
from tests import known
from tests.test_onnx_to_hlo import _convert_case, _reason_key

iree_runtime = pytest.importorskip("tests.iree_runtime")

SUITE = "hlo-iree"
ALL_CASES = os.environ.get("OPCONV_IREE_ALL_CASES") == "1"
FUNCTIONS_PER_MODULE = 40
# Verified in IREE when this file landed (onnx 1.23.2, iree 3.13, default selection: 223); may only grow.
MIN_VERIFIED = 220

# Compile failures that are IREE's, not the exporter's (diagnostic text -> why): functions that hit them are
# not compiled with the others, and their cases are listed in tests/known_failures.json.
IREE_LIMITATIONS = {
    "undefined symbol: fmod": "IREE's embedded CPU executables have no libm fmod (float64 remainder)",
}


@dataclass
class Exported:
    case: object
    function: str  # the name of the compiled function computing this case
    feeds: list
    expected: list


def _function_key(text: str) -> str:
    """The function's text without its name and comments: equal keys compile to the same function."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("//")]
    return re.sub(r"func\.func @\w+", "func.func @f", "\n".join(lines))


def _mlir_problem(text: str) -> str | None:
    """MLIR's parser / verifier complaint about a one-function module, or None."""
    from iree.compiler import ir

    try:
        with ir.Context() as context:
            module = ir.Module.parse(module_text([text]), context)
            return None if module.operation.verify() else "does not verify"
    except Exception as error:  # the bindings raise MLIRError or ValueError with the diagnostics
        lines = [ln.strip() for ln in str(error).splitlines() if "error" in ln]
        return (lines[-1] if lines else str(error))[:200]


def _known_limitation(text: str) -> str | None:
    """The IREE_LIMITATIONS key a function is known to hit, or None."""
    if re.search(r'"stablehlo\.remainder".*-> tensor<[0-9x]*f64>', text):
        return "undefined symbol: fmod"
    return None


def _compile(functions: dict[str, str]) -> tuple[list[bytes], dict[str, str]]:
    """Binaries holding as many of ``functions`` (name -> func text) as IREE compiles, and name -> error."""
    from iree.compiler import CompilerToolError

    names = list(functions)
    try:
        return [iree_runtime.compile_stablehlo(module_text([functions[n] for n in names], names[0]))], {}
    except CompilerToolError as error:
        message = str(error)
    if len(names) == 1:
        return [], {names[0]: _diagnostic(message)}
    named = [n for n in names if re.search(rf"\b{re.escape(n)}_dispatch", message)]
    if named and len(named) < len(names):  # IREE named the culprit (a dispatch of it): compile the rest
        rest = {n: t for n, t in functions.items() if n not in named}
        binaries, failed = _compile(rest)
        for n in named:
            failed.update(_compile({n: functions[n]})[1])
        return binaries, failed
    half = len(names) // 2
    first, failed = _compile({n: functions[n] for n in names[:half]})
    second, more = _compile({n: functions[n] for n in names[half:]})
    return first + second, {**failed, **more}


def _diagnostic(message: str) -> str:
    for pattern in IREE_LIMITATIONS:
        if pattern in message:
            return pattern
    errors = [ln.split("error:", 1)[1].strip() for ln in message.splitlines() if "error:" in ln]
    return (errors[0] if errors else message.strip().splitlines()[0])[:200]


def _compare(expected: list, actual: list) -> str:
    """'' when every output matches with the per-dtype tolerances of the HLO executor sweep, else why not."""
    if len(actual) < len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for i, (want, got) in enumerate(zip(expected, actual)):
        cmp = compare_arrays(f"output {i}", want, got)
        if not cmp.ok:
            return cmp.message
    return ""


def _features(text: str) -> set[tuple[str, tuple[str, ...]]]:
    """(StableHLO op, element types of its results) of every operation of a function."""
    found = set()
    for match in re.finditer(r'"(stablehlo\.\w+)"\(.*?-> ([^\n]*)', text):
        found.add((match.group(1), tuple(sorted(set(re.findall(r"x?([a-z]+\d+)>", match.group(2)))))))
    return found


def _select(functions: dict[str, str]) -> set[str]:
    """Functions covering every (op, result element types) pair of ``functions``, the shortest first."""
    covered, chosen = set(), set()
    for name in sorted(functions, key=lambda n: (functions[n].count("\n"), n)):
        features = _features(functions[name])
        if features - covered:
            chosen.add(name)
            covered |= features
    return chosen


@pytest.fixture(scope="module")
def sweep():
    refused, invalid = collections.Counter(), {}
    functions: dict[str, str] = {}  # key -> func text named @fnN
    names_by_key: dict[str, str] = {}
    cases: list[Exported] = []
    for case in testdata.node_cases():
        model, _ = _convert_case(case)
        if model is None:
            continue  # the converter's refusals are counted by tests/test_onnx_to_hlo.py
        try:
            text = export_function(model, "f")
        except StableHloExportError as error:
            refused[_reason_key(str(error).split(": ", 1)[-1])] += 1
            continue
        key = _function_key(text)
        if key not in names_by_key:
            problem = _mlir_problem(text)
            if problem is not None:
                invalid[case.name] = problem
                continue
            names_by_key[key] = f"fn{len(names_by_key)}"
            functions[names_by_key[key]] = text.replace("func.func @f(", f"func.func @{names_by_key[key]}(", 1)
        feeds = case.feeds(0)
        cases.append(Exported(case, names_by_key[key], [feeds[v.name] for v in model.graph.inputs],
                              list(case.datasets[0][1])))
    chosen = set(functions) if ALL_CASES else _select(functions)
    # Functions IREE is known to reject are not compiled (a failed module costs a recompile of the rest).
    compile_failed = {n: _known_limitation(functions[n]) for n in chosen if _known_limitation(functions[n])}
    chosen_list = sorted(set(chosen) - set(compile_failed), key=lambda n: int(n[2:]))
    parts = [chosen_list[i::max(1, -(-len(chosen_list) // FUNCTIONS_PER_MODULE))]
             for i in range(max(1, -(-len(chosen_list) // FUNCTIONS_PER_MODULE)))]
    with ThreadPoolExecutor(max_workers=2) as pool:  # iree-compile runs as a subprocess
        results = list(pool.map(lambda part: _compile({n: functions[n] for n in part}), parts))
    binaries = [b for bs, _ in results for b in bs]
    compile_failed.update({n: why for _, failed in results for n, why in failed.items()})
    module = iree_runtime.IreeModule([], binaries)
    outcome: dict[str, tuple[str, str]] = {}
    for item in cases:
        if item.function not in chosen:
            continue
        if item.function in compile_failed:
            outcome[item.case.name] = ("iree compile", compile_failed[item.function])
            continue
        try:
            with np.errstate(all="ignore"):
                got = module.call(item.function, *item.feeds)
        except Exception as error:  # the runtime raises RuntimeError/ValueError from its C++ status
            outcome[item.case.name] = ("iree run", str(error).splitlines()[0][:200])
            continue
        problem = _compare(item.expected, got)
        outcome[item.case.name] = ("wrong", problem) if problem else ("verified", "")
    return outcome, refused, invalid, len(functions), len(chosen)


def test_node_cases_run_in_iree_as_stablehlo(sweep):
    outcome, refused, invalid, distinct, compiled = sweep
    counts = collections.Counter(status for status, _ in outcome.values())
    scope = "all" if ALL_CASES else "those covering every op and result type"
    print(f"\nONNX -> HLO -> StableHLO -> IREE node cases ({scope}: "
          f"{compiled} of {distinct} distinct functions compiled): {counts['verified']} verified in IREE, "
          f"{counts['wrong']} wrong, {counts['iree compile']} IREE compile failures, {counts['iree run']} IREE run "
          f"failures, {sum(refused.values())} export refused, {len(invalid)} exported but invalid StableHLO")
    for reason, n in refused.most_common():
        print(f"  export refused {n:4d}: {reason}")
    for name, why in sorted(invalid.items()):
        print(f"  invalid StableHLO: {name}: {why}")
    for name, (status, why) in sorted(outcome.items()):
        if status != "verified":
            print(f"  {status}: {name}: {why}")
    listed = known.KNOWN.get(SUITE, {})
    failing = {name: f"invalid StableHLO: {why}" for name, why in invalid.items()}
    failing.update({name: f"{status}: {why}" for name, (status, why) in outcome.items() if status != "verified"})
    unexpected = {name: why for name, why in failing.items() if name not in listed}
    assert not unexpected, f"exported but not verified in IREE: {unexpected}"
    now_pass = [name for name in listed if outcome.get(name, ("", ""))[0] == "verified"]
    assert not now_pass, f"listed in tests/known_failures.json ({SUITE}) but verified now: {now_pass}"
    assert counts["verified"] >= MIN_VERIFIED


# The two smallest light models (by weights): the others carry 25-550 MB of weights, which as MLIR constants
# would take minutes to write and compile.
LIGHT_IN_IREE = ["light_squeezenet", "light_shufflenet"]
LIGHT = [c for c in testdata.light_cases() if c.name in LIGHT_IN_IREE]


@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model_runs_in_iree_as_stablehlo(case):
    hlo = onnx_to_hlo(opconv.load(case.path))
    feeds = testdata.random_feeds(case.load_model())
    module = iree_runtime.IreeModule(export(hlo))
    got = module.call("main", *[feeds[v.name] for v in hlo.graph.inputs])
    problem = _compare(case.datasets[0][1], got)
    assert not problem, problem
