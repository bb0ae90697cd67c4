"""``opconv onnx-to-ir`` and ``opconv ir-to-onnx``: convert between ONNX and OpenVINO IR v10 (opset1),
optionally verifying the result.

Both write atomically (nothing is left on failure), show their stages with their times on stderr, and with
``--json`` print what they did (or the error) as one JSON document (:mod:`opconv.cli.output`).
"""

from __future__ import annotations

import os

import click

from ..api import DEFAULT_ONNX_OPSET
from . import cli
from .output import Conversion, Progress, json_option, op_summary  # noqa: F401 - Progress: its old home
from .run_cmd import MODEL, shape_options

_INPUT_SHAPE_HELP = (
    "Static shape for an input with symbolic or unknown dims, as NAME=D0,D1,... (repeatable); "
    "binds the symbols of its declared dims (batch, seq) for every input. "
    "OpenVINO opset1 IR needs every input shape static."
)

OPSET_HELP = (
    f"Target ai.onnx opset (13 up to the newest the installed onnx defines). Default {DEFAULT_ONNX_OPSET}: "
    "onnxruntime 1.20, the oldest the test extras allow, reads it; newer opsets only newer runtimes."
)


def default_output(model_path: str, suffix: str = ".xml") -> str:
    """MODEL with its suffix replaced by ``suffix``, beside it."""
    return os.path.splitext(model_path)[0] + suffix


def output_option(what: str, default: str):
    return click.option(
        "-o",
        "--output",
        type=click.Path(),
        help=f"{what} to write, or a folder to write it in under MODEL's name. Default: {default}.",
    )


def to_onnx_options(source: str):
    """The argument and options of every command that writes ONNX from a ``source`` model (ir-to-onnx, hlo-to-onnx)."""

    def apply(command):
        for decorator in reversed(
            (
                click.argument("model", type=MODEL),
                output_option("The .onnx", "MODEL with an .onnx suffix, beside it"),
                click.option("--opset", type=int, default=DEFAULT_ONNX_OPSET, show_default=True, help=OPSET_HELP),
                click.option(
                    "--verify",
                    "verify_after",
                    is_flag=True,
                    help=f"Run {source} and the ONNX model on the same random inputs and compare every output.",
                ),
                json_option,
            )
        ):
            command = decorator(command)
        return command

    return apply


@cli.command("onnx-to-ir")
@click.argument("model", type=MODEL)
@output_option("The .xml (its .bin goes beside it)", "MODEL with an .xml suffix, beside it")
@shape_options(_INPUT_SHAPE_HELP)
@click.option(
    "--verify",
    "verify_after",
    is_flag=True,
    help="Run the ONNX model and the IR on the same random inputs and compare every output.",
)
@json_option
def onnx_to_ir(model, output, input_shapes, dims, verify_after, as_json):
    """Convert an ONNX MODEL to OpenVINO IR v10 (opset1): OUT.xml plus OUT.bin.

    Every node must map to opset1; otherwise nothing is written and every
    unsupported node is listed with the reason each rule gave.

    \b
    Examples:
      opconv onnx-to-ir resnet.onnx --input-shape data=1,3,224,224
      opconv onnx-to-ir mlp.onnx -o out/ --input-shape x=8,64 --verify   # out/mlp.xml
      opconv onnx-to-ir bert.onnx --input-shape input_ids=1,128   # attention_mask [batch,seq] too
      opconv onnx-to-ir bert.onnx --dim batch=1 --dim seq=128 --json

    Exit code 0 when the IR was written (and, with --verify, matches), 1 when
    --verify finds a difference, 2 when the model cannot be read or converted.
    """
    from ..converters.onnx_to_openvino import onnx_to_openvino

    with Conversion("onnx-to-ir", model, "onnx", as_json=as_json) as conv:
        source = conv.load()
        target = conv.output_path(output, default_output(model), "openvino")
        converted = conv.convert(
            "converting to OpenVINO opset1", lambda m: onnx_to_openvino(m, input_shapes=input_shapes, dims=dims), source
        )
        conv.save(converted, target)
        conv.report(f"wrote {' and '.join(conv.files)} ({op_summary(converted)})")
        if verify_after:
            conv.verify(source, converted, input_shapes, dims)


@cli.command("ir-to-onnx")
@to_onnx_options("the IR")
def ir_to_onnx(model, output, opset, verify_after, as_json):
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
    from ..converters.openvino_to_onnx import openvino_to_onnx

    to_onnx(
        Conversion("ir-to-onnx", model, "openvino", as_json=as_json),
        output,
        lambda m: openvino_to_onnx(m, opset=opset),
        verify_after,
    )


def to_onnx(conversion: Conversion, output: str | None, convert, verify_after: bool) -> None:
    """What ir-to-onnx and hlo-to-onnx share: convert, write MODEL.onnx, say at which opset, verify."""
    with conversion as conv:
        source = conv.load()
        target = conv.output_path(output, default_output(conv.model, ".onnx"), "onnx")
        converted = conv.convert("converting to ONNX", convert, source)
        conv.save(converted, target)
        conv.report(f"wrote {' and '.join(conv.files)} (ai.onnx opset {converted.opsets['']}; {op_summary(converted)})")
        if verify_after:
            conv.verify(source, converted)
