"""OpenVINO 2023.0 as a second oracle: its own venv, created on first use, and a batch runner.

opconv writes IR v10 with opset1 layers for the deployed base of older OpenVINO runtimes; the current
OpenVINO is lenient where their plugins are not.  OpenVINO 2023.0.0 is the oldest release with a Python 3.11
wheel.  It needs numpy 1.x, so it cannot share the test venv: :func:`ensure` installs it into
``.cache/openvino-2023.0/venv`` (``OPCONV_OPENVINO_2023_DIR`` overrides the folder) under a file lock, so two
test processes never race, and :func:`run_models` runs a whole list of models there in one subprocess
(``tests/ov2023_runner.py``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "tests", "ov2023_runner.py")
VERSION = "2023.0.0"
REQUIREMENTS = (f"openvino=={VERSION}", "numpy<1.27")
BF16_SUFFIX = "@bf16"  # the runner's marker for bfloat16 bit patterns carried as uint16
# The wheels of OpenVINO 2023.0.0 are built for CPython 3.7-3.11.
SUPPORTED_PYTHONS = ("3.11", "3.10", "3.9", "3.8")


class Unavailable(RuntimeError):
    """OpenVINO 2023.0 could not be installed or started here (the message says why)."""


def cache_dir() -> str:
    return os.environ.get("OPCONV_OPENVINO_2023_DIR") or os.path.join(ROOT, ".cache", "openvino-2023.0")


def _base_python() -> str:
    if f"{sys.version_info[0]}.{sys.version_info[1]}" in SUPPORTED_PYTHONS:
        return sys.executable
    for version in SUPPORTED_PYTHONS:
        found = shutil.which(f"python{version}")
        if found:
            return found
    raise Unavailable(
        f"OpenVINO {VERSION} has wheels for CPython {', '.join(SUPPORTED_PYTHONS)} only; "
        f"this is {sys.version.split()[0]} and none of python3.8-3.11 is on PATH"
    )


def _run(command: list[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=_child_env())
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Unavailable(f"{what} failed: {error}") from error
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-8:]
        raise Unavailable(f"{what} failed (exit {done.returncode}): " + " | ".join(tail))


def _child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["CI"] = "true"  # `import openvino` otherwise waits on telemetry
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@dataclass
class Environment:
    python: str  # the venv's interpreter
    installed_in_s: float | None  # seconds the install took in this process; None when it was cached


def ensure() -> Environment:
    """The venv holding OpenVINO 2023.0, installed on first use (pip from the configured index)."""
    folder = cache_dir()
    os.makedirs(folder, exist_ok=True)
    venv = os.path.join(folder, "venv")
    python = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, "opconv-ready")
    with open(os.path.join(folder, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second test process waits here for the first one's install
        if os.path.exists(marker):
            return Environment(python, None)
        start = time.perf_counter()
        shutil.rmtree(venv, ignore_errors=True)  # a half-made venv from an interrupted install
        _run([_base_python(), "-m", "venv", venv], "creating a venv for OpenVINO 2023.0", 300)
        _run([python, "-m", "pip", "install", "--quiet", *REQUIREMENTS], f"pip install {' '.join(REQUIREMENTS)}", 900)
        _run([python, "-I", "-c", "import openvino.runtime as ov; ov.Core()"], "importing OpenVINO 2023.0", 120)
        with open(marker, "w") as f:
            f.write(VERSION + "\n")
        return Environment(python, time.perf_counter() - start)


@dataclass
class Job:
    name: str
    model: str  # an IR .xml, or an .onnx file for 2023.0's own ONNX frontend
    feeds: dict  # input name -> array


@dataclass
class Outcome:
    outputs: list | None = None  # arrays by output position when the model ran
    error: str | None = None


@dataclass
class Batch:
    outcomes: dict = field(default_factory=dict)  # job name -> Outcome
    version: str = ""
    seconds: float = 0.0
    processes: int = 0


def _save_feeds(path: str, feeds: dict) -> None:
    arrays = {}
    for name, value in feeds.items():
        value = np.asarray(value)
        if value.dtype.name == "bfloat16":
            arrays[name + BF16_SUFFIX] = value.view(np.uint16)
        else:
            arrays[name] = value
    np.savez(path, **arrays)


def _load_outputs(path: str) -> list:
    import ml_dtypes

    with np.load(path) as data:
        keys = sorted(data.files, key=lambda k: int(k[3:].split("@")[0]))
        return [data[k].view(ml_dtypes.bfloat16) if k.endswith(BF16_SUFFIX) else data[k] for k in keys]


def run_models(env: Environment, jobs: list[Job], timeout: float = 1800) -> Batch:
    """Run every job in OpenVINO 2023.0's CPU plugin at f32 precision, as few subprocesses as possible.

    A job that crashes the plugin process gets that as its error and the rest run in a fresh process.
    """
    batch = Batch()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ov2023-") as tmp:
        specs = []
        for i, job in enumerate(jobs):
            inputs = os.path.join(tmp, f"in{i}.npz")
            _save_feeds(inputs, job.feeds)
            specs.append(
                {"name": job.name, "model": job.model, "inputs": inputs, "outputs": os.path.join(tmp, f"out{i}.npz")}
            )
        by_name = {spec["name"]: spec for spec in specs}
        pending = specs
        results_path = os.path.join(tmp, "results.jsonl")
        while pending:
            jobs_path = os.path.join(tmp, "jobs.json")
            with open(jobs_path, "w", encoding="utf-8") as f:
                json.dump(pending, f)
            open(results_path, "w").close()
            batch.processes += 1
            try:
                done = subprocess.run(
                    [env.python, "-I", RUNNER, jobs_path, results_path],
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    env=_child_env(),
                )
                failure = f"the OpenVINO 2023.0 process died (exit {done.returncode}): " + " | ".join(
                    done.stderr.strip().splitlines()[-3:]
                )
            except subprocess.TimeoutExpired:
                failure = f"the OpenVINO 2023.0 process took over {timeout} s"
            with open(results_path, encoding="utf-8") as f:
                lines = [json.loads(line) for line in f if line.strip()]
            for line in lines:
                if "version" in line:
                    batch.version = line["version"]
                    continue
                spec = by_name[line["name"]]
                batch.outcomes[line["name"]] = (
                    Outcome(_load_outputs(spec["outputs"])) if line["ok"] else Outcome(error=line["error"])
                )
            finished = {line["name"] for line in lines if "name" in line}
            rest = [spec for spec in pending if spec["name"] not in finished]
            if rest and not lines:
                raise Unavailable(f"OpenVINO 2023.0 did not start: {failure}")
            if rest:  # the first unfinished job took the process down with it
                batch.outcomes[rest[0]["name"]] = Outcome(error=failure)
                rest = rest[1:]
            pending = rest
    batch.seconds = time.perf_counter() - start
    return batch


def check_node_cases(env: Environment, verified: dict, frontend: bool = False):
    """Run the IRs that the current OpenVINO verified (``Sweep.verified`` of tests/test_onnx_to_openvino_cases.py)
    in OpenVINO 2023.0 and compare with each node case's expected outputs.

    Returns ``(batch, failing, by_frontend)``: ``failing`` maps a case to what went wrong in 2023.0;
    ``by_frontend`` (with ``frontend=True``) maps each failing case to what 2023.0's own ONNX frontend does with
    the same ONNX model (None: it runs it correctly).
    """
    from tests.test_onnx_to_openvino_cases import _compare

    batch = run_models(env, [Job(name, v.xml, v.feeds) for name, v in verified.items()])
    failing = {}
    for name, v in verified.items():
        outcome = batch.outcomes[name]
        problem = outcome.error or _compare(v.case, v.expected, outcome.outputs)
        if problem:
            failing[name] = problem
    by_frontend = {}
    if frontend and failing:
        import onnx

        with tempfile.TemporaryDirectory(prefix="ov2023-onnx-") as tmp:
            jobs = []
            for name in failing:
                path = os.path.join(tmp, f"{name}.onnx")
                onnx.save(verified[name].model, path)
                jobs.append(Job(name, path, verified[name].feeds))
            ran = run_models(env, jobs)
        for name in failing:
            outcome, v = ran.outcomes[name], verified[name]
            by_frontend[name] = outcome.error or _compare(v.case, v.expected, outcome.outputs)
    return batch, failing, by_frontend
