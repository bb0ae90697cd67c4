"""List the contrib operators ONNX Runtime's CPU execution provider runs: ``tests/ort_cpu_contrib_ops.json``.

Usage::

    python scripts/ort_contrib_kernels.py            # print the list and (re)write the JSON file
    python scripts/ort_contrib_kernels.py --check    # exit 1 if the committed file is stale

The source is ORT's own kernel registry (``get_all_opkernel_def()``), not a hand-made list.
Three groups are written:

- ``ops``: every CPUExecutionProvider kernel in ``com.microsoft``, ``com.microsoft.nchwc`` and
  ``ai.onnx.training``, plus the kernels ORT registers in the plain ai.onnx domain for
  operators (or versions) ONNX itself does not define (LayerNormalization-1,
  SimplifiedLayerNormalization-1).  One entry per (domain, name, version range), with the
  union of the kernel defs' type constraints.
- ``no_cpu_kernel``: contrib schemas the same ORT build knows but has no CPU kernel for --
  operators ORT implements only for other providers (CUDA, ROCm, DirectML, WebGPU ...).

The coverage test (``tests/test_contrib_coverage.py``) reads this file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import onnx.defs
from onnxruntime import __version__ as ORT_VERSION
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "tests" / "ort_cpu_contrib_ops.json"
PROVIDER = "CPUExecutionProvider"
CONTRIB_DOMAINS = ("com.microsoft", "com.microsoft.nchwc", "ai.onnx.training")
OPEN_END = 2**31 - 1


def _onnx_versions() -> dict[str, list[int]]:
    versions: dict[str, list[int]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx"):
            versions.setdefault(schema.name, []).append(schema.since_version)
    return versions


def _is_ort_own_onnx_domain_kernel(name: str, since: int, onnx_versions) -> bool:
    """An ai.onnx-domain kernel for an op (or version range) that ONNX itself does not define."""
    known = onnx_versions.get(name)
    return not known or since < min(known)


def cpu_contrib_kernels() -> list[dict]:
    onnx_versions = _onnx_versions()
    merged: dict[tuple, dict] = {}
    for kernel in ort_state.get_all_opkernel_def():
        if kernel.provider != PROVIDER:
            continue
        domain = kernel.domain or "ai.onnx"
        since, until = kernel.version_range
        if domain not in CONTRIB_DOMAINS and not (
            domain == "ai.onnx" and _is_ort_own_onnx_domain_kernel(kernel.op_name, since, onnx_versions)
        ):
            continue
        entry = merged.setdefault(
            (domain, kernel.op_name, since),
            {
                "domain": domain,
                "name": kernel.op_name,
                "since": since,
                "until": None if until >= OPEN_END else until,
                "types": {},
            },
        )
        for constraint, types in kernel.type_constraints.items():
            allowed = entry["types"].setdefault(constraint, [])
            allowed.extend(t for t in types if t not in allowed)
    for entry in merged.values():
        entry["types"] = {k: sorted(v) for k, v in sorted(entry["types"].items())}
    return sorted(merged.values(), key=lambda e: (e["domain"], e["name"], e["since"]))


def schemas_without_cpu_kernel(kernels: list[dict]) -> list[dict]:
    with_kernel = {(k["domain"], k["name"]) for k in kernels}
    newest: dict[tuple, int] = {}
    for schema in ort_state.get_all_operator_schema():
        if schema.domain in CONTRIB_DOMAINS and (schema.domain, schema.name) not in with_kernel:
            key = (schema.domain, schema.name)
            newest[key] = max(newest.get(key, 0), schema.since_version)
    return [{"domain": d, "name": n, "since": v} for (d, n), v in sorted(newest.items())]


def generate() -> str:
    kernels = cpu_contrib_kernels()
    data = {
        "source": f"onnxruntime {ORT_VERSION} get_all_opkernel_def(), {PROVIDER}",
        "generated_by": "scripts/ort_contrib_kernels.py",
        "about": "ops: ORT's CPU kernels in the contrib domains and its own ai.onnx-domain ops "
        "(until null = open-ended); no_cpu_kernel: contrib schemas ORT runs only on other providers",
        "ops": kernels,
        "no_cpu_kernel": schemas_without_cpu_kernel(kernels),
    }
    return json.dumps(data, indent=1) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale; rerun {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    data = json.loads(text)
    for op in data["ops"]:
        until = "" if op["until"] is None else op["until"]
        print(f"{op['domain']:22} {op['name']:36} {op['since']}-{until}")
    print(f"{len(data['ops'])} CPU kernels; {len(data['no_cpu_kernel'])} contrib schemas without one")
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
