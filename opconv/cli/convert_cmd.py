"""``opconv onnx-to-ir``: convert an ONNX model to OpenVINO IR v10 (opset1), optionally verifying it."""

from __future__ import annotations

import os
import sys

import click

from . import cli
from .run_cmd import MODEL, _parse_shapes

_INPUT_SHAPE_HELP = ("Static shape for an input with symbolic or unknown dims, as NAME=D0,D1,... "
                     "(repeatable). OpenVINO opset1 IR needs every input shape static.")


def default_output(model_path: str) -> str:
    """MODEL with its suffix replaced by .xml, beside it."""
    return os.path.splitext(model_path)[0] + ".xml"


@cli.command("onnx-to-ir")
@click.argument("model", type=MODEL)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="The .xml to write (its .bin goes beside it). Default: MODEL with an .xml suffix.")
@click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME=DIMS", help=_INPUT_SHAPE_HELP)
@click.option("--verify", "verify_after", is_flag=True,
              help="Run the ONNX model and the IR on the same random inputs and compare every output.")
def onnx_to_ir(model, output, input_shapes, verify_after):
    """Convert an ONNX MODEL to OpenVINO IR v10 (opset1): OUT.xml plus OUT.bin.

    Every node must map to opset1; otherwise nothing is written and every
    unsupported node is listed with the reason each rule gave.

    \b
    Examples:
      opconv onnx-to-ir resnet.onnx --input-shape data=1,3,224,224
      opconv onnx-to-ir mlp.onnx -o out/mlp.xml --input-shape x=8,64 --verify

    Exit code 0 when the IR was written (and, with --verify, matches), 1 when
    --verify finds a difference, 2 when the model cannot be read or converted.
    """
    import opconv
    from ..converters.onnx_to_openvino import onnx_to_openvino

    shapes = _parse_shapes(input_shapes)
    source = opconv.load(model, "onnx")
    converted = onnx_to_openvino(source, input_shapes=shapes)
    target = output or default_output(model)
    opconv.save(converted, target)
    counts = ", ".join(f"{op.rpartition('::')[2]} {n}" for op, n in converted.op_counts().items())
    click.echo(f"wrote {target} and {os.path.splitext(target)[0]}.bin ({counts})")
    if verify_after:
        _verify(opconv, source, converted, shapes)


def _verify(opconv, source, converted, shapes) -> None:
    """Compare the IR with the ONNX model on seeded random inputs; exit 1 on any difference."""
    report = opconv.verify(source, converted, input_shapes=shapes)
    for o in report.outputs:
        status = "ok" if o.ok else "DIFFERS"
        click.echo(f"  {o.name}: {status}, max abs err {o.max_abs_error:.3g}, "
                   f"{o.mismatches}/{o.total} mismatches" + ("" if o.ok else f" ({o.message})"))
    click.echo(report.summary())
    if not report.ok:
        sys.exit(1)
