"""The ONNX kernel registry against the schema files.

* Every registration names an op version that exists in the schemas (no typos, no
  made-up versions).
* Every version of every ai.onnx / ai.onnx.preview.training op either has a kernel
  registered at exactly that version (the executor refuses to run a kernel older than
  the schema in force), or ONNX defines it as a function the executor expands.
  The few that have neither are listed in tests/known_failures.json.
"""

from __future__ import annotations

import onnx.defs
import pytest

from opconv.dialects.onnx.executor import EXECUTOR, REGISTRY
from opconv.schemas import dialect_schemas
from tests import known

EXECUTOR.load_kernels()
_ONNX_DEFINED = {(s.domain, s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history()}
# ONNX's own ops; ONNX Runtime's ai.onnx-domain additions are counted by tests/test_contrib_coverage.py
SCHEMAS = [
    s
    for s in dialect_schemas("onnx")
    if s.domain in ("", "ai.onnx.preview.training") and (s.domain, s.name, s.version) in _ONNX_DEFINED
]
REGISTERED = {(r.domain, r.op, r.since) for r in REGISTRY.registrations()}


def test_every_registration_is_a_schema_version():
    versions = {(s.domain, s.name, s.version) for s in dialect_schemas("onnx")}
    stray = sorted(REGISTERED - versions)
    assert not stray, f"kernels registered for op versions that do not exist: {stray}"


def _has_function_body(s) -> bool:
    try:
        return onnx.defs.get_schema(s.name, s.version, s.domain).has_function
    except onnx.defs.SchemaError:
        return False


@pytest.mark.parametrize("schema", SCHEMAS, ids=[f"{s.domain or 'ai.onnx'}::{s.name}-{s.version}" for s in SCHEMAS])
def test_schema_version_has_a_kernel(schema):
    covered = (schema.domain, schema.name, schema.version) in REGISTERED or _has_function_body(schema)
    known.check(
        "onnx-kernel-coverage",
        f"{schema.name}-{schema.version}",
        covered,
        f"no kernel registered for {schema.name} at version {schema.version} and no function body",
    )
