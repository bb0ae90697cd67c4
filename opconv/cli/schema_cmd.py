"""``opconv schema list|show``: browse the operator schemas of a dialect."""

from __future__ import annotations

import json

import click

from ..errors import SchemaError
from ..schemas import DIALECT_FILES, dialect_schemas, lookup
from . import cli
from .output import say

DIALECT = click.Choice(sorted(DIALECT_FILES))


@cli.group()
def schema():
    """Browse the operator schemas opconv validates and converts against."""


@schema.command("list")
@click.argument("dialect", type=DIALECT)
@click.option("--domain", help="Only this domain ('' is ai.onnx; e.g. com.microsoft, opset1).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {domain, op, since_version}.")
def schema_list(dialect, domain, as_json):
    """List every operator version of DIALECT (onnx, openvino or hlo)."""
    entries = [s for s in dialect_schemas(dialect) if domain is None or s.domain == domain]
    if as_json:
        click.echo(
            json.dumps([{"domain": s.domain, "op": s.name, "since_version": s.version} for s in entries], indent=1)
        )
        return
    by_op: dict[tuple[str, str], list[int]] = {}
    for s in entries:
        by_op.setdefault((s.domain, s.name), []).append(s.version)
    for (dom, name), versions in sorted(by_op.items()):
        label = f"{dom}::{name}" if dom else name
        click.echo(f"{label:48s} {', '.join(map(str, versions))}")
    say(f"{len(by_op)} operators, {len(entries)} versions", err=True)


@schema.command("show")
@click.argument("dialect", type=DIALECT)
@click.argument("op")
@click.option("--version", "version", type=int, help="The version in force at this opset (default: newest).")
@click.option("--domain", default=None, help="Domain of the op (default: the dialect's main domain).")
@click.option("--json", "as_json", is_flag=True, help="Print the schema entry as JSON.")
def schema_show(dialect, op, version, domain, as_json):
    """Show one operator's attributes, inputs, outputs and type constraints."""
    if domain is None:
        domain = _guess_domain(dialect, op)
    s = lookup(dialect, op, version, domain)
    if as_json:
        click.echo(json.dumps(s.to_json(), indent=1))
        return
    label = f"{s.domain}::{s.name}" if s.domain else s.name
    click.echo(f"{label} (version {s.version}, {dialect})")
    if s.doc:
        click.echo(f"  {s.doc}")
    if s.completed_from:
        click.echo(f"  (completed from {s.completed_from})")
    click.echo("attributes:")
    for a in s.attributes or ():
        req = "required" if a.required else f"default {a.default!r}" if a.default is not None else "optional"
        click.echo(f"  {a.name}: {a.type} ({req})")
    for title, params in (("inputs", s.inputs), ("outputs", s.outputs)):
        click.echo(f"{title}:")
        for p in params:
            opt = "" if p.option == "single" else f" [{p.option}]"
            click.echo(f"  {p.name}: {p.type}{opt}")
    if s.type_constraints:
        click.echo("type constraints:")
        for k, v in s.type_constraints.items():
            click.echo(f"  {k}: {', '.join(v)}")


def _guess_domain(dialect: str, op: str) -> str:
    schemas = dialect_schemas(dialect)
    domains = [d for d in schemas.domains() if schemas.find(op, None, d) is not None]
    if not domains:
        raise SchemaError(f"unknown {dialect} op {op}")
    return "" if "" in domains else domains[0]
