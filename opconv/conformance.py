"""Run ONNX's own test cases through an opconv executor and report per case.

``opconv conformance`` and ``tests/test_onnx_conformance.py`` both use
:func:`run_case`, so the command and CI judge a case the same way: every
dataset's outputs must match the expected ones within the tolerance table of
:mod:`opconv.compare` (exact for integers, bools and strings).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .compare import compare_arrays
from .errors import OpconvError
from .testdata import Case


@dataclass
class CaseResult:
    name: str
    kind: str
    passed: bool
    message: str = ""
    seconds: float = 0.0
    details: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "passed": self.passed,
            "message": self.message,
            "seconds": round(self.seconds, 4),
        }


def run_case(case: Case, *, rtol: float | None = None, atol: float | None = None) -> CaseResult:
    """Load ``case``'s model with opconv, run every dataset, compare every output."""
    import opconv

    start = time.perf_counter()
    try:
        model = opconv.load(case.path or case.load_model())
        names = [v.name for v in model.graph.outputs]
        for index, (_inputs, expected) in enumerate(case.datasets):
            feeds = case.feeds(index)
            with np.errstate(all="ignore"):
                actual = opconv.run(model, feeds)
            for name, e in zip(names, expected):
                cmp = compare_arrays(name, e, actual[name], rtol, atol)
                if not cmp.ok:
                    return CaseResult(
                        case.name,
                        case.kind,
                        False,
                        f"output {name!r}: {cmp.message}",
                        time.perf_counter() - start,
                        [cmp.to_json()],
                    )
    except OpconvError as e:
        return CaseResult(case.name, case.kind, False, str(e), time.perf_counter() - start)
    except Exception as e:  # noqa: BLE001 - a crash is a failed case, reported with its type
        return CaseResult(case.name, case.kind, False, f"crash: {type(e).__name__}: {e}", time.perf_counter() - start)
    return CaseResult(case.name, case.kind, True, "", time.perf_counter() - start)
