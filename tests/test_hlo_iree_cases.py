"""ONNX -> HLO -> StableHLO -> IREE: every node case and every light model converted to HLO, exported to
StableHLO and run in IREE's CPU runtime computes the outputs shipped with onnx.

The node cases are converted as ``tests/test_onnx_to_hlo.py`` converts them (its helpers are reused), each
exported as one ``func.func`` checked by MLIR's parser and verifier, identical functions compiled once (~1,090
distinct functions for ~1,360 cases), and the functions packed into modules compiled two at a time.  A module
that IREE cannot compile is split until the failing function is alone; such failures are counted per reason, and
only the documented IREE limitations below are allowed.

Where the time goes (iree 3.13, 2-core AVX2 machine): compiling costs ~0.3 CPU-s per node function, 300-360
CPU-s for the sweep, whatever the module size (20 to 160 functions per module cost alike), ``--iree-opt-level``
(O0 saves nothing: the time is per-dispatch codegen) or MLIR threading; converting, exporting and running add
~35 s.  The node test takes 4m40 on a 2-core machine with little else running.

The light models are exported with their weights as function arguments (``export(..., weights="arguments")``),
compiled once each with convolutions as im2col + matmul, and run twice: with their own weights against the
shipped output, and with seeded perturbed weights against onnxruntime (the shipped weights make the class
probabilities uniform whatever the input).  The nine take ~2m15 together there (densenet121 and the inceptions
compile for 25-45 CPU-s each; vgg19 builds and converts 575 MB of weights); the whole file 7 min, 750 CPU-s.
"""

from __future__ import annotations

import collections
import copy
import functools
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
from opconv.dialects.hlo.stablehlo import StableHloExportError, export, export_function, module_text, weight_arguments
from tests import known
from tests.test_onnx_to_hlo import _convert_case, _reason_key

pytestmark = pytest.mark.slow  # a long sweep: the full suite runs it, `-m "not slow"` skips it

iree_runtime = pytest.importorskip("tests.iree_runtime")

SUITE = "hlo-iree"
FUNCTIONS_PER_MODULE = 40
# Verified in IREE with onnx 1.23.2 and iree 3.13 (every node case); may only grow.
MIN_VERIFIED = 1360

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


@functools.cache
def _mlir_context():
    """One MLIR context for every check (creating one costs ~20 ms, parsing a small function ~1 ms)."""
    from iree.compiler import ir

    return ir.Context()


