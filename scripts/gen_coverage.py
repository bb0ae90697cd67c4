"""Generate docs/coverage.md: per operator, which of opconv's registries know it.

    python scripts/gen_coverage.py            # write docs/coverage.md
    python scripts/gen_coverage.py --check    # exit 1 if the committed file is stale

The tables are read from the registries themselves, never written by hand:

* kernels: ``REGISTRY`` of ``opconv/dialects/<dialect>/executor.py`` (``@onnx_op``, ``@ov_op``, ``@hlo_op``);
* translators: the ``RULES`` of each direction's package in ``opconv/converters/``, keyed by the op of each
  rule's pattern root (the op a rule is anchored at);
* version adapters: ``UPGRADES`` / ``DOWNGRADES`` of ``opconv/converters/onnx_versions/registry.py``;
* contrib decompositions: ``DECOMPOSITIONS`` of ``opconv/converters/decompose/registry.py``;
* StableHLO emitters: ``EMITTERS`` of ``opconv/dialects/hlo/stablehlo/_writer.py``.

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
    """(domain, op) -> how many rules of the direction are anchored at it."""
    import importlib

    rules = importlib.import_module(f"opconv.converters.{direction}").RULES
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for rule in rules:
        root = rule.pattern.root
        counts[(_domain(root.domain), root.op)] += 1
    return counts


def _versions(since: list[int] | None) -> str:
    return ", ".join(str(v) for v in since) if since else NO


def _yes(present: bool) -> str:
    return "yes" if present else NO


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _onnx_tables() -> tuple[list[str], dict]:
    from opconv.converters.decompose import registry as decompose_registry
    import opconv.converters.decompose  # noqa: F401  (registers the decompositions)
    from opconv.converters.onnx_versions import registry as version_registry
    import opconv.converters.onnx_versions  # noqa: F401  (registers the adapters)

    kernels = _kernels("onnx")
    to_openvino = _rule_anchors("onnx_to_openvino")
    to_hlo = _rule_anchors("onnx_to_hlo")
    ups: dict[str, list[int]] = defaultdict(list)
    downs: dict[str, list[int]] = defaultdict(list)
    for op, version in version_registry.UPGRADES:
        ups[op].append(version)
    for op, version in version_registry.DOWNGRADES:
        downs[op].append(version)

    standard_rows, contrib_rows = [], []
    totals = defaultdict(int)
    for domain, op, versions in _schema_ops("onnx", "onnx.json"):
        key = (domain, op)
        adapters = []
        if domain == "":
            adapters += [f"up {v}" for v in sorted(ups.get(op, ()))]
            adapters += [f"down {v}" for v in sorted(downs.get(op, ()))]
        row = [f"`{op}`", domain or "ai.onnx", _versions(versions), _versions(kernels.get(key)),
               _yes(key in to_openvino), _yes(key in to_hlo), ", ".join(adapters) or NO]
        standard_rows.append(row)
        totals["standard"] += 1
        totals["standard kernel"] += key in kernels
        totals["standard openvino"] += key in to_openvino
        totals["standard hlo"] += key in to_hlo
        totals["standard adapters"] += bool(adapters)

    contrib = _schema_ops("onnx", "onnx_contrib.json")
    contrib_domains = sorted({d or "ai.onnx" for d, _, _ in contrib})
    for domain, op, versions in contrib:
        key = (domain, op)
        decompositions = decompose_registry.DECOMPOSITIONS.get(key, {})
        decomposed = sorted(v for v, fn in decompositions.items() if fn is not None)
        row = [f"`{op}`", domain or "ai.onnx", _versions(versions), _versions(kernels.get(key)), _versions(decomposed),
               _yes(key in to_openvino), _yes(key in to_hlo)]
        contrib_rows.append(row)
        totals["contrib"] += 1
        totals["contrib kernel"] += key in kernels
        totals["contrib decomposed"] += bool(decomposed)

    lines = [
        "## ONNX standard operators",
        "",
        f"{totals['standard']} operators of the pinned onnx (`opconv/schemas/onnx.json`): "
        f"{totals['standard kernel']} with a kernel, {totals['standard openvino']} with an ONNX -> OpenVINO rule, "
        f"{totals['standard hlo']} with an ONNX -> HLO rule, {totals['standard adapters']} with hand-written "
        "version adapters.",
        "",
        "*schema*: the versions the schemas define; *kernel*: the `since` versions of its kernels "
        "(`@onnx_op`, `opconv/dialects/onnx/ops/`); *-> OpenVINO*, *-> HLO*: a rule of "
        "`opconv/converters/onnx_to_openvino/` or `onnx_to_hlo/` is anchored at the op; *adapters*: "
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
    for domain, op, _ in ops:
        key = ("opset1", op)
        rows.append([f"`{op}`", _yes(key in kernels), _yes(key in to_onnx)])
    with_kernel = sum(row[1] == "yes" for row in rows)
    with_rule = sum(row[2] == "yes" for row in rows)
    lines = [
        "## OpenVINO opset1 operations",
        "",
        f"{len(rows)} operations: {with_kernel} with a kernel (`@ov_op`, `opconv/dialects/openvino/ops/`), "
        f"{with_rule} with an OpenVINO -> ONNX rule (`@RULES.op`, `opconv/converters/openvino_to_onnx/`).",
        "",
    ]
    return lines + _table(["op", "kernel", "-> ONNX"], rows)


def _hlo_table() -> list[str]:
    from opconv.dialects.hlo.stablehlo import _writer
    import opconv.dialects.hlo.stablehlo  # noqa: F401  (registers the emitters)

    kernels = _kernels("hlo")
    to_onnx = _rule_anchors("hlo_to_onnx")
    rows = []
    for _, op, _ in _schema_ops("hlo", "hlo.json"):
        key = ("", op)
        stablehlo = "yes" if op in _writer.EMITTERS else ("no static form" if op in _writer.NO_STATIC_FORM else NO)
        rows.append([f"`{op}`", _yes(key in kernels), _yes(key in to_onnx), stablehlo])
    lines = [
        "## HLO operations",
        "",
        f"{len(rows)} operations: {sum(r[1] == 'yes' for r in rows)} with a kernel (`@hlo_op`, "
        f"`opconv/dialects/hlo/ops/`), {sum(r[2] == 'yes' for r in rows)} with an HLO -> ONNX rule (`@RULES.op`, "
        f"`opconv/converters/hlo_to_onnx/`), {sum(r[3] == 'yes' for r in rows)} with a StableHLO emitter "
        "(`@emitter`, `opconv/dialects/hlo/stablehlo/`).",
        "",
    ]
    return lines + _table(["op", "kernel", "-> ONNX", "StableHLO"], rows)


def _registry_sizes() -> list[str]:
    """One row per registry: how many entries (kernels, rules, adapters ...) and how many operators they serve."""
    from opconv.converters.decompose import registry as decompose_registry
    from opconv.converters.onnx_versions import registry as version_registry
    from opconv.dialects.hlo.stablehlo import _writer

    rows = []
    for dialect, decorator in (("onnx", "@onnx_op"), ("openvino", "@ov_op"), ("hlo", "@hlo_op")):
        kernels = _kernels(dialect)
        rows.append([f"{dialect} kernels", f"`{decorator}`", str(sum(map(len, kernels.values()))), str(len(kernels))])
    for direction, how in (("onnx_to_openvino", "`Rule` in `RULES`"), ("onnx_to_hlo", "`Rule` in `RULES`"),
                           ("openvino_to_onnx", "`@RULES.op`"), ("hlo_to_onnx", "`@RULES.op`")):
        anchors = _rule_anchors(direction)
        rows.append([direction.replace("_to_", " -> ") + " rules", how,
                     str(sum(anchors.values())), str(len(anchors))])
    for name, table in (("upgrade", version_registry.UPGRADES), ("downgrade", version_registry.DOWNGRADES)):
        rows.append([f"{name} adapters", f"`@{name}`", str(len(table)), str(len({op for op, _ in table}))])
    decompositions = {key: [v for v, fn in by_version.items() if fn is not None]
                      for key, by_version in decompose_registry.DECOMPOSITIONS.items()}
    rows.append(["contrib decompositions", "`@decomposes`", str(sum(map(len, decompositions.values()))),
                 str(sum(bool(v) for v in decompositions.values()))])
    rows.append(["StableHLO emitters", "`@emitter`", str(len(_writer.EMITTERS)), str(len(_writer.EMITTERS))])
    lines = ["## Registries", "", "Entries: registered kernels (one per `since` version), rules, adapters, "
             "decompositions (one per `since` version) or emitters; operators: how many distinct operators they "
             "serve (for rules, the ops the rules are anchored at).", ""]
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
    changed = list(difflib.unified_diff(committed.splitlines(), fresh.splitlines(), "committed", "generated",
                                        lineterm="", n=0))
    print(f"{args.output}: " + ("differs from the registries; run python " + GENERATED_BY if changed
                                else "up to date"), file=sys.stderr if changed else sys.stdout)
    for line in changed[:40]:
        print(f"  {line}", file=sys.stderr)
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
