"""``opconv run``, ``opconv verify`` and ``opconv conformance``: execute models with the reference executors.

Inputs and outputs travel as ``.npz`` files keyed by graph input/output name
(``numpy.savez`` writes them, ``numpy.load`` reads them).  Without ``--inputs``
both ``run`` and ``verify`` draw seeded random inputs with the generator of
:func:`opconv.verify.random_inputs`, so ``--seed`` reproduces a run exactly.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

import click
import numpy as np

from .. import load
from ..atomic import check_output, is_stdout, write_file, write_text
from ..errors import ExecutionError, OpconvError
from ..input_shapes import parse_dim_option, parse_shape_option
from . import cli
from .output import QUIET, json_option, verbosity

MODEL = click.Path(dir_okay=False)  # existence is checked by the loader, with opconv's own message

_RANDOM_SHAPE_HELP = ("Shape of an input with symbolic or unknown dims for random inputs, as NAME=D0,D1,... "
                      "(repeatable; NAME= for a scalar); binds the symbols of its declared dims for every input. "
                      "Dims nothing binds are 1.")

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
        return click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DIMS",
                            help=input_shape_help)(parsed)
    return wrap


def show_input_shapes(shapes: dict[str, Any]) -> None:
    """Say on stderr which shapes the random inputs have (``{name: shape}``; None for a sequence or optional)."""
    text = " ".join(f"{name}={','.join(map(str, shape))}" for name, shape in shapes.items() if shape is not None)
    click.echo(f"input shapes: {text or 'none'}", err=True)


# ---------------------------------------------------------------------------
# npz files
# ---------------------------------------------------------------------------

def read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file by name; strings come back as object arrays (opconv's string type)."""
    import zipfile  # here, not at the top: a conversion never needs it and a fresh process starts faster

    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except FileNotFoundError:
        raise OpconvError("no such file", where=path) from None
    except OSError as e:
        raise OpconvError(f"cannot read: {e.strerror or e}", where=path) from None
    if magic == b"\x93NUMPY":
        raise OpconvError("a .npy file holds one unnamed array; give inputs by name in an .npz file "
                          "(numpy.savez(path, x=array))", where=path)
    if not magic.startswith(b"PK"):
        raise OpconvError("not a numpy .npz file", where=path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise OpconvError("holds pickled Python objects, which opconv does not load; save strings as "
                              "numpy unicode arrays", where=path) from None
        raise OpconvError(f"not a valid numpy .npz file ({e})", where=path) from None
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        raise OpconvError(f"not a valid numpy .npz file ({e})", where=path) from None
    return {k: v.astype(object) if v.dtype.kind in "US" else v for k, v in arrays.items()}


def write_npz(path: str, arrays: dict[str, Any]) -> None:
    """Write ``arrays`` as an .npz file atomically.

    Written entry by entry rather than with ``numpy.savez``, whose keyword arguments
    cannot hold every output name (``file``, for one); sequences are stored element
    by element as ``name[i]``, and empty optionals are left out.
    """
    import zipfile

    def write(f):
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
            for name, array in _flatten(arrays):
                if array.dtype == object:
                    array = array.astype(str)  # strings as unicode: readable without pickle
                with zf.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)

    write_file(path, write, "wb")


def _flatten(arrays: dict[str, Any]):
    for name, value in arrays.items():
        if isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                yield f"{name}[{i}]", np.asarray(item)
        elif value is not None:
            yield name, np.asarray(value)


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
        parts.append(f"min {finite.min():.6g}  max {finite.max():.6g}  mean {finite.mean():.6g}  "
                     f"std {finite.std():.6g}")
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
@click.option("--inputs", "inputs_path", type=click.Path(dir_okay=False),
              help="An .npz file of inputs by name (default: seeded random inputs).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the outputs to this .npz file.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the random inputs and of the model's random ops.")
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
    from ..verify import random_inputs

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
            show_input_shapes({name: None if isinstance(v, (list, tuple)) or v is None else np.shape(v)
                               for name, v in feeds.items()})
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
        click.echo(json.dumps({"ok": True, "model": model, "inputs_from": origin,
                               "inputs": {name: describe(v) for name, v in feeds.items()},
                               "outputs": {name: {"type": describe(v), "stats": stats(v)}
                                           for name, v in outputs.items()},
                               "files": [output] if output else []}, indent=1))


@cli.command()
@click.argument("model_a", metavar="A", type=MODEL)
@click.argument("model_b", metavar="B", type=MODEL)
@click.option("--inputs", "inputs_path", type=click.Path(dir_okay=False),
              help="An .npz file of inputs by A's input names (default: seeded random inputs).")
