"""``opconv decompose``: rewrite ONNX Runtime's contrib operators into standard ai.onnx operators."""

from __future__ import annotations

import os

import click

from . import cli
from .run_cmd import MODEL


def default_output(model_path: str) -> str:
    """MODEL.onnx -> MODEL.decomposed.onnx, beside it."""
    stem, ext = os.path.splitext(model_path)
    return f"{stem}.decomposed{ext or '.onnx'}"


@cli.command("decompose")
@click.argument("model", type=MODEL)
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Where to write the result. Default: MODEL with .decomposed before its suffix.")
@click.option("--domain", "domains", multiple=True, default=("com.microsoft", "com.microsoft.nchwc"),
              show_default=True,
              help="A domain whose operators are decomposed (repeatable).")
def decompose(model, output, domains):
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

    Exit code 0 when written, 2 when the model cannot be read or decomposed.
    """
    import opconv

    source = opconv.load(model, "onnx")
    before = sum(1 for n in source.graph.walk() if n.domain in domains)
    result = opconv.decompose(source, domains=domains)
    target = output or default_output(model)
    opconv.save(result, target)
    click.echo(f"wrote {target} ({before} contrib node(s) decomposed, {len(list(result.graph.walk()))} nodes)")
