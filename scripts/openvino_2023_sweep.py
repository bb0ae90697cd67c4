"""Every ONNX node case's IR in OpenVINO 2023.0, beside the current OpenVINO.

Converts the node cases as tests/test_onnx_to_openvino_cases.py does (each IR verified in the current OpenVINO
and opconv's IR executor), runs every verified IR in OpenVINO 2023.0.0 (installed on first use into
``.cache/openvino-2023.0/``, see tests/openvino_2023.py) and compares with ONNX's expected outputs.  For each
case 2023.0 gets wrong it also runs the ONNX model through 2023.0's own ONNX frontend, to tell what opconv's IR
could avoid from what 2023.0 cannot do at all.  tests/test_openvino_2023.py runs a subset covering every
converted op; this is the full sweep (~3 minutes of conversion + ~1.5 minutes in 2023.0).

    python scripts/openvino_2023_sweep.py                 # all node cases
    python scripts/openvino_2023_sweep.py -k resize -k sce   # the cases whose name contains any TEXT
    python scripts/openvino_2023_sweep.py --json report.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("CI", "true")  # `import openvino` otherwise waits on telemetry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", action="append", default=[], metavar="TEXT", help="only cases whose name contains TEXT")
    parser.add_argument("--json", help="write {case: {'2023': problem, 'frontend': problem or null}} here")
    args = parser.parse_args(argv)

    import openvino as ov

    from opconv.testdata import node_cases
    from tests import known, openvino_2023
    from tests.test_onnx_to_openvino_cases import Sweep, _sweep_case

    start = time.perf_counter()
    env = openvino_2023.ensure()
    if env.installed_in_s is not None:
        print(f"installed OpenVINO {openvino_2023.VERSION} in {env.installed_in_s:.1f} s")
    sweep, core = Sweep(), ov.Core()
    with tempfile.TemporaryDirectory(prefix="opconv-node-irs-") as irs, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in node_cases():
            if not args.k or any(text in case.name for text in args.k):
                _sweep_case(case, core, os.path.join(irs, f"{case.name}.xml"), sweep)
        converted = time.perf_counter() - start
        batch, failing, by_frontend = openvino_2023.check_node_cases(env, sweep.verified, frontend=True)
    listed = known.KNOWN.get("openvino-2023", {})
    print(
        f"{len(sweep.verified)} node cases verified in the current OpenVINO ({len(sweep.wrong)} wrong there, "
        f"{len(sweep.refused)} refused; {converted:.1f} s); OpenVINO {batch.version} runs "
        f"{len(sweep.verified) - len(failing)} of them correctly ({batch.seconds:.1f} s, "
        f"{1000 * batch.seconds / max(len(sweep.verified), 1):.0f} ms per IR, {batch.processes} process(es))"
    )
    for name, problem in sorted(failing.items()):
        frontend = by_frontend.get(name)
        print(f"  {name}{' [listed]' if name in listed else ''}: {problem.splitlines()[-1][:160]}")
        print(f"      2023.0's ONNX frontend: {'correct' if frontend is None else frontend.splitlines()[-1][:160]}")
    for name in sorted(set(listed) - set(failing)):
        if name in sweep.verified:
            print(f"  {name}: listed in tests/known_failures.json but correct now")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    name: {"2023": problem, "frontend": by_frontend.get(name)}
                    for name, problem in sorted(failing.items())
                },
                f,
                indent=1,
            )
    return 1 if set(failing) - set(listed) else 0


if __name__ == "__main__":
    sys.exit(main())
