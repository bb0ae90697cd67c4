"""A fuzzing campaign: mutated ONNX, IR and HLO files and CLI nonsense, each tried in a child process.

Every input must end in a clean result: success, or one line ``opconv: error: ...`` with exit code 1 or 2.
A traceback, an internal error (exit 3), a signal, a hang over ``--timeout`` seconds, a memory
limit hit (``--memory`` MiB more than the forked child started with, set with resource.setrlimit), or a
warning or second error line on stderr is a crash; crashes are grouped by signature
(exception type + innermost opconv frame, or the kind of failure) and one reproducer per signature is
kept under ``--out``.

    python scripts/fuzz_campaign.py --per-format 10000 --commands 1 --format onnx --out /tmp/fuzz/onnx  # release
    python scripts/fuzz_campaign.py --per-format 50 --format onnx         # a quick look

The report (``--out``/report.json, rewritten every 100 inputs) holds per format the outcomes, the crash
signatures with a saved reproducer each, the slowest command and the largest peak RSS of a child (wait4's
ru_maxrss, which counts the pages it shares with this process, ``parent_rss_mib``) with the inputs that set them.

The mutations (shared with ``tests/test_fuzz.py``) are in :mod:`fuzz_mutations` beside this script.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import fuzz_mutations as fm  # noqa: E402


def commands(kind: str, path: str, work: str, rng: random.Random, per_input: int) -> list[list[str]]:
    """``per_input`` of the CLI commands that read an input of ``kind``, drawn at random."""
    out = os.path.join(work, "out")
    if kind == "onnx":
        every = [
            ["check", path],
            ["run", path],
            ["onnx-to-ir", path, "-o", out + ".xml"],
            ["onnx-to-hlo", path, "-o", out + ".hlo"],
            ["upgrade", path, "--opset", "21", "-o", out + ".onnx"],
            ["downgrade", path, "--opset", "13", "-o", out + ".onnx"],
        ]
    elif kind == "ir":
        every = [["check", path], ["run", path], ["ir-to-onnx", path, "-o", out + ".onnx"]]
    elif kind == "hlo":
        every = [["check", path], ["run", path], ["hlo-to-onnx", path, "-o", out + ".onnx"]]
    else:
        return [fm.cli_nonsense(rng, path, out)]
    return rng.sample(every, min(per_input, len(every)))


def run_one(args: list[str], timeout: float, memory: int, cwd: str) -> tuple[str, str, float, int]:
    """(outcome, detail, seconds, peak RSS in KiB) of one CLI command in a forked child.

    The outcome is "ok", "error", or a crash kind. The parent imported opconv once; a fork costs
    milliseconds where a fresh interpreter costs a second. The child's address space may grow by
    ``memory`` MiB (resource.setrlimit), and it is killed after ``timeout`` seconds. The peak RSS is the
    kernel's (wait4), so it includes the pages the child shares with the parent it was forked from.
    """
    started = time.monotonic()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        _child(args, memory, cwd, write_end)
    os.close(write_end)
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_end], [], [], left)[0]:
            os.kill(child, signal.SIGKILL)
            os.close(read_end)
            rss = os.wait4(child, 0)[2].ru_maxrss
            return "hang", f"over {timeout:g} s", time.monotonic() - started, rss
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status, usage = os.wait4(child, 0)
    seconds = time.monotonic() - started
    if os.WIFSIGNALED(status):
        return "signal", f"signal {os.WTERMSIG(status)}", seconds, usage.ru_maxrss
    try:
        outcome, detail = json.loads(b"".join(chunks).decode())
    except ValueError:
        return "crash", f"no report (exit {os.WEXITSTATUS(status)})", seconds, usage.ru_maxrss
    return outcome, detail, seconds, usage.ru_maxrss


def _child(args: list[str], memory: int, cwd: str, report_fd: int) -> None:
    import resource
    import traceback

    outcome, detail = "crash", "?"
    try:
        os.chdir(cwd)
        os.environ["OPCONV_DEBUG"] = "1"  # internal errors propagate with their traceback
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = used + (memory << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(os.open(os.path.join(cwd, ".stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        import click

        from opconv.cli import cli
        from opconv.errors import OpconvError

        try:
            cli.main(args=args, prog_name="opconv", standalone_mode=False)
            outcome, detail = "ok", ""
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
            outcome, detail = (
                ("ok", "") if code == 0 else ("error", "") if code in (1, 2) else ("crash", f"exit {code}")
            )
        except (OpconvError, click.ClickException, click.exceptions.Exit, click.Abort):
            outcome, detail = "error", ""
        except MemoryError:
            outcome, detail = "memory", _site(traceback.extract_tb(sys.exc_info()[2]))
        except BaseException as e:  # noqa: BLE001 - what the campaign looks for
            outcome = "crash"
            detail = f"{type(e).__name__} at {_site(traceback.extract_tb(e.__traceback__))}: {str(e)[:200]}"
        if outcome in ("ok", "error"):
            sys.stderr.flush()
            outcome, detail = _one_line(outcome, detail, os.path.join(cwd, ".stderr"))
    finally:
        try:
            os.write(report_fd, json.dumps([outcome, detail]).encode())
        finally:
            os._exit(0)


def _one_line(outcome: str, detail: str, stderr_path: str) -> tuple[str, str]:
    """A failure says one line, ``opconv: error: ...`` (or nothing, as a failed check, whose report is on
    stdout); a second error line, a warning or a traceback on stderr is a crash of kind "lines"."""
    with open(stderr_path, encoding="utf-8", errors="replace") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    noise = [line for line in lines if "Warning" in line or "Traceback" in line]
    errors = [line for line in lines if line.startswith("opconv: error: ")]
    if noise:
        return "lines", noise[0][:200]
    if len(errors) > 1 or outcome == "error" and errors and lines[-1] is not errors[0]:
        return "lines", f"{len(lines)} lines, the last: {lines[-1][:200]}"
    return outcome, detail


def _site(tb) -> str:
    """The innermost opconv frame of a traceback: ``opconv/x.py:function``."""
    frames = [f for f in tb if "/opconv/" in f.filename.replace(os.sep, "/") and "/scripts/" not in f.filename]
    where = frames[-1] if frames else (tb[-1] if tb else None)
    return f"{os.path.relpath(where.filename, ROOT)}:{where.name}" if where else "?"


def _import_everything() -> None:
    """What the commands import lazily, imported once in the parent: each forked child then starts ready."""
    import importlib

    import opconv.cli  # noqa: F401
    from opconv import dialects

    for name in (
        "opconv.verification",
        "opconv.compare",
        "opconv.validation",
        "opconv.converters.onnx_to_openvino",
        "opconv.converters.onnx_to_hlo",
        "opconv.converters.hlo_to_onnx",
        "opconv.converters.openvino_to_onnx",
        "opconv.converters.onnx_versions",
        "opconv.dialects.onnx.executor",
        "opconv.dialects.onnx.fusion",
        "opconv.dialects.openvino.executor",
        "opconv.dialects.hlo.executor",
    ):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    for name in ("onnx", "openvino", "hlo"):
        dialects.get(name)
        executor = sys.modules.get(f"opconv.dialects.{name}.executor")
        if executor is not None:
            executor.EXECUTOR.load_kernels()
    fm.seed_inputs(node_cases=0)  # converting and saving the fixtures imports what those paths import lazily


def campaign(
    formats,
    per_format: int,
    seed: int,
    timeout: float,
    memory: int,
    out_dir: str,
    node_cases: int = 300,
    per_input: int = 2,
) -> dict:
    _import_everything()
    rng = random.Random(seed)
    seeds = _seeds_in_a_child(node_cases, seed)
    os.makedirs(out_dir, exist_ok=True)
    report = {
        "per_format": per_format,
        "seed": seed,
        "timeout_s": timeout,
        "memory_mib": memory,
        "parent_rss_mib": round(_rss_kib() / 1024, 1),
        "commands_per_input": per_input,
        "seeds": {"onnx": len(seeds.onnx), "ir": len(seeds.ir), "hlo": len(seeds.hlo)},
        "formats": {},
    }
    for kind in formats:
        outcomes: Counter = Counter()
        signatures: dict[str, dict] = defaultdict(lambda: {"count": 0})
        slowest = {"seconds": 0.0}
        peak = {"rss_mib": 0.0}
        started = time.time()
        for i in range(per_format):
            with tempfile.TemporaryDirectory() as work:
                path = fm.write_mutant(kind, seeds, rng, work)
                for args in commands(kind, path, work, rng, per_input):
                    outcome, detail, seconds, rss_kib = run_one(args, timeout, memory, work)
                    outcomes[outcome] += 1
                    if seconds > slowest["seconds"]:
                        slowest = {
                            "seconds": round(seconds, 2),
                            "command": args[0],
                            "outcome": outcome,
                            "saved": fm.keep(path, os.path.join(out_dir, kind), "-slowest"),
                        }
                    if rss_kib / 1024 > peak["rss_mib"]:
                        peak = {
                            "rss_mib": round(rss_kib / 1024, 1),
                            "command": args[0],
                            "outcome": outcome,
                            "saved": fm.keep(path, os.path.join(out_dir, kind), "-peak"),
                        }
                    if outcome not in ("ok", "error"):
                        # a hang or a memory kill carries no frame: the command tells such signatures apart
                        key = (
                            f"{outcome}: {detail.split(': ')[0]}"
                            if outcome == "crash"
                            else f"{outcome}: {detail} ({args[0]})"
                        )
                        sig = signatures[key]
                        sig["count"] += 1
                        if sig["count"] == 1:
                            sig["example"] = {
                                "args": args,
                                "detail": detail,
                                "saved": fm.keep(path, os.path.join(out_dir, kind), len(signatures)),
                            }
            if (i + 1) % 100 == 0 or i + 1 == per_format:
                report["formats"][kind] = {
                    "inputs": i + 1,
                    "outcomes": dict(outcomes),
                    "signatures": dict(signatures),
                    "slowest": slowest,
                    "peak": peak,
                    "seconds": round(time.time() - started),
                }
                _write(report, out_dir)
                print(
                    f"{kind}: {i + 1}/{per_format} inputs, {dict(outcomes)}, {len(signatures)} signatures, "
                    f"slowest {slowest['seconds']} s, peak {peak['rss_mib']} MiB",
                    flush=True,
                )
    return report


def _seeds_in_a_child(node_cases: int, seed: int) -> fm.Seeds:
    """The seeds, collected in a forked child that sends them back pickled: the node cases they come from
    (~120 MB of arrays) never enter this process, and each fork, which copies its page tables, costs less."""
    import pickle

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        with os.fdopen(write_end, "wb") as pipe:
            pickle.dump(fm.seed_inputs(node_cases, seed), pipe)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        seeds = pickle.load(pipe)
    os.waitpid(child, 0)
    return seeds


def _rss_kib() -> int:
    """This process's resident memory, KiB: what every forked child starts with."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _write(report: dict, out_dir: str) -> None:
    with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-format", type=int, default=200)
    parser.add_argument("--format", action="append", choices=fm.FORMATS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--memory", type=int, default=2048, help="address-space limit per input, MiB")
    parser.add_argument("--commands", type=int, default=2, help="commands tried per input (of 3-6)")
    parser.add_argument("--node-cases", type=int, default=300, help="ONNX node-case models among the seeds")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "opconv-fuzz"))
    args = parser.parse_args()
    report = campaign(
        args.format or fm.FORMATS,
        args.per_format,
        args.seed,
        args.timeout,
        args.memory,
        args.out,
        args.node_cases,
        args.commands,
    )
    _write(report, args.out)
    for kind, r in report["formats"].items():
        print(
            f"{kind}: {r['inputs']} inputs, {sum(r['outcomes'].values())} commands {r['outcomes']}, "
            f"{len(r['signatures'])} crash signatures, {r['seconds']} s; slowest command {r['slowest']}, "
            f"peak RSS {r['peak']} (the forked parent held {report['parent_rss_mib']} MiB)"
        )
        for key, sig in sorted(r["signatures"].items(), key=lambda kv: -kv[1]["count"]):
            print(f"  {sig['count']:5d}  {key}  (e.g. {sig['example']['saved']})")


if __name__ == "__main__":
    main()
