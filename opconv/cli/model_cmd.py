"""``opconv inspect`` and ``opconv check``: look at a model file without converting it."""

from __future__ import annotations

import json
import sys

import click

from .. import load
from ..ir import Model, Value
from . import cli
from .output import say

MODEL = click.Path(dir_okay=False)  # existence is checked by the loader, with opconv's own message


@cli.command()
@click.argument("model", type=MODEL)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def inspect(model, as_json):
    """Summarise MODEL: dialect, opset imports, op counts, inputs and outputs, weight bytes."""
    m = load(model)
    info = summary(m)
    if as_json:
        click.echo(json.dumps(info, indent=1))
        return
    click.echo(f"{model}: {info['dialect']} model")
    if info["producer"]:
        click.echo(f"  producer: {info['producer']}")
    default = "ai.onnx" if info["dialect"] == "onnx" else '""'  # the default domain's name in that dialect
    click.echo("  opsets: " + ", ".join(f"{d or default}={v}" for d, v in info["opsets"].items()))
    click.echo(f"  nodes: {info['node_count']} ({len(info['op_counts'])} op types)")
    click.echo(f"  weights: {info['weight_bytes']:,} bytes in {info['initializer_count']} constants")
    for title in ("inputs", "outputs"):
        click.echo(f"  {title}:")
        for v in info[title]:
            click.echo(f"    {v['name']}: {v['type']}")
    click.echo("  ops:")
    for op, count in info["op_counts"].items():
        click.echo(f"    {op:32s} {count}")


def summary(m: Model) -> dict:
    def describe(v: Value) -> dict:
        return {"name": v.name, "type": str(v.type) if v.type is not None else "unknown"}

    graph_inputs = [v for v in m.graph.inputs if v.const is None]
    return {
        "dialect": m.dialect,
        "producer": " ".join(x for x in (m.producer, m.producer_version) if x),
        "opsets": dict(m.opsets),
        "node_count": sum(1 for _ in m.graph.walk()),
        "op_counts": m.op_counts(),
        "inputs": [describe(v) for v in graph_inputs],
        "outputs": [describe(v) for v in m.graph.outputs],
        "initializer_count": len(m.graph.initializers),
        "weight_bytes": m.weight_bytes(),
        "functions": [f"{f.domain}::{f.name}" for f in m.functions],
    }


@cli.command()
@click.argument("model", type=MODEL)
@click.option("--json", "as_json", is_flag=True, help="Print the problems as JSON.")
def check(model, as_json):
    """Check MODEL against its dialect's operator schemas.

    Lists every problem with the node it concerns: unknown ops or versions,
    input/output counts, missing or mistyped attributes, input types, names
    used but never defined or defined twice.

    Exit code 0 when valid, 1 when invalid, 2 when MODEL cannot be read.
    """
    from ..validation import check_model

    problems = check_model(load(model))
    if as_json:
        click.echo(json.dumps({"valid": not problems, "problems": [p.to_json() for p in problems]}, indent=1))
    else:
        for p in problems:
            click.echo(f"{model}: {p}")
        say(f"{model}: {'valid' if not problems else f'{len(problems)} problem(s)'}", err=bool(problems))
    sys.exit(1 if problems else 0)
