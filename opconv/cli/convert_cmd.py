"""``opconv onnx-to-ir`` and ``opconv ir-to-onnx``: convert between ONNX and OpenVINO IR v10 (opset1),
optionally verifying the result.

Both write atomically (nothing is left on failure) and, when stderr is a
terminal, show which stage a long conversion is in.
"""

from __future__ import annotations

import os
import sys
import time

import click

from ..atomic import is_stdout
from . import cli
from .run_cmd import MODEL, shape_options

_INPUT_SHAPE_HELP = ("Static shape for an input with symbolic or unknown dims, as NAME=D0,D1,... (repeatable); "
                     "binds the symbols of its declared dims (batch, seq) for every input. "
                     "OpenVINO opset1 IR needs every input shape static.")


def default_output(model_path: str, suffix: str = ".xml") -> str:
    """MODEL with its suffix replaced by ``suffix``, beside it."""
    return os.path.splitext(model_path)[0] + suffix


class Progress:
    """Stage messages on stderr (``[1.2s] converting...``), shown only when stderr is a terminal."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self.width = 0

    def stage(self, text: str) -> None:
        if not self.enabled:
            return
        line = f"[{time.perf_counter() - self.start:6.1f}s] {text}"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def done(self) -> None:
        if self.enabled and self.width:
            self.stream.write("\r" + " " * self.width + "\r")  # leave the terminal clean for the summary
            self.stream.flush()
            self.width = 0


def _summary(model) -> str:
    return ", ".join(f"{op.rpartition('::')[2]} {n}" for op, n in model.op_counts().items())


@cli.command("onnx-to-ir")
@click.argument("model", type=MODEL)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="The .xml to write (its .bin goes beside it). Default: MODEL with an .xml suffix.")
@shape_options(_INPUT_SHAPE_HELP)
@click.option("--verify", "verify_after", is_flag=True,
              help="Run the ONNX model and the IR on the same random inputs and compare every output.")
def onnx_to_ir(model, output, input_shapes, dims, verify_after):
    """Convert an ONNX MODEL to OpenVINO IR v10 (opset1): OUT.xml plus OUT.bin.

    Every node must map to opset1; otherwise nothing is written and every
    unsupported node is listed with the reason each rule gave.

    \b
    Examples:
      opconv onnx-to-ir resnet.onnx --input-shape data=1,3,224,224
      opconv onnx-to-ir mlp.onnx -o out/mlp.xml --input-shape x=8,64 --verify
      opconv onnx-to-ir bert.onnx --input-shape input_ids=1,128   # attention_mask [batch,seq] too
      opconv onnx-to-ir bert.onnx --dim batch=1 --dim seq=128

    Exit code 0 when the IR was written (and, with --verify, matches), 1 when
    --verify finds a difference, 2 when the model cannot be read or converted.
    """
    import opconv
    from ..converters.onnx_to_openvino import onnx_to_openvino

    target = output or default_output(model)
    source, converted, progress = load_convert_save(
        model, "onnx", target, "converting to OpenVINO opset1",
        lambda m: onnx_to_openvino(m, input_shapes=input_shapes, dims=dims))
    click.echo(f"wrote {target} and {os.path.splitext(target)[0]}.bin ({_summary(converted)})")
    if verify_after:
        _verify(opconv, source, converted, progress, input_shapes, dims)


@cli.command("ir-to-onnx")
@click.argument("model", type=MODEL)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="The .onnx to write. Default: MODEL with an .onnx suffix.")
@click.option("--opset", type=int, default=None,
              help="Target ai.onnx opset (13 up to the newest the installed onnx defines; default the newest).")
@click.option("--verify", "verify_after", is_flag=True,
              help="Run the IR and the ONNX model on the same random inputs and compare every output.")
def ir_to_onnx(model, output, opset, verify_after):
    """Convert an OpenVINO IR MODEL (.xml with its .bin; IR v10, or v11 with opset1 layers) to ONNX.

    Every layer must have an ONNX form; otherwise nothing is written and every
    such layer is listed with the reason. Graph inputs and outputs keep their
    names; large weights go to OUT.onnx.data when one protobuf cannot hold them.

    \b
    Examples:
      opconv ir-to-onnx model.xml
      opconv ir-to-onnx model.xml -o back.onnx --opset 17 --verify

    Exit code 0 when the ONNX model was written (and, with --verify, matches),
    1 when --verify finds a difference, 2 when the IR cannot be read or converted.
    """
    import opconv
    from ..converters.openvino_to_onnx import openvino_to_onnx

    target = output or default_output(model, ".onnx")
    source, converted, progress = load_convert_save(
        model, "openvino", target, "converting to ONNX", lambda m: openvino_to_onnx(m, opset=opset))
    click.echo(f"wrote {target} (ai.onnx opset {converted.opsets['']}; {_summary(converted)})",
               err=is_stdout(target))
    if verify_after:
        _verify(opconv, source, converted, progress)


def load_convert_save(model: str, dialect: str, target: str, what: str, convert, save=None):
    """Load ``model`` (of ``dialect``), ``convert`` it and write ``target`` atomically, showing each stage.

    Returns ``(source, converted, progress)``; ``save`` defaults to ``opconv.save``.
    """
    import opconv

    progress = Progress()
    progress.stage(f"loading {model}")
    source = opconv.load(model, dialect)
    try:
        progress.stage(what)
        converted = convert(source)
        progress.stage(f"writing {target}")
        (save or opconv.save)(converted, target)
    finally:
        progress.done()
    return source, converted, progress


def _verify(opconv, source, converted, progress: Progress, input_shapes=None, dims=None) -> None:
    """Compare the converted model with its source on seeded random inputs; exit 1 on any difference."""
    progress.stage("verifying")
    try:
        report = opconv.verify(source, converted, input_shapes=input_shapes, dims=dims)
    finally:
        progress.done()
    for o in report.outputs:
        status = "ok" if o.ok else "DIFFERS"
        click.echo(f"  {o.name}: {status}, max abs err {o.max_abs_error:.3g}, "
                   f"{o.mismatches}/{o.total} mismatches" + ("" if o.ok else f" ({o.message})"))
    click.echo(report.summary())
    if not report.ok:
        sys.exit(1)
