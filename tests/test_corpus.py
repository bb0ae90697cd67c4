"""The real-model corpus (``fixtures/corpus/``, built by ``scripts/build_corpus.py``) through every target.

One case per (model, target).  Each model's stored inputs go through opconv and the runtimes, and every output is
compared with the onnxruntime outputs stored beside the model (``opconv/compare.py``'s per-dtype tolerances):

- ``run``: opconv's ONNX executor;
- ``onnx-to-ir``: converted with the manifest's concrete input shapes, run in OpenVINO's CPU plugin (f32) and in
  opconv's IR executor; ``ir-to-onnx``: that IR converted back to ONNX, run in onnxruntime;
- ``onnx-to-hlo``: run in opconv's HLO executor and, exported to StableHLO, compiled and run by IREE;
  ``hlo-to-onnx``: that HLO converted back to ONNX, run in onnxruntime;
- ``upgrade-21``, ``downgrade-13``, ``downgrade-11``: ``opconv.convert_version``, checked by ``onnx.checker`` and
  run in onnxruntime and in opconv;
- ``decompose`` (the models onnxruntime's tools made): ``opconv.decompose``, which must leave no contrib node
  (or refuse, naming each node and why), checked by ``onnx.checker`` and run in onnxruntime and in opconv.

A pair is *verified*, *refused* (opconv raised an ``OpconvError``: listed in ``tests/known_failures.json`` under
``corpus`` with its message; a listed pair that starts passing fails, so the list only shrinks) or *wrong* (a
conversion gave different numbers, a runtime rejected what opconv wrote, or opconv crashed with something other
than an ``OpconvError``): always a failure, never listed.  ``python scripts/corpus_status.py`` rewrites the
``corpus`` list from the current outcomes and prints the counts per target.

Each model converts once per direction per session (module caches); IREE compiles (2-4 s each) run two at a time
in the background from the start of the module, while the other targets' cases run (onnx-to-hlo comes last).
Measured on 2 cores: 409 cases in 2 min 48 s of CPU (IREE on every model); most of it is OpenVINO compiling the
IR of the quantized models, whose QDQ / integer ops become thousands of opset1 layers today.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import onnx
import pytest

import opconv
from opconv.compare import compare_arrays, tolerance

from . import known

pytestmark = pytest.mark.slow  # a long sweep: the full suite runs it, `-m "not slow"` skips it

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fixtures", "corpus")
SUITE = "corpus"
# onnx-to-hlo last: its IREE compiles run in the background while the other targets' cases run
TARGETS = [
    "run",
    "onnx-to-ir",
    "ir-to-onnx",
    "hlo-to-onnx",
    "upgrade-21",
    "downgrade-13",
    "downgrade-11",
    "decompose",
    "onnx-to-hlo",
]

with open(os.path.join(CORPUS, "manifest.json"), encoding="utf-8") as _f:
    MANIFEST = {e["name"]: e for e in json.load(_f)["models"]}


class Outcome(Exception):
    """How a (model, target) pair ended when it did not verify: ``kind`` is 'refused' or 'wrong'."""

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


def _one_line(error: BaseException) -> str:
    """The message on one line, paths relative to the repository (the list must not depend on the checkout)."""
    text = " ".join(str(error).replace(ROOT + os.sep, "").split())
    return (text or type(error).__name__)[:400]


def _opconv(step: str, fn, *args, **kwargs):
    """Call opconv: an OpconvError is a refusal, anything else a crash (a bug, reported as wrong)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except opconv.OpconvError as error:
        raise Outcome("refused", f"{step}: {_one_line(error)}") from None
    except Exception as error:  # noqa: BLE001 - any other exception is an opconv bug
        raise Outcome("wrong", f"{step} crashed: {type(error).__name__}: {_one_line(error)}") from None


