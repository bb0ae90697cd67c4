"""Every node case and shipped model test of the onnx package through opconv's ONNX executor.

Expected outputs come from onnx itself (its reference implementations); a case
must match within opconv's tolerance table.  Known failures, each with a
reason, are in tests/known_failures.json under "onnx-conformance".
"""

from __future__ import annotations

import pytest

from opconv import testdata
from opconv.conformance import run_case
from tests import known

CASES = list(testdata.node_cases()) + testdata.model_cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.kind}/{c.name}" for c in CASES])
def test_onnx_conformance(case):
    result = run_case(case)
    known.check("onnx-conformance", case.name, result.passed, result.message)
