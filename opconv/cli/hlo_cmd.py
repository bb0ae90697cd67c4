"""``opconv onnx-to-hlo`` and ``opconv hlo-to-onnx``: convert between ONNX and the HLO dialect.

Both write atomically (nothing is left on failure), mirror ``onnx-to-ir``'s
options, and can verify the result numerically with opconv's executors.
"""

from __future__ import annotations

import os

import click

from . import cli
from .convert_cmd import default_output, output_option, to_onnx, to_onnx_options
from .output import Conversion, json_option, op_summary
from .run_cmd import MODEL, shape_options

_INPUT_SHAPE_HELP = (
    "Static shape for an input with symbolic or unknown dims, as NAME=D0,D1,... (repeatable); "
    "binds the symbols of its declared dims (batch, seq) for every input. "
    "HLO values have static shapes."
)


@cli.command("onnx-to-hlo")
@click.argument("model", type=MODEL)
@output_option("The file", "MODEL with an .hlo suffix (.mlir with --format stablehlo), beside it")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "stablehlo"]),
    default=None,
    help="text: opconv's HLO module (+ OUT.weights for large constants); stablehlo: MLIR text with "
    "stablehlo.* ops. Default: stablehlo for a .mlir output, else text.",
)
@shape_options(_INPUT_SHAPE_HELP)
@click.option(
    "--weights-as-arguments",
    is_flag=True,
    help="StableHLO only (implies --format stablehlo): pass constants of 1 KiB or more as arguments "
    "of @main after the inputs instead of dense<...> literals, and write them, in argument order "
    "and keyed by constant name, to the output path with an .npz suffix.",
)
@click.option(
    "--verify",
    "verify_after",
    is_flag=True,
    help="Run the ONNX model and the HLO module on the same random inputs and compare every output.",
)
@json_option
def onnx_to_hlo(model, output, fmt, input_shapes, dims, weights_as_arguments, verify_after, as_json):
    """Convert an ONNX MODEL to the HLO dialect (text module or StableHLO).

    Every node must map to HLO operations; otherwise nothing is written and
    every unsupported node is listed with the reason each rule gave. Fusions
    (Conv + Add -> ConvBias, MatMul + Add -> DotGeneralBias, LayerNorm and
    Gelu patterns ...) are reported.

    \b
    Examples:
      opconv onnx-to-hlo resnet.onnx --input-shape data=1,3,224,224
      opconv onnx-to-hlo bert.onnx -o bert.mlir --format stablehlo --input-shape ids=1,128
      opconv onnx-to-hlo mlp.onnx --input-shape x=8,64 --verify
      opconv onnx-to-hlo bert.onnx --dim batch=1 --dim seq=128
      opconv onnx-to-hlo vgg.onnx -o vgg.mlir --weights-as-arguments   # + vgg.npz

    Exit code 0 when the module was written (and, with --verify, matches), 1
    when --verify finds a difference, 2 when the model cannot be read or converted.
    """
    from ..converters.onnx_to_hlo import conversion_stats
    from ..converters.onnx_to_hlo import onnx_to_hlo as convert
    from ..dialects.hlo.io import save

    if fmt is None:
        fmt = "stablehlo" if weights_as_arguments or (output and output.lower().endswith(".mlir")) else "text"
    if weights_as_arguments and fmt != "stablehlo":
        raise click.UsageError("--weights-as-arguments needs --format stablehlo")
    with Conversion("onnx-to-hlo", model, "onnx", as_json=as_json) as conv:
        source = conv.load()
        target = conv.output_path(output, default_output(model, ".mlir" if fmt == "stablehlo" else ".hlo"), "hlo")
        weights_file = os.path.splitext(target)[0] + ".npz"
        converted = conv.convert(
            "converting to HLO", lambda m: convert(m, input_shapes=input_shapes, dims=dims), source
        )
        conv.save(
            converted,
            target,
            (lambda m, path: _save_with_weight_arguments(m, path, weights_file))
            if weights_as_arguments
            else (lambda m, path: save(m, path, format=fmt)),
            extra_files=(weights_file,) if weights_as_arguments else (),
        )
        stats = conversion_stats(converted)
        fused, patterns = stats.get("fused_ops", {}), stats.get("patterns", {})
        conv.report(
            f"wrote {' and '.join(conv.files)} ({op_summary(converted)})",
            "fusions: "
            + (", ".join(f"{op} {n}" for op, n in fused.items()) or "none")
            + "; multi-node patterns fused: "
            + (", ".join(f"{op} {n}" for op, n in patterns.items()) or "none"),
            fusions={"fused_ops": fused, "patterns": patterns},
        )
        if verify_after:
            conv.verify(source, converted, input_shapes, dims)


def _save_with_weight_arguments(model, path: str, weights_file: str) -> None:
    """Write StableHLO whose large constants are arguments, and those constants in argument order (atomically)."""
    import zipfile

    import numpy as np

    from ..atomic import OutputFiles
    from ..dialects.hlo.stablehlo import export, weight_arguments

    text = export(model, weights="arguments")
    with OutputFiles(path) as files:
        # What np.savez writes, without its reserved keyword names ("file", "allow_pickle").
        with files.open(weights_file) as f, zipfile.ZipFile(f, "w") as archive:
            for name, array in weight_arguments(model):
                with archive.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)
        with files.open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


@cli.command("hlo-to-onnx")
@to_onnx_options("the HLO module")
def hlo_to_onnx(model, output, opset, verify_after, as_json):
    """Convert an HLO text module MODEL (.hlo) to ONNX.

    Every operation must have an ONNX form; otherwise nothing is written and
    every such operation is listed with the reason.

    \b
    Examples:
      opconv hlo-to-onnx model.hlo
      opconv hlo-to-onnx model.hlo -o back.onnx --opset 17 --verify

    Exit code 0 when the ONNX model was written (and, with --verify, matches),
    1 when --verify finds a difference, 2 when the module cannot be read or converted.
    """
    from ..converters.hlo_to_onnx import hlo_to_onnx as convert

    to_onnx(
        Conversion("hlo-to-onnx", model, "hlo", as_json=as_json, hints={"onnx": "onnx-to-hlo"}),
        output,
        lambda m: convert(m, opset=opset),
        verify_after,
    )


__all__ = ["onnx_to_hlo", "hlo_to_onnx"]
