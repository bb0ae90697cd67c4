"""Generate docs/coverage.md: per operator, which of opconv's registries know it.

    python scripts/gen_coverage.py            # write docs/coverage.md
    python scripts/gen_coverage.py --check    # exit 1 if the committed file is stale

The tables are read from the registries themselves, never written by hand:

* kernels: ``REGISTRY`` of ``opconv/dialects/<dialect>/executor.py`` (``@onnx_op``, ``@ov_op``, ``@hlo_op``);
* translators: the lowering registry (``opconv/lowering.py``) per route, one entry per (op, ``since``), plus
  the route's fusions keyed by their pattern root; a direction that still lists pattern rules in its
  package's ``RULES`` is read from there, keyed by the op each rule is anchored at;
* version adapters: the lowering routes ``("onnx", "onnx:up")`` / ``("onnx", "onnx:down")``;
* contrib decompositions: ``decompositions()`` of ``opconv/converters/decompose/registry.py``;
* StableHLO emitters: the lowering route ``("hlo", "stablehlo")``.

The operator lists come from the schemas (``opconv/schemas/*.json``).  The output depends only on the tree,
so it is byte-for-byte reproducible; ``tests/test_coverage_doc.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections import defaultdict
from pathlib import Path

# Scripts run from a checkout where opconv is usually not installed.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUTPUT = ROOT / "docs" / "coverage.md"
GENERATED_BY = "scripts/gen_coverage.py"

NO = "–"


def _domain(domain: str | None) -> str:
    return "" if domain in (None, "ai.onnx") else domain


def _schema_ops(dialect: str, filename: str) -> list[tuple[str, str, list[int]]]:
    """``(domain, op, versions)`` of every operator of one schema file (``opconv/schemas/<filename>``), sorted."""
    data = json.loads((ROOT / "opconv" / "schemas" / filename).read_text(encoding="utf-8"))
    if data["dialect"] != dialect:
        raise SystemExit(f"{filename} is no {dialect} schema file")
    versions: dict[tuple[str, str], set[int]] = defaultdict(set)
    for entry in data["ops"]:
        versions[(entry["domain"], entry["name"])].add(entry["version"])
    return [(d, op, sorted(v)) for (d, op), v in sorted(versions.items())]


def _kernels(dialect: str) -> dict[tuple[str, str], list[int]]:
    """(domain, op) -> the ``since`` versions of its kernels in the dialect's executor registry."""
    import importlib

    executor = importlib.import_module(f"opconv.dialects.{dialect}.executor")
    executor.EXECUTOR.load_kernels()
    found: dict[tuple[str, str], list[int]] = defaultdict(list)
    for reg in executor.REGISTRY.registrations():
        found[(_domain(reg.domain), reg.op)].append(reg.since)
    return {k: sorted(v) for k, v in found.items()}


def _rule_anchors(direction: str) -> dict[tuple[str, str], int]:
    """(domain, op) -> how many translators (one per ``since``) and fusions of the direction it has, or, for a
    direction still listing pattern rules in ``RULES``, how many of them are anchored at it."""
    import importlib

    from opconv.converters import lowering

    package = importlib.import_module(f"opconv.converters.{direction}")
    route = tuple(direction.split("_to_"))
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for t in lowering.translators(*route):
        counts[(t.domain, t.op)] += 1
    rules = [f.rule for f in lowering.fusions(*route)] if counts else list(package.RULES)
    for rule in rules:
        root = rule.pattern.root
        counts[(_domain(root.domain), root.op)] += 1
    return counts


def _lowered(direction: str) -> bool:
    """Whether a direction registers its translators in the lowering registry."""
    from opconv.converters import lowering

    return bool(lowering.translators(*direction.split("_to_")))


def _adapters(route: str) -> dict[str, list[int]]:
    """op -> the versions of its adapters on the lowering route ``("onnx", route)``."""
    import opconv.converters.onnx_versions  # noqa: F401  (registers the adapters)
    from opconv.converters import lowering

    found: dict[str, list[int]] = defaultdict(list)
    for t in lowering.translators("onnx", route):
        found[t.op].append(t.since)
    return found


def _emitters() -> set[str]:
    from opconv.dialects.hlo.stablehlo import exportable_ops

    return set(exportable_ops())


def _versions(since: list[int] | None) -> str:
    return ", ".join(str(v) for v in since) if since else NO


def _yes(present: bool) -> str:
    return "yes" if present else NO


