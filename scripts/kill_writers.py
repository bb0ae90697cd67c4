"""Kill opconv's writers at random moments; check that no output is ever a mixed old/new pair.

Each writer saves two versions of a model in turn, A (every weight 1.0, graph "A") and B (every weight
2.0, one more row, graph "B"), in a forked child that is SIGKILLed after a random delay.  Then the output
must be absent, all A or all B (its graph name and the weights it loads agree), and the next write to the
folder (a different file) must remove the killed writer's temporaries.

    python scripts/kill_writers.py --tries 100          # every writer, 100 kills each
    python scripts/kill_writers.py --tries 20 --writer ir

``tests/test_writers.py`` runs the same trials with fewer tries.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import opconv  # noqa: E402
from opconv import atomic  # noqa: E402
from opconv.errors import OpconvError  # noqa: E402

ROWS = 512  # x [1, ROWS*1024] weights: 2 MiB, so that a save takes long enough to be killed inside


class Mixed(AssertionError):
    """An output whose parts come from different saves."""


def _onnx_model(version: str):
    from onnx import TensorProto, helper, numpy_helper

    rows = ROWS + (version == "B")
    value = 1.0 if version == "A" else 2.0
    w = numpy_helper.from_array(np.full((rows, 1024), value, np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        version,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 1024])],
        [w],
    )
    return opconv.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def _weights(model) -> np.ndarray:
    consts = [v.const for v in model.graph.values() if v.const is not None and v.const.nbytes > 1024]
    if len(consts) != 1:
        raise Mixed(f"expected one large constant, found {len(consts)}")
    return np.asarray(consts[0].numpy())


def _check_model(path: str) -> str | None:
    """The version at ``path`` (None when absent); raises Mixed when the parts disagree."""
    if not os.path.exists(path):
        return None
    model = opconv.load(path)
    version = model.graph.name
    w = _weights(model)
    expected = 1.0 if version == "A" else 2.0
    if w.shape[0] != ROWS + (version == "B") or not np.all(w == expected):
        raise Mixed(f"{path}: graph {version!r} beside weights {np.unique(w)[:4]} of shape {w.shape}")
    return version


def _check_npz(path: str) -> str | None:
    if not os.path.exists(path):
        return None
    with np.load(path) as data:
        (name,) = data.files
        w = data[name]
    if not np.all(w == (1.0 if name == "A" else 2.0)) or w.shape[0] != ROWS + (name == "B"):
        raise Mixed(f"{path}: {name} holds the wrong values")
    return name


def _check_json(path: str) -> str | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)  # a half-written file fails here
    if len(data["values"]) != ROWS * 64 + (data["version"] == "B"):
        raise Mixed(f"{path}: wrong length for {data['version']}")
    return data["version"]


def writers() -> dict:
    """name -> (output file name, {version: save(path)}, check(path))."""
    from opconv.cli.run_cmd import write_npz

    onnx = {v: _onnx_model(v) for v in "AB"}
    ir = {v: opconv.convert(m, to="openvino") for v, m in onnx.items()}
    hlo = {v: opconv.convert(m, to="hlo") for v, m in onnx.items()}
    arrays = {v: _weights(m) for v, m in onnx.items()}
    texts = {v: json.dumps({"version": v, "values": [1] * (ROWS * 64 + (v == "B"))}) for v in "AB"}
    return {
        "onnx-external": (
            "m.onnx",
            {v: (lambda path, m=m: opconv.save(m, path, external_data=True)) for v, m in onnx.items()},
            _check_model,
        ),
        "ir": ("m.xml", {v: (lambda path, m=m: opconv.save(m, path)) for v, m in ir.items()}, _check_model),
        "hlo": ("m.hlo", {v: (lambda path, m=m: opconv.save(m, path)) for v, m in hlo.items()}, _check_model),
        "npz": ("out.npz", {v: (lambda path, v=v: write_npz(path, {v: arrays[v]})) for v in "AB"}, _check_npz),
        "json": ("report.json", {v: (lambda path, v=v: atomic.write_text(path, texts[v])) for v in "AB"}, _check_json),
    }


def temporaries(folder: str) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith(atomic.TEMP_PREFIX))


def trial(name: str, writer, folder: str, rng: np.random.Generator, max_delay: float) -> dict:
    """Fork a child that saves A, B, A, ... to ``folder``; SIGKILL it after a random delay; check."""
    file_name, saves, check = writer
    path = os.path.join(folder, file_name)
    child = os.fork()
    if child == 0:  # the writer: never returns
        try:
            for i in range(10**9):
                saves["AB"[i % 2]](path)
        except BaseException as e:  # the parent finds the output stuck: say why
            print(f"kill_writers: the {name} writer failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        finally:
            os._exit(1)
    time.sleep(rng.uniform(0, max_delay))
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    state = check(path)  # raises Mixed
    left = temporaries(folder)
    atomic.write_text(os.path.join(folder, "next-run.txt"), "another write to the folder\n")
    survivors = temporaries(folder)
    if survivors:
        raise AssertionError(f"{name}: temporaries survived the next write: {survivors}")
    return {"state": state, "temporaries": len(left)}


def run(names, tries: int, seed: int = 0, max_delay: float = 0.25, folder: str | None = None) -> dict:
    rng = np.random.default_rng(seed)
    table = writers()
    results = {}
    for name in names:
        with tempfile.TemporaryDirectory(dir=folder) as work:
            states = [trial(name, table[name], work, rng, max_delay) for _ in range(tries)]
        results[name] = {
            "tries": tries,
            "absent": sum(s["state"] is None for s in states),
            "A": sum(s["state"] == "A" for s in states),
            "B": sum(s["state"] == "B" for s in states),
            "killed_with_temporaries": sum(s["temporaries"] > 0 for s in states),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=100)
    parser.add_argument("--writer", action="append", choices=sorted(WRITER_NAMES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.time()
    try:
        results = run(args.writer or WRITER_NAMES, args.tries, args.seed)
    except OpconvError as e:
        sys.exit(f"kill_writers: {e}")
    for name, r in results.items():
        print(
            f"{name:14s} {r['tries']} kills: {r['A']} A, {r['B']} B, {r['absent']} absent, "
            f"{r['killed_with_temporaries']} left temporaries (all removed by the next write); 0 mixed"
        )
    print(f"{time.time() - started:.0f} s")


WRITER_NAMES = ("onnx-external", "ir", "hlo", "npz", "json")

if __name__ == "__main__":
    main()
