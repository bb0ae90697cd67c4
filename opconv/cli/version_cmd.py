"""``opconv upgrade`` and ``opconv downgrade``: move an ONNX model to another ai.onnx opset."""

from __future__ import annotations

import os

import click

from ..errors import ConversionError
from . import cli
from .output import Conversion, json_option
from .run_cmd import MODEL


def default_output(model_path: str, opset: int) -> str:
    """MODEL.onnx -> MODEL.opsetN.onnx, beside it."""
    stem, ext = os.path.splitext(model_path)
    return f"{stem}.opset{opset}{ext or '.onnx'}"


def _convert(
    model: str, opset: int, output: str | None, verify_after: bool, direction: str, decompose: bool, as_json: bool
) -> None:
    import opconv

    with Conversion(direction, model, "onnx", as_json=as_json) as conv:
        source = conv.load()
        target = conv.output_path(output, default_output(model, opset), "onnx")
        current = source.opsets.get("", source.opsets.get("ai.onnx", 1))
        if direction == "upgrade" and opset < current:
            raise ConversionError(
                f"the model is at opset {current}; use `opconv downgrade` to go to {opset}", where=model
            )
        if direction == "downgrade" and opset > current:
            raise ConversionError(
                f"the model is at opset {current}; use `opconv upgrade` to go to {opset}", where=model
            )
        converted = conv.convert(
            f"converting to opset {opset}", lambda m: opconv.convert_version(m, opset, decompose=decompose), source
        )
        conv.save(converted, target)
        conv.report(
            f"wrote {' and '.join(conv.files)} (opset {current} -> {opset}, {len(list(converted.graph.walk()))} nodes)"
        )
        if verify_after:
            conv.verify(source, converted)


_OUTPUT_HELP = (
    "Where to write the result, or a folder to write it in under MODEL's name. "
    "Default: MODEL with .opsetN before its suffix, beside it."
)
_DECOMPOSE_HELP = "First rewrite ONNX Runtime's contrib operators into standard ones (else they stay as they are)."
_VERIFY_HELP = "Run the original and the converted model on the same random inputs and compare every output."


def _version_options(command):
    """The arguments and options upgrade and downgrade share, in the order --help lists them."""
    for decorator in reversed(
        (
            click.option("--opset", type=click.IntRange(1), required=True, help="The ai.onnx opset to move to."),
            click.argument("model", type=MODEL),
            click.option("-o", "--output", type=click.Path(), help=_OUTPUT_HELP),
            click.option("--verify", "verify_after", is_flag=True, help=_VERIFY_HELP),
            click.option("--decompose", is_flag=True, help=_DECOMPOSE_HELP),
            json_option,
        )
    ):
        command = decorator(command)
    return command


@cli.command("upgrade")
@_version_options
def upgrade(opset, model, output, verify_after, decompose, as_json):
    """Move an ONNX MODEL to a newer ai.onnx opset.

    Every node is adapted one operator version at a time (attributes that
    became inputs, removed attributes, renamed ops); subgraphs too.  When a
    node cannot be converted, nothing is written and every such node is listed
    with the opsets it would need.

    \b
    Examples:
      opconv upgrade --opset 21 model.onnx
      opconv upgrade --opset 17 model.onnx -o model17.onnx --verify

    Exit code 0 when written (and, with --verify, equal), 1 when --verify finds
    a difference, 2 when the model cannot be read or converted.
    """
    _convert(model, opset, output, verify_after, "upgrade", decompose, as_json)


@cli.command("downgrade")
@_version_options
def downgrade(opset, model, output, verify_after, decompose, as_json):
    """Move an ONNX MODEL to an older ai.onnx opset.

    Inputs that older versions took as attributes must be constants; element
    types an older version lacks are computed in a wider type between Casts;
    operators newer than the target are decomposed where an exact
    decomposition exists.  Otherwise nothing is written and every offending
    node is listed with the opsets it would need.

    \b
    Examples:
      opconv downgrade --opset 13 model.onnx
      opconv downgrade --opset 11 model.onnx -o model11.onnx --verify

    Exit code 0 when written (and, with --verify, equal), 1 when --verify finds
    a difference, 2 when the model cannot be read or converted.
    """
    _convert(model, opset, output, verify_after, "downgrade", decompose, as_json)