def _converted(key: tuple[str, str], rules: dict) -> str:
    """``yes`` when a translator is anchored at the op, ``decomposed`` for an ai.onnx composite (expanded into
    standard ops before any translator runs), else NO."""
    from opconv.converters.decompose.registry import COMPOSITES

    return "yes" if key in rules else ("decomposed" if key in COMPOSITES else NO)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _onnx_tables() -> tuple[list[str], dict]:
    import opconv.converters.decompose  # noqa: F401  (registers the decompositions)
    from opconv.converters.decompose import registry as decompose_registry

    kernels = _kernels("onnx")
    to_openvino = _rule_anchors("onnx_to_openvino")
    to_hlo = _rule_anchors("onnx_to_hlo")
    ups, downs = _adapters("onnx:up"), _adapters("onnx:down")

    standard_rows, contrib_rows = [], []
    totals = defaultdict(int)
    for domain, op, versions in _schema_ops("onnx", "onnx.json"):
        key = (domain, op)
        adapters = []
        if domain == "":
            adapters += [f"up {v}" for v in sorted(ups.get(op, ()))]
            adapters += [f"down {v}" for v in sorted(downs.get(op, ()))]
        row = [
            f"`{op}`",
            domain or "ai.onnx",
            _versions(versions),
            _versions(kernels.get(key)),
            _converted(key, to_openvino),
            _converted(key, to_hlo),
            ", ".join(adapters) or NO,
        ]
        standard_rows.append(row)
        totals["standard"] += 1
        totals["standard kernel"] += key in kernels
        totals["standard openvino"] += key in to_openvino
        totals["standard hlo"] += key in to_hlo
        totals["standard adapters"] += bool(adapters)
        totals["standard composites"] += row[4] == "decomposed"

    contrib = _schema_ops("onnx", "onnx_contrib.json")
    contrib_domains = sorted({d or "ai.onnx" for d, _, _ in contrib})
    for domain, op, versions in contrib:
        key = (domain, op)
        decompositions = decompose_registry.decompositions().get(key, {})
        decomposed = sorted(v for v, fn in decompositions.items() if fn is not None)
        row = [
            f"`{op}`",
            domain or "ai.onnx",
            _versions(versions),
            _versions(kernels.get(key)),
            _versions(decomposed),
            _converted(key, to_openvino),
            _converted(key, to_hlo),
        ]
        contrib_rows.append(row)
        totals["contrib"] += 1
        totals["contrib kernel"] += key in kernels
        totals["contrib decomposed"] += bool(decomposed)

    lines = [
        "## ONNX standard operators",
        "",
        f"{totals['standard']} operators of the pinned onnx (`opconv/schemas/onnx.json`): "
        f"{totals['standard kernel']} with a kernel, {totals['standard openvino']} with an ONNX -> OpenVINO rule, "
        f"{totals['standard hlo']} with an ONNX -> HLO rule, {totals['standard composites']} composites decomposed "
        f"into standard operators for both, {totals['standard adapters']} with hand-written version adapters.",
        "",
        "*schema*: the versions the schemas define; *kernel*: the `since` versions of its kernels "
        "(`@onnx_op`, `opconv/dialects/onnx/ops/`); *-> OpenVINO*, *-> HLO*: a rule of "
        "`opconv/converters/onnx_to_openvino/` or `onnx_to_hlo/` is anchored at the op (*decomposed*: an ai.onnx "
        "composite, expanded by `opconv/converters/decompose/` before the rules run); *adapters*: "
        "`@upgrade` / `@downgrade` steps of `opconv/converters/onnx_versions/` (steps without one go through "
        "the schema-driven generic adapter). An op without a kernel may still run through its schema's "
        "function body; an op without a rule may still convert when folding removes it first.",
        "",
    ]
    lines += _table(["op", "domain", "schema", "kernel", "-> OpenVINO", "-> HLO", "adapters"], standard_rows)
    lines += [
        "",
        "## ONNX contrib operators",
        "",
        f"{totals['contrib']} operators of onnxruntime's schemas (`opconv/schemas/onnx_contrib.json`: "
        f"{', '.join(contrib_domains)}): {totals['contrib kernel']} with a kernel, "
        f"{totals['contrib decomposed']} decomposed into standard ONNX by `opconv/converters/decompose/` "
        "(`@decomposes`), which `onnx-to-ir` and `onnx-to-hlo` run before their rules.",
        "",
    ]
    lines += _table(["op", "domain", "schema", "kernel", "decomposed from", "-> OpenVINO", "-> HLO"], contrib_rows)
    return lines, totals


def _openvino_table() -> list[str]:
    kernels = _kernels("openvino")
    to_onnx = _rule_anchors("openvino_to_onnx")
    rows = []
    ops = _schema_ops("openvino", "openvino.json")
    for _domain, op, _ in ops:
        key = ("opset1", op)
        rows.append([f"`{op}`", _yes(key in kernels), _yes(key in to_onnx)])
    with_kernel = sum(row[1] == "yes" for row in rows)
    with_rule = sum(row[2] == "yes" for row in rows)
    lines = [
        "## OpenVINO opset1 operations",
        "",
        f"{len(rows)} operations: {with_kernel} with a kernel (`@ov_op`, `opconv/dialects/openvino/ops/`), "
        f"{with_rule} with an OpenVINO -> ONNX translator (`@lower`, `opconv/converters/openvino_to_onnx/`).",
        "",
    ]
    return lines + _table(["op", "kernel", "-> ONNX"], rows)


