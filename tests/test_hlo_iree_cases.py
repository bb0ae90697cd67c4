"""ONNX -> HLO -> StableHLO -> IREE: node cases and light models converted to HLO, exported to StableHLO and
run in IREE's CPU runtime compute the outputs shipped with onnx.

The node cases are converted as ``tests/test_onnx_to_hlo.py`` converts them (its helpers are reused), each
exported as one ``func.func`` checked by MLIR's parser and verifier, identical functions compiled once, and
the functions packed into small modules compiled two at a time (IREE spends ~0.15 CPU-s per small function and
grows superlinearly with module size).  A module that IREE cannot compile is split until the failing function
is alone; such failures are counted per reason, and only the documented IREE limitations below are allowed.

Compiling all ~1,100 distinct functions takes 5-10 CPU-minutes, beyond the CI budget, so by default the sweep
compiles, shortest first, the functions that together hold every (StableHLO op, result element types) pair the
node cases produce, and checks every case whose function is identical to a chosen one.

The light models are exported with their weights as function arguments (``export(..., weights="arguments")``),
compiled once each, and run twice: with their own weights against the shipped output, and with seeded perturbed
weights against onnxruntime (the shipped weights make the class probabilities uniform whatever the input).

Set ``OPCONV_IREE_ALL_CASES=1`` for every node case and every light model.
"""

from __future__ import annotations

import collections
import copy
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import opconv
from opconv import testdata
from opconv.compare import compare_arrays
from opconv.converters.onnx_to_hlo import onnx_to_hlo
from opconv.dialects.hlo.stablehlo import (StableHloExportError, export, export_function, module_text,
                                           weight_arguments)
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


def _light_variant(model: onnx.ModelProto, seed: int | None) -> onnx.ModelProto:
    """A light model whose ConstantOfShape weights (all 0.02) are Constant nodes holding the full tensors, times
    seeded uniform float32 factors in [0.5, 1.5) when ``seed`` is given (same magnitudes and signs, no two elements equal),
    which also returns the input of its final Softmax: with the shipped weights the class probabilities are exactly
    uniform whatever the input, while the logits are not."""
    rng = np.random.default_rng(seed)
    model = copy.deepcopy(model)
    shapes = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or not node.attribute:
            continue
        fill = onnx.numpy_helper.to_array(node.attribute[0].t).reshape(())
        shape = tuple(int(d) for d in shapes[node.input[0]])
        if seed is not None and fill.dtype == np.float32:
            weight = fill * (rng.random(shape, dtype=np.float32) + np.float32(0.5))
        else:
            weight = np.full(shape, fill)
        node.CopyFrom(onnx.helper.make_node("Constant", [], list(node.output), node.name,
                                            value=onnx.numpy_helper.from_array(weight)))
    last = model.graph.node[-1]
    if last.op_type == "Softmax":
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(last.input[0]))
    return model


def _without_comments(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//"))


# Light models run by default: ~20 s each on a busy 2-core machine (alexnet passes 244 MB of weights).  The others
# take 30-360 s each there and run with OPCONV_IREE_ALL_CASES=1: zfnet512 (alexnet's shape, 349 MB of weights to
# build twice), vgg19 (575 MB, 20 GFLOP per run), densenet121, inception_v1/v2 and resnet50 (53-121 convolution
# shapes, each its own dispatch to compile).
LIGHT_BY_DEFAULT = {"light_squeezenet", "light_shufflenet", "light_bvlc_alexnet"}
LIGHT = [c for c in testdata.light_cases() if ALL_CASES or c.name in LIGHT_BY_DEFAULT]


@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model_runs_in_iree_as_stablehlo(case):
    """Each light model compiled once with its weights as function arguments, then run twice: with its own weights
    (compared with the shipped output) and with perturbed weights (all outputs and the logits compared with
    onnxruntime on the perturbed ONNX model)."""
    import onnxruntime

    shipped = case.load_model()
    original, perturbed = _light_variant(shipped, None), _light_variant(shipped, 0)
    feeds = testdata.random_feeds(shipped)
    converted = [onnx_to_hlo(opconv.load(m)) for m in (original, perturbed)]
    # Every constant is an argument, so the two functions are equal.
    texts = [export(hlo, weights="arguments", min_weight_bytes=0) for hlo in converted]
    assert _without_comments(texts[0]) == _without_comments(texts[1]), "perturbing the weights changed the function"
    module = iree_runtime.IreeModule(texts[0])
    inputs = [feeds[v.name] for v in converted[0].graph.inputs]

    def run(hlo):
        return module.call("main", *inputs, *[array for _, array in weight_arguments(hlo, min_weight_bytes=0)])

    problem = _compare(case.datasets[0][1], run(converted[0])[:1])
    assert not problem, f"own weights vs the shipped output: {problem}"
    session = onnxruntime.InferenceSession(perturbed.SerializeToString(), providers=["CPUExecutionProvider"])
    problem = _compare(session.run(None, feeds), run(converted[1]))
    assert not problem, f"perturbed weights vs onnxruntime: {problem}"
