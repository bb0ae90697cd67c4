"""What every command shares about its output: -q/-v, stage progress, --json, and the conversion flow.

Verbosity lives in the click context (``ctx.meta``), so a command reads the ``-q``/``-v`` given before or
after its name (``opconv -q onnx-to-ir ...`` and ``opconv onnx-to-ir ... -q``).  The conversion commands
all go through :class:`Conversion`: load (with a hint when the file is of another dialect), convert, write,
and report, as text or as one JSON document on standard output (errors too, with ``--json``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from typing import Any

import click

from ..atomic import is_stdout
from ..errors import ConversionError, ModelReadError, OpconvError, one_line

QUIET, NORMAL, VERBOSE = 0, 1, 2
_KEY = "opconv.verbosity"

#: the command that reads each dialect, for "did you mean" when a file of that dialect reaches another one
_READER_COMMAND = {"openvino": "ir-to-onnx", "hlo": "hlo-to-onnx", "onnx": "onnx-to-ir"}


# ---------------------------------------------------------------------------
# -q / -v
# ---------------------------------------------------------------------------


def verbosity() -> int:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_KEY, NORMAL) if ctx is not None else NORMAL


def _set_verbosity(level: int):
    def callback(ctx: click.Context, _param, value: bool) -> None:
        if value:
            ctx.meta[_KEY] = level

    return callback


def add_verbosity_options(command: click.Command) -> None:
    """Give ``command`` (and, for a group, every command under it) ``-q/--quiet`` and ``-v/--verbose``,
    except where the command has such an option of its own (``verify -q``)."""
    taken = {flag for param in command.params for flag in getattr(param, "opts", ())}
    command.params += [
        option
        for option in (
            click.Option(
                ["-q", "--quiet"],
                is_flag=True,
                expose_value=False,
                callback=_set_verbosity(QUIET),
                help="Print only errors and what was asked for (no progress, no summary).",
            ),
            click.Option(
                ["-v", "--verbose"],
                is_flag=True,
                expose_value=False,
                callback=_set_verbosity(VERBOSE),
                help="Print more: the op counts of both models and every stage's time.",
            ),
        )
        if not taken & set(option.opts)
    ]
    for sub in getattr(command, "commands", {}).values():
        add_verbosity_options(sub)


def say(message: str, *, err: bool = False) -> None:
    """An informational line: shown unless -q."""
    if verbosity() > QUIET:
        click.echo(message, err=err)


# ---------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------


class Progress:
    """The stages of a command with their durations, on stderr.

    On a terminal one live line shows the stage running; when the command ends it is replaced by a
    summary of every stage's time, which stays on screen.  Elsewhere (a log, a pipe) each stage is one
    plain line with its time, written when the command ends, or as each stage ends with ``as_they_end``
    (-v); a command that fails prints only its one error line.  ``enabled=False`` (-q) prints nothing;
    the times are kept either way (``timings``, for --json).
    """

    def __init__(self, stream=None, *, enabled: bool = True, as_they_end: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.live = enabled and bool(getattr(self.stream, "isatty", lambda: False)())
        self.as_they_end = enabled and not self.live and as_they_end
        self.timings: list[tuple[str, float]] = []
        self.current: str | None = None
        self.started = self.start = time.perf_counter()
        self.width = 0
        self.shown = 0  # how many of the timings are printed

    @classmethod
    def for_command(cls) -> Progress:
        return cls(enabled=verbosity() > QUIET, as_they_end=verbosity() >= VERBOSE)

    def stage(self, text: str) -> None:
        """Start stage ``text``, ending the one before."""
        self._end_stage()
        self.current, self.started = text, time.perf_counter()
        if self.live:
            self._rewrite(f"[{self.started - self.start:6.1f}s] {text}")

    def pause(self) -> None:
        """Clear the live line, so that other lines can be printed (the next stage draws it again)."""
        if self.live and self.width:
            self._rewrite("")
            self.stream.write("\r")
            self.stream.flush()
            self.width = 0

    def done(self) -> None:
        """End the last stage and show the times not shown yet (on a terminal, as one summary line)."""
        self._end_stage()
        self.pause()
        if not self.enabled or self.shown == len(self.timings):
            return
        if self.live:
            self.stream.write(self.summary() + "\n")
        else:
            self.stream.writelines(f"{text}: {seconds:.2f}s\n" for text, seconds in self.timings[self.shown :])
        self.shown = len(self.timings)
        self.stream.flush()

    def summary(self) -> str:
        stages = ", ".join(f"{text} {seconds:.2f}s" for text, seconds in self.timings)
        return f"{stages} (total {sum(s for _, s in self.timings):.2f}s)"

    def to_json(self) -> list[dict]:
        return [{"stage": text, "seconds": round(seconds, 4)} for text, seconds in self.timings]

    def _end_stage(self) -> None:
        if self.current is None:
            return
        seconds = time.perf_counter() - self.started
        self.timings.append((self.current, seconds))
        if self.as_they_end:
            self.stream.write(f"{self.current}: {seconds:.2f}s\n")
            self.stream.flush()
            self.shown = len(self.timings)
        self.current = None

    def _rewrite(self, line: str) -> None:
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)


# ---------------------------------------------------------------------------
# --json
# ---------------------------------------------------------------------------


def error_json(e: OpconvError) -> dict:
    """An error as JSON: its type, message, file, exit code, and for a conversion every refused node."""
    record: dict[str, Any] = {
        "type": type(e).__name__,
        "message": e.message,
        "where": e.where,
        "exit_code": e.exit_code,
    }
    if isinstance(e, ConversionError):
        record["refused"] = [r.to_json() for r in e.refused]
    return {"ok": False, "error": record}


def json_option(command):
    """Decorator: ``--json`` (as ``as_json``); with it, an OpconvError is one JSON document on stdout too."""

    @functools.wraps(command)
    def wrapped(*args, as_json: bool, **kwargs):
        try:
            return command(*args, as_json=as_json, **kwargs)
        except OpconvError as e:
            if not as_json:
                raise
            click.echo(json.dumps(error_json(e), indent=1))
            click.echo(f"opconv: error: {one_line(e)}", err=True)
            sys.exit(e.exit_code)

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print what was done (files written, op counts, fusions, stage times; or the "
        "error with every refused node) as one JSON document on standard output.",
    )(wrapped)


# ---------------------------------------------------------------------------
# the conversion flow
# ---------------------------------------------------------------------------


class Conversion:
    """One conversion command: load, convert, write, report (as text, or as JSON with ``as_json``)."""

    def __init__(
        self, command: str, model: str, dialect: str, *, as_json: bool = False, hints: dict[str, str] | None = None
    ):
        self.command, self.model, self.dialect, self.as_json = command, model, dialect, as_json
        self.hints = {**_READER_COMMAND, **(hints or {})}
        self.progress = Progress.for_command()
        self.record: dict = {"ok": True, "command": command, "input": model}
        self.files: list[str] = []
        self.folder: str | None = None  # -o FOLDER/, made when the model is written

    def output_path(self, output: str | None, default: str, target_dialect: str) -> str:
        """Where to write: ``output``, ``default`` (a path beside MODEL), or ``output/<default's name>``
        when ``output`` is a folder (an existing one, or a path ending in /, made when the model is written)."""
        if output and (os.path.isdir(output) or output.endswith(("/", os.sep))):
            self.folder = output
            output = os.path.join(output, os.path.basename(default))
        target = output or default
        if self.as_json and is_stdout(target):
            raise click.UsageError("--json prints to standard output; write the model to a file (-o PATH)")
        self._check_suffix(target, target_dialect)
        return target

    def _check_suffix(self, target: str, dialect: str) -> None:
        """Refuse, before any work, an output name the target dialect is not written as."""
        from ..api import DIALECT_NAMES
        from ..atomic import check_output
        from ..dialects import get

        suffixes = get(dialect).suffixes
        if target.lower().endswith(suffixes) or check_output(target) == "stream":
            return
        bin_note = " (its .bin goes beside it)" if dialect == "openvino" else ""
        raise OpconvError(
            f"{self.command} writes {DIALECT_NAMES[dialect]}, whose file is "
            f"{' or '.join(suffixes)}{bin_note}; give -o a {suffixes[0]} path or a folder",
            where=target,
        )

    def load(self):
        """The source model; a file of another dialect is refused with the command that reads it."""
        import opconv

        from ..api import DIALECT_NAMES

        self.progress.stage(f"loading {self.model}")
        try:
            source = opconv.load(self.model, self.dialect)
        except ModelReadError:
            actual = _dialect_of(self.model) or self.dialect
            if actual == self.dialect or actual not in self.hints:
                raise
            raise ModelReadError(
                f"this is {DIALECT_NAMES[actual]}, not {DIALECT_NAMES[self.dialect]}: "
                f"did you mean `opconv {self.hints[actual]}`?",
                where=self.model,
            ) from None
        self.record["source"] = _model_json(source)
        return source

    def convert(self, what: str, convert, source):
        self.progress.stage(what)
        return convert(source)

    def save(self, model, target: str, save=None, extra_files: tuple[str, ...] = ()) -> None:
        """Write ``model`` to ``target`` (with ``save``, default ``opconv.save``); note the files written."""
        import opconv

        self.progress.stage(f"writing {target}")
        if self.folder:
            os.makedirs(self.folder, exist_ok=True)
        since = time.time_ns() - 50_000_000  # file times come from a coarse clock
        (save or opconv.save)(model, target)
        self.files = [
            path
            for path in (target, *_data_files(target, model.dialect), *extra_files)
            if path == target or _written_since(path, since)
        ]
        self.record.update(output=_model_json(model), files=self.files)

    def report(self, *lines: str, **fields) -> None:
        """What was done: ``lines`` as text (on stderr when the model went to stdout), ``fields`` in the JSON."""
        self.progress.pause()
        self.record.update(fields)
        if self.as_json:
            return
        err = bool(self.files) and is_stdout(self.files[0])
        for line in lines:
            say(line, err=err)
        if verbosity() >= VERBOSE:
            for side in ("source", "output"):
                if side in self.record:
                    counts = self.record[side]["op_counts"]
                    say(f"{side} ops: " + ", ".join(f"{op} {n}" for op, n in counts.items()), err=err)

    def verify(self, source, converted, input_shapes=None, dims=None) -> None:
        """Compare ``converted`` with ``source`` on seeded random inputs (a difference makes the exit code 1)."""
        import opconv

        self.progress.stage("verifying")
        report = opconv.verify(source, converted, input_shapes=input_shapes, dims=dims)
        self.progress.pause()
        self.record.update(ok=report.ok, verify=report.to_json())
        if self.as_json:
            return
        for o in report.outputs:
            if verbosity() > QUIET or not o.ok:
                status = "ok" if o.ok else "DIFFERS"
                click.echo(
                    f"  {o.name}: {status}, max abs err {o.max_abs_error:.3g}, "
                    f"{o.mismatches}/{o.total} mismatches" + ("" if o.ok else f" ({o.message})")
                )
        if verbosity() > QUIET or not report.ok:
            click.echo(report.summary())

    def __enter__(self) -> Conversion:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """On success: the stage times, the JSON document, exit 1 when --verify found a difference."""
        if exc_type is not None:
            self.progress.pause()  # the error's line starts on a clean line
            return
        self.progress.done()
        if self.as_json:
            self.record["stages"] = self.progress.to_json()
            click.echo(json.dumps(self.record, indent=1))
        if not self.record["ok"]:
            sys.exit(1)


def _dialect_of(path: str) -> str | None:
    """The dialect a model file is in: by its content where that is distinctive (IR XML, HLO text), so that
    a misnamed file is told too, else by its suffix; None when neither tells."""
    from .. import dialects

    try:
        with open(path, "rb") as f:
            head = f.read(512)
        for name in ("openvino", "hlo"):
            if dialects.get(name).sniff(head):
                return name
        return dialects.detect(path).name
    except (OSError, OpconvError):
        return None


def op_summary(model) -> str:
    """``Conv 2, Relu 2, ...`` for a summary line."""
    return ", ".join(f"{op.rpartition('::')[2]} {n}" for op, n in model.op_counts().items())


def _model_json(model) -> dict:
    counts = model.op_counts()
    return {"dialect": model.dialect, "opsets": dict(model.opsets), "nodes": sum(counts.values()), "op_counts": counts}


def _data_files(target: str, dialect: str) -> tuple[str, ...]:
    """The files a save of ``dialect`` may write beside ``target``."""
    if dialect == "openvino":
        return (os.path.splitext(target)[0] + ".bin",)
    return (target + (".data" if dialect == "onnx" else ".weights"),)


def _written_since(path: str, since_ns: int) -> bool:
    try:
        return os.stat(path).st_mtime_ns >= since_ns
    except OSError:
        return False
