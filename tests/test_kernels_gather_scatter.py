"""opconv.kernels.gather_scatter against onnxruntime (Gather*, Scatter*, OneHot,
DepthToSpace, SpaceToDepth, Tile) and XLA gather/scatter against slow loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opconv.errors import ExecutionError
from opconv.kernels import gather_scatter as K

from .test_kernels_helpers import assert_close, rng, run_ort


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("indices", [np.array(1), np.array([0, -1, 2, 1]), np.array([[0, 1], [-2, -3]])])
def test_gather_matches_ort(axis, indices):
    data = rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    (expected,) = run_ort("Gather", [data, indices.astype(np.int64)], {"axis": axis})
    assert_close(K.gather(data, indices, axis), expected)


def test_gather_out_of_range_raises():
    with pytest.raises(ExecutionError):
        K.gather(np.zeros(3), np.array([3]))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_matches_ort(axis):
    r = rng(2)
    data = r.standard_normal((3, 4, 5)).astype(np.float32)
    shape = [2, 3, 4]
    indices = r.integers(-data.shape[axis], data.shape[axis], shape).astype(np.int64)
    (expected,) = run_ort("GatherElements", [data, indices], {"axis": axis})
    assert_close(K.gather_elements(data, indices, axis), expected)


@pytest.mark.parametrize(
    "data_shape,indices_shape,batch_dims",
    [
        ((3, 4), (2, 2), 0),
        ((3, 4, 5), (2, 1), 0),
        ((3, 4, 5), (2, 3, 3), 0),
        ((2, 4, 5), (2, 3, 1), 1),
        ((2, 3, 4, 5), (2, 3, 2), 2),
        ((2, 3, 4), (2, 5, 2), 1),
    ],
)
def test_gather_nd_matches_ort(data_shape, indices_shape, batch_dims):
    r = rng(3)
    data = r.standard_normal(data_shape).astype(np.float32)
    k = indices_shape[-1]
    bounds = np.array(data_shape[batch_dims : batch_dims + k])
    indices = (r.integers(0, 1 << 20, indices_shape) % (2 * bounds) - bounds).astype(np.int64)
    (expected,) = run_ort("GatherND", [data, indices], {"batch_dims": batch_dims})
    assert_close(K.gather_nd(data, indices, batch_dims), expected)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements_matches_ort(reduction, axis):
    r = rng(4)
    data = r.standard_normal((4, 5, 3)).astype(np.float32)
    updates = r.standard_normal((3, 4, 2)).astype(np.float32)
    n = data.shape[axis]
    if reduction == "none":
        # Duplicates would make the oracle's write order matter: use one
        # permutation of the axis per line, truncated to the updates' extent.
        lines = list(updates.shape)
        lines[axis] = n
        indices = np.argsort(r.random(lines), axis=axis).take(range(updates.shape[axis]), axis=axis)
        indices = indices - n * (r.random(updates.shape) < 0.3)
    else:
        indices = r.integers(-n, n, updates.shape)
    indices = indices.astype(np.int64)
    (expected,) = run_ort("ScatterElements", [data, indices, updates], {"axis": axis, "reduction": reduction}, opset=18)
    assert_close(K.scatter_elements(data, indices, updates, axis, reduction), expected)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("data_shape,indices_shape", [((6,), (4, 1)), ((4, 5, 3), (2, 2)), ((4, 5, 3), (3, 2, 3))])
def test_scatter_nd_matches_ort(reduction, data_shape, indices_shape):
    r = rng(5)
    data = r.standard_normal(data_shape).astype(np.float32)
    k = indices_shape[-1]
    n_updates = int(np.prod(indices_shape[:-1]))
    grid = np.array(list(itertools.product(*[range(s) for s in data_shape[:k]])))
    if reduction == "none":
        chosen = grid[r.permutation(len(grid))[:n_updates]]
    else:
        chosen = grid[r.integers(0, len(grid), n_updates)]
    chosen = chosen - np.array(data_shape[:k]) * (r.random(chosen.shape) < 0.3)  # some negative indices
    indices = chosen.reshape(indices_shape).astype(np.int64)
    updates = r.standard_normal(indices_shape[:-1] + data_shape[k:]).astype(np.float32)
    (expected,) = run_ort("ScatterND", [data, indices, updates], {"reduction": reduction}, opset=18)
    assert_close(K.scatter_nd(data, indices, updates, reduction), expected)


def test_scatter_replace_duplicates_last_wins():
    got = K.scatter_elements(np.zeros(3), np.array([1, 1, 1]), np.array([5.0, 6.0, 7.0]))
    assert_close(got, np.array([0.0, 7.0, 0.0]))


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_one_hot_matches_ort(axis, dtype):
    indices = np.array([[0, 3, -1], [-4, 5, 2]], np.int64)  # 5 is out of range
    depth = np.array(4, np.int64)
    values = np.array([2, 7], dtype)
    (expected,) = run_ort("OneHot", [indices, depth, values], {"axis": axis})
    assert_close(K.one_hot(indices, 4, values[0], values[1], axis), expected)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("block", [2, 3])
def test_depth_to_space_matches_ort(mode, block):
    x = rng(6).standard_normal((2, 2 * block * block, 3, 4)).astype(np.float32)
    (expected,) = run_ort("DepthToSpace", [x], {"blocksize": block, "mode": mode})
    assert_close(K.depth_to_space(x, block, mode), expected)


@pytest.mark.parametrize("block", [2, 3])
def test_space_to_depth_matches_ort(block):
    x = rng(7).standard_normal((2, 3, 2 * block, 3 * block)).astype(np.float32)
    (expected,) = run_ort("SpaceToDepth", [x], {"blocksize": block})
    assert_close(K.space_to_depth(x, block, "DCR"), expected)


@pytest.mark.parametrize("mode", ["blocks_first", "depth_first"])
@pytest.mark.parametrize("shape", [(1, 8, 3), (2, 16, 2, 3), (1, 16, 2, 1, 2)])
def test_space_depth_round_trip_nd(mode, shape):
    x = rng(8).standard_normal(shape).astype(np.float32)
    block = 2 if len(shape) != 3 else 8
    assert_close(K.space_to_depth(K.depth_to_space(x, block, mode), block, mode), x)


def test_depth_to_space_1d_blocks_first():
    x = np.arange(6).reshape(1, 6, 1)  # 3 blocks of depth 2
    assert_close(K.depth_to_space(x, 3, "blocks_first"), np.array([[[0, 2, 4], [1, 3, 5]]]))


@pytest.mark.parametrize("repeats", [[1, 1], [2, 3], [0, 2]])
def test_tile_matches_ort(repeats):
    x = rng(9).standard_normal((2, 3)).astype(np.float32)
    (expected,) = run_ort("Tile", [x, np.array(repeats, np.int64)])
    assert_close(K.tile(x, repeats), expected)


# ---------------------------------------------------------------- XLA gather / scatter


def _start_vector(indices, ivd, batch_index, operand_rank, index_map, operand_batching, indices_batching):
    batch_dims = [d for d in range(indices.ndim) if d != ivd]
    start = [0] * operand_rank
    for k, operand_dim in enumerate(index_map):
        full = list(batch_index)
        if ivd < indices.ndim:
            full.insert(ivd, k)
        start[operand_dim] = int(indices[tuple(full)])
    for operand_dim, indices_dim in zip(operand_batching, indices_batching):
        start[operand_dim] = batch_index[batch_dims.index(indices_dim)]
    return start


def slow_xla_gather(operand, indices, offset_dims, collapsed, index_map, ivd, slice_sizes, obd=(), ibd=()):
    batch_dims = [d for d in range(indices.ndim) if d != ivd]
    kept = [d for d in range(operand.ndim) if d not in collapsed and d not in obd]
    out_rank = len(batch_dims) + len(kept)
    batch_positions = [p for p in range(out_rank) if p not in offset_dims]
    shape = [0] * out_rank
    for p, d in zip(batch_positions, batch_dims):
        shape[p] = indices.shape[d]
    for p, d in zip(sorted(offset_dims), kept):
        shape[p] = slice_sizes[d]
    out = np.zeros(shape, operand.dtype)
    for index in itertools.product(*[range(s) for s in shape]):
        start = _start_vector(indices, ivd, [index[p] for p in batch_positions], operand.ndim, index_map, obd, ibd)
        start = [min(max(s, 0), operand.shape[d] - slice_sizes[d]) for d, s in enumerate(start)]
        offsets = iter(index[p] for p in sorted(offset_dims))
        full = [start[d] + (next(offsets) if d in kept else 0) for d in range(operand.ndim)]
        out[index] = operand[tuple(full)]
    return out


GATHER_CASES = [
    # operand shape, indices, kwargs
    (
        (5, 4),
        [[0], [3], [4]],
        dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 4]),
    ),
    (
        (5, 4, 3),
        [[1, 2], [4, 3], [-1, 0]],
        dict(
            offset_dims=[1, 2, 3],
            collapsed_slice_dims=[],
            start_index_map=[0, 1],
            index_vector_dim=1,
            slice_sizes=[2, 2, 3],
        ),
    ),  # clamped starts
    (
        (5, 4, 3),
        [[[1], [2]], [[0], [3]]],
        dict(
            offset_dims=[0, 3], collapsed_slice_dims=[1], start_index_map=[1], index_vector_dim=2, slice_sizes=[3, 1, 2]
        ),
    ),
    (
        (6, 5),
        [[0, 2, 4], [1, 1, 3]],
        dict(
            offset_dims=[], collapsed_slice_dims=[0, 1], start_index_map=[1, 0], index_vector_dim=0, slice_sizes=[1, 1]
        ),
    ),
    (
        (5, 7),
        [3, 0, 6],
        dict(offset_dims=[0], collapsed_slice_dims=[1], start_index_map=[1], index_vector_dim=1, slice_sizes=[5, 1]),
    ),  # implicit index vector dim
    (
        (3, 5, 4),
        [[1, 2], [0, 0], [4, 1]],
        dict(
            offset_dims=[1],
            collapsed_slice_dims=[1],
            start_index_map=[1],
            index_vector_dim=2,
            slice_sizes=[1, 1, 2],
            operand_batching_dims=[0],
            start_indices_batching_dims=[0],
        ),
    ),
]


@pytest.mark.parametrize("operand_shape,indices,kwargs", GATHER_CASES)
def test_xla_gather_matches_loop(operand_shape, indices, kwargs):
    operand = rng(10).standard_normal(operand_shape).astype(np.float32)
    indices = np.array(indices, np.int64)
    expected = slow_xla_gather(
        operand,
        indices,
        kwargs["offset_dims"],
        kwargs["collapsed_slice_dims"],
        kwargs["start_index_map"],
        kwargs["index_vector_dim"],
        kwargs["slice_sizes"],
        kwargs.get("operand_batching_dims", ()),
        kwargs.get("start_indices_batching_dims", ()),
    )
    assert_close(K.xla_gather(operand, indices, **kwargs), expected)


def slow_xla_scatter(operand, indices, updates, window_dims, inserted, sdod, ivd, combine, ibd=(), sibd=()):
    out = operand.copy()
    scatter_dims = [d for d in range(updates.ndim) if d not in window_dims]
    window_operand = [d for d in range(operand.ndim) if d not in inserted and d not in ibd]
    extent = [1] * operand.ndim
    for j, d in enumerate(window_operand):
        extent[d] = updates.shape[window_dims[j]]
    for index in itertools.product(*[range(s) for s in updates.shape]):
        start = _start_vector(indices, ivd, [index[d] for d in scatter_dims], operand.ndim, sdod, ibd, sibd)
        if any(s < 0 or s + e > size for s, e, size in zip(start, extent, operand.shape)):
            continue
        window = iter(index[d] for d in window_dims)
        full = tuple(start[d] + (next(window) if d in window_operand else 0) for d in range(operand.ndim))
        out[full] = combine(out[full], updates[index])
    return out


SCATTER_CASES = [
    # operand shape, indices, updates shape, kwargs
    (
        (6, 3),
        [[1], [4], [1]],
        (3, 3),
        dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1),
    ),
    (
        (5, 4, 3),
        [[0, 1], [3, 2], [4, 3]],
        (3, 2, 2, 3),
        dict(
            update_window_dims=[1, 2, 3],
            inserted_window_dims=[],
            scatter_dims_to_operand_dims=[0, 1],
            index_vector_dim=1,
        ),
    ),  # last window is out of bounds
    (
        (5, 4),
        [[2, 0, 2]],
        (2, 3),
        dict(update_window_dims=[0], inserted_window_dims=[1], scatter_dims_to_operand_dims=[1], index_vector_dim=0),
    ),
    (
        (4, 6),
        [[1, 5], [0, 0]],
        (2,),
        dict(
            update_window_dims=[], inserted_window_dims=[0, 1], scatter_dims_to_operand_dims=[1, 0], index_vector_dim=1
        ),
    ),
    (
        (3, 5, 2),
        [[1, 4], [0, 0], [2, 2]],
        (3, 2, 2),
        dict(
            update_window_dims=[2],
            inserted_window_dims=[1],
            scatter_dims_to_operand_dims=[1],
            index_vector_dim=2,
            input_batching_dims=[0],
            scatter_indices_batching_dims=[0],
        ),
    ),
]


@pytest.mark.parametrize("operand_shape,indices,updates_shape,kwargs", SCATTER_CASES)
@pytest.mark.parametrize("combiner", ["replace", "add", "max", "custom"])
def test_xla_scatter_matches_loop(operand_shape, indices, updates_shape, kwargs, combiner):
    r = rng(11)
    operand = r.standard_normal(operand_shape).astype(np.float32)
    updates = r.standard_normal(updates_shape).astype(np.float32)
    indices = np.array(indices, np.int64)
    functions = {
        "replace": lambda a, b: b,
        "add": lambda a, b: a + b,
        "max": np.maximum,
        "custom": lambda a, b: a * np.float32(0.5) + b,
    }
    expected = slow_xla_scatter(
        operand,
        indices,
        updates,
        kwargs["update_window_dims"],
        kwargs["inserted_window_dims"],
        kwargs["scatter_dims_to_operand_dims"],
        kwargs["index_vector_dim"],
        functions[combiner],
        kwargs.get("input_batching_dims", ()),
        kwargs.get("scatter_indices_batching_dims", ()),
    )
    chosen = functions["custom"] if combiner == "custom" else combiner
    assert_close(K.xla_scatter(operand, indices, updates, combiner=chosen, **kwargs), expected)
