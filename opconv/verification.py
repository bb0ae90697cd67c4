"""``opconv.verify``: run two models on the same inputs and compare every output.

The two models may be of any dialect (a conversion is verified against its
source).  Their inputs and outputs are paired by name when both models use the
same names, else by position (recorded in the report, since a renamed graph is
legitimate after a conversion but worth knowing); differing counts are an
error.  Outputs are compared with :func:`opconv.compare.compare_arrays`, so
"equal" uses the same per-dtype tolerance table as the conformance runs.

When no inputs are given they are drawn by :func:`random_inputs` from a
generator seeded by ``seed``, so a failing verification can be replayed: the
same seed gives the same inputs.  ``opconv run`` uses the same generator.

Each side runs on a backend (:mod:`opconv.backends`): opconv's own executors by
default, or onnxruntime, OpenVINO or IREE, the runtimes a model is deployed to.
A side may also be outputs stored by an earlier run (``expected``), which is how
CI gates on one reference run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import budget
from .compare import ERROR_FIGURES, OutputComparison, compare_arrays
from .errors import ExecutionError, OpconvError
from .input_shapes import InputShapes, format_shape
from .ir import Model, Value
from .types import OptionalType, SequenceType, TensorType, element_type
from .validation import require_valid

#: vocabulary of random string inputs
_WORDS = np.array(["alpha", "beta", "gamma", "delta", "cat", "dog", "red", "blue", "one", "two"], dtype=object)

#: random integers avoid 0 and negatives: integer inputs are often divisors, counts, repeats or sizes,
#: and a division by zero or a negative size would make both models fail instead of being compared
_INT_RANGE = (1, 6)

#: sequence inputs get this many elements
_SEQUENCE_LENGTH = 2

#: prefixes of the entries of a saved reference (the layout of fixtures/corpus/*.npz too)
INPUT_PREFIX, OUTPUT_PREFIX = "input:", "output:"

#: the backend of a side when none is chosen
DEFAULT_BACKEND = "opconv"


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------


@dataclass
class VerifyReport:
    """The result of :func:`verify`: ``ok`` when every output of B equals A's within tolerance."""

    ok: bool
    outputs: list[OutputComparison]
    input_matching: str  # 'name' or 'position'
    output_matching: str  # 'name' or 'position'
    seed: int
    model_a: str = ""
    model_b: str = ""
    rtol: float | None = None  # explicit overrides; None = the per-dtype table
    atol: float | None = None
    output_rtol: dict[str, float] = field(default_factory=dict)  # per output, over rtol/atol
    output_atol: dict[str, float] = field(default_factory=dict)
    precision: str | None = None  # the float type the models compute in, when narrower than their outputs
    backend_a: str = DEFAULT_BACKEND  # "expected" when A is a saved reference
    backend_b: str = DEFAULT_BACKEND
    inputs: dict[str, dict] = field(default_factory=dict)  # A's input name -> {"shape", "dtype"}
    random_inputs: bool = False
    notes: list[str] = field(default_factory=list)
    seconds_a: float = 0.0
    seconds_b: float = 0.0
    bisect: Any = None  # an opconv.bisect.BisectReport when asked for and some output differs
    histograms: dict = field(default_factory=dict)  # output name -> opconv.html_report.ErrorHistogram, if asked

    @property
    def failures(self) -> list[OutputComparison]:
        return [o for o in self.outputs if not o.ok]

    def summary(self) -> str:
        """``verify: N outputs equal`` or ``verify: N of M outputs differ``."""
        bad = len(self.failures)
        if bad == 0:
            return f"verify: {len(self.outputs)} outputs equal"
        return f"verify: {bad} of {len(self.outputs)} outputs differ"

    def to_json(self) -> dict:
        """A JSON-serializable dict of the whole report."""
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "model_a": self.model_a,
            "model_b": self.model_b,
            "input_matching": self.input_matching,
            "output_matching": self.output_matching,
            "seed": self.seed,
            "random_inputs": self.random_inputs,
            "backend_a": self.backend_a,
            "backend_b": self.backend_b,
            "rtol": self.rtol,
            "atol": self.atol,
            "output_rtol": dict(self.output_rtol),
            "output_atol": dict(self.output_atol),
            "precision": self.precision,
            "inputs": self.inputs,
            "notes": list(self.notes),
            "seconds_a": round(self.seconds_a, 6),
            "seconds_b": round(self.seconds_b, 6),
            "outputs": [o.to_json() for o in self.outputs],
            **self._bisect_json(),
        }

    def _bisect_json(self) -> dict:
        if self.bisect is None:
            return {}
        first = self.bisect.divergence
        return {"first_divergence": None if first is None else first.to_json(), "bisect": self.bisect.to_json()}

    def to_junit(self) -> str:
        """JUnit XML: one testsuite ``opconv.verify`` with one testcase per output."""
        from lxml import etree

        failures = self.failures
        root = etree.Element(
            "testsuites",
            name="opconv",
            tests=str(len(self.outputs)),
            failures=str(len(failures)),
            errors="0",
            time=f"{self.seconds_a + self.seconds_b:.6f}",
        )
        suite = etree.SubElement(
            root,
            "testsuite",
            name="opconv.verify",
            tests=str(len(self.outputs)),
            failures=str(len(failures)),
            errors="0",
            skipped="0",
            time=f"{self.seconds_a + self.seconds_b:.6f}",
        )
        props = etree.SubElement(suite, "properties")
        for key in (
            "model_a",
            "model_b",
            "backend_a",
            "backend_b",
            "input_matching",
            "output_matching",
            "seed",
            "rtol",
            "atol",
            "precision",
        ):
            value = getattr(self, key)
            etree.SubElement(props, "property", name=key, value=xml_safe("" if value is None else str(value)))
        for key in ("output_rtol", "output_atol"):
            for name, value in getattr(self, key).items():
                etree.SubElement(props, "property", name=f"{key}:{name}", value=str(value))
        for o in self.outputs:
            case = etree.SubElement(suite, "testcase", classname="opconv.verify", name=xml_safe(o.name), time="0")
            case_props = etree.SubElement(case, "properties")
            for key in ("rtol", "atol", "mismatches", "total") + ERROR_FIGURES:
                etree.SubElement(case_props, "property", name=key, value=str(getattr(o, key)))
            if not o.ok:
                failure = etree.SubElement(case, "failure", message=xml_safe(o.message), type="mismatch")
                failure.text = xml_safe(_failure_details(o))
        said = self.notes + ([self.bisect.summary()] if self.bisect is not None else [])
        if said:
            etree.SubElement(suite, "system-out").text = xml_safe("\n".join(said))
        return etree.tostring(root, pretty_print=True, xml_declaration=True, encoding="UTF-8").decode("utf-8")


