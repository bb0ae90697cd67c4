"""Writers never clobber: non-regular targets are left as they were, streams are written into, multi-file
saves are never seen as a mixed old/new pair, and temporaries do not survive the next write.

The pairs are checked by loading them back (opconv's loaders, numpy, json) and comparing with the values
each version was built from; the standard streams are read back by onnx and numpy.
"""

from __future__ import annotations

import importlib.util
import io
import os
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from opconv import atomic
from opconv.cli import cli
from opconv.errors import ModelWriteError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("kill_writers", os.path.join(ROOT, "scripts", "kill_writers.py"))
kill_writers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kill_writers)


@pytest.fixture(scope="module")
def writers():
    return kill_writers.writers()


def _char_device(tmp_path) -> str:
    """A character device of our own (a /dev/null twin) when we may make one, else /dev/null itself."""
    if os.geteuid() == 0:
        path = str(tmp_path / "null")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        return path
    return "/dev/null"


def _hostile_targets(tmp_path) -> dict:
    target = tmp_path / "target.txt"
    target.write_text("keep me")
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    return {"symbolic link": str(tmp_path / "link"), "FIFO": str(tmp_path / "fifo"), "directory": str(tmp_path / "dir")}


def _snapshot(path: str):
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev


@pytest.fixture
def alarm():
    """Fail instead of hanging when a writer would open a FIFO nobody reads."""

    def fired(signum, frame):
        raise TimeoutError("a writer blocked on the output")

    previous = signal.signal(signal.SIGALRM, fired)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("writer", ["onnx-external", "ir", "hlo", "npz", "json"])
def test_symlinks_fifos_and_directories_are_refused_and_left_as_they_were(tmp_path, writers, writer, alarm):
    save = writers[writer][1]["A"]
    for kind, path in _hostile_targets(tmp_path).items():
        before = _snapshot(path)
        with pytest.raises(ModelWriteError, match=f"is a {kind}") as info:
            save(path)
        assert path in str(info.value) and "\n" not in str(info.value)
        assert _snapshot(path) == before
    assert (tmp_path / "target.txt").read_text() == "keep me"
    assert kill_writers.temporaries(str(tmp_path)) == []


@pytest.mark.parametrize("writer", ["onnx-external", "ir", "hlo"])
def test_a_save_of_two_files_is_refused_on_a_device_and_leaves_it_a_device(tmp_path, writers, writer):
    device = _char_device(tmp_path)
    before = _snapshot(device)
    with pytest.raises(ModelWriteError, match="a stream holds only one file"):
        writers[writer][1]["A"](device)
    assert _snapshot(device) == before
    assert not os.path.exists(device + ".bin") and not os.path.exists(device + ".weights")


@pytest.mark.parametrize("writer", ["npz", "json"])
def test_a_one_file_output_is_streamed_into_a_device(tmp_path, writers, writer):
    device = _char_device(tmp_path)
    before = _snapshot(device)
    writers[writer][1]["B"](device)
    assert _snapshot(device) == before
    assert kill_writers.temporaries(os.path.dirname(device)) == []


