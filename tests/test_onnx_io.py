"""ONNX file I/O: external data (lazy, memory-mapped, refused when hostile), atomic saves."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opconv
from opconv.dialects.onnx.io import ExternalData
from opconv.errors import ModelReadError, ModelWriteError
from tests.runtimes import run_ort


def _feeds():
    return {"x": np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)}


def test_external_data_is_lazy_and_memory_mapped(fixtures_dir):
    model = opconv.load(os.path.join(fixtures_dir, "mlp_external.onnx"))
    w = model.graph.initializers["fc0.w"].const
    assert isinstance(w.origin, ExternalData) and not w.is_loaded
    assert not w.numpy().flags.writeable and w.numpy().shape == (64, 128)  # read: smaller than MAP_AT_BYTES
    assert model.meta["external_data"]


def test_large_external_tensors_are_memory_mapped_small_ones_read(tmp_path, monkeypatch):
    from opconv import dialects

    # Every mapping holds a file descriptor until its array is freed; a graph is freed by the garbage collector
    # only, so a sweep over thousands of small models once ran out of descriptors: small slices are read.
    monkeypatch.setattr(dialects, "MAP_AT_BYTES", 1024)
    data = np.arange(600, dtype=np.float32)
    path = tmp_path / "w.bin"
    data.tofile(path)
    big = dialects.read_slice(str(path), np.float32, 0, (600,))
    small = dialects.read_slice(str(path), np.float32, 400, (10,))
    assert isinstance(big, np.memmap) and not isinstance(small, np.memmap)
    np.testing.assert_array_equal(big, data)
    np.testing.assert_array_equal(small, data[100:110])
    assert not small.flags.writeable


def test_external_data_round_trip_runs_the_same(fixtures_dir, tmp_path):
    src = os.path.join(fixtures_dir, "mlp_external.onnx")
    out = tmp_path / "copy.onnx"
    opconv.save(opconv.load(src), out)
    assert (tmp_path / "copy.onnx.data").exists()  # kept external, as loaded
    for name in ("fc0.w", "fc2.b"):
        t = next(t for t in onnx.load(str(out), load_external_data=False).graph.initializer if t.name == name)
        assert t.data_location == TensorProto.EXTERNAL
    expected = run_ort(onnx.load(src), _feeds())
    actual = run_ort(onnx.load(str(out)), _feeds())
    np.testing.assert_array_equal(expected[0], actual[0])


def test_save_embedded_and_external_on_request(fixtures_dir, tmp_path):
    model = opconv.load(os.path.join(fixtures_dir, "cnn.onnx"))
    opconv.save(model, tmp_path / "ext.onnx", external_data=True, threshold=0)
    loaded = onnx.load(str(tmp_path / "ext.onnx"), load_external_data=False)
    assert all(t.data_location == TensorProto.EXTERNAL for t in loaded.graph.initializer)
    reloaded = opconv.load(tmp_path / "ext.onnx")
    opconv.save(reloaded, tmp_path / "embedded.onnx", external_data=False)
    assert not (tmp_path / "embedded.onnx.data").exists()
    feeds = {"image": np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    a = run_ort(onnx.load(os.path.join(fixtures_dir, "cnn.onnx")), feeds)[0]
    b = run_ort(onnx.load(str(tmp_path / "embedded.onnx")), feeds)[0]
    np.testing.assert_array_equal(a, b)


def _external_model(folder, location, offset=0, length=None, dims=(2, 3)):
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))],
    )
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=list(dims))
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    w.external_data.add(key="offset", value=str(offset))
    if length is not None:
        w.external_data.add(key="length", value=str(length))
    graph.initializer.append(w)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(folder, "m.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


@pytest.mark.parametrize(
    "location, message",
    [
        ("../outside.bin", "escapes the model's folder"),
        ("/etc/passwd", "is absolute"),
        ("missing.bin", "does not exist"),
    ],
)
def test_hostile_external_locations_are_refused(tmp_path, location, message):
    folder = tmp_path / "m"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 24)
    with pytest.raises(ModelReadError, match=message):
        opconv.load(_external_model(str(folder), location))


def test_symlink_escaping_the_folder_is_refused(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 24)
    os.symlink(tmp_path / "outside.bin", folder / "link.bin")
    with pytest.raises(ModelReadError, match="escapes"):
        opconv.load(_external_model(str(folder), "link.bin"))


def test_external_range_past_the_file_end_is_refused(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 24)
    with pytest.raises(ModelReadError, match="lie outside"):
        opconv.load(_external_model(str(tmp_path), "w.bin", offset=16, length=24))
    with pytest.raises(ModelReadError, match="bytes stored"):
        opconv.load(_external_model(str(tmp_path), "w.bin", length=20))


def test_absurd_shape_is_refused(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 24)
    with pytest.raises(ModelReadError, match="absurd shape"):
        opconv.load(_external_model(str(tmp_path), "w.bin", dims=(2**30, 2**30, 2**10)))


def test_not_a_model_file(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff\xfe this is not protobuf" * 10)
    with pytest.raises(ModelReadError, match="junk.onnx"):
        opconv.load(path)


def test_failed_save_leaves_nothing_behind(fixtures_dir, tmp_path):
    model = opconv.load(os.path.join(fixtures_dir, "cnn.onnx"))
    bad = opconv.Tensor("float32", (2,), loader=lambda: (_ for _ in ()).throw(OSError(5, "disk on fire")))
    model.graph.add_initializer("poison", bad)
    with pytest.raises(ModelWriteError):
        opconv.save(model, tmp_path / "out.onnx", external_data=True, threshold=0)
    assert os.listdir(tmp_path) == []


def test_save_into_missing_folder(tmp_path, fixtures_dir):
    model = opconv.load(os.path.join(fixtures_dir, "cnn.onnx"))
    with pytest.raises(ModelWriteError, match="does not exist"):
        opconv.save(model, tmp_path / "nope" / "out.onnx")


def test_saved_file_mode_follows_umask(tmp_path, fixtures_dir):
    opconv.save(opconv.load(os.path.join(fixtures_dir, "cnn.onnx")), tmp_path / "out.onnx")
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(tmp_path / "out.onnx").st_mode & 0o777 == 0o666 & ~mask


def _fallocate_failing_with(code):
    def fallocate(fd, start, length):
        raise OSError(code, os.strerror(code))

    return fallocate


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_full_disk_at_reservation_leaves_nothing_behind(tmp_path, monkeypatch, fmt):
    """Blocks are reserved before big writes; a full disk then fails the save at once, atomically."""
    import errno

    from opconv import atomic

    model = _big_weight_model()
    if fmt == "openvino":
        model = opconv.convert(model, to="openvino")
    monkeypatch.setattr(atomic, "_fallocate", _fallocate_failing_with(errno.ENOSPC))
    with pytest.raises(ModelWriteError, match="No space left"):
        opconv.save(model, tmp_path / ("out.xml" if fmt == "openvino" else "out.onnx"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_filesystem_without_reservation_still_saves(tmp_path, monkeypatch, fmt):
    import errno

    from opconv import atomic

    model = _big_weight_model()
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 1024)).astype(np.float32)}
    expected = opconv.run(model, feeds)["y"]
    monkeypatch.setattr(atomic, "_fallocate", _fallocate_failing_with(errno.EOPNOTSUPP))
    if fmt == "openvino":
        opconv.save(opconv.convert(model, to="openvino"), tmp_path / "out.xml")
        import openvino as ov

        compiled = ov.Core().compile_model(str(tmp_path / "out.xml"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        actual = compiled(feeds)[0]
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)
    else:
        opconv.save(model, tmp_path / "out.onnx", external_data=True)
        source = opconv.dialects.onnx.io.to_proto(model)
        np.testing.assert_array_equal(
            run_ort(onnx.load(str(tmp_path / "out.onnx")), feeds)[0], run_ort(source, feeds)[0]
        )


def _big_weight_model():
    """One MatMul with a 4 MiB weight (above the size from which blocks are reserved)."""
    w = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    return opconv.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
