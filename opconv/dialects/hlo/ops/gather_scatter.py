"""Gather and ScatterND: XLA's general gather and scatter (numerics: :mod:`opconv.kernels.gather_scatter`).

Gather clamps each start index so the slice lies inside the input; ScatterND
(XLA Scatter despite its name) skips update windows that do not lie inside
the input, and combines each update into its element with ``computation``
(UPDATE replaces), in row-major order of ``updates``.
"""

from __future__ import annotations

import numpy as np

from ....kernels import gather_scatter as K
from ..executor import hlo_op
from ._computation import combiner


@hlo_op("Gather")
def gather(
    ctx,
    x,
    start_indices,
    *,
    index_vector_dim,
    start_index_map,
    collapsed_slice_dims,
    offset_dims,
    slice_sizes,
    indices_are_sorted,
):
    return K.xla_gather(
        x, start_indices, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim, slice_sizes
    )


@hlo_op("ScatterND")
def scatter_nd(
    ctx,
    x,
    scatter_indices,
    updates,
    *,
    computation,
    index_vector_dim,
    update_window_dims,
    inserted_window_dims,
    scatter_dims_to_operand_dims,
    indices_are_sorted,
    unique_indices,
):
    name = str(computation).upper()
    combine = "replace" if name == "UPDATE" else combiner(name, np.asarray(x).dtype)
    return K.xla_scatter(
        x,
        scatter_indices,
        updates,
        update_window_dims,
        inserted_window_dims,
        scatter_dims_to_operand_dims,
        index_vector_dim,
        combine,
    )