def _mlir_problem(text: str) -> str | None:
    """MLIR's parser / verifier complaint about a one-function module, or None."""
    from iree.compiler import ir

    try:
        module = ir.Module.parse(module_text([text]), _mlir_context())
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
        cases.append(
            Exported(case, names_by_key[key], [feeds[v.name] for v in model.graph.inputs], list(case.datasets[0][1]))
        )
    # Functions IREE is known to reject are not compiled (a failed module costs a recompile of the rest).
    compile_failed = {n: _known_limitation(t) for n, t in functions.items() if _known_limitation(t)}
    to_compile = [n for n in functions if n not in compile_failed]
    count = max(1, -(-len(to_compile) // FUNCTIONS_PER_MODULE))
    parts = [to_compile[i::count] for i in range(count)]  # interleaved: neighbours are often alike in cost
    with ThreadPoolExecutor(max_workers=2) as pool:  # iree-compile runs as a subprocess
        results = list(pool.map(lambda part: _compile({n: functions[n] for n in part}), parts))
    binaries = [b for bs, _ in results for b in bs]
    compile_failed.update({n: why for _, failed in results for n, why in failed.items()})
    module = iree_runtime.IreeModule([], binaries)
    outcome: dict[str, tuple[str, str]] = {}
    for item in cases:
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
    return outcome, refused, invalid, len(functions)


def test_node_cases_run_in_iree_as_stablehlo(sweep):
    outcome, refused, invalid, distinct = sweep
    counts = collections.Counter(status for status, _ in outcome.values())
    print(
        f"\nONNX -> HLO -> StableHLO -> IREE node cases ({distinct} distinct functions): "
        f"{counts['verified']} verified in IREE, "
        f"{counts['wrong']} wrong, {counts['iree compile']} IREE compile failures, {counts['iree run']} IREE run "
        f"failures, {sum(refused.values())} export refused, {len(invalid)} exported but invalid StableHLO"
    )
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


def _with_logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """A light model that also returns the input of its final Softmax: with the shipped weights the class
    probabilities are exactly uniform whatever the input, while the logits are not."""
    model = copy.deepcopy(model)
    last = model.graph.node[-1]
    if last.op_type == "Softmax":
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(last.input[0]))
    return model


def _perturbed(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its float ConstantOfShape weights (all 0.02) as Constant nodes holding the fill times seeded
    uniform float32 factors in [0.5, 1.5) (same magnitudes and signs, no two elements equal)."""
    rng = np.random.default_rng(0)
    model = copy.deepcopy(model)
    shapes = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape" or not node.attribute:
            continue
        fill = onnx.numpy_helper.to_array(node.attribute[0].t).reshape(())
        if fill.dtype != np.float32:
            continue
        shape = tuple(int(d) for d in shapes[node.input[0]])
        weight = fill * (rng.random(shape, dtype=np.float32) + np.float32(0.5))
        node.CopyFrom(
            onnx.helper.make_node(
                "Constant", [], list(node.output), node.name, value=onnx.numpy_helper.from_array(weight)
            )
        )
    return model


LIGHT = testdata.light_cases()
LIGHT_TEST = "test_light_model_runs_in_iree_as_stablehlo"


@pytest.fixture(scope="module")
def light_modules(request):
    """Name -> (HLO of the shipped model, future of its VM binary) for the selected light models.

    The shipped models convert in about a second each (their ConstantOfShape weights fold to broadcast views), and
    their modules compile two at a time in the background, in test order, while the tests build, convert and run
    the perturbed models: compiling is most of a light model's time (densenet121 has 264 dispatches)."""
    names = {
        item.callspec.params["case"].name
        for item in request.session.items
        if getattr(item, "originalname", "") == LIGHT_TEST
    }
    with ThreadPoolExecutor(max_workers=2) as pool:  # iree-compile runs as a subprocess
        modules = {}
        for case in LIGHT:
            if case.name in names:
                hlo = onnx_to_hlo(opconv.load(_with_logits(case.load_model())))
                text = export(hlo, weights="arguments", min_weight_bytes=0)
                modules[case.name] = hlo, pool.submit(iree_runtime.compile_stablehlo, text, iree_runtime.IM2COL_FLAGS)
        yield modules
        for _, binary in modules.values():
            binary.cancel()


@pytest.mark.parametrize("case", LIGHT, ids=[c.name for c in LIGHT])
def test_light_model_runs_in_iree_as_stablehlo(case, light_modules):
    """Each light model compiled once with its weights as function arguments, then run twice: with its own weights
    (compared with the shipped output) and with perturbed weights (all outputs and the logits compared with
    onnxruntime on the perturbed ONNX model, the arguments taken from its own conversion)."""
    import onnxruntime

    hlo, binary = light_modules[case.name]
    own = weight_arguments(hlo, min_weight_bytes=0)
    shipped = _with_logits(case.load_model())
    perturbed = _perturbed(shipped)
    converted = onnx_to_hlo(opconv.load(perturbed))
    weights = dict(weight_arguments(converted, min_weight_bytes=0))
    assert {n: (a.shape, a.dtype) for n, a in own} == {n: (a.shape, a.dtype) for n, a in weights.items()}, (
        "perturbing the weights changed the function's weight arguments"
    )
    module = iree_runtime.IreeModule([], [binary.result()])
    feeds = testdata.random_feeds(shipped)
    inputs = [feeds[v.name] for v in hlo.graph.inputs]
    problem = _compare(case.datasets[0][1], module.call("main", *inputs, *[array for _, array in own])[:1])
    assert not problem, f"own weights vs the shipped output: {problem}"
    session = onnxruntime.InferenceSession(perturbed.SerializeToString(), providers=["CPUExecutionProvider"])
    problem = _compare(session.run(None, feeds), module.call("main", *inputs, *[weights[n] for n, _ in own]))
    assert not problem, f"perturbed weights vs onnxruntime: {problem}"