def _runtime(step: str, fn, *args):
    """Call a runtime on what opconv wrote: failing to load or run it means opconv wrote something wrong."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args)
    except Exception as error:  # noqa: BLE001
        raise Outcome("wrong", f"{step} failed on opconv's output: {_one_line(error)}") from None


def _compute_tolerance(proto: onnx.ModelProto) -> tuple[float | None, float | None]:
    """(rtol, atol) of the narrowest float type the model computes in, or (None, None) for the per-dtype table.

    A float16 model with float32 inputs and outputs (onnxruntime's ``keep_io_types``) computes in float16: its
    float32 outputs carry float16 rounding, so they are compared at float16's tolerance, not float32's.
    """
    narrow = {onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BFLOAT16: "bfloat16"}
    found = {t.data_type for t in proto.graph.initializer} | {
        a.i for n in proto.graph.node if n.op_type == "Cast" for a in n.attribute if a.name == "to"
    }
    kinds = [narrow[t] for t in found if t in narrow]
    if not kinds:
        return None, None
    return max((tolerance(k) for k in kinds), key=lambda t: t[0])


class Model:
    """One corpus model: its ONNX file, stored inputs and onnxruntime outputs, and (cached) conversions."""

    def __init__(self, name: str):
        self.name = name
        self.entry = MANIFEST[name]
        self.path = os.path.join(CORPUS, name + ".onnx")
        data = np.load(os.path.join(CORPUS, name + ".npz"))
        self.inputs = {k[6:]: data[k] for k in data.files if k.startswith("input:")}
        self.expected = {k[7:]: data[k] for k in data.files if k.startswith("output:")}
        self.shapes = {k: tuple(v) for k, v in self.entry["shapes"].items()}
        self.tolerance = _compute_tolerance(onnx.load(self.path, load_external_data=False))
        self._cache: dict[str, object] = {}

    def cached(self, key: str, make):
        """``make()`` once per key; a raised Outcome is cached and raised again."""
        if key not in self._cache:
            try:
                self._cache[key] = make()
            except Outcome as outcome:
                self._cache[key] = outcome
        value = self._cache[key]
        if isinstance(value, Outcome):
            raise Outcome(value.kind, value.detail)
        return value

    def compare(self, runtime: str, outputs) -> None:
        """Compare ``outputs`` (a dict by name, or a list by position) with the stored outputs."""
        names = list(self.expected)
        if isinstance(outputs, dict):
            outputs = [outputs[n] for n in names] if set(names) <= set(outputs) else list(outputs.values())
        if len(outputs) != len(names):
            raise Outcome("wrong", f"{runtime}: {len(outputs)} outputs, onnxruntime gave {len(names)}")
        for name, actual in zip(names, outputs):
            cmp = compare_arrays(name, self.expected[name], actual, *self.tolerance)
            if not cmp.ok:
                raise Outcome("wrong", f"{runtime}: output {name}: {cmp.message}")

    def source_passes_checker(self) -> bool:
        def check() -> bool:
            try:
                onnx.checker.check_model(onnx.load(self.path), True)
                return True
            except Exception:  # noqa: BLE001 - any checker complaint
                return False

        return self.cached("source passes checker", check)

    def feeds_for(self, input_names: list[str]) -> dict:
        """The stored inputs under ``input_names`` (by name, else by position)."""
        if set(input_names) <= set(self.inputs):
            return {n: self.inputs[n] for n in input_names}
        return dict(zip(input_names, self.inputs.values()))

    # -- conversions, each once ------------------------------------------------

    def source(self):
        return self.cached("source", lambda: opconv.load(self.path))

    def ir(self):
        """(converted IR Model, path of its saved .xml)."""

        def make():
            converted = _opconv("onnx-to-ir", opconv.convert, self.source(), to="openvino", input_shapes=self.shapes)
            xml = os.path.join(_workdir(), f"{self.name}.xml")
            _opconv("saving the IR", opconv.save, converted, xml)
            return converted, xml

        return self.cached("ir", make)

    def hlo(self):
        return self.cached(
            "hlo", lambda: _opconv("onnx-to-hlo", opconv.convert, self.source(), to="hlo", input_shapes=self.shapes)
        )

    def version(self, opset: int) -> onnx.ModelProto:
        from opconv.dialects.onnx.io import to_proto

        def make():
            converted = _opconv(f"convert_version to {opset}", opconv.convert_version, self.source(), opset)
            return _opconv("writing the protobuf", to_proto, converted)

        return self.cached(f"opset{opset}", make)


_WORKDIR: list[str] = []


def _workdir() -> str:
    if not _WORKDIR:
        _WORKDIR.append(tempfile.mkdtemp(prefix="opconv-corpus-"))
    return _WORKDIR[0]


_MODELS: dict[str, Model] = {}


def model(name: str) -> Model:
    if name not in _MODELS:
        _MODELS[name] = Model(name)
    return _MODELS[name]


# ---------------------------------------------------------------------------
# Runtimes
# ---------------------------------------------------------------------------


def _ort_run(proto: onnx.ModelProto, m: Model) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    if m.entry.get("ort_optimization") == "basic":  # as the stored outputs were made (see the manifest's notes)
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return session.run(None, m.feeds_for([i.name for i in session.get_inputs()]))


def _openvino_run(xml: str, m: Model) -> list:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    feeds = m.feeds_for([p.get_any_name() for p in compiled.inputs])
    result = compiled(feeds)
    outputs = []
    for name, expected in m.expected.items():
        try:  # every output is found by its ONNX name, as code reading outputs by name expects
            port = compiled.output(name)
        except RuntimeError:
            raise Outcome(
                "wrong",
                f"OpenVINO has no output named {name!r} (it has {[o.get_any_name() for o in compiled.outputs]})",
            ) from None
        value = result[port]
        if value.dtype != expected.dtype and value.dtype.kind in "iufb" and expected.dtype.kind in "iufb":
            # OpenVINO reports IR v10 outputs in its legacy types (i64 -> i32, u8/bool -> f32); values are compared.
            value = value.astype(expected.dtype)
        outputs.append(value)
    return outputs


_IREE_POOL: list[ThreadPoolExecutor] = []
_IREE_COMPILES: dict[str, Future] = {}


def start_iree_compiles(names) -> None:
    """Convert ``names`` to HLO and StableHLO here, and compile them in the background, two at a time (iree-compile
    is a subprocess; opconv's conversions stay in this thread)."""
    from opconv.dialects.hlo.stablehlo import export

    from .iree_runtime import compile_stablehlo

    def compile_text(text):
        try:
            return compile_stablehlo(text)
        except Exception as error:  # noqa: BLE001
            return Outcome("wrong", f"IREE could not compile opconv's StableHLO: {_one_line(error)}")

    if not _IREE_POOL:
        _IREE_POOL.append(ThreadPoolExecutor(max_workers=2))
    for name in names:
        if name in _IREE_COMPILES:
            continue
        try:
            text = _opconv("StableHLO export", export, model(name).hlo(), weights="arguments", min_weight_bytes=0)
        except Outcome as refused:
            _IREE_COMPILES[name] = Future()
            _IREE_COMPILES[name].set_result(refused)
            continue
        _IREE_COMPILES[name] = _IREE_POOL[0].submit(compile_text, text)


def _iree_run(m: Model, hlo) -> list:
    from opconv.dialects.hlo.stablehlo import weight_arguments

    from .iree_runtime import IreeModule

    start_iree_compiles([m.name])
    binary = _IREE_COMPILES[m.name].result()
    if isinstance(binary, Outcome):
        raise binary
    module = _runtime("IREE load", IreeModule, [], [binary])
    inputs = m.feeds_for([v.name for v in hlo.graph.inputs])
    weights = [a for _, a in weight_arguments(hlo, min_weight_bytes=0)]
    return _runtime("IREE run", module.call, "main", *inputs.values(), *weights)


# ---------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------


def check_run(m: Model) -> None:
    m.compare("opconv ONNX executor", _opconv("opconv run", opconv.run, m.source(), m.inputs))


def check_onnx_to_ir(m: Model) -> None:
    converted, xml = m.ir()
    m.compare("OpenVINO CPU (f32)", _runtime("OpenVINO", _openvino_run, xml, m))
    ir = _opconv("loading the IR", opconv.load, xml)
    m.compare(
        "opconv IR executor",
        _opconv("opconv IR executor", opconv.run, ir, m.feeds_for([v.name for v in ir.graph.inputs])),
    )


def check_ir_to_onnx(m: Model) -> None:
    from opconv.dialects.onnx.io import to_proto

    _, xml = m.ir()  # a refused onnx-to-ir refuses the round trip with the same reason
    back = _opconv("ir-to-onnx", opconv.convert, _opconv("loading the IR", opconv.load, xml), to="onnx")
    proto = _opconv("writing the protobuf", to_proto, back)
    m.compare("onnxruntime (ir-to-onnx)", _runtime("onnxruntime", _ort_run, proto, m))


def check_onnx_to_hlo(m: Model) -> None:
    hlo = m.hlo()
    m.compare(
        "opconv HLO executor",
        _opconv("opconv HLO executor", opconv.run, hlo, m.feeds_for([v.name for v in hlo.graph.inputs])),
    )
    m.compare("IREE (StableHLO)", _iree_run(m, hlo))


def check_hlo_to_onnx(m: Model) -> None:
    from opconv.dialects.onnx.io import to_proto

    back = _opconv("hlo-to-onnx", opconv.convert, m.hlo(), to="onnx")
    proto = _opconv("writing the protobuf", to_proto, back)
    m.compare("onnxruntime (hlo-to-onnx)", _runtime("onnxruntime", _ort_run, proto, m))


def check_version(m: Model, opset: int) -> None:
    proto = m.version(opset)
    if m.source_passes_checker():
        # (onnxruntime's optimizer writes its own ai.onnx-domain LayerNormalization-1, which onnx's checker does
        # not know: such a source fails the checker itself, and its converted form is held to what it was)
        _runtime("onnx.checker", onnx.checker.check_model, proto, True)
    m.compare(f"onnxruntime (opset {opset})", _runtime("onnxruntime", _ort_run, proto, m))
    converted = _opconv("loading the converted model", opconv.load, proto)
    m.compare(
        f"opconv ONNX executor (opset {opset})",
        _opconv("opconv run", opconv.run, converted, m.feeds_for([v.name for v in converted.graph.inputs])),
    )


def check_decompose(m: Model) -> None:
    from opconv.dialects.onnx.io import to_proto

    decomposed = _opconv("decompose", opconv.decompose, m.source())  # strict: a refusal names every node left
    left = sorted({f"{n.domain}::{n.op}" for n in decomposed.graph.walk() if n.domain not in ("", "ai.onnx")})
    if left:
        raise Outcome("wrong", f"decompose left {', '.join(left)} without refusing")
    proto = _opconv("writing the protobuf", to_proto, decomposed)
    _runtime("onnx.checker", onnx.checker.check_model, proto, True)  # standard operators only: valid ONNX
    m.compare("onnxruntime (decomposed)", _runtime("onnxruntime", _ort_run, proto, m))
    m.compare(
        "opconv ONNX executor (decomposed)",
        _opconv("opconv run", opconv.run, decomposed, m.feeds_for([v.name for v in decomposed.graph.inputs])),
    )


CHECKS = {
    "run": check_run,
    "onnx-to-ir": check_onnx_to_ir,
    "ir-to-onnx": check_ir_to_onnx,
    "onnx-to-hlo": check_onnx_to_hlo,
    "hlo-to-onnx": check_hlo_to_onnx,
    "upgrade-21": lambda m: check_version(m, 21),
    "downgrade-13": lambda m: check_version(m, 13),
    "downgrade-11": lambda m: check_version(m, 11),
    "decompose": check_decompose,
}


def outcome(name: str, target: str) -> tuple[str, str]:
    """('verified' | 'refused' | 'wrong', detail) of one pair."""
    try:
        CHECKS[target](model(name))
    except Outcome as result:
        return result.kind, result.detail
    return "verified", ""


def case_name(name: str, target: str) -> str:
    return f"{name}:{target}"


# ---------------------------------------------------------------------------

#: the decompose target is for the models onnxruntime's tools made (the others have no contrib node to rewrite)
PAIRS = [
    (name, target)
    for target in TARGETS
    for name in MANIFEST
    if target != "decompose" or MANIFEST[name]["exporter"] == "onnxruntime"
]


@pytest.fixture(scope="module", autouse=True)
def _iree_in_background(request):
    """Starts the IREE compiles of the selected onnx-to-hlo cases before the first case, and cleans up."""
    start_iree_compiles(
        [
            item.callspec.params["name"]
            for item in request.session.items
            if getattr(item, "originalname", "") == "test_corpus_model"
            and item.callspec.params["target"] == "onnx-to-hlo"
        ]
    )
    yield
    for pool in _IREE_POOL:  # joined: later tests rely on a one-thread process (opconv forks to guard inference)
        pool.shutdown(wait=True, cancel_futures=True)
    _IREE_POOL.clear()
    if _WORKDIR:
        import shutil

        shutil.rmtree(_WORKDIR[0], ignore_errors=True)


@pytest.mark.parametrize("name,target", PAIRS, ids=[case_name(n, t) for n, t in PAIRS])
def test_corpus_model(name, target):
    kind, detail = outcome(name, target)
    assert kind != "wrong", f"{name} {target}: {detail}"
    known.check(
        SUITE,
        case_name(name, target),
        kind == "verified",
        f"{name} {target} refused, and not listed in tests/known_failures.json: {detail}",
    )


def test_corpus_has_every_family_and_exporter():
    """The corpus keeps its breadth: 40+ models, both torch exporters, onnxruntime's tools."""
    exporters = {e["exporter"] for e in MANIFEST.values()}
    families = {e["family"] for e in MANIFEST.values()}
    assert len(MANIFEST) >= 40, len(MANIFEST)
    assert {"legacy", "dynamo", "onnxruntime"} <= exporters, exporters
    assert {"transformers", "cnn", "rnn", "audio", "control_flow", "ort-optimizer", "ort-quantized"} <= families
    listed = set(known.KNOWN.get(SUITE, {}))
    stale = sorted(listed - {case_name(n, t) for n, t in PAIRS})
    assert not stale, f"tests/known_failures.json lists corpus pairs that no longer exist: {stale[:5]}"
