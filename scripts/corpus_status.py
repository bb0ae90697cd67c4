"""Run every (corpus model, target) pair of ``tests/test_corpus.py``, rewrite the ``corpus`` section of
``tests/known_failures.json`` from the outcomes, and print the counts per target.

    python scripts/corpus_status.py            # rewrite the list, print the table (exit 1 if any pair is wrong)
    python scripts/corpus_status.py --check    # print only; the list is left as it is
    python scripts/corpus_status.py --json F   # also write every pair's outcome to F

Refused pairs are listed with opconv's refusal as the reason; verified pairs leave the list, so after a fix lands
this one command shrinks the list.  Wrong pairs are never listed: they are bugs to fix (printed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("CI", "true")  # `import openvino` otherwise waits on telemetry

from tests import test_corpus as harness  # noqa: E402

KNOWN = os.path.join(ROOT, "tests", "known_failures.json")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="do not rewrite tests/known_failures.json")
    parser.add_argument("--json", help="write every pair's outcome to this file")
    parser.add_argument("--reasons", action="store_true", help="also print the refusals grouped by cause")
    parser.add_argument("-k", dest="only", help="only pairs whose 'model:target' contains this text (implies --check)")
    args = parser.parse_args(argv)
    pairs = [(n, t) for n, t in harness.PAIRS if not args.only or args.only in harness.case_name(n, t)]
    start = time.perf_counter()
    harness.start_iree_compiles(sorted({n for n, t in pairs if t == "onnx-to-hlo"}))
    results = {}
    for name, target in pairs:
        results[(name, target)] = harness.outcome(name, target)
        print(f"{harness.case_name(name, target):48s} {results[(name, target)][0]}", file=sys.stderr, flush=True)
    for pool in harness._IREE_POOL:
        pool.shutdown(wait=False, cancel_futures=True)
    elapsed = time.perf_counter() - start

    counts = {t: Counter() for t in harness.TARGETS}
    for (_name, target), (kind, _) in results.items():
        counts[target][kind] += 1
    print(f"{'target':14s} {'verified':>9s} {'refused':>8s} {'wrong':>6s}")
    for target in harness.TARGETS:
        c = counts[target]
        if sum(c.values()):
            print(f"{target:14s} {c['verified']:9d} {c['refused']:8d} {c['wrong']:6d}")
    total = sum(counts.values(), Counter())
    print(
        f"{'all':14s} {total['verified']:9d} {total['refused']:8d} {total['wrong']:6d}   "
        f"({len(harness.MANIFEST)} models, {elapsed:.0f} s)"
    )

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                [{"model": n, "target": t, "outcome": k, "detail": d} for (n, t), (k, d) in results.items()],
                f,
                indent=1,
            )
    if not args.check and not args.only:
        with open(KNOWN, encoding="utf-8") as f:
            known = json.load(f)
        known["corpus"] = {harness.case_name(n, t): d for (n, t), (k, d) in results.items() if k == "refused"}
        with open(KNOWN, "w", encoding="utf-8") as f:
            json.dump(known, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"tests/known_failures.json: {len(known['corpus'])} corpus entries")
    if args.reasons:
        print_reasons(results)
    wrong = [(n, t, d) for (n, t), (k, d) in results.items() if k == "wrong"]
    for name, target, detail in wrong:
        print(f"WRONG {name} {target}: {detail}")
    return 1 if wrong else 0


def cause(detail: str) -> str:
    """A refusal's cause without names: its first per-node reason, or its first sentence."""
    body = detail.split(": ", 1)[-1]
    node = re.search(r"node '[^']*' \(([^)]*)\): (.*?)(?: \| |$)", body)
    text = f"{node.group(1)}: {node.group(2)}" if node else body
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\(node '…' \([^)]*\)", "(node", text)
    return text.split("; ")[0][:150]


def print_reasons(results) -> None:
    groups: dict[str, list[str]] = {}
    for (name, target), (kind, detail) in results.items():
        if kind == "refused":
            groups.setdefault(cause(detail), []).append(f"{name}:{target}")
    print("\nrefusals by cause:")
    for key, pairs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(pairs):4d}  {key}\n      e.g. {', '.join(pairs[:3])}")


if __name__ == "__main__":
    sys.exit(main())