def test_cli_outputs_to_a_device_leave_it_a_device(tmp_path, fixtures_dir):
    device = _char_device(tmp_path)
    before = _snapshot(device)
    model = os.path.join(fixtures_dir, "cnn.onnx")
    runner = CliRunner()
    # (conformance --report writes through the same write_text as verify --json; listing ONNX's cases
    # takes it ~10 s, so it is left out here)
    for args in (
        ["run", model, "--shape", "image=1,3,32,32", "-o", device],
        ["verify", model, model, "--shape", "image=1,3,32,32", "--json", device, "--junit", device],
        ["upgrade", model, "--opset", "18", "-o", device],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 0, (args, result.output)
        assert _snapshot(device) == before
    link = tmp_path / "link.npz"
    link.symlink_to(tmp_path / "elsewhere.npz")
    result = runner.invoke(cli, ["run", model, "--shape", "image=1,3,32,32", "-o", str(link)])
    assert result.exit_code == 2 and "is a symbolic link" in result.output
    assert link.is_symlink() and not (tmp_path / "elsewhere.npz").exists()


def test_dash_and_dev_stdout_stream_the_file_and_move_messages_to_stderr(tmp_path, fixtures_dir):
    model = os.path.join(fixtures_dir, "cnn.onnx")
    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()
    for target in ("-", "/dev/stdout"):
        result = runner.invoke(cli, ["run", model, "--shape", "image=1,3,32,32", "-o", target])
        assert result.exit_code == 0, result.output
        with np.load(io.BytesIO(result.stdout_bytes)) as data:
            assert data["probs"].shape == (1, 10)
            np.testing.assert_allclose(data["probs"].sum(), 1.0, rtol=1e-5)  # a softmax's outputs
        assert f"wrote {target}" in result.stderr
    result = runner.invoke(cli, ["upgrade", model, "--opset", "18", "-o", "-"])
    assert result.exit_code == 0, result.stderr
    upgraded = onnx.load_from_string(result.stdout_bytes)
    assert [o.version for o in upgraded.opset_import if o.domain == ""] == [18]
    onnx.checker.check_model(upgraded)


@pytest.mark.slow
@pytest.mark.parametrize("writer", kill_writers.WRITER_NAMES)
def test_a_writer_killed_at_random_moments_never_leaves_a_mixed_pair(tmp_path, writers, writer):
    rng = np.random.default_rng(sum(map(ord, writer)))
    states = [kill_writers.trial(writer, writers[writer], str(tmp_path), rng, max_delay=0.08) for _ in range(20)]
    assert {s["state"] for s in states} <= {None, "A", "B"}
    assert any(s["state"] for s in states)  # the kills did land after some saves


def test_the_pair_check_sees_an_old_model_beside_new_weights(tmp_path, writers):
    """What the kill test guards against, made by hand: the old .xml beside the new .bin."""
    _, saves, check = writers["ir"]
    saves["A"](str(tmp_path / "a.xml"))
    saves["B"](str(tmp_path / "b.xml"))
    os.replace(tmp_path / "b.bin", tmp_path / "a.bin")
    with pytest.raises(kill_writers.Mixed):
        check(str(tmp_path / "a.xml"))


# The saving child is a fresh interpreter, not a fork: a fork of a test session that has loaded OpenVINO's
# plugins can die of SIGSEGV on its own, which says nothing about opconv.
_SAVE_FOREVER = """
import sys
sys.path.insert(0, sys.argv[1])
import importlib.util
spec = importlib.util.spec_from_file_location("kill_writers", sys.argv[2])
kill_writers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kill_writers)
_, saves, _ = kill_writers.writers()["ir"]
saves["A"](sys.argv[3])
print("ready", flush=True)
for i in range(10**6):
    saves["BA"[i % 2]](sys.argv[3])
"""


def test_sigterm_during_a_save_removes_its_temporaries(tmp_path, writers):
    _, _, check = writers["ir"]
    path = str(tmp_path / "m.xml")
    script = os.path.join(ROOT, "scripts", "kill_writers.py")
    for delay in np.random.default_rng(7).uniform(0.005, 0.06, 4):
        child = subprocess.Popen(
            [sys.executable, "-c", _SAVE_FOREVER, ROOT, script, path], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout.readline().strip() == "ready"
        time.sleep(delay)
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=60)
        assert child.returncode == -signal.SIGTERM  # died of it, as a process without opconv's handler would
        assert kill_writers.temporaries(str(tmp_path)) == []
        check(path)


def test_the_next_write_removes_temporaries_of_dead_writers_only(tmp_path):
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    names = {
        "dead": f".opconv-{dead}-0123456789ab.tmp",
        "alive": f".opconv-{os.getppid()}-0123456789ab.tmp",
        "legacy-old": ".opconv-0123456789abcdef.tmp",
        "legacy-new": ".opconv-fedcba9876543210.tmp",
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"x")
    old = time.time() - 2 * 3600
    os.utime(tmp_path / names["legacy-old"], (old, old))
    atomic.write_text(str(tmp_path / "report.json"), "{}\n")
    assert sorted(kill_writers.temporaries(str(tmp_path))) == sorted([names["alive"], names["legacy-new"]])


def test_an_interrupted_save_leaves_the_previous_pair_whole(tmp_path, writers, monkeypatch):
    """A failure while writing (here: the disk fills while the .xml is written) keeps the old pair."""
    _, saves, check = writers["ir"]
    path = str(tmp_path / "m.xml")
    saves["A"](path)
    real_open = atomic.OutputFiles.open

    def failing_open(self, final, *args, **kwargs):
        if final == path:
            raise OSError(28, "No space left on device")
        return real_open(self, final, *args, **kwargs)

    monkeypatch.setattr(atomic.OutputFiles, "open", failing_open)
    with pytest.raises(ModelWriteError, match="No space left"):
        saves["B"](path)
    assert check(path) == "A"
    assert kill_writers.temporaries(str(tmp_path)) == []
