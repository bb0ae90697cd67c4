"""``opconv run``, ``opconv verify`` and ``opconv conformance``: execute models with the reference executors.

Inputs and outputs travel as ``.npz`` files keyed by graph input/output name
(``numpy.savez`` writes them, ``numpy.load`` reads them).  Without ``--inputs``
both ``run`` and ``verify`` draw seeded random inputs with the generator of
:func:`opconv.verification.random_inputs`, so ``--seed`` reproduces a run exactly.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import click
import numpy as np

from .. import load
from ..atomic import check_output, is_stdout, write_text
from ..errors import ExecutionError
from ..input_shapes import parse_dim_option, parse_shape_option
from ..npz import read_npz, write_npz  # noqa: F401 - write_npz is used here and by scripts
from . import cli
from .output import QUIET, json_option, verbosity

MODEL = click.Path(dir_okay=False)  # existence is checked by the loader, with opconv's own message

_RANDOM_SHAPE_HELP = (
    "Shape of an input with symbolic or unknown dims for random inputs, as NAME=D0,D1,... "
    "(repeatable; NAME= for a scalar); binds the symbols of its declared dims for every input. "
    "Dims nothing binds are 1."
)

_DIM_HELP = "Size of a symbolic dim wherever inputs declare it, as SYMBOL=N (repeatable), e.g. --dim batch=1."


def shape_options(input_shape_help: str):
    """Decorator: the shape options every command that takes shapes shares.

    ``--input-shape NAME=D0,D1,...`` (repeatable; the old ``--shape`` is a hidden alias) and ``--dim SYMBOL=N``
    reach the command parsed, as ``input_shapes`` ({name: dims}) and ``dims`` ({symbol: size}); a malformed value
    (``x=-1,16``, ``x=?,3``) is an :class:`OpconvError`, one line and exit 2.
    """

    def wrap(command):
        @functools.wraps(command)
        def parsed(*args, input_shapes, old_shapes, dims, **kwargs):
            shapes = dict(parse_shape_option(text) for text in input_shapes + old_shapes)
            return command(*args, input_shapes=shapes, dims=dict(parse_dim_option(text) for text in dims), **kwargs)

        parsed = click.option("--dim", "dims", multiple=True, metavar="SYMBOL=N", help=_DIM_HELP)(parsed)
        parsed = click.option("--shape", "old_shapes", multiple=True, hidden=True)(parsed)
        return click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DIMS", help=input_shape_help)(
            parsed
        )

    return wrap


def show_input_shapes(shapes: dict[str, Any]) -> None:
    """Say on stderr which shapes the random inputs have (``{name: shape}``; None for a sequence or optional)."""
    text = " ".join(f"{name}={','.join(map(str, shape))}" for name, shape in shapes.items() if shape is not None)
    click.echo(f"input shapes: {text or 'none'}", err=True)


def _echo(*outputs: str | None):
    """click.echo, or its stderr form when a file goes to standard output (which the file then owns)."""
    err = any(is_stdout(path) for path in outputs if path)
    return lambda message: click.echo(message, err=err)


# ---------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------


def describe(value: Any) -> str:
    """``float32[2,10]``, ``seq(2) of float32[3]``, ``empty optional``."""
    if value is None:
        return "empty optional"
    if isinstance(value, (list, tuple)):
        inner = describe(value[0]) if value else "nothing"
        return f"seq({len(value)}) of {inner}"
    a = np.asarray(value)
    dtype = "string" if a.dtype.kind in "OUS" else str(a.dtype)
    return f"{dtype}[{','.join(map(str, a.shape))}]"


def stats(value: Any) -> str:
    """A few statistics of a numeric array: min, max, mean, std (and NaN/inf counts when present)."""
    if value is None or isinstance(value, (list, tuple)):
        return ""
    a = np.asarray(value)
    if a.size == 0:
        return "empty"
    if a.dtype == np.bool_:
        return f"true {int(a.sum())}/{a.size}"
    if a.dtype.kind not in "iufc":
        try:
            a = a.astype(np.float64)  # bfloat16, float8 ...
        except (TypeError, ValueError):
            return ""
    if a.dtype.kind == "c":
        a = np.abs(a)
    a = a.astype(np.float64, copy=False)
    finite = a[np.isfinite(a)]
    parts = []
    if finite.size:
        parts.append(
            f"min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean():.6g}  std {finite.std():.6g}"
        )
    nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
    if nan:
        parts.append(f"nan {nan}")
    if inf:
        parts.append(f"inf {inf}")
    return "  ".join(parts)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def _show(v: Any) -> str:
    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, float):
        return f"{v:.7g}"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _error_figure(x: float) -> str:
    return f"{x:.3g}"


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------


@cli.command()
@click.argument("model", type=MODEL)
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(dir_okay=False),
    help="An .npz file of inputs by name (default: seeded random inputs).",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the outputs to this .npz file.")
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the random inputs and of the model's random ops.",
)
@shape_options(_RANDOM_SHAPE_HELP)
@json_option
def run(model, inputs_path, output, seed, input_shapes, dims, as_json):
    """Run MODEL with opconv's reference executor and summarise its outputs.

    Prints each input and output with its type and a few statistics; -o
    saves the outputs (written atomically: a failed run leaves no file).

    \b
    Examples:
      opconv run model.onnx                          # seeded random inputs
      opconv run model.onnx --inputs in.npz -o out.npz
      opconv run model.onnx --input-shape x=1,3,224,224 --seed 7
      opconv run bert.onnx --dim batch=2 --dim seq=12

    Make an inputs file with numpy: numpy.savez("in.npz", x=array).
    Exit code 0 when the model ran, 2 when it could not be read or run.
    """
    import opconv

    from ..verification import random_inputs

    say = _echo(output) if verbosity() > QUIET and not as_json else (lambda message: None)
    if output:
        check_output(output)
        if as_json and is_stdout(output):
            raise click.UsageError("--json prints to standard output; write the outputs to a file (-o PATH)")
    m = load(model)
    if inputs_path:
        feeds, origin = read_npz(inputs_path), inputs_path
    else:
        notes: list[str] = []
        feeds = random_inputs(m, seed=seed, input_shapes=input_shapes, dims=dims, notes=notes)
        origin = f"random, seed {seed}"
        if verbosity() > QUIET:
            show_input_shapes(
                {name: None if isinstance(v, (list, tuple)) or v is None else np.shape(v) for name, v in feeds.items()}
            )
            for note in notes:
                click.echo(f"note: {note}", err=True)
    try:
        with np.errstate(all="ignore"):
            outputs = opconv.run(m, feeds, seed=seed)
    except ExecutionError as e:
        if e.where == m.path:
            raise
        raise ExecutionError(str(e), where=model) from None  # name the file, not only the node
    say(f"{model}: {len(outputs)} output(s), inputs {origin}")
    rows = [["", "name", "type", "stats"]]
    rows += [["input", name, describe(v), ""] for name, v in feeds.items()]
    rows += [["output", name, describe(v), stats(v)] for name, v in outputs.items()]
    for line in _table(rows):
        say("  " + line)
    if output:
        write_npz(output, outputs)
        say(f"wrote {output}")
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": True,
                    "model": model,
                    "inputs_from": origin,
                    "inputs": {name: describe(v) for name, v in feeds.items()},
                    "outputs": {name: {"type": describe(v), "stats": stats(v)} for name, v in outputs.items()},
                    "files": [output] if output else [],
                },
                indent=1,
            )
        )


class SideProgress:
    """verify's progress on stderr: which model runs on which backend and how long it took.

    On a terminal a live line counts the seconds of the running side and stays, with its time, when it ends;
    otherwise one timed line per side when it ends (a side that fails leaves only the error's line).
    """

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._ticker = None

    def __call__(self, side: str, what: str, seconds: float | None) -> None:
        if seconds is None:
            if self.live:
                self._ticker = _Ticker(self.stream, f"{side}: running {what}")
        elif self._ticker is not None:
            self._ticker.stop(f"{side}: {what}: {seconds:.2f} s")
            self._ticker = None
        else:
            self.stream.write(f"{side}: {what}: {seconds:.2f} s\n")
            self.stream.flush()

    def close(self) -> None:
        """End a live line left by a side that failed (its error follows on a line of its own)."""
        if self._ticker is not None:
            self._ticker.stop("")
            self._ticker = None


class _Ticker:
    """A terminal line ``text ... 3 s`` rewritten every second by a thread until ``stop``."""

    def __init__(self, stream, text: str):
        import threading
        import time

        self.stream, self.text, self.start, self.width = stream, text, time.perf_counter(), 0
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._show(f"{text} ...")
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        import time

        while not self._stopped.wait(1.0):
            with self._lock:
                if not self._stopped.is_set():
                    self._show(f"{self.text} ... {time.perf_counter() - self.start:.0f} s")

    def _show(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def stop(self, final: str) -> None:
        """Stop ticking; ``final`` replaces the line (kept on screen), or an empty one clears it."""
        with self._lock:
            self._stopped.set()
            self._show(final)
            self.stream.write("\n" if final else "\r")
            self.stream.flush()
        self._thread.join()


def _backend_option(values: tuple[str, ...]) -> str | tuple[str, str] | None:
    """``--backend NAME`` (both sides), ``A:NAME``, ``B:NAME`` -> what :func:`opconv.verify` takes."""
    from ..verification import DEFAULT_BACKEND

    both, sides = None, {}
    for text in values:
        side, _, name = text.rpartition(":")
        if side.upper() not in ("", "A", "B"):
            raise click.BadParameter(f"{text!r}: give NAME, A:NAME or B:NAME", param_hint="--backend")
        if side:
            sides[side.upper()] = name
        else:
            both = name
    if not sides:
        return both
    default = both or DEFAULT_BACKEND
    return sides.get("A", default), sides.get("B", default)


def _tolerance_option(what: str, values: tuple[str, ...]) -> float | dict[str, float] | None:
    """``--rtol 1e-3`` (every output) and ``--rtol NAME=1e-2`` (one output), repeatable -> a number or a mapping
    with ``"*"`` for the rest."""
    per: dict[str, float] = {}
    for text in values:
        name, sep, number = text.rpartition("=")
        try:
            per[name if sep else "*"] = float(number)
        except ValueError:
            raise click.BadParameter(f"{text!r}: give a number or OUTPUT=NUMBER", param_hint=f"--{what}") from None
    if not per:
        return None
    return per["*"] if list(per) == ["*"] else per


@cli.command()
@click.argument("model_a", metavar="A", type=MODEL)
@click.argument("model_b", metavar="[B]", type=MODEL, required=False)
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(dir_okay=False),
    help="An .npz file of inputs by A's input names (default: seeded random inputs).",
)
@click.option(
    "--backend",
    "backends",
    multiple=True,
    metavar="[A:|B:]NAME",
    help="What runs the models: opconv (reference executors, default), onnxruntime, openvino, iree. "
    "NAME for both sides, A:NAME or B:NAME for one (repeatable).",
)
@click.option(
    "--openvino-precision",
    type=click.Choice(["f32", "bf16", "f16", "default"]),
    default="f32",
    show_default=True,
    help="Inference precision of OpenVINO's CPU plugin; 'default' leaves it to the plugin (bf16 on a CPU that has it).",
)
@click.option(
    "--rtol",
    "rtols",
    multiple=True,
    metavar="[OUTPUT=]R",
    help="Relative tolerance: R for every float output, OUTPUT=R for one (repeatable). "
    "Default: per element type, at the precision the model computes in.",
)
@click.option(
    "--atol",
    "atols",
    multiple=True,
    metavar="[OUTPUT=]A",
    help="Absolute tolerance: A for every float output, OUTPUT=A for one (repeatable).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the random inputs and of both models' random ops.",
)
@shape_options(_RANDOM_SHAPE_HELP)
@click.option(
    "--expected",
    "expected_path",
    type=click.Path(dir_okay=False),
    help="Compare A with outputs stored in this .npz (input:NAME / output:NAME, as --save-outputs "
    "writes them) instead of running a second model.",
)
@click.option(
    "--save-outputs",
    "save_path",
    type=click.Path(dir_okay=False),
    help="Write the inputs and A's outputs to this .npz, for a later --expected.",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the full report as JSON.")
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False),
    help="Write a JUnit XML report (one testcase per output) for CI dashboards.",
)
@click.option(
    "--bisect",
    "bisect",
    is_flag=True,
    help="When outputs differ, find the first node of A whose output B does not reproduce.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="Write a self-contained HTML page: outputs with error histograms, bisect result, settings.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress or input shapes on stderr.")
def verify(
    model_a,
    model_b,
    inputs_path,
    backends,
    openvino_precision,
    rtols,
    atols,
    seed,
    input_shapes,
    dims,
    expected_path,
    save_path,
    json_path,
    junit_path,
    quiet,
    bisect,
    html_path,
):
    """Run A and B on the same inputs and compare every output of B with A's.

    A and B may be of any dialect, e.g. an ONNX model and its conversion, and
    run on opconv's executors or on the runtimes they are deployed to.
    Inputs and outputs pair by name, or by position when the names differ
    (said in the output).  Floats compare with |b - a| <= atol + rtol*|a|
    (tolerances per element type, at the float type the model computes in,
    unless --rtol/--atol); integers, bools and strings exactly.  Each output
    gets the max, mean, median and 99th percentile of its absolute and
    relative errors.  When outputs differ, --bisect names the first node of A
    (in topological order) whose output B does not reproduce, comparing the
    intermediate values the conversion kept names for, on the same backends.

    \b
    Examples:
      opconv verify model.onnx converted.onnx
      opconv verify model.onnx model.xml --backend A:onnxruntime --backend B:openvino
      opconv verify model.onnx model.xml --inputs in.npz --rtol 1e-4 --atol logits=1e-3
      opconv verify model.onnx model.xml --backend onnxruntime --save-outputs ref.npz
      opconv verify model.xml --expected ref.npz --backend openvino --junit report.xml
      opconv verify model.onnx model.xml --bisect --html report.html

    Exit code 0 when every output is equal, 1 when some differ, 2 when a model
    or the inputs cannot be read or run.
    """
    import opconv

    if (model_b is None) == (expected_path is None):
        raise click.UsageError(
            "give two models A B, or one model and --expected F.npz"
            if model_b is None
            else "give --expected or a second model, not both"
        )
    say = _echo(json_path, junit_path, html_path)
    for path in (json_path, junit_path, save_path, html_path):
        if path:
            check_output(path)
    inputs = read_npz(inputs_path) if inputs_path else None
    progress = None if quiet else SideProgress()
    try:
        report = opconv.verify(
            model_a,
            model_b,
            inputs,
            _tolerance_option("rtol", rtols),
            _tolerance_option("atol", atols),
            seed=seed,
            input_shapes=input_shapes,
            dims=dims,
            backends=_backend_option(backends),
            openvino_precision=openvino_precision,
            expected=expected_path,
            save_outputs=save_path,
            progress=progress,
            bisect=bisect,
            histograms=bool(html_path),
        )
    finally:
        if progress is not None:
            progress.close()
    if report.random_inputs and not quiet:
        show_input_shapes({name: s.get("shape") for name, s in report.inputs.items()})
    say(f"A: {report.model_a}" + ("" if report.backend_a == "expected" else f" on {report.backend_a}"))
    say(f"B: {report.model_b} on {report.backend_b}")
    origin = f"random, seed {seed}" if report.random_inputs else inputs_path or expected_path
    fed = ", ".join(f"{name} {_describe_input(s)}" for name, s in report.inputs.items()) or "none"
    say(f"inputs ({origin}): {fed}")
    if report.precision:
        say(f"note: the models compute in {report.precision}: float outputs compare at its tolerance")
    for note in report.notes:
        say(f"note: {note}")
    for line in _verdict_table(report):
        say(line)
    if json_path:
        write_text(json_path, json.dumps(report.to_json(), indent=1) + "\n")
    if junit_path:
        write_text(junit_path, report.to_junit())
    _bisect_and_html(report, html_path, say)
    if save_path:
        say(f"wrote {save_path}")
    say(report.summary())
    sys.exit(0 if report.ok else 1)


def _bisect_and_html(report, html_path: str | None, say) -> None:
    """``verify --bisect``'s line and ``--html``'s page."""
    if report.bisect is not None:
        say(report.bisect.summary())
    if html_path:
        from ..html_report import render

        write_text(html_path, render(report))


def _verdict_table(report) -> list[str]:
    """The per-output table, its first column the verdict (green ok / red FAIL where the terminal shows colour)."""
    rows = [
        [
            "verdict",
            "output",
            "shape/dtype",
            "abs error max/mean/median/p99",
            "rel error max/mean/median/p99",
            "mismatches",
            "rtol/atol",
            "first mismatch (A vs B)",
        ]
    ]
    for o in report.outputs:
        comparable = o.expected_shape == o.actual_shape and o.expected_dtype == o.actual_dtype
        errors = [_figures(o, "abs"), _figures(o, "rel")] if comparable else ["-", "-"]
        rows.append(
            [
                "ok" if o.ok else "FAIL",
                o.name,
                _type_cell(o),
                *errors,
                f"{o.mismatches}/{o.total}" if comparable else "-",
                f"{o.rtol:g}/{o.atol:g}",
                _first_mismatch_cell(o),
            ]
        )
    lines = _table(rows)
    for i, o in enumerate(report.outputs, start=1):
        verdict = rows[i][0]
        lines[i] = click.style(verdict, fg="green" if o.ok else "red", bold=not o.ok) + lines[i][len(verdict) :]
    return lines


def _figures(o, kind: str) -> str:
    return "/".join(_error_figure(getattr(o, f"{stat}_{kind}_error")) for stat in ("max", "mean", "median", "p99"))


def _describe_input(s: dict) -> str:
    if "shape" in s:
        return f"{s['dtype']}[{','.join(map(str, s['shape']))}]"
    return ", ".join(f"{k} {v}" for k, v in s.items())


def _type_cell(o) -> str:
    if o.expected_shape is None and o.actual_shape is None:
        return "-" if o.ok else o.message  # sequences and optionals: only the message says more
    a = f"{o.expected_dtype}[{','.join(map(str, o.expected_shape))}]"
    if o.expected_shape == o.actual_shape and o.expected_dtype == o.actual_dtype:
        return a
    return f"{a} vs {o.actual_dtype}[{','.join(map(str, o.actual_shape))}]"


def _first_mismatch_cell(o) -> str:
    if o.first_mismatch is None:
        return "-"
    return f"[{','.join(map(str, o.first_mismatch))}]: {_show(o.expected_value)} vs {_show(o.actual_value)}"


CONFORMANCE_KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator")


@cli.command()
@click.option(
    "--kind",
    type=click.Choice(CONFORMANCE_KINDS + ("all",)),
    default="all",
    show_default=True,
    help="Which of ONNX's test suites to run.",
)
@click.option("-k", "substring", help="Only cases whose name contains SUBSTRING (e.g. -k conv).")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    help="Write every case's result (name, kind, passed, message, seconds) as JSON.",
)
def conformance(kind, substring, report_path):
    """Run ONNX's own test cases (shipped in the onnx package) through opconv's executor.

    Each case's model runs on its stored inputs and every output must match
    the stored expected output within opconv's tolerance table. Prints each
    failure, then "N passed, N failed".

    \b
    Examples:
      opconv conformance --kind node -k softmax
      opconv conformance --kind pytorch-converted --report conformance.json

    Exit code 0 when every selected case passed, 1 otherwise.
    """
    from .. import testdata
    from ..conformance import run_case

    say = _echo(report_path)
    if report_path:
        check_output(report_path)
    kinds = CONFORMANCE_KINDS if kind == "all" else (kind,)
    cases = list(testdata.node_cases()) if "node" in kinds else []
    cases += testdata.model_cases([k for k in kinds if k != "node"])
    if substring:
        cases = [c for c in cases if substring in c.name]
    results = []
    for case in cases:
        result = run_case(case)
        results.append(result)
        if not result.passed:
            say(f"FAIL {case.kind}/{case.name}: {result.message}")
    passed = sum(r.passed for r in results)
    failed = len(results) - passed
    if report_path:
        report = {
            "kind": kind,
            "filter": substring,
            "passed": passed,
            "failed": failed,
            "cases": [r.to_json() for r in results],
        }
        write_text(report_path, json.dumps(report, indent=1) + "\n")
    say(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