@click.option("--rtol", type=float, help="Relative tolerance for every float output (default: per element type).")
@click.option("--atol", type=float, help="Absolute tolerance for every float output (default: per element type).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the random inputs and of both models' random ops.")
@shape_options(_RANDOM_SHAPE_HELP)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the full report as JSON.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False),
              help="Write a JUnit XML report (one testcase per output) for CI dashboards.")
def verify(model_a, model_b, inputs_path, rtol, atol, seed, input_shapes, dims, json_path, junit_path):
    """Run A and B on the same inputs and compare every output of B with A's.

    A and B may be of any dialect, e.g. an ONNX model and its conversion.
    Inputs and outputs pair by name, or by position when the names differ
    (said in the output).  Floats compare with |b - a| <= atol + rtol*|a|
    (tolerances per element type unless --rtol/--atol); integers, bools and
    strings exactly.

    \b
    Examples:
      opconv verify model.onnx converted.onnx
      opconv verify model.onnx model.xml --inputs in.npz --rtol 1e-4 --atol 1e-5
      opconv verify a.onnx b.onnx --seed 3 --json report.json --junit report.xml

    Exit code 0 when every output is equal, 1 when some differ, 2 when a model
    or the inputs cannot be read or run.
    """
    import opconv

    say = _echo(json_path, junit_path)
    for path in (json_path, junit_path):
        if path:
            check_output(path)
    inputs = read_npz(inputs_path) if inputs_path else None
    report = opconv.verify(model_a, model_b, inputs, rtol, atol, seed=seed, input_shapes=input_shapes, dims=dims)
    if report.random_inputs:
        show_input_shapes({name: s.get("shape") for name, s in report.inputs.items()})
    say(f"A: {report.model_a}")
    say(f"B: {report.model_b}")
    fed = ", ".join(f"{name} {_describe_input(s)}" for name, s in report.inputs.items()) or "none"
    say(f"inputs ({f'random, seed {seed}' if report.random_inputs else inputs_path}): {fed}")
    for note in report.notes:
        say(f"note: {note}")
    rows = [["output", "shape/dtype", "max abs err", "max rel err", "mismatches", "first mismatch (A vs B)"]]
    for o in report.outputs:
        comparable = o.expected_shape == o.actual_shape and o.expected_dtype == o.actual_dtype
        errors = [_error_figure(o.max_abs_error), _error_figure(o.max_rel_error)] if comparable else ["-", "-"]
        rows.append([o.name, _type_cell(o), *errors, f"{o.mismatches}/{o.total}" if comparable else "-",
                     _first_mismatch_cell(o)])
    for line in _table(rows):
        say(line)
    if json_path:
        write_text(json_path, json.dumps(report.to_json(), indent=1) + "\n")
    if junit_path:
        write_text(junit_path, report.to_junit())
    say(report.summary())
    sys.exit(0 if report.ok else 1)


def _describe_input(s: dict) -> str:
    if "shape" in s:
        return f"{s['dtype']}[{','.join(map(str, s['shape']))}]"
    return ", ".join(f"{k} {v}" for k, v in s.items())


def _type_cell(o) -> str:
    if o.expected_shape is None and o.actual_shape is None:
        return "ok" if o.ok else o.message  # sequences and optionals: only the message says more
    a = f"{o.expected_dtype}[{','.join(map(str, o.expected_shape))}]"
    if o.expected_shape == o.actual_shape and o.expected_dtype == o.actual_dtype:
        return f"ok {a}"
    return f"DIFFER {a} vs {o.actual_dtype}[{','.join(map(str, o.actual_shape))}]"


def _first_mismatch_cell(o) -> str:
    if o.first_mismatch is None:
        return "-"
    return f"[{','.join(map(str, o.first_mismatch))}]: {_show(o.expected_value)} vs {_show(o.actual_value)}"


CONFORMANCE_KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator")


@cli.command()
@click.option("--kind", type=click.Choice(CONFORMANCE_KINDS + ("all",)), default="all", show_default=True,
              help="Which of ONNX's test suites to run.")
@click.option("-k", "substring", help="Only cases whose name contains SUBSTRING (e.g. -k conv).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False),
              help="Write every case's result (name, kind, passed, message, seconds) as JSON.")
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
        report = {"kind": kind, "filter": substring, "passed": passed, "failed": failed,
                  "cases": [r.to_json() for r in results]}
        write_text(report_path, json.dumps(report, indent=1) + "\n")
    say(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
