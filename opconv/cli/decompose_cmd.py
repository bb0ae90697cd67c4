"""``opconv decompose``: rewrite ONNX Runtime's contrib operators (and on request the ai.onnx composites) into
standard ai.onnx operators."""

from __future__ import annotations

import os

import click

from . import cli
from .output import Conversion, json_option
from .run_cmd import MODEL


def default_output(model_path: str) -> str:
    """MODEL.onnx -> MODEL.decomposed.onnx, beside it."""
    stem, ext = os.path.splitext(model_path)
    return f"{stem}.decomposed{ext or '.onnx'}"


@cli.command("decompose")
@click.argument("model", type=MODEL)
@click.option(
    "-o",
    "--output",
    type=click.Path(),
    help="Where to write the result, or a folder to write it in under MODEL's name. "
    "Default: MODEL with .decomposed before its suffix, beside it.",
)
@click.option(
    "--domain",
    "domains",
    multiple=True,
    default=("com.microsoft", "com.microsoft.nchwc"),
    show_default=True,
    help="A domain whose operators are decomposed (repeatable).",
)
@click.option(
    "--composites",
    is_flag=True,
    help="Also decompose the ai.onnx composites (Attention, RNN/GRU/LSTM unrolled, RotaryEmbedding, "
    "RMSNormalization, MeanVarianceNormalization, LpNormalization, NegativeLogLikelihoodLoss, "
    "SoftmaxCrossEntropyLoss), as onnx-to-ir and onnx-to-hlo do; "
    "their input shapes must be static.",
)
@json_option
def decompose(model, output, domains, composites, as_json):
    """Rewrite the contrib operators of an ONNX MODEL (ONNX Runtime's com.microsoft ones, the blocked-layout
    com.microsoft.nchwc ones its level-3 optimizer writes, and its ai.onnx-domain LayerNormalization-1 /
    SimplifiedLayerNormalization-1) into standard ai.onnx operators at the model's opset, so that any runtime
    reads it.

    When a node cannot be decomposed, nothing is written and every reason is
    listed once with the count and names of the nodes it applies to.

    \b
    Examples:
      opconv decompose bert_optimized.onnx
      opconv decompose model.onnx -o standard.onnx
      opconv decompose lstm.onnx --composites

    Exit code 0 when written, 2 when the model cannot be read or decomposed.
    """
    import opconv

    from ..converters.decompose import is_composite

    with Conversion("decompose", model, "onnx", as_json=as_json) as conv:
        source = conv.load()
        target = conv.output_path(output, default_output(model), "onnx")
        before = sum(1 for n in source.graph.walk() if n.domain in domains or (composites and is_composite(n)))
        result = conv.convert(
            "decomposing", lambda m: opconv.decompose(m, domains=domains, composites=composites), source
        )
        conv.save(result, target)
        conv.report(
            f"wrote {' and '.join(conv.files)} ({before} node(s) decomposed, {len(list(result.graph.walk()))} nodes)",
            decomposed=before,
        )