def _failure_details(o: OutputComparison) -> str:
    lines = [
        f"expected shape {_fmt_shape(o.expected_shape)} {o.expected_dtype}, "
        f"actual shape {_fmt_shape(o.actual_shape)} {o.actual_dtype}",
        "abs error "
        + error_figures(o, "abs")
        + ", rel error "
        + error_figures(o, "rel")
        + f" (rtol {o.rtol:g}, atol {o.atol:g})",
        f"{o.mismatches} of {o.total} elements outside tolerance",
    ]
    if o.first_mismatch is not None:
        lines.append(f"first at {list(o.first_mismatch)}: A={_plain(o.expected_value)!r} B={_plain(o.actual_value)!r}")
    return "\n".join(lines)


def error_figures(o: OutputComparison, kind: str) -> str:
    """``max 0.1 mean 0.01 median 0.001 p99 0.05`` of the ``kind`` ('abs' or 'rel') errors of ``o``."""
    return " ".join(f"{stat} {getattr(o, f'{stat}_{kind}_error'):.3g}" for stat in ("max", "mean", "median", "p99"))


def _show(value: Any) -> str:
    value = _plain(value)
    return f"{value:.7g}" if isinstance(value, float) else repr(value)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _fmt_shape(shape) -> str:
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


def xml_safe(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold (control characters, lone surrogates) escaped."""

    def ok(c: str) -> bool:
        o = ord(c)
        return o in (0x9, 0xA, 0xD) or 0x20 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD or 0x10000 <= o <= 0x10FFFF

    return "".join(c if ok(c) else f"\\x{ord(c):02x}" for c in text)


# ---------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------

#: ``progress(side, what, seconds)``: called with ``seconds=None`` when a side starts, then with its duration
Progress = Callable[[str, str, "float | None"], None]


def verify(
    a: Any,
    b: Any = None,
    inputs: Mapping[str, Any] | None = None,
    rtol: float | Mapping[str, float] | None = None,
    atol: float | Mapping[str, float] | None = None,
    *,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    backends: str | Sequence[str] | None = None,
    openvino_precision: str = "f32",
    expected: str | os.PathLike | Mapping[str, Any] | None = None,
    save_outputs: str | os.PathLike | None = None,
    progress: Progress | None = None,
    bisect: bool = False,
    histograms: bool = False,
) -> VerifyReport:
    """Run models ``a`` and ``b`` on the same inputs and compare every output of B with A's.

    ``inputs`` maps A's input names to arrays; when omitted, seeded random
    inputs are generated.  Their shapes: ``input_shapes`` ({name: shape})
    fixes whole shapes and binds the symbols of those inputs' declared dims,
    ``dims`` ({symbol: size}) fixes symbols; without either, an input of A
    with symbolic dims takes B's static shape where B declares one; any dim
    still open is 1 (said in ``report.notes``).  ``seed`` also seeds the random ops of opconv's executors.

    ``backends``: what runs the models, one name for both sides or (A's, B's), from
    :data:`opconv.backends.NAMES` (default ``opconv``); ``openvino_precision`` is the CPU plugin's
    inference precision (``f32``, ``bf16``, ``f16`` or ``default``).

    ``rtol``/``atol``: a number overrides the per-dtype tolerance table for every output, a mapping
    {output name: value} for those outputs (its ``"*"`` entry for the others).  Without them a float output
    is compared at the tolerance of the narrowest float type the models compute in (a float16 model with
    float32 outputs at float16's).

    ``expected``: outputs stored by an earlier run (an .npz path or a mapping) take A's place, and ``a`` is the
    model compared with them (``b`` stays None); entries ``input:NAME`` are the inputs they were computed from
    (used unless ``inputs`` is given), ``output:NAME`` the outputs (a file without prefixes holds outputs
    only, as ``opconv run -o`` writes).  ``save_outputs`` writes the inputs and A's outputs (the model's, with
    ``expected``) in that layout.  ``progress`` is told when each side starts and how long it took.

    ``bisect``: when some output differs, find the first node of A whose output B does not reproduce, on the
    same backends (``report.bisect``, :mod:`opconv.bisect`).  ``histograms``: keep each output's error
    histogram (``report.histograms``, drawn by ``opconv verify --html``).
    """
    if (b is None) == (expected is None):
        raise OpconvError(
            "give two models, or one model and expected outputs"
            if b is None
            else "give expected outputs or a second model, not both"
        )
    backend_a, backend_b = _backend_names(backends)
    settings: dict[str, dict[str, Any]] = {"opconv": {"seed": seed}, "openvino": {"precision": openvino_precision}}
    notes: list[str] = []
    if expected is not None:
        if backend_a != DEFAULT_BACKEND and not isinstance(backends, str):
            raise OpconvError("A is the expected outputs: it runs on no backend")
        side_b = _Side.of_model(a, backend_b, settings)
        side_a = _Side.of_reference(expected, side_b)
        if inputs is None and side_a.stored_inputs:
            inputs = side_a.stored_inputs
    else:
        side_a, side_b = _Side.of_model(a, backend_a, settings), _Side.of_model(b, backend_b, settings)
    input_matching, in_pairs = _pair("input", side_a.input_names, side_b.input_names, notes)
    output_matching, out_pairs = _pair("output", side_a.output_names, side_b.output_names, notes)
    output_rtol, global_rtol = _per_output("rtol", rtol, out_pairs)
    output_atol, global_atol = _per_output("atol", atol, out_pairs)

    generated = inputs is None
    if inputs is None:
        # drawn for A's model (B's when A is a reference), by A's names
        drawn_for = side_a if side_a.model is not None else side_b
        if side_a.model is not None and side_b.model is not None and not input_shapes and not dims:
            input_shapes = _static_shapes_of(required_inputs(side_a.model), required_inputs(side_b.model), in_pairs)
        drawn = random_inputs(drawn_for.model, seed=seed, input_shapes=input_shapes, dims=dims, notes=notes)
        by_b = {y: x for x, y in in_pairs.items()} if drawn_for is side_b else {}
        feeds_a = {by_b.get(name, name): value for name, value in drawn.items()}
    else:
        feeds_a = _user_feeds(inputs, in_pairs)
    feeds_b = {in_pairs.get(name, name): value for name, value in feeds_a.items()}

    outputs_a, seconds_a = side_a.run("A", feeds_a, progress)
    outputs_b, seconds_b = side_b.run("B", feeds_b, progress)
    if save_outputs is not None:
        reference_run = (outputs_a, feeds_a) if side_a.model is not None else (outputs_b, feeds_b)
        save_reference(save_outputs, reference_run[1], reference_run[0])
    precision = _narrowest(side_a.precision(), side_b.precision())
    comparisons = []
    for name_a in side_a.output_names:
        name_b = out_pairs[name_a]
        cmp = compare_arrays(
            name_a,
            outputs_a[name_a],
            outputs_b[name_b],
            output_rtol.get(name_a, global_rtol),
            output_atol.get(name_a, global_atol),
            precision,
        )
        if cmp.first_mismatch is not None:  # the figures in A-then-B order, as the table's header has them
            cmp.message = (
                f"{cmp.mismatches} of {cmp.total} elements differ; first at {list(cmp.first_mismatch)}: "
                f"A {_show(cmp.expected_value)} vs B {_show(cmp.actual_value)}"
            )
        if name_b != name_a:
            cmp.message = f"(B's output {name_b!r}) {cmp.message}".rstrip()
        comparisons.append(cmp)
    report = VerifyReport(
        ok=all(c.ok for c in comparisons),
        outputs=comparisons,
        input_matching=input_matching,
        output_matching=output_matching,
        seed=seed,
        model_a=side_a.description,
        model_b=side_b.description,
        rtol=global_rtol,
        atol=global_atol,
        output_rtol=output_rtol,
        output_atol=output_atol,
        precision=precision,
        backend_a=side_a.backend_name(),
        backend_b=side_b.backend_name(),
        inputs={k: _summarize(v) for k, v in feeds_a.items()},
        random_inputs=generated,
        notes=notes,
        seconds_a=seconds_a,
        seconds_b=seconds_b,
    )
    if histograms:
        from .html_report import error_histogram

        report.histograms = {
            name: error_histogram(outputs_a[name], outputs_b[out_pairs[name]]) for name in side_a.output_names
        }
    if bisect and not report.ok:
        _bisect(report, side_a, side_b, feeds_a, feeds_b, out_pairs, global_rtol, global_atol, progress)
    return report


def _bisect(
    report: VerifyReport,
    side_a: _Side,
    side_b: _Side,
    feeds_a: dict,
    feeds_b: dict,
    out_pairs: dict[str, str],
    rtol: float | None,
    atol: float | None,
    progress: Progress | None,
) -> None:
    """``report.bisect``: the first divergence, found on the sides' own backends; or a note saying why not."""
    from .bisect import first_divergence

    if side_a.model is None or side_b.model is None:
        report.notes.append("bisect needs two models: stored outputs hold no intermediate values")
        return
    try:
        report.bisect = first_divergence(
            side_a.source,
            side_b.source,
            feeds_a,
            feeds_b,
            backend_a=side_a.backend,
            backend_b=side_b.backend,
            rtol=rtol,
            atol=atol,
            precision=report.precision,
            output_pairs=out_pairs,
            loaded=(side_a.model, side_b.model),
            progress=progress,
        )
    except OpconvError as e:  # the outputs' comparison stands; say why no divergence is named
        report.notes.append(f"bisect could not run: {e}")


@dataclass
class _Side:
    """One side of a verification: a model and the backend that runs it, or outputs stored by an earlier run."""

    description: str  # what the report calls it
    input_names: list[str]
    output_names: list[str]
    model: Model | None = None  # None for stored outputs
    source: Any = None  # what the caller gave: a runtime reads a path's own files
    backend: Any = None
    stored_inputs: dict = field(default_factory=dict)
    stored_outputs: dict = field(default_factory=dict)

    @classmethod
    def of_model(cls, source: Any, backend: str, settings: dict[str, dict[str, Any]]) -> _Side:
        """``source`` loaded, to run on ``backend`` made with its ``settings`` (backend name -> keywords)."""
        import opconv

        from .backends import get_backend

        runner = get_backend(backend, **settings.get(backend, {}))  # an unknown name fails before a long load
        model = require_valid(opconv.load(source))
        return cls(
            _describe(model, source),
            [v.name for v in required_inputs(model)],
            [v.name for v in model.graph.outputs],
            model,
            source,
            runner,
        )

    @classmethod
    def of_reference(cls, expected: str | os.PathLike | Mapping[str, Any], other: _Side) -> _Side:
        """Stored outputs; without stored inputs they were computed from ``other``'s inputs."""
        inputs, outputs = _reference(expected)
        name = (
            f"{os.fspath(expected)} (expected outputs)"
            if isinstance(expected, (str, os.PathLike))
            else "<expected outputs>"
        )
        return cls(
            name, list(inputs) or list(other.input_names), list(outputs), stored_inputs=inputs, stored_outputs=outputs
        )

    def run(self, which: str, feeds: dict, progress: Progress | None) -> tuple[dict, float]:
        if self.model is None:
            return self.stored_outputs, 0.0
        return _run(which, self.backend, self.source, self.model, feeds, progress)

    def precision(self) -> str | None:
        if self.model is None:
            return None
        return _narrowest(compute_precision(self.model), self.backend.compute_precision())

    def backend_name(self) -> str:
        return "expected" if self.model is None else self.backend.describe()


def _backend_names(backends: str | Sequence[str] | None) -> tuple[str, str]:
    if backends is None:
        pair = (DEFAULT_BACKEND, DEFAULT_BACKEND)
    elif isinstance(backends, str):
        pair = (backends, backends)
    else:
        pair = tuple(backends)
        if len(pair) != 2:
            raise OpconvError(f"backends: give one name or two (A's, B's), got {len(pair)}")
    return pair


def _per_output(
    what: str, value: float | Mapping[str, float] | None, out_pairs: dict[str, str]
) -> tuple[dict[str, float], float | None]:
    """({A's output name: tolerance}, the tolerance of every other output) from a number or a mapping; a
    mapping may name outputs by A's or B's names, and ``"*"`` is the rest."""
    if value is None or not isinstance(value, Mapping):
        return {}, None if value is None else float(value)
    by_b = {y: x for x, y in out_pairs.items()}
    per, rest = {}, None
    for name, tol in value.items():
        if name == "*":
            rest = float(tol)
        elif name in out_pairs or name in by_b:
            per[name if name in out_pairs else by_b[name]] = float(tol)
        else:
            raise OpconvError(
                f"{what} for {name!r}: no output has that name (the outputs are {', '.join(out_pairs) or 'none'})"
            )
    return per, rest


def _reference(expected: str | os.PathLike | Mapping[str, Any]) -> tuple[dict, dict]:
    """(inputs, outputs) of a saved reference: ``input:``/``output:`` entries, or outputs only."""
    from .npz import read_npz

    arrays = read_npz(os.fspath(expected)) if isinstance(expected, (str, os.PathLike)) else dict(expected)
    inputs = {k[len(INPUT_PREFIX) :]: v for k, v in arrays.items() if k.startswith(INPUT_PREFIX)}
    outputs = {k[len(OUTPUT_PREFIX) :]: v for k, v in arrays.items() if k.startswith(OUTPUT_PREFIX)}
    if not inputs and not outputs:
        outputs = arrays
    if not outputs:
        where = os.fspath(expected) if isinstance(expected, (str, os.PathLike)) else None
        raise OpconvError("the expected outputs hold no output: entries", where=where)
    return inputs, outputs


def save_reference(path: str | os.PathLike, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
    """Write ``inputs`` and ``outputs`` as ``input:NAME`` / ``output:NAME`` entries of an .npz (atomically), the
    layout ``expected`` reads."""
    from .npz import write_npz

    write_npz(
        os.fspath(path),
        {**{INPUT_PREFIX + k: v for k, v in inputs.items()}, **{OUTPUT_PREFIX + k: v for k, v in outputs.items()}},
    )


#: float types from narrowest to widest, for the compute precision
_FLOAT_WIDTH = {"float8e4m3fn": 1, "float8e5m2": 1, "bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}


def compute_precision(model: Model) -> str | None:
    """The float type holding most of ``model``'s float weights when it is narrower than float32 (a float16
    export computes in float16 even when its inputs and outputs are float32), else None."""
    counts: dict[str, int] = {}
    for value in model.graph.initializers.values():
        const = value.const
        if const is not None and const.dtype in _FLOAT_WIDTH:
            counts[const.dtype] = counts.get(const.dtype, 0) + int(np.prod(const.shape, dtype=np.int64))
    if not counts:
        return None
    dtype = max(counts, key=lambda d: counts[d])
    return dtype if _FLOAT_WIDTH[dtype] < 4 else None


def _narrowest(*precisions: str | None) -> str | None:
    """The narrowest float type of ``precisions``; of two as wide, bfloat16 (fewer mantissa bits)."""
    known = [p for p in precisions if p is not None]
    return min(known, key=lambda p: (_FLOAT_WIDTH.get(p, 4), p != "bfloat16")) if known else None


def _static_shapes_of(ins_a: list[Value], ins_b: list[Value], in_pairs: dict[str, str]) -> dict[str, tuple]:
    """A's inputs with symbolic dims -> the static shape B declares for its paired input (a dynamic ONNX
    model verified against its static conversion runs at the conversion's shapes)."""
    declared_b = {v.name: v.shape for v in ins_b if isinstance(v.type, TensorType)}
    shapes = {}
    for v in ins_a:
        mine = v.shape if isinstance(v.type, TensorType) else None
        theirs = declared_b.get(in_pairs[v.name]) if v.name in in_pairs else None
        if mine is None or theirs is None or all(isinstance(d, int) for d in mine) or len(mine) != len(theirs):
            continue
        if all(isinstance(d, int) and d >= 0 for d in theirs) and all(
            not isinstance(m, int) or m == d for m, d in zip(mine, theirs)
        ):
            shapes[v.name] = tuple(theirs)
    return shapes


def required_inputs(model: Model) -> list[Value]:
    """The graph inputs a caller must feed (inputs backed by an initializer have a default)."""
    return [v for v in model.graph.inputs if v.const is None]


def _pair(kind: str, names_a: list[str], names_b: list[str], notes: list[str]) -> tuple[str, dict[str, str]]:
    """Pair A's names with B's: by name when the name sets agree, else by position."""
    if sorted(names_a) == sorted(names_b):
        return "name", {n: n for n in names_a}
    if len(names_a) != len(names_b):
        raise OpconvError(
            f"the models have different numbers of {kind}s: A has {len(names_a)} "
            f"({', '.join(names_a) or 'none'}), B has {len(names_b)} ({', '.join(names_b) or 'none'})"
        )
    renamed = [f"{x!r}->{y!r}" for x, y in zip(names_a, names_b) if x != y]
    notes.append(f"{kind}s matched by position because their names differ: {', '.join(renamed)}")
    return "position", dict(zip(names_a, names_b))


def _user_feeds(inputs: Mapping[str, Any], in_pairs: dict[str, str]) -> dict[str, Any]:
    """The caller's inputs by A's names (B's names are accepted too when matching by position)."""
    by_b = {b: a for a, b in in_pairs.items()}
    feeds = {}
    for name, value in inputs.items():
        feeds[name if name in in_pairs or name not in by_b else by_b[name]] = value
    return feeds


def _run(which: str, backend, source: Any, model: Model, feeds: dict, progress: Progress | None) -> tuple[dict, float]:
    """Run one side on its backend: a runtime reads the model's own files when it came from a path."""
    what = f"{_describe(model, source)} on {backend.describe()}"
    if progress:
        progress(which, what, None)
    start = time.perf_counter()
    given = source if backend.reads_files and isinstance(source, (str, os.PathLike)) else model
    try:
        out = backend.run(given, feeds)
    except OpconvError as e:
        parts = [f"model {which}" + (f" ({model.path})" if model.path else "")]
        if e.where and e.where != model.path:
            parts.append(e.where)
        parts.append(e.message)
        raise ExecutionError(": ".join(parts)) from e
    seconds = time.perf_counter() - start
    if progress:
        progress(which, what, seconds)
    return out, seconds


def _describe(model: Model, source: Any) -> str:
    return model.path or (source if isinstance(source, str) else f"<in-memory {model.dialect} model>")


def _summarize(value: Any) -> dict:
    if isinstance(value, (list, tuple)):
        return {"sequence_length": len(value)}
    if value is None:
        return {"optional": "empty"}
    arr = np.asarray(value)
    return {"shape": list(arr.shape), "dtype": str(arr.dtype)}


# ---------------------------------------------------------------------------
# random inputs
# ---------------------------------------------------------------------------


def random_inputs(
    model: Any,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """Seeded random values for every required input of ``model``.

    Floats are standard normal, integers in [1, 5] (non-zero and positive, see
    ``_INT_RANGE``), bools fair coins, strings short words.  An integer input
    that feeds the indices of a gather/scatter-like op gets valid indices for
    the data it indexes.  Shapes: ``input_shapes`` fixes whole shapes (and binds
    the symbols of those inputs' declared dims for the other inputs), ``dims``
    fixes symbols (:class:`opconv.input_shapes.InputShapes`); every dim still
    open is 1, which is appended to ``notes`` when a list is given.
    """
    import opconv

    if not (hasattr(seed, "__index__") and seed.__index__() >= 0):
        raise OpconvError(f"the seed must be a non-negative integer, got {seed!r}")
    model = require_valid(opconv.load(model))
    rng = np.random.default_rng(seed)
    inputs = required_inputs(model)
    bound = InputShapes({v.name: _tensor_type(v).shape for v in inputs}, input_shapes, dims)
    shapes = bound.with_defaults(1)
    opened = bound.unresolved()
    if opened and notes is not None:
        notes.append(
            "dims nothing binds are 1 (--input-shape/--dim choose them): "
            + ", ".join(f"{name} {format_shape(bound.shapes[name])} -> {format_shape(shapes[name])}" for name in opened)
        )
    return {v.name: _random_value(v, _tensor_type(v), shapes[v.name], shapes, rng) for v in inputs}


def _tensor_type(v: Value) -> TensorType:
    """The tensor type of ``v``, or of the elements of a sequence/optional input."""
    t = v.type
    while isinstance(t, (SequenceType, OptionalType)):
        t = t.elem
    if not isinstance(t, TensorType) or t.dtype is None:
        raise OpconvError(
            f"cannot make a random value for input {v.name!r} of type {t or 'unknown'}; pass its value explicitly"
        )
    return t


def _random_value(v: Value, t: TensorType, shape: tuple, shapes: dict, rng: np.random.Generator) -> Any:
    dtype = t.dtype
    assert dtype is not None  # _tensor_type refuses a type without one

    def one() -> np.ndarray:
        return _random_tensor(v, dtype, shape, shapes, rng)

    if isinstance(v.type, SequenceType):
        return [one() for _ in range(_SEQUENCE_LENGTH)]
    return one()


def _random_tensor(v: Value, dtype: str, shape: tuple, shapes: dict, rng: np.random.Generator) -> np.ndarray:
    et = element_type(dtype)
    # drawn as float64 (two for complex) before the cast
    budget.check(shape, 16 if et.is_complex else 8, f"the random value of input {v.name!r}")
    if dtype == "string":
        return rng.choice(_WORDS, size=shape)
    assert et.numpy is not None  # every type but string has one
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if et.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(et.numpy)
    if et.is_float:
        return rng.standard_normal(shape).astype(et.numpy)
    bounds = index_bounds(v, shape, shapes)
    if bounds is not None:
        # an array of bounds (GatherND) broadcasts along the last axis of the indices
        return rng.integers(0, np.maximum(bounds, 1), size=shape).astype(et.numpy)
    info = np.iinfo(et.numpy) if et.numpy.kind in "iu" else _narrow_iinfo(et.numpy)
    low, high = max(_INT_RANGE[0], int(info.min)), min(_INT_RANGE[1], int(info.max) + 1)
    return rng.integers(low, high, size=shape).astype(et.numpy)


def _narrow_iinfo(dtype: np.dtype):
    import ml_dtypes

    return ml_dtypes.iinfo(dtype)


# ---------------------------------------------------------------------------
# valid indices
# ---------------------------------------------------------------------------

#: ops that only move or relabel data: an input that flows through them into an indices input is indices too
_TRANSPARENT = {"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Expand", "Convert"}


def _axis_bounds(data_pos: int, axis_input: int | None = None):
    """Bounds for ops indexing one axis of their data input: indices in [0, data.shape[axis]).

    The axis is the node's ``axis`` attribute, else the constant input ``axis_input`` (OpenVINO's
    Gather-1 takes it as an input), else 0.
    """

    def bounds(node, data_shape, index_shape):
        if "axis" in node.attrs:
            axis = int(node.attr("axis"))
        else:
            axis = _const_scalar(node, axis_input, default=0) if axis_input is not None else 0
        if data_shape is None or not -len(data_shape) <= axis < len(data_shape):
            return None
        extent = data_shape[axis]
        return extent if isinstance(extent, int) else None

    return data_pos, bounds


def _nd_bounds(node, data_shape, index_shape):
    """GatherND/ScatterND: the last axis of the indices addresses data axes batch_dims.. batch_dims+k."""
    if data_shape is None or not index_shape:
        return None
    batch = int(node.attr("batch_dims", 0))
    k = index_shape[-1]
    dims = data_shape[batch : batch + k]
    if len(dims) != k:
        return None
    return np.array(dims) if all(isinstance(d, int) for d in dims) else None


def _one_hot_bounds(node, data_shape, index_shape):
    return _const_scalar(node, 1, default=None)


#: (op, position of the indices input) -> (position of the indexed input or None, bounds function)
_INDEX_CONSUMERS = {
    ("Gather", 1): _axis_bounds(0, axis_input=2),
    ("GatherElements", 1): _axis_bounds(0),
    ("ScatterElements", 1): _axis_bounds(0),
    ("Scatter", 1): _axis_bounds(0),
    ("GatherND", 1): (0, _nd_bounds),
    ("ScatterND", 1): (0, _nd_bounds),
    ("OneHot", 0): (None, _one_hot_bounds),
    # com.microsoft embedding ops: word ids index word_embedding, segment ids index segment_embedding.
    ("EmbedLayerNormalization", 0): _axis_bounds(2),
    ("EmbedLayerNormalization", 1): _axis_bounds(3),
}


def index_bounds(v: Value, shape: tuple, shapes: dict[str, tuple]):
    """Exclusive upper bound(s) for an integer input used as indices, or None when it is not.

    A scalar bound applies to every element; an array bound (GatherND) applies
    along the last axis.  When the indexed data's extent is unknown the bound
    is 1 (all zeros: always valid).
    """
    for node, pos in _index_uses(v):
        entry = _INDEX_CONSUMERS.get((node.op, pos))
        if entry is None:
            continue
        data_pos, bounds_fn = entry
        data_shape = None
        if data_pos is not None and data_pos < len(node.inputs) and node.inputs[data_pos] is not None:
            data = node.inputs[data_pos]
            data_shape = shapes.get(data.name) if data.producer is None and data.const is None else data.shape
        bound = bounds_fn(node, data_shape, shape)
        if isinstance(bound, np.ndarray) or (isinstance(bound, (int, np.integer)) and bound > 0):
            return bound
        return 1
    return None


def _index_uses(v: Value, depth: int = 3):
    """(node, input position) of every use of ``v``, looking through a few data-moving ops."""
    for node, pos in v.uses:
        yield node, pos
        if depth and node.op in _TRANSPARENT and pos == 0:
            for out in node.outputs:
                if out is not None:
                    yield from _index_uses(out, depth - 1)


def _const_scalar(node, pos: int, default):
    """The value of a constant scalar input of ``node`` (an initializer), else ``default``."""
    if pos >= len(node.inputs) or node.inputs[pos] is None or node.inputs[pos].const is None:
        return default
    value = np.asarray(node.inputs[pos].const.numpy())
    return int(value.reshape(-1)[0]) if value.size == 1 else default