def _hlo_table() -> list[str]:
    from opconv.dialects.hlo.stablehlo import NO_STATIC_FORM

    kernels = _kernels("hlo")
    to_onnx = _rule_anchors("hlo_to_onnx")
    emitters = _emitters()
    rows = []
    for _, op, _ in _schema_ops("hlo", "hlo.json"):
        key = ("", op)
        stablehlo = "yes" if op in emitters else ("no static form" if op in NO_STATIC_FORM else NO)
        rows.append([f"`{op}`", _yes(key in kernels), _yes(key in to_onnx), stablehlo])
    lines = [
        "## HLO operations",
        "",
        f"{len(rows)} operations: {sum(r[1] == 'yes' for r in rows)} with a kernel (`@hlo_op`, "
        f"`opconv/dialects/hlo/ops/`), {sum(r[2] == 'yes' for r in rows)} with an HLO -> ONNX translator (`@lower`, "
        f"`opconv/converters/hlo_to_onnx/`), {sum(r[3] == 'yes' for r in rows)} with a StableHLO emitter "
        "(`@emitter`, `opconv/dialects/hlo/stablehlo/`).",
        "",
    ]
    return lines + _table(["op", "kernel", "-> ONNX", "StableHLO"], rows)


def _registry_sizes() -> list[str]:
    """One row per registry: how many entries (kernels, rules, adapters ...) and how many operators they serve."""
    from opconv.converters.decompose import registry as decompose_registry

    rows = []
    for dialect, decorator in (("onnx", "@onnx_op"), ("openvino", "@ov_op"), ("hlo", "@hlo_op")):
        kernels = _kernels(dialect)
        rows.append([f"{dialect} kernels", f"`{decorator}`", str(sum(map(len, kernels.values()))), str(len(kernels))])
    for direction in ("onnx_to_openvino", "onnx_to_hlo", "openvino_to_onnx", "hlo_to_onnx"):
        anchors = _rule_anchors(direction)
        name, how = ("translators", "`@lower` (+ `@fusion`)") if _lowered(direction) else ("rules", "`Rule` in `RULES`")
        rows.append(
            [direction.replace("_to_", " -> ") + f" {name}", how, str(sum(anchors.values())), str(len(anchors))]
        )
    for name, route in (("upgrade", "onnx:up"), ("downgrade", "onnx:down")):
        table = _adapters(route)
        rows.append([f"{name} adapters", f"`@{name}`", str(sum(map(len, table.values()))), str(len(table))])
    decompositions = {
        key: [v for v, fn in by_version.items() if fn is not None]
        for key, by_version in decompose_registry.decompositions().items()
    }
    rows.append(
        [
            "contrib decompositions",
            "`@decomposes`",
            str(sum(map(len, decompositions.values()))),
            str(sum(bool(v) for v in decompositions.values())),
        ]
    )
    emitters = _emitters()
    rows.append(["StableHLO emitters", "`@emitter`", str(len(emitters)), str(len(emitters))])
    lines = [
        "## Registries",
        "",
        "Entries: registered kernels (one per `since` version), translators (one per "
        "op and `since` version, with the route's multi-node fusions), rules, adapters, decompositions (one per "
        "`since` version) or emitters; operators: how many distinct operators they serve (for rules and "
        "fusions, the ops they are anchored at).",
        "",
    ]
    return lines + _table(["registry", "registered with", "entries", "operators"], rows)


def generate() -> str:
    onnx_lines, _ = _onnx_tables()
    lines = [
        "# Operator coverage",
        "",
        f"<!-- generated by {GENERATED_BY}; do not edit by hand: run `python {GENERATED_BY}` -->",
        "",
        "Which of opconv's registries know each operator, read from the registries themselves "
        "(`docs/adding-an-op.md` says where each one lives). `tests/test_coverage_doc.py` fails when this file "
        "and the registries disagree.",
        "",
    ]
    lines += _registry_sizes() + [""] + onnx_lines + [""] + _openvino_table() + [""] + _hlo_table()
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/coverage.md from opconv's registries.")
    parser.add_argument("--check", action="store_true", help="exit 1, writing nothing, if the file is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"file to write or check (default {OUTPUT})")
    args = parser.parse_args(argv)
    fresh = generate()
    if not args.check:
        args.output.write_text(fresh, encoding="utf-8")
        print(f"wrote {args.output}")
        return 0
    committed = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
    changed = list(
        difflib.unified_diff(committed.splitlines(), fresh.splitlines(), "committed", "generated", lineterm="", n=0)
    )
    print(
        f"{args.output}: " + ("differs from the registries; run python " + GENERATED_BY if changed else "up to date"),
        file=sys.stderr if changed else sys.stdout,
    )
    for line in changed[:40]:
        print(f"  {line}", file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
