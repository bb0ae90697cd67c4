#!/usr/bin/env python3
"""Generate ``opconv/schemas/hlo.json``: the 141 operations of the HLO dialect.

The source is the dialect's "Operation Semantics" document
(``shared/specs/hlo-operation-semantics.zh.txt``, sections 3.1 Abs ... 3.141 Xor,
in Chinese), read together with its English summary
(``shared/specs/hlo-ops-english.md``).  There is no machine-readable form of
that document, so the op definitions live below as Python data, one entry per
section and in section order; each entry starts with its section number, which
:func:`build_ops` checks runs 1..141 without gaps.

How the document was read
-------------------------
* Names are the section titles, spelled as the document spells them.
* Element types are mapped to opconv's canonical names: ``float``/``f32`` ->
  ``float32``, ``double`` -> ``float64``, ``half`` -> ``float16``, ``complex``
  -> ``complex64`` and ``complex128``.  A parameter the document types as a
  bare ``int`` or ``tensor(int)`` (a shape, a size, a count) accepts ``int32``
  or ``int64``, as the document's own integer operands (``Tind``, ``Ts``,
  ``Ta``) do.  "All types" means every element type the document names
  anywhere (:data:`ALL`).
* ``enum`` attributes are ``string`` attributes with an ``allowed`` list.
* Attributes the document marks optional, or gives a default for, are
  optional.  Otherwise they are required, unless the reference the document
  cites for the op (XLA, ONNX, PyTorch) defines a scalar default: that default
  is recorded, and the attribute's doc says where it comes from.  List
  attributes whose default depends on the rank (strides, dilations) are
  optional without a default; their doc states the implied value.  Conv's
  window parameters and DotGeneral's batching dims are optional too, because
  XLA and StableHLO let them be omitted when trivial; any other departure is
  explained in the op's ``notes``.
* The schema format allows one variadic parameter, the last.  Ops that take
  two lists of equal length (Reduce, ReduceWindow, PartialReduce: N operands
  and N init values) take one variadic ``inputs`` holding the operands first
  and then their init values; their notes say so.
* A tuple has no TYPE in the schema format.  Parameters carrying one use the
  constraint name ``Tuple`` and leave it undeclared, which
  ``OpSchema.allowed_types`` reads as "any type".
* 18 sections are a title only.  They are completed from the public reference
  that defines an op of that name (XLA's operation semantics, the StableHLO
  specification, or the ONNX / PyTorch operator that the vendor's builder
  mirrors); ``completed_from`` names it.  Signatures of the vendor builder
  quoted in the English summary fixed the attribute names where there is one.
* Wherever an entry departs from the document (known defects, types that
  cannot be meant), its ``notes`` say what changed and why.

Usage::

    python scripts/gen_hlo_schemas.py           # (re)write opconv/schemas/hlo.json
    python scripts/gen_hlo_schemas.py --check   # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(REPO))

from opconv.schemas import OpSchema, dump, parse_op  # noqa: E402
from opconv.types import ELEMENT_TYPES  # noqa: E402

OUTPUT = REPO / "opconv" / "schemas" / "hlo.json"
SOURCE = (
    "HLO operation semantics (shared/specs/hlo-operation-semantics.zh.txt, sections 3.1-3.141) "
    "with its English summary (shared/specs/hlo-ops-english.md); title-only sections completed "
    "from the source named in each op's completed_from"
)
GENERATED_BY = "scripts/gen_hlo_schemas.py"

DIALECT = "hlo"
DOMAIN = ""
VERSION = 1
VARIADIC_MAX = 2**31 - 1

# ---------------------------------------------------------------------------
# Element type groups, in canonical names
# ---------------------------------------------------------------------------

UINT = ("uint8", "uint16", "uint32", "uint64")
SINT = ("int8", "int16", "int32", "int64")
INT = UINT + SINT
FLOAT = ("float16", "float32", "float64")
#: the document's usual "numeric" list
NUMERIC = UINT + SINT + FLOAT
#: the "numeric" list of Gather, ScatterND and SelectAndScatter, which adds bfloat16
NUMERIC_BF16 = UINT + SINT + ("float16", "bfloat16", "float32", "float64")
SIGNED = SINT + FLOAT
COMPLEX = ("complex64", "complex128")
BOOL = ("bool",)
#: "all types": every element type the document names
ALL = BOOL + SINT + UINT + ("float16", "bfloat16", "float32", "float64") + COMPLEX
#: index-like integer operands (shapes, sizes, start indices, axes)
INDEX = ("int32", "int64")

TUPLE = "Tuple"  # undeclared constraint: a tuple value (see the module docstring)

COMPUTATIONS = (
    "UPDATE",
    "ADD",
    "SUB",
    "MUL",
    "DIV",
    "MIN",
    "MAX",
    "AND",
    "OR",
    "XOR",
    "ARGMIN",
    "ARGMAX",
    "L2",
    "COUNT",
)
AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
PAD_MODES = ("PAD_VALUE", "PAD_EDGE", "PAD_REFLECT", "PAD_SYMMETRIC")

# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

_NO_DEFAULT = object()


def req(name: str, type_: str, doc: str, allowed=None) -> dict:
    """A required attribute."""
    return _attr(name, type_, True, _NO_DEFAULT, allowed, doc)


def opt(name: str, type_: str, doc: str, default=_NO_DEFAULT, allowed=None) -> dict:
    """An optional attribute; without ``default`` it is simply absent when not given."""
    return _attr(name, type_, False, default, allowed, doc)


def _attr(name, type_, required, default, allowed, doc) -> dict:
    out = {"name": name, "type": type_, "required": required}
    if default is not _NO_DEFAULT:
        out["default"] = default
    if allowed is not None:
        out["allowed"] = list(allowed)
    out["doc"] = doc
    return out


def one(name: str, type_: str = "T", doc: str = "") -> dict:
    """A single (mandatory) input or output."""
    return {"name": name, "type": type_, "option": "single", "doc": doc}


def maybe(name: str, type_: str = "T", doc: str = "") -> dict:
    """An optional input or output."""
    return {"name": name, "type": type_, "option": "optional", "doc": doc}


def many(name: str, type_: str = "T", doc: str = "", min_arity: int = 1, homogeneous: bool = True) -> dict:
    """A variadic input or output (must be the last parameter)."""
    return {
        "name": name,
        "type": type_,
        "option": "variadic",
        "doc": doc,
        "min_arity": min_arity,
        "homogeneous": homogeneous,
    }


def op(
    section: int,
    name: str,
    doc: str,
    *,
    attrs=(),
    inputs=(),
    outputs=(),
    types=None,
    notes: str = "",
    completed_from: str | None = None,
) -> tuple[int, dict]:
    """One operation: its section number (3.N) and its raw schema entry.

    ``types`` maps constraint names to tuples of canonical element type names;
    they become ``tensor(<name>)`` type strings.
    """
    raw = {
        "name": name,
        "domain": DOMAIN,
        "version": VERSION,
        "doc": doc,
        "attributes": list(attrs),
        "inputs": list(inputs),
        "outputs": list(outputs),
        "type_constraints": {k: [f"tensor({e})" for e in v] for k, v in (types or {}).items()},
    }
    raw.update(_arity("inputs", raw["inputs"]))
    raw.update(_arity("outputs", raw["outputs"]))
    if completed_from:
        raw["completed_from"] = completed_from
    if notes:
        raw["notes"] = notes
    return section, raw


def _arity(kind: str, params: list[dict]) -> dict:
    # The loader's defaults ignore a variadic parameter's min_arity, so the bounds are spelled out.
    least = sum(p["option"] == "single" for p in params)
    most = len(params)
    for p in params:
        if p["option"] == "variadic":
            least += p["min_arity"]
            most = VARIADIC_MAX
    return {f"min_{kind}": least, f"max_{kind}": most}


# --- shapes that recur -------------------------------------------------------


def unary(section: int, name: str, doc: str, types=FLOAT, *, notes: str = "") -> tuple[int, dict]:
    """Element-wise ``output = f(input)`` with one type for input and output."""
    return op(section, name, doc, inputs=[one("input")], outputs=[one("output")], types={"T": types}, notes=notes)


BROADCAST_DIMENSIONS = opt(
    "broadcast_dimensions",
    "ints",
    "XLA-style explicit broadcast of the lower-rank operand: for each of its dims, the dim of the "
    "result it maps to. Absent: the operands have equal shapes.",
)


def binary(
    section: int,
    name: str,
    doc: str,
    types=NUMERIC,
    *,
    broadcast: bool = False,
    rhs_type: str = "T",
    extra_types=None,
    notes: str = "",
    completed_from: str | None = None,
) -> tuple[int, dict]:
    """Element-wise ``output = f(lhs, rhs)``; ``broadcast`` adds ``broadcast_dimensions``."""
    all_types = {"T": types, **(extra_types or {})}
    return op(
        section,
        name,
        doc,
        attrs=[BROADCAST_DIMENSIONS] if broadcast else [],
        inputs=[one("lhs"), one("rhs", rhs_type)],
        outputs=[one("output")],
        types=all_types,
        notes=notes,
        completed_from=completed_from,
    )


def logical(section: int, name: str, doc: str) -> tuple[int, dict]:
    """Element-wise boolean connective with ``broadcast_dimensions``."""
    return binary(section, name, doc, BOOL, broadcast=True)


def arg_reduce(section: int, name: str, extreme: str) -> tuple[int, dict]:
    """ArgMax / ArgMin: the int64 index of the extreme element along ``axis``."""
    return op(
        section,
        name,
        f"Index of the {extreme} element along `axis`, as int64; ties resolve to the first "
        "index unless select_last_index is set.",
        attrs=[
            opt("axis", "int", "Axis to reduce, in [0, rank-1].", default=0),
            opt("keepdims", "bool", "Keep the reduced axis with size 1.", default=True),
            opt("select_last_index", "bool", "On ties, return the last index instead of the first.", default=False),
        ],
        inputs=[one("input")],
        outputs=[one("output", "tensor(int64)")],
        types={"T": NUMERIC},
    )


def split_activation(section: int, name: str, doc: str, *, approximate: bool = False) -> tuple[int, dict]:
    """Gated activations that halve ``input`` along ``dim`` into (a, b)."""
    attrs = [req("dim", "int", "Dim along which the input is split into two equal halves a and b.")]
    if approximate:
        attrs.insert(0, req("approximate", "bool", "false: exact GELU via erf; true: the tanh approximation."))
    return op(section, name, doc, attrs=attrs, inputs=[one("input")], outputs=[one("output")], types={"T": FLOAT})


def conv_attributes() -> list[dict]:
    """The attributes Conv and ConvBias share (XLA ConvGeneralDilated plus auto_pad)."""
    return [
        req("input_batch_dimension", "int", "Batch dim of lhs."),
        req("input_feature_dimension", "int", "Feature (channel) dim of lhs."),
        req("input_spatial_dimensions", "ints", "The n spatial dims of lhs, in window order."),
        req(
            "kernel_input_feature_dimension",
            "int",
            "Input-feature dim of rhs; its size times feature_group_count is lhs's feature size.",
        ),
        req("kernel_output_feature_dimension", "int", "Output-feature dim of rhs."),
        req("kernel_spatial_dimensions", "ints", "The n spatial dims of rhs, in window order."),
        req("output_batch_dimension", "int", "Batch dim of the output."),
        req("output_feature_dimension", "int", "Feature dim of the output."),
        req("output_spatial_dimensions", "ints", "The n spatial dims of the output."),
        opt("window_strides", "ints", "Window stride per spatial dim. Absent: 1 everywhere."),
        opt(
            "padding",
            "ints",
            "Low and high padding of each spatial dim; negative values crop before convolving. Absent: no padding.",
        ),
        opt(
            "lhs_dilation",
            "ints",
            "Input dilation per spatial dim (d-1 zeros between elements, as in a transposed "
            "convolution). Absent: 1 everywhere.",
        ),
        opt("rhs_dilation", "ints", "Kernel (atrous) dilation per spatial dim. Absent: 1 everywhere."),
        opt(
            "feature_group_count",
            "int",
            "Number of groups the feature dims are split into (grouped convolution); default from XLA.",
            default=1,
        ),
        opt(
            "batch_group_count",
            "int",
            "Number of groups the batch dim is split into (filter gradients); output batch = "
            "input batch / batch_group_count; default from XLA.",
            default=1,
        ),
        opt(
            "auto_pad",
            "string",
            "Automatic padding as in AveragePool; the empty string means NOTSET.",
            default="NOTSET",
            allowed=("",) + AUTO_PAD,
        ),
    ]


CONV_NOTES = (
    'The document gives auto_pad the default "" (explicit padding); it is recorded as NOTSET, '
    'which means the same, and "" stays accepted. The document does not say how the flat padding '
    "list is laid out; opconv reads it as [x1_begin, x2_begin, ..., x1_end, x2_end, ...], the "
    "layout the document uses for the pooling ops. Stride, dilation and group-count defaults are "
    "XLA's."
)


def dot_general_attributes() -> list[dict]:
    """The dimension numbers of DotGeneral and DotGeneralBias."""
    return [
        opt("lhs_batching_dimensions", "ints", "Batch dims of lhs (paired with rhs's).", default=[]),
        opt("rhs_batching_dimensions", "ints", "Batch dims of rhs.", default=[]),
        req("lhs_contracting_dimensions", "ints", "Dims of lhs summed over."),
        req("rhs_contracting_dimensions", "ints", "Dims of rhs summed over (paired with lhs's)."),
    ]


DOT_GENERAL_NOTES = "Empty batching dimensions (no batch) are the default, as in XLA and StableHLO."


def pool_padding(
    auto_pad_doc: str = "Automatic padding: NOTSET uses `padding`; SAME_UPPER and "
    "SAME_LOWER pad so that out = ceil(in / stride), the odd cell at the end "
    "(UPPER) or start (LOWER); VALID pads nothing.",
) -> list[dict]:
    """``padding`` and ``auto_pad`` of the ONNX-style pooling ops."""
    return [
        opt(
            "padding",
            "ints",
            "Padding [x1_begin, x2_begin, ..., x1_end, x2_end, ...] of the pooled dims; not "
            "together with auto_pad. Absent: 0.",
        ),
        opt("auto_pad", "string", auto_pad_doc, default="NOTSET", allowed=AUTO_PAD),
    ]


def computation_enum(doc: str) -> dict:
    return req("computation", "string", doc, allowed=COMPUTATIONS)


ENUM_NOT_REGION = (
    "Where XLA takes a computation (region), this dialect names the combiner with the "
    "`computation` enum, as the document specifies."
)

# ---------------------------------------------------------------------------
# The 141 operations, in section order (3.N)
# ---------------------------------------------------------------------------

OPS: list[tuple[int, dict]] = [
    unary(1, "Abs", "Absolute value of each element.", NUMERIC),
    unary(2, "Acos", "Arc cosine of each element."),
    binary(3, "Add", "Element-wise sum lhs + rhs.", broadcast=True),
    logical(4, "And", "Element-wise logical AND of two boolean tensors."),
    arg_reduce(5, "ArgMax", "largest"),
    arg_reduce(6, "ArgMin", "smallest"),
    unary(7, "Asin", "Arc sine of each element."),
    unary(8, "Asinh", "Inverse hyperbolic sine of each element."),
    unary(9, "Atan", "Arc tangent of each element."),
    binary(
        10,
        "Atan2",
        "Element-wise two-argument arc tangent atan2(lhs, rhs): the angle of the point (rhs, lhs), in [-pi, pi].",
        FLOAT,
        notes="The document writes the formula as atan2(lhs/rhs); the quadrant-aware two-argument "
        "form atan2(lhs, rhs) of XLA and C is meant, since the op takes two inputs.",
    ),
    unary(11, "Atanh", "Inverse hyperbolic tangent of each element."),
    op(
        12,
        "AveragePool",
        "Average pooling over the dims listed in `dims` (ONNX AveragePool semantics with a layout-selecting `dims`).",
        attrs=[
            req("dims", "ints", "The input dims pooled over (selects the layout)."),
            req("kernel_shape", "ints", "Window size per pooled dim."),
            opt("ceil_mode", "bool", "Round the output size up instead of down.", default=False),
            opt("count_include_pad", "bool", "Count padded cells in the divisor.", default=False),
            opt("strides", "ints", "Stride per pooled dim. Absent: 1."),
            *pool_padding(),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
        notes="The document calls the output an integer tensor, a copy-paste slip: the output has "
        "the input's floating type T. auto_pad's default NOTSET is ONNX's; the document "
        "gives none.",
    ),
    op(
        13,
        "BatchNormGrad",
        "Gradients of batch normalisation with respect to the input, scale and bias, for each "
        "feature along `feature_index` (XLA BatchNormGrad).",
        attrs=[
            req("epsilon", "float", "Added to the variance for numerical safety."),
            req("feature_index", "int", "Index of the feature dim of the input."),
        ],
        inputs=[
            one("input"),
            one("scale", doc="Per-feature scale, shape [C]."),
            one("mean", doc="Per-feature batch mean."),
            one("variance", doc="Per-feature batch variance."),
            one("grad_output", doc="Gradient flowing into the batch-norm output."),
        ],
        outputs=[one("grad_input"), one("grad_scale"), one("grad_bias")],
        types={"T": FLOAT},
    ),
    op(
        14,
        "BatchNormInference",
        "Normalises each feature with the given mean and variance: "
        "(input - mean) / sqrt(variance + epsilon) * scale + bias.",
        attrs=[
            req("epsilon", "float", "Added to the variance for numerical safety."),
            req("feature_index", "int", "Index of the feature dim of the input."),
        ],
        inputs=[
            one("input"),
            one("scale", doc="Shape [C]."),
            one("bias", doc="Shape [C]."),
            one("mean", doc="Shape [C]."),
            one("variance", doc="Shape [C]."),
        ],
        outputs=[one("output")],
        types={"T": FLOAT},
    ),
    op(
        15,
        "BatchNormTraining",
        "Normalises each feature with the mean and variance computed over all other dims of the "
        "batch, and also returns those statistics.",
        attrs=[
            req("epsilon", "float", "Added to the variance for numerical safety."),
            req("feature_index", "int", "Index of the feature dim of the input."),
        ],
        inputs=[one("input"), one("scale", doc="Shape [C]."), one("bias", doc="Shape [C].")],
        outputs=[
            one("output"),
            one("mean", doc="Batch mean per feature."),
            one("variance", doc="Batch variance per feature."),
        ],
        types={"T": FLOAT},
    ),
    op(
        16,
        "BCELoss",
        "Binary cross-entropy between probabilities `input` and targets `target`, optionally "
        "weighted per element, reduced as `reduction` says.",
        attrs=[
            opt(
                "reduction",
                "string",
                "none: per-element loss; mean: average; sum: total. Default from PyTorch.",
                default="mean",
                allowed=("none", "mean", "sum"),
            )
        ],
        inputs=[
            one("input", doc="Probabilities in [0, 1]."),
            one("target", doc="Targets, same shape."),
            maybe("weight", doc="Rescaling weight, broadcast to the input's shape."),
        ],
        outputs=[one("output", doc="Scalar for mean/sum, input-shaped for none.")],
        types={"T": FLOAT},
        completed_from="PyTorch documentation (torch.nn.BCELoss)",
        notes="Title-only section. Completed as torch.nn.BCELoss; the vendor builder signature "
        'BCELoss(operands, reduction="") fixed the attribute name. The builder\'s default, an '
        "empty string, is not explained; PyTorch's default mean is recorded.",
    ),
    op(
        17,
        "BitcastConvert",
        "Reinterprets the bits of each element as another element type of the same width; the shape is unchanged.",
        inputs=[one("input")],
        outputs=[one("output", "T1")],
        types={"T": ALL, "T1": ALL},
    ),
    op(
        18,
        "Broadcast",
        "Adds new leading dims of sizes `broadcast_sizes`, replicating the input into them.",
        attrs=[req("broadcast_sizes", "ints", "Sizes of the dims prepended to the input's shape.")],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        19,
        "BroadcastInDim",
        "Replicates the input into the result shape (taken from the result type), mapping input "
        "dim i to result dim broadcast_dimensions[i].",
        attrs=[req("broadcast_dimensions", "ints", "For each input dim, the result dim it maps to.")],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        20,
        "Cbrt",
        "Cube root of each element; integer inputs give a floating result.",
        inputs=[one("input")],
        outputs=[one("output", "To")],
        types={"T": NUMERIC, "To": FLOAT},
    ),
    unary(21, "Ceil", "Rounds each element up to an integral value."),
    op(
        22,
        "Cholesky",
        "Cholesky factor of each symmetric positive-definite matrix in a batch (the last two dims), "
        "lower or upper triangular.",
        attrs=[req("lower", "bool", "true: return the lower factor L; false: the upper factor U.")],
        inputs=[one("input", doc="Batch of square matrices in the last two dims.")],
        outputs=[one("output")],
        types={"T": FLOAT},
    ),
    op(
        23,
        "Clamp",
        "Limits each element of `input` to [min, max]: min(max(input, min), max); the bounds may be scalars.",
        inputs=[one("min"), one("input"), one("max")],
        outputs=[one("output")],
        types={"T": NUMERIC},
    ),
    op(
        24,
        "Compare",
        "Element-wise comparison of lhs and rhs selected by comparison_direction, giving booleans.",
        attrs=[
            req(
                "comparison_direction",
                "string",
                "EQ, NE, GE, GT, LE or LT (lhs OP rhs).",
                allowed=("EQ", "NE", "GE", "GT", "LE", "LT"),
            )
        ],
        inputs=[one("lhs"), one("rhs")],
        outputs=[one("output", "To")],
        types={"T": ALL, "To": BOOL},
    ),
    op(
        25,
        "Complex",
        "Builds complex numbers from a real part (lhs) and an imaginary part (rhs).",
        inputs=[one("lhs", doc="Real part."), one("rhs", doc="Imaginary part.")],
        outputs=[one("output", "To")],
        types={"T": FLOAT, "To": COMPLEX},
    ),
    op(
        26,
        "Concatenate",
        "Joins the input tensors end to end along `dimension`.",
        attrs=[req("dimension", "int", "Dim to join along, in [-rank, rank-1]; negative counts from the back.")],
        inputs=[many("inputs")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        27,
        "Constant",
        "Produces the tensor held in `value`.",
        attrs=[req("value", "tensor", "The constant.")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        28,
        "Conv",
        "General n-d convolution of lhs by the kernel rhs (XLA ConvGeneralDilated): dimension "
        "numbers, strides, padding, input and kernel dilation, feature and batch grouping, plus "
        "ONNX-style auto_pad.",
        attrs=conv_attributes(),
        inputs=[one("lhs", doc="Input, rank n+2."), one("rhs", doc="Kernel, rank n+2.")],
        outputs=[one("output")],
        types={"T": NUMERIC},
        notes=CONV_NOTES,
    ),
    op(
        29,
        "ConvBias",
        "Conv followed by adding a rank-1 bias along the output feature dim.",
        attrs=conv_attributes(),
        inputs=[
            one("lhs", doc="Input, rank n+2."),
            one("rhs", doc="Kernel, rank n+2."),
            one("bias", doc="Rank 1, one value per output feature."),
        ],
        outputs=[one("output")],
        types={"T": NUMERIC},
        notes=CONV_NOTES,
    ),
    op(
        30,
        "Convert",
        "Converts each element to another element type, like a C++ static_cast; narrowing an "
        "integer keeps its sign bit rather than only the low bits.",
        inputs=[one("input")],
        outputs=[one("output", "T1")],
        types={"T": ALL, "T1": ALL},
    ),
    unary(31, "Copy", "Returns a copy of the input.", ALL),
    unary(32, "Cos", "Cosine of each element."),
    op(
        33,
        "CTCLoss",
        "Connectionist temporal classification loss between log-probabilities and target "
        "sequences (PyTorch CTCLoss semantics, no reduction); also returns the alpha table.",
        attrs=[opt("blank", "int", "Index of the blank label.", default=0)],
        inputs=[
            one("input", doc="Log-probabilities, (T, N, C) or (T, C)."),
            one("targets", "Ti", doc="Class indices, (N, S) padded or concatenated 1-d."),
            one("input_lengths", "Ti", doc="Length of each input sequence, (N) or ()."),
            one("target_lengths", "Ti", doc="Length of each target sequence, (N) or ()."),
        ],
        outputs=[one("loss", doc="Per-sequence loss."), one("alpha", doc="Forward variables kept for the gradient.")],
        types={"T": FLOAT, "Ti": INDEX},
    ),
    op(
        34,
        "CustomCall",
        "Calls an opaque, backend-defined function named by call_target_name on the operands.",
        attrs=[
            req("call_target_name", "string", "Name of the function the backend calls."),
            opt("backend_config", "string", "Opaque configuration passed to the target (XLA's opaque)."),
            opt("has_side_effect", "bool", "The call must not be removed or duplicated.", default=False),
        ],
        inputs=[many("args", "V", min_arity=0, homogeneous=False)],
        outputs=[many("outputs", "V", homogeneous=False)],
        types={"V": ALL},
        completed_from="XLA operation semantics",
        notes="Title-only section. Completed from XLA's CustomCall; the vendor builder signature "
        "CustomCall(args, call_target_name) fixed the names. Results are listed as separate "
        "outputs, as in StableHLO, rather than as one tuple.",
    ),
    op(
        35,
        "DepthToSpace",
        "Moves blocks of the depth dim into the spatial dims: the inverse of SpaceToDepth.",
        attrs=[
            req("space_dims", "ints", "Dims of height and width."),
            req("depth_dim", "int", "Dim of depth (channels)."),
            req("blocksize", "int", "Edge of the square block moved out of depth."),
            opt(
                "mode",
                "string",
                "DCR: depth-column-row order; CRD: column-row-depth order.",
                default="DCR",
                allowed=("DCR", "CRD"),
            ),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
        completed_from="ONNX operators (DepthToSpace)",
        notes="Title-only section. Completed as ONNX DepthToSpace with SpaceToDepth's layout "
        "attributes (space_dims, depth_dim), following the vendor builder signature "
        'DepthToSpace(input, space_dims, depth_dim, blocksize, mode="DCR").',
    ),
    binary(36, "Div", "Element-wise quotient lhs / rhs.", broadcast=True),
    op(
        37,
        "Dot",
        "Sum of products over lhs's last dim and rhs's first dim, for rank-1 or rank-2 operands: "
        "vector-vector, matrix-vector or matrix-matrix product.",
        inputs=[one("lhs", doc="Rank 1 or 2."), one("rhs", doc="Rank 1 or 2.")],
        outputs=[one("output")],
        types={"T": NUMERIC},
    ),
    op(
        38,
        "DotGeneral",
        "Dot with explicit contracting dims, summed over, and batch dims, kept and paired between lhs and rhs.",
        attrs=dot_general_attributes(),
        inputs=[one("lhs"), one("rhs")],
        outputs=[one("output")],
        types={"T": NUMERIC},
        notes=DOT_GENERAL_NOTES,
    ),
    op(
        39,
        "DotGeneralBias",
        "DotGeneral followed by adding a rank-1 bias along the result's feature (last) dim.",
        attrs=dot_general_attributes(),
        inputs=[one("lhs"), one("rhs"), one("bias", "T1", doc="Rank 1.")],
        outputs=[one("output")],
        types={"T": NUMERIC, "T1": NUMERIC},
        notes=DOT_GENERAL_NOTES,
    ),
    op(
        40,
        "Dropout",
        "In training mode, zeroes each element with probability `ratio` and scales the rest by "
        "1 / (1 - ratio); otherwise returns the input unchanged.",
        attrs=[
            opt("ratio", "float", "Probability of dropping an element; default from ONNX.", default=0.5),
            opt("training_mode", "bool", "Drop elements (true) or pass the input through (false).", default=True),
            opt("seed", "int", "Seed of the random generator. Absent: chosen by the runtime."),
            opt(
                "noise_shape",
                "ints",
                "Shape of the random keep mask, broadcast against the input (TensorFlow). Absent: the input's shape.",
            ),
        ],
        inputs=[one("data")],
        outputs=[one("output"), maybe("mask", "tensor(bool)", doc="Elements kept (true).")],
        types={"T": FLOAT},
        completed_from="ONNX operators (Dropout)",
        notes="Title-only section. Completed from ONNX Dropout; ratio and training_mode are "
        "attributes and noise_shape is added, after the vendor builder signature "
        "Dropout(data, ratio, training_mode=true, seed, noise_shape).",
    ),
    op(
        41,
        "DynamicBroadcastInDim",
        "BroadcastInDim whose result shape is given at run time by the `shape` tensor.",
        attrs=[req("broadcast_dimensions", "ints", "For each input dim, the result dim it maps to.")],
        inputs=[one("input"), one("shape", "Ts", doc="1-d result shape.")],
        outputs=[one("output")],
        types={"T": ALL, "Ts": INDEX},
    ),
    op(
        42,
        "DynamicIota",
        "Tensor of the run-time shape `shape` whose values count 0, 1, 2, ... along iota_dimension.",
        attrs=[req("iota_dimension", "int", "Dim along which the values increase.")],
        inputs=[one("shape", "Tint", doc="1-d output shape.")],
        outputs=[one("output")],
        types={"T": NUMERIC, "Tint": INDEX},
    ),
    op(
        43,
        "DynamicPad",
        "Pads or crops each dim by amounts given at run time, with a constant, edge or mirrored values.",
        attrs=[
            opt(
                "mode",
                "string",
                "PAD_VALUE: padding_value; PAD_EDGE: repeat the edge; PAD_REFLECT: mirror without "
                "the edge; PAD_SYMMETRIC: mirror including the edge.",
                default="PAD_VALUE",
                allowed=PAD_MODES,
            )
        ],
        inputs=[
            one("input"),
            one("pads", "Tint", doc="[x1_begin, x2_begin, ..., x1_end, x2_end, ...]; negative crops."),
            maybe("padding_value", doc="Scalar used by PAD_VALUE."),
        ],
        outputs=[one("output")],
        types={"T": ALL, "Tint": INDEX},
        notes="The document calls mode and padding_value optional without a default; the default "
        "mode PAD_VALUE is constant padding, as in XLA's Pad.",
    ),
    op(
        44,
        "DynamicReshape",
        "Reshapes to the run-time `shape`: one -1 is inferred and a 0 copies the input's dim unless allowzero is 1.",
        attrs=[
            opt(
                "allowzero",
                "int",
                "1: a 0 in shape is a literal zero-sized dim; 0: it copies the input's dim.",
                default=0,
                allowed=(0, 1),
            )
        ],
        inputs=[one("input"), one("shape", "Tint", doc="1-d target shape; empty gives a scalar.")],
        outputs=[one("output")],
        types={"T": ALL, "Tint": INDEX},
    ),
    op(
        45,
        "DynamicSlice",
        "Extracts a slice of sizes slice_sizes starting at run-time indices.",
        attrs=[req("slice_sizes", "ints", "Slice size per input dim.")],
        inputs=[one("input"), one("start_indices", "Tind", doc="1-d, one start per input dim.")],
        outputs=[one("output")],
        types={"T": ALL, "Tind": INDEX},
    ),
    op(
        46,
        "DynamicUpdateSlice",
        "Overwrites the slice of the input that starts at run-time indices with `update`.",
        inputs=[
            one("input"),
            one("update", doc="The new values; fits inside the input."),
            one("start_indices", "Tind", doc="1-d, one start per input dim."),
        ],
        outputs=[one("output")],
        types={"T": ALL, "Tind": INDEX},
    ),
    op(
        47,
        "Elu",
        "Exponential linear unit: x for x >= 0, alpha * (exp(x) - 1) below.",
        attrs=[opt("alpha", "float", "Scale of the negative part; default from ONNX.", default=1.0)],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
    ),
    op(
        48,
        "Erf",
        "Gauss error function of each element.",
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
        completed_from="XLA operation semantics",
        notes="Title-only section. Completed from XLA's element-wise Erf; the vendor builder takes one operand.",
    ),
    unary(49, "Exp", "e raised to each element."),
    op(
        50,
        "Expm1",
        "exp(x) - 1 of each element, accurate near zero; integer inputs give a floating result.",
        inputs=[one("input")],
        outputs=[one("output", "To")],
        types={"T": ("uint8", "uint32", "int8", "int32") + FLOAT, "To": FLOAT},
    ),
    unary(51, "Floor", "Rounds each element down to an integral value."),
    op(
        52,
        "Gather",
        "XLA general gather: slices of size slice_sizes are taken at start positions read from "
        "start_indices, size-1 dims in collapsed_slice_dims are dropped, and offset_dims place the "
        "slice dims among the batch dims of the result.",
        attrs=[
            req(
                "index_vector_dim",
                "int",
                "Dim of start_indices holding the index vectors; equal to its rank means an implicit "
                "trailing dim of size 1.",
            ),
            req(
                "start_index_map",
                "ints",
                "For each index-vector component, the input dim it starts; unmapped dims start at 0.",
            ),
            req("collapsed_slice_dims", "ints", "Slice dims of size 1 removed from the result."),
            req("offset_dims", "ints", "Result dims that hold the remaining slice dims."),
            req("slice_sizes", "ints", "Slice size per input dim."),
            opt("indices_are_sorted", "bool", "Promise that start_indices are sorted.", default=False),
        ],
        inputs=[one("input"), one("start_indices", "Tind")],
        outputs=[one("output")],
        types={"T": NUMERIC_BF16, "Tind": INDEX},
        notes="Corrected defects of the document: it says the output has the input's shape (a "
        "copy-paste slip; the shape follows from offset_dims, slice_sizes and the batch dims "
        "of start_indices), and it gives start_indices the data type T, which would make "
        "indices floating point; they are integers (int32/int64) as in XLA. The doc of "
        "indices_are_sorted names scatter_indices by mistake.",
    ),
    split_activation(
        53, "GeGlu", "Splits the input in two halves a, b along `dim` and returns a * gelu(b).", approximate=True
    ),
    op(
        54,
        "Gelu",
        "Gaussian error linear unit 0.5 * x * (1 + erf(x / sqrt(2))), or its tanh approximation.",
        attrs=[req("approximate", "bool", "false: exact GELU via erf; true: the tanh approximation.")],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
        notes="The document's tanh formula writes sqrt(2/p); sqrt(2/pi) is meant.",
    ),
    op(
        55,
        "Gemm",
        "General matrix multiply alpha * A' * B' + beta * C, where A' and B' are A and B, "
        "transposed when transA / transB are set, and C is broadcast to the result.",
        attrs=[
            opt("alpha", "float", "Scale of the product.", default=1.0),
            opt("beta", "float", "Scale of C.", default=1.0),
            opt("transA", "int", "Transpose A first (1) or not (0).", default=0, allowed=(0, 1)),
            opt("transB", "int", "Transpose B first (1) or not (0).", default=0, allowed=(0, 1)),
        ],
        inputs=[
            one("A", doc="Matrix (M, K), or (K, M) with transA."),
            one("B", doc="Matrix (K, N), or (N, K) with transB."),
            maybe("C", doc="Addend broadcastable to (M, N)."),
        ],
        outputs=[one("output")],
        types={"T": NUMERIC},
        completed_from="ONNX operators (Gemm)",
        notes="Title-only section. Completed as ONNX Gemm, after the vendor builder signature "
        "Gemm(operands, alpha=1, beta=1, transA=0, transB=0); the element types are those of "
        "Dot.",
    ),
    op(
        56,
        "GeneralSplit",
        "Splits the input along `axis` into consecutive pieces whose sizes are given by `split`.",
        attrs=[opt("axis", "int", "Dim to split; negative counts from the back.", default=0)],
        inputs=[one("input"), one("split", "Tint", doc="1-d sizes of the pieces; they sum to the dim's size.")],
        outputs=[many("outputs")],
        types={"T": ALL, "Tint": INDEX},
        completed_from="ONNX operators (Split)",
        notes="Title-only section. Completed as ONNX Split with a sizes tensor, after the vendor "
        "builder signature GeneralSplit(input, split, axis=0).",
    ),
    op(
        57,
        "GetTupleElement",
        "Extracts element `index` of a tuple.",
        attrs=[req("index", "int", "Zero-based position in the tuple.")],
        inputs=[one("input", TUPLE)],
        outputs=[one("output")],
        types={"T": ALL},
        completed_from="XLA operation semantics",
        notes="Title-only section. Completed from XLA's GetTupleElement (vendor builder: "
        "GetTupleElement(input, index)). The input is a tuple, which has no schema type: its "
        "constraint `Tuple` is left undeclared (any type).",
    ),
    op(
        58,
        "GlobalAveragePool",
        "Mean over the spatial dims listed in `dims`, which are kept with size 1.",
        attrs=[req("dims", "ints", "The spatial dims (e.g. H and W); selects NCHW or NHWC layout.")],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
    ),
    op(
        59,
        "GlobalMaxPool",
        "Maximum over the spatial dims listed in `dims`, which are kept with size 1.",
        attrs=[req("dims", "ints", "The spatial dims (e.g. H and W); selects NCHW or NHWC layout.")],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
        completed_from="ONNX operators (GlobalMaxPool)",
        notes="Title-only section. Completed as ONNX GlobalMaxPool with GlobalAveragePool's `dims`, "
        "after the vendor builder signature GlobalMaxPool(input, dims).",
    ),
    split_activation(
        60, "Glu", "Gated linear unit: splits the input in two halves a, b along `dim` and returns a * sigmoid(b)."
    ),
    op(
        61,
        "GridSample",
        "Samples the input [N, C, H, W] at the normalised locations of `grid` [N, H_out, W_out, 2] by "
        "nearest or bilinear interpolation.",
        attrs=[
            opt(
                "mode",
                "string",
                "NEAREST or LINEAR (bilinear); default from ONNX.",
                default="LINEAR",
                allowed=("NEAREST", "LINEAR"),
            ),
            opt(
                "align_corners",
                "bool",
                "true: -1 and 1 are the centres of the corner pixels; false: their outer edges. Default from ONNX.",
                default=False,
            ),
            opt(
                "padding_mode",
                "string",
                "Values for samples outside the input, named as in Pad: PAD_VALUE (zeros), PAD_EDGE "
                "(border), PAD_REFLECT (reflection). Default from ONNX (zeros).",
                default="PAD_VALUE",
                allowed=PAD_MODES,
            ),
        ],
        inputs=[one("input"), one("grid", "Tg")],
        outputs=[one("output")],
        types={"T": FLOAT, "Tg": ("float32",)},
        notes="The document types mode as int yet names its values NEAREST and LINEAR; it is a "
        "string enum here. padding_mode refers to Pad's modes without listing them; all four "
        "are allowed.",
    ),
    op(
        62,
        "GroupNorm",
        "Group normalisation: channels (dim 1) are split into num_groups groups, each group is "
        "normalised over its channels and spatial dims, then scaled and shifted per channel.",
        attrs=[
            req("num_groups", "int", "Number of channel groups; divides the channel count."),
            opt("epsilon", "float", "Added to the variance; default from ONNX.", default=1e-5),
        ],
        inputs=[
            one("input", doc="(N, C, D1, ..., Dn)."),
            one("scale", doc="Per channel, shape [C]."),
            one("bias", doc="Per channel, shape [C]."),
        ],
        outputs=[one("output")],
        types={"T": FLOAT},
        completed_from="ONNX operators (GroupNormalization)",
        notes="Title-only section, absent from the vendor builder. Completed as ONNX "
        "GroupNormalization (opset 21: per-channel scale and bias).",
    ),
    split_activation(
        63, "Gtu", "Gated tanh unit: splits the input in two halves a, b along `dim` and returns tanh(a) * sigmoid(b)."
    ),
    op(
        64,
        "HardSigmoid",
        "Piecewise-linear sigmoid max(0, min(1, slope * x + offset)).",
        attrs=[
            opt("slope", "float", "Slope; default from ONNX (alpha).", default=0.2),
            opt("offset", "float", "Offset; default from ONNX (beta).", default=0.5),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
    ),
    unary(65, "HardSwish", "x * max(0, min(1, x / 6 + 0.5)) of each element."),
    op(
        66,
        "If",
        "Runs true_branch when the scalar `pred` is true and false_branch otherwise, returning that region's results.",
        attrs=[
            req("true_branch", "region", "Computation run when pred is true."),
            req("false_branch", "region", "Computation run when pred is false; same result types."),
        ],
        inputs=[one("pred", "tensor(bool)", doc="Scalar condition.")],
        outputs=[many("outputs", "V", min_arity=0, homogeneous=False)],
        types={"V": ALL},
        completed_from="StableHLO specification",
        notes="Title-only section, absent from the vendor builder. Completed from StableHLO's "
        "`if`: the branches capture their operands from the enclosing scope, so pred is the "
        "only input.",
    ),
    op(
        67,
        "Imag",
        "Imaginary part of each element; zero for real inputs.",
        inputs=[one("input")],
        outputs=[one("output", "To")],
        types={"T": FLOAT + COMPLEX, "To": FLOAT},
        notes="The document gives the output the input's type T; the imaginary part of a complex "
        "number is real, so the output has its own floating constraint, as Real's does.",
    ),
    op(
        68,
        "InstanceNorm",
        "Normalises each channel of each instance over its spatial dims, then applies per-channel scale and bias.",
        attrs=[opt("epsilon", "float", "Added to the variance; default from ONNX.", default=1e-5)],
        inputs=[
            one("input", doc="(N, C, D1, ...) or (N, D1, ..., C)."),
            one("scale", doc="Shape [C]."),
            one("bias", doc="Shape [C]."),
        ],
        outputs=[one("output")],
        types={"T": FLOAT},
    ),
    op(
        69,
        "Iota",
        "Tensor of the result type's shape whose values count 0, 1, 2, ... along iota_dimension.",
        attrs=[req("iota_dimension", "int", "Dim along which the values increase.")],
        outputs=[one("output")],
        types={"T": NUMERIC},
    ),
    op(
        70,
        "IsFinite",
        "Whether each element is neither infinite nor NaN.",
        inputs=[one("input")],
        outputs=[one("output", "To")],
        types={"T": FLOAT, "To": FLOAT + ("int8", "int32", "bool")},
    ),
    op(
        71,
        "LayerNorm",
        "Normalises over the trailing axes [axis, rank) to zero mean and unit variance, then "
        "scales and shifts; can also return the mean and reciprocal standard deviation.",
        attrs=[
            opt("axis", "int", "First normalised axis, in [-rank, rank); default from ONNX.", default=-1),
            opt("epsilon", "float", "Added to the variance; default from ONNX.", default=1e-5),
        ],
        inputs=[one("input"), one("scale"), one("bias")],
        outputs=[
            one("output"),
            maybe("mean", doc="Mean, kept for the gradient."),
            maybe("rstd", doc="1 / sqrt(variance + epsilon), kept for the gradient."),
        ],
        types={"T": FLOAT},
        notes="mean and rstd are optional outputs, as in ONNX LayerNormalization: the document "
        "describes them as training-time by-products.",
    ),
    op(
        72,
        "LeakyRelu",
        "x for x >= 0, alpha * x below.",
        attrs=[opt("alpha", "float", "Slope of the negative part; default from ONNX.", default=0.01)],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": NUMERIC},
    ),
    unary(73, "Log", "Natural logarithm of each element."),
    unary(74, "Log1p", "log(1 + x) of each element, accurate near zero."),
    op(
        75,
        "Map",
        "Applies the scalar computation element-wise across the inputs, over `dimensions`.",
        attrs=[
            req("dimensions", "ints", "Dims mapped over."),
            req("computation", "region", "Scalar computation taking one element of each input."),
        ],
        inputs=[many("input", homogeneous=False)],
        outputs=[one("output")],
        types={"T": NUMERIC},
        notes="The document types computation as a graph; HLO bodies are regions in opconv.",
    ),
    binary(76, "Max", "Element-wise maximum."),
    op(
        77,
        "MaxPool",
        "Max pooling with ONNX MaxPool semantics, including dilation and ceil_mode; can also "
        "return the flat index of each maximum.",
        attrs=[
            req("kernel_shape", "ints", "Window size per pooled axis."),
            opt("strides", "ints", "Stride per pooled axis. Absent: 1."),
            opt("dilations", "ints", "Window dilation per pooled axis. Absent: 1."),
            *pool_padding(),
            opt("ceil_mode", "bool", "Round the output size up instead of down.", default=False),
            opt("return_indices", "bool", "Also produce Indices.", default=False),
            opt(
                "storage_order",
                "int",
                "Index order of Indices: 0 row-major, 1 column-major.",
                default=0,
                allowed=(0, 1),
            ),
        ],
        inputs=[one("input")],
        outputs=[one("output"), maybe("Indices", "T1", doc="Flat index of each maximum.")],
        types={"T": FLOAT + ("int8", "uint8"), "T1": ("int64",)},
        notes="Indices is optional: it exists only when return_indices is set.",
    ),
    op(
        78,
        "MaxRoiPool",
        "Max pooling of each region of interest to pooled_shape, giving "
        "[num_rois, C, pooled_shape[0], pooled_shape[1]].",
        attrs=[
            req("layout", "string", "Input layout.", allowed=("NCHW", "NHWC")),
            req("pooled_shape", "ints", "Output [H, W] of each region."),
            opt("spatial_scale", "float", "Maps ROI coordinates to the input's scale; default from ONNX.", default=1.0),
        ],
        inputs=[one("input"), one("rois", doc="(num_rois, 5): [batch_id, x1, y1, x2, y2].")],
        outputs=[one("output")],
        types={"T": FLOAT},
        notes="The document types layout as DimensionsLayout; a string enum of its two layouts here.",
    ),
    binary(79, "Min", "Element-wise minimum."),
    unary(80, "Mish", "x * tanh(softplus(x)) of each element."),
    unary(81, "Neg", "Negation of each element.", SIGNED),
    op(
        82,
        "NMS",
        "Non-maximum suppression: per batch and class, keeps boxes by descending score, dropping "
        "those overlapping a kept box beyond iou_threshold or scoring below score_threshold.",
        attrs=[
            opt("max_output_boxes_per_class", "int", "Most boxes kept per batch and class; 0 keeps none.", default=0),
            opt("iou_threshold", "float", "IoU above which a box is suppressed, in [0, 1].", default=0.0),
            opt("score_threshold", "float", "Boxes scoring below it are dropped. Absent: no threshold."),
            opt(
                "center_point_box",
                "int",
                "Box format: 0 [y1, x1, y2, x2] corners; 1 [x_center, y_center, width, height].",
                default=0,
                allowed=(0, 1),
            ),
        ],
        inputs=[
            one("boxes", "tensor(float32)", doc="[num_batches, num_boxes, 4]."),
            one("scores", "tensor(float32)", doc="[num_batches, num_classes, num_boxes]."),
        ],
        outputs=[one("selected_indices", "tensor(int64)", doc="[num_selected, 3] of (batch, class, box).")],
        notes="The document gives defaults for max_output_boxes_per_class and iou_threshold only in "
        "their descriptions; they are recorded as defaults.",
    ),
    op(
        83,
        "NonZero",
        "Coordinates of the non-zero elements, one row per element ([count, rank], like torch.nonzero).",
        inputs=[one("input")],
        outputs=[one("output", "tensor(int64)")],
        types={"T": ALL},
    ),
    unary(84, "Not", "Element-wise logical NOT.", BOOL),
    logical(85, "Or", "Element-wise logical OR of two boolean tensors."),
    op(
        86,
        "Pad",
        "Pads each dim with low, high and interior amounts (negative edge amounts crop), filling "
        "with a constant, the edge, or mirrored values.",
        attrs=[
            opt(
                "mode",
                "string",
                "PAD_VALUE: padding_value; PAD_EDGE: repeat the edge; PAD_REFLECT: mirror without the "
                "edge; PAD_SYMMETRIC: mirror including the edge.",
                default="PAD_VALUE",
                allowed=PAD_MODES,
            ),
            req("edge_padding_low", "ints", "Padding before index 0, per dim; negative crops."),
            req("edge_padding_high", "ints", "Padding after the last element, per dim; negative crops."),
            req(
                "interior_padding",
                "ints",
                "Padding between adjacent elements, per dim (>= 0); applied before edge padding.",
            ),
        ],
        inputs=[one("input"), one("padding_value", doc="Scalar used by PAD_VALUE.")],
        outputs=[one("output")],
        types={"T": NUMERIC},
        notes="The document types the three padding attributes as int, but describes one value per "
        "dim; they are lists. mode has no default in the document; PAD_VALUE, XLA's constant "
        "padding, is recorded.",
    ),
    op(
        87,
        "PartialReduce",
        "Approximate top-k: reduces `inputs` along reduction_dim keeping about `size` extreme "
        "elements as ordered by `comparator`, trading exactness for speed on large inputs.",
        attrs=[
            req("size", "int", "Number of elements kept (k)."),
            req("comparator", "region", "Strict order on element tuples; the largest are kept."),
            opt("reduction_dim", "int", "Dim reduced; negative counts from the back.", default=-1),
            opt("recall_target", "float", "Expected recall of the approximation.", default=0.95),
            opt(
                "aggregate_to_topk",
                "bool",
                "Reduce the approximate candidates exactly to k (true) or return them all.",
                default=True,
            ),
            opt("op_name", "string", "Name of the reduction, passed through by the vendor builder."),
        ],
        inputs=[many("inputs", min_arity=2, homogeneous=False, doc="N operands, then N scalar init values.")],
        outputs=[many("outputs", homogeneous=False)],
        types={"T": NUMERIC},
        completed_from="XLA operation semantics (ApproxTopK)",
        notes="Title-only section whose semantics the document does not give. In XLA, PartialReduce "
        "is the backend custom call behind ApproxTopK (jax.lax.approx_max_k), so the op is "
        "completed as ApproxTopK. The vendor builder signature PartialReduce(lhs, rhs, size, "
        "region_list, op_name) is read as operands, init values, k, comparator and a name; "
        "operands and init values share one variadic input (operands first).",
    ),
    op(
        88,
        "PopulationCount",
        "Number of set bits in each element.",
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": UINT},
        notes="The document types the output as plain int; as in XLA the result keeps the input's "
        "unsigned integer type.",
    ),
    binary(
        89,
        "Pow",
        "lhs raised to the power rhs, element-wise; the exponent's type may differ.",
        ("int32", "int64") + FLOAT,
        rhs_type="T1",
        extra_types={"T1": NUMERIC},
    ),
    op(
        90,
        "PRelu",
        "x for x >= 0, slope * x below, with a tensor of slopes broadcast to x.",
        inputs=[one("input"), one("slope")],
        outputs=[one("output")],
        types={"T": FLOAT + ("uint32", "uint64", "int32", "int64")},
    ),
    op(
        91,
        "Real",
        "Real part of each element; real inputs are returned as they are.",
        inputs=[one("input")],
        outputs=[one("output", "T1")],
        types={"T": COMPLEX + FLOAT, "T1": FLOAT},
    ),
    op(
        92,
        "RealDynamicSlice",
        "Strided slice [start, limit) with start, limit and stride given at run time, on the dims "
        "in `axes` or on all dims.",
        inputs=[
            one("input"),
            one("start_indices", "Tind"),
            one("limit_indices", "Tind"),
            one("strides", "Tind", doc="Positive."),
            maybe("axes", "Tind", doc="Dims sliced, in [-rank, rank-1]. Absent: all dims."),
        ],
        outputs=[one("output")],
        types={"T": ALL, "Tind": INDEX},
        notes="axes is optional: the document says all dims are sliced when it is empty.",
    ),
    op(
        93,
        "Reduce",
        "Reduces `dimensions` of the inputs with the named computation, starting from the init "
        "values. With several inputs only MIN/MAX apply: the first input is reduced and the others "
        "are taken at the position of its extreme.",
        attrs=[
            req("dimensions", "ints", "Dims reduced away."),
            opt("type", "string", "Computation type string; the document does not define its values."),
            computation_enum("Combiner applied to the elements of each reduced group."),
        ],
        inputs=[many("inputs", min_arity=2, homogeneous=False, doc="N inputs, then N scalar init values.")],
        outputs=[many("outputs", homogeneous=False)],
        types={"T": NUMERIC},
        notes=ENUM_NOT_REGION + " The document's two lists (inputs, init_values) share one variadic "
        "input, inputs first, because a schema has one variadic parameter.",
    ),
    op(
        94,
        "ReduceWindow",
        "Applies the named reduction to every window of the inputs, one result element per window "
        "position (pooling is a special case); several inputs only for ARGMIN/ARGMAX.",
        attrs=[
            computation_enum("Combiner applied to the elements of each window."),
            req("window_dimensions", "ints", "Window size per input dim."),
            opt("window_strides", "ints", "Window stride per dim. Absent: 1."),
            opt("base_dilations", "ints", "Input dilation per dim. Absent: 1."),
            opt("window_dilations", "ints", "Window dilation per dim. Absent: 1."),
            opt(
                "auto_pad",
                "string",
                "NOTSET: no padding; SAME_UPPER/SAME_LOWER pad so that out = ceil(in / stride), the "
                "odd cell at the end (UPPER) or start (LOWER); VALID: no padding.",
                default="NOTSET",
                allowed=AUTO_PAD,
            ),
            opt("ceil_mode", "bool", "Round the output size up when the last window does not fit.", default=False),
        ],
        inputs=[many("inputs", min_arity=2, homogeneous=False, doc="N inputs, then N scalar init values.")],
        outputs=[many("outputs", homogeneous=False)],
        types={"T": NUMERIC},
        notes=ENUM_NOT_REGION + " XLA's explicit padding is replaced by auto_pad and ceil_mode, as "
        "the document says; it defines no padding attribute, so NOTSET means no padding. The "
        "document's two lists (inputs, init_values) share one variadic input, inputs first.",
    ),
    unary(95, "Relu", "max(0, x) of each element.", SIGNED),
    unary(96, "Relu6", "min(max(0, x), 6) of each element.", SIGNED),
    binary(
        97,
        "Rem",
        "Element-wise remainder of lhs / rhs with the sign of lhs (C fmod).",
        notes="The document lists a single input, a copy-paste slip: the remainder needs a "
        "dividend lhs and a divisor rhs, as the vendor builder has.",
    ),
    op(
        98,
        "Reshape",
        "Reinterprets the input with the result type's shape; the element count is unchanged.",
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        99,
        "Resize",
        "Resizes the input with ONNX Resize semantics: each output coordinate is mapped back to the "
        "input and interpolated (nearest, n-linear or n-cubic).",
        attrs=[
            opt("mode", "string", "Interpolation.", default="NEAREST", allowed=("NEAREST", "LINEAR", "CUBIC")),
            opt(
                "coordinate_transformation_mode",
                "string",
                "How an output coordinate maps to an input coordinate.",
                default="HALF_PIXEL",
                allowed=(
                    "HALF_PIXEL",
                    "ASYMMETRIC",
                    "PYTORCH_HALF_PIXEL",
                    "TF_HALF_PIXEL_FOR_NN",
                    "ALIGN_CORNERS",
                    "TF_CROP_AND_RESIZE",
                ),
            ),
            opt(
                "exclude_outside",
                "bool",
                "Give samples outside the input zero weight and renormalise the rest.",
                default=False,
            ),
            opt(
                "nearest_mode",
                "string",
                "Rounding of NEAREST mode.",
                default="ROUND_PREFER_FLOOR",
                allowed=("ROUND_PREFER_FLOOR", "ROUND_PREFER_CEIL", "FLOOR", "CEIL"),
            ),
            opt(
                "extrapolation_value",
                "float",
                "Output value for coordinates outside the input in TF_CROP_AND_RESIZE mode.",
                default=0.0,
            ),
            opt("cubic_coeff_a", "float", "Coefficient a of CUBIC mode.", default=-0.75),
        ],
        inputs=[
            one("input", "T1"),
            maybe("roi", "T2", doc="[start1, ..., startN, end1, ..., endN]; TF_CROP_AND_RESIZE only."),
            maybe("scales", "tensor(float32)", doc="Scale per dim; exclusive with sizes."),
            maybe("sizes", "Tint", doc="Output size per dim; exclusive with scales."),
        ],
        outputs=[one("output", "T1")],
        types={"T1": ALL, "T2": FLOAT, "Tint": INDEX},
        notes="The document gives exclude_outside no type; it is a bool (default false) because it "
        "is described as true or false. roi, scales and sizes are optional: exactly one of "
        "scales and sizes is given, and roi matters only for TF_CROP_AND_RESIZE.",
    ),
    op(
        100,
        "Reverse",
        "Reverses the order of elements along each dim in `dimensions`.",
        attrs=[req("dimensions", "ints", "Dims reversed.")],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        101,
        "ReverseSequence",
        "For each batch entry i, reverses the first sequence_lens[i] elements along time_axis and "
        "leaves the rest in place.",
        attrs=[
            opt("batch_axis", "int", "Batch axis.", default=1, allowed=(0, 1)),
            opt("time_axis", "int", "Time axis.", default=0, allowed=(0, 1)),
        ],
        inputs=[one("input", doc="Rank >= 2."), one("sequence_lens", "Tint", doc="[batch_size].")],
        outputs=[one("output")],
        types={"T": ALL, "Tint": INDEX},
    ),
    op(
        102,
        "RngNormal",
        "Tensor of the given shape filled with normally distributed random numbers of mean mu and "
        "standard deviation sigma.",
        attrs=[opt("seed", "int", "Random seed; if unset the runtime seeds from the clock.", default=1)],
        inputs=[
            one("mu", doc="Scalar mean."),
            one("sigma", doc="Scalar standard deviation."),
            one("shape", "T1", doc="1-d output shape."),
        ],
        outputs=[one("output")],
        types={"T": FLOAT, "T1": INDEX},
    ),
    op(
        103,
        "RngUniform",
        "Tensor of the given shape filled with random numbers uniformly distributed in [a, b).",
        attrs=[opt("seed", "int", "Random seed; if unset the runtime seeds from the clock.", default=1)],
        inputs=[
            one("a", doc="Scalar lower bound."),
            one("b", doc="Scalar upper bound (excluded)."),
            one("shape", "T1", doc="1-d output shape."),
        ],
        outputs=[one("output")],
        types={"T": NUMERIC, "T1": INDEX},
    ),
    op(
        104,
        "RoiAlign",
        "Region-of-interest align (Mask R-CNN): pools each ROI to output_height x output_width by "
        "averaging or taking the maximum of bilinearly interpolated samples.",
        attrs=[
            opt(
                "mode",
                "string",
                "Pooling of the samples in a bin.",
                default="ROIALIGN_AVG",
                allowed=("ROIALIGN_AVG", "ROIALIGN_MAX"),
            ),
            opt(
                "coordinate_transformation_mode",
                "string",
                "ROIALIGN_HALF_PIXEL shifts coordinates by -0.5 (recommended); "
                "ROIALIGN_OUTPUT_HALF_PIXEL does not (legacy). Default from ONNX.",
                default="ROIALIGN_HALF_PIXEL",
                allowed=("ROIALIGN_HALF_PIXEL", "ROIALIGN_OUTPUT_HALF_PIXEL"),
            ),
            opt("output_height", "int", "Pooled height.", default=1),
            opt("output_width", "int", "Pooled width.", default=1),
            opt(
                "sampling_ratio",
                "int",
                "Samples per bin edge; 0 chooses ceil(roi_size / output_size) adaptively.",
                default=0,
            ),
            opt("spatial_scale", "float", "Maps ROI coordinates to the feature map's scale.", default=1.0),
        ],
        inputs=[
            one("input", "T1"),
            one("rois", "T1", doc="(num_rois, 4)."),
            one("batch_indices", "T2", doc="(num_rois,): batch entry of each ROI."),
        ],
        outputs=[one("output", "T1", doc="[num_rois, C, output_height, output_width].")],
        types={"T1": FLOAT, "T2": ("int64",)},
        notes="The document declares the constraint T1 twice, the second time for batch_indices "
        "(int64); that one is T2 here. coordinate_transformation_mode is typed int but named "
        "by its enum values; it is a string enum.",
    ),
    unary(
        105,
        "Round",
        "Rounds each element to the nearest integer, halves away from zero (0.5 -> 1, 2.5 -> 3, -0.5 -> -1).",
        notes="Half away from zero is this dialect's rounding (XLA round_nearest_afz); it differs "
        "from ONNX Round, which rounds halves to even (see RoundNearestEven).",
    ),
    unary(
        106,
        "RoundNearestEven",
        "Rounds each element to the nearest integer, halves to the even neighbour (0.5 -> 0, 2.5 -> 2).",
    ),
    unary(
        107,
        "Rsqrt",
        "1 / sqrt(x) of each element.",
        NUMERIC,
        notes="The document says the result is NaN for inputs <= 0. For 0 it is +inf, as IEEE "
        "division and XLA give; negative inputs give NaN.",
    ),
    op(
        108,
        "ScatterND",
        "XLA general scatter: windows of `updates` are combined into the input at start positions "
        "read from scatter_indices, element by element with the named computation.",
        attrs=[
            computation_enum("Combiner of an existing element and its update (UPDATE replaces)."),
            req(
                "index_vector_dim",
                "int",
                "Dim of scatter_indices holding the index vectors, in [0, rank]; equal to rank means "
                "index vectors of size 1.",
            ),
            req("update_window_dims", "ints", "Dims of updates that are window dims."),
            req("inserted_window_dims", "ints", "Input dims of size 1 absent from the update window."),
            req(
                "scatter_dims_to_operand_dims",
                "ints",
                "For each index-vector component, the input dim it indexes; unmapped dims start at 0.",
            ),
            opt("indices_are_sorted", "bool", "Promise that scatter_indices are sorted.", default=False),
            opt("unique_indices", "bool", "Promise that scatter_indices do not repeat.", default=False),
        ],
        inputs=[one("input"), one("scatter_indices", "Tind"), one("updates")],
        outputs=[one("output", doc="Shape of the input.")],
        types={"T": NUMERIC_BF16, "Tind": INDEX},
        notes=ENUM_NOT_REGION + " Despite its name the op is XLA's Scatter, not ONNX ScatterND. The "
        "document gives scatter_indices the data type T, which would make indices floating "
        "point; they are integers (int32/int64) as in XLA.",
    ),
    op(
        109,
        "Select",
        "Element-wise choice: on_true where pred is true, on_false elsewhere; pred may be a scalar.",
        inputs=[one("pred", "tensor(bool)"), one("on_true"), one("on_false")],
        outputs=[one("output")],
        types={"T": NUMERIC + ("bfloat16",)},
    ),
    op(
        110,
        "SelectAndScatter",
        "For each window of the input, selects one element with select_type and combines the "
        "matching source value into it with the named computation; other elements get init_value.",
        attrs=[
            req(
                "select_type",
                "string",
                "Comparison picking the window's element: GE, GT, LE or LT.",
                allowed=("GE", "GT", "LE", "LT"),
            ),
            computation_enum("Combiner of the values scattered to one element."),
            req("window_dimensions", "ints", "Window size per input dim."),
            req("window_strides", "ints", "Window stride per input dim."),
            req("padding", "ints", "Padding [x1_begin, x2_begin, ..., x1_end, x2_end, ...] of the input."),
        ],
        inputs=[
            one("input"),
            one("source", doc="One value per window position."),
            one("init_value", doc="Scalar initial value of the output."),
        ],
        outputs=[one("output", doc="Shape of the input.")],
        types={"T": NUMERIC_BF16},
        notes=ENUM_NOT_REGION + " The selection is likewise named by select_type instead of a select region.",
    ),
    op(
        111,
        "SetDimensionSize",
        "Sets the run-time size of one dim of a dynamically shaped (bounded) tensor.",
        attrs=[req("dimension", "int", "Dim whose size is set, in [0, rank).")],
        inputs=[one("input"), one("size", "Tint", doc="Scalar size.")],
        outputs=[one("output")],
        types={"T": ALL, "Tint": INDEX},
    ),
    op(
        112,
        "Shape",
        "The input's shape as a 1-d int64 tensor, optionally only the axes [start, end).",
        attrs=[
            opt("start", "int", "First axis returned; negative counts from the back.", default=0),
            opt(
                "end",
                "int",
                "Axis after the last returned; negative counts from the back; values past the rank are clamped.",
                default=1024,
            ),
        ],
        inputs=[one("input")],
        outputs=[one("output", "To")],
        types={"T": ALL, "To": ("int64",)},
    ),
    binary(
        113,
        "ShiftLeft",
        "Shifts the bits of each lhs element left by rhs.",
        UINT,
        rhs_type="Ts",
        extra_types={"Ts": INT},
        notes="The document types the shift amount as plain int; any integer tensor is accepted. "
        "XLA itself requires rhs to have lhs's type.",
    ),
    binary(
        114,
        "ShiftRightArithmetic",
        "Shifts the bits of each lhs element right by rhs, copying the sign bit into the vacated bits.",
        INT,
        broadcast=True,
        completed_from="XLA operation semantics",
        notes="Title-only section. Completed from XLA's ShiftRightArithmetic (vendor builder: "
        "ShiftRightArithmetic(lhs, rhs, broadcast_dimensions={})); the element types are "
        "XLA's integer types.",
    ),
    binary(
        115,
        "ShiftRightLogical",
        "Shifts the bits of each lhs element right by rhs, filling the vacated bits with zeros.",
        INT,
        broadcast=True,
        completed_from="XLA operation semantics",
        notes="Title-only section. Completed from XLA's ShiftRightLogical (vendor builder: "
        "ShiftRightLogical(lhs, rhs, broadcast_dimensions={})); the element types are "
        "XLA's integer types.",
    ),
    unary(116, "Sigmoid", "Logistic function 1 / (1 + exp(-x)) of each element."),
    unary(117, "Sign", "-1, 0 or 1 according to the sign of each element.", NUMERIC),
    unary(118, "Sin", "Sine of each element."),
    unary(119, "Sinh", "Hyperbolic sine of each element."),
    unary(120, "Silu", "x * sigmoid(x) of each element."),
    op(
        121,
        "Size",
        "Number of elements of the input, as an int64 scalar.",
        inputs=[one("input")],
        outputs=[one("output", "To")],
        types={"T": ALL, "To": ("int64",)},
        notes="The document restricts the input to integer types; an element count does not depend "
        "on the element type (Shape accepts every type), so every type is accepted.",
    ),
    op(
        122,
        "Slice",
        "Strided slice [start, limit) of every dim, with static bounds.",
        attrs=[
            req("start_indices", "ints", "Start per dim."),
            req("limit_indices", "ints", "Exclusive end per dim."),
            req("strides", "ints", "Step per dim (> 0)."),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        123,
        "SliceInDim",
        "Strided slice [start_index, limit_index) of one dim; the others are kept whole.",
        attrs=[
            req("start_index", "int", "First index taken."),
            req("limit_index", "int", "Exclusive end."),
            opt("stride", "int", "Step (> 0).", default=1),
            req("dim", "int", "The dim sliced."),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
        completed_from="XLA operation semantics",
        notes="Title-only section. Completed from XLA's SliceInDim; the vendor builder signature "
        "SliceInDim(operand, start_index, limit_index, stride, dim) fixed the names.",
    ),
    op(
        124,
        "Softmax",
        "Softmax along `axis`, optionally subtracting the maximum first for stability, returning its "
        "logarithm, or bounding the denominator below by epsilon.",
        attrs=[
            opt("axis", "int", "Axis normalised, in [-rank, rank-1].", default=-1),
            opt("accurate", "bool", "Subtract each vector's maximum before exponentiating.", default=False),
            opt("logarithmic", "bool", "Return log(softmax).", default=False),
            opt("epsilon", "float", "The denominator is max(sum, epsilon).", default=0.0),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
    ),
    op(
        125,
        "Softplus",
        "(1 / beta) * log(1 + exp(beta * x)), reverting to x where beta * x exceeds threshold.",
        attrs=[
            opt("beta", "float", "The beta of the formula; default from PyTorch.", default=1.0),
            opt("threshold", "float", "Above it the op is linear.", default=20.0),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": FLOAT},
        notes="The document types beta and threshold as T (the tensor element type); they are float "
        "attributes. Its beta default is blank; PyTorch's 1 is recorded.",
    ),
    op(
        126,
        "Sort",
        "Sorts the inputs along `dimension`, ordering by the first input's values and permuting the "
        "other inputs the same way.",
        attrs=[
            opt("dimension", "int", "Dim sorted; default from XLA.", default=-1),
            req("descending", "bool", "Sort largest first."),
            opt("is_stable", "bool", "Keep equal elements in their input order; default from XLA.", default=False),
        ],
        inputs=[many("inputs", homogeneous=False)],
        outputs=[many("output", homogeneous=False)],
        types={"T": NUMERIC},
        notes="The order is named by `descending`, as the document specifies, rather than by XLA's comparator region.",
    ),
    op(
        127,
        "SpaceToDepth",
        "Moves blocks of the spatial dims into the depth dim.",
        attrs=[
            req("space_dims", "ints", "Dims of height and width."),
            req("blocksize", "int", "Edge of the square block moved into depth."),
            req("depth_dim", "int", "Dim of depth (channels)."),
        ],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    unary(128, "Sqrt", "Square root of each element."),
    op(
        129,
        "Squeeze",
        "Removes the size-1 dims listed in axes, or every size-1 dim when axes is absent.",
        inputs=[one("input"), maybe("axes", "Ta", doc="Dims removed, in [-rank, rank-1].")],
        outputs=[one("output")],
        types={"T": ALL, "Ta": INDEX},
        notes="axes is optional: the document removes every size-1 dim when none are given.",
    ),
    binary(130, "Sub", "Element-wise difference lhs - rhs."),
    unary(131, "Swish", "x / (1 + exp(-x)) of each element."),
    unary(132, "Tan", "Tangent of each element."),
    unary(133, "Tanh", "Hyperbolic tangent of each element."),
    op(
        134,
        "Tile",
        "Repeats the input repeats[i] times along each dim i.",
        inputs=[one("input"), one("repeats", "Tint", doc="1-d, one count per input dim.")],
        outputs=[one("output")],
        types={"T": ALL, "Tint": INDEX},
        completed_from="ONNX operators (Tile)",
        notes="Title-only section. Completed as ONNX Tile, after the vendor builder signature Tile(input, repeats).",
    ),
    op(
        135,
        "Topk",
        "The k largest (or smallest) elements along `axis` and their indices.",
        attrs=[
            opt("axis", "int", "Axis searched; default from ONNX.", default=-1),
            opt("sorted", "bool", "Return the k elements in order.", default=True),
            opt("largest", "bool", "Take the largest (true) or smallest (false) elements.", default=True),
        ],
        inputs=[one("input"), one("k", "Tk", doc="1-d, holding one positive count.")],
        outputs=[one("output"), one("indices", "Ti", doc="Positions of the values along axis.")],
        types={"T": NUMERIC, "Tk": INDEX, "Ti": INDEX},
    ),
    op(
        136,
        "Transpose",
        "Permutes the dims: output dim i is input dim permutation[i].",
        attrs=[req("permutation", "ints", "A permutation of 0..rank-1.")],
        inputs=[one("input")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        137,
        "Trilu",
        "Keeps the upper or lower triangle of each matrix in the last two dims, relative to "
        "diagonal k, and zeroes the rest.",
        attrs=[
            opt("upper", "bool", "Keep the upper (true) or lower (false) triangle; default from ONNX.", default=True),
            opt(
                "k",
                "int",
                "Diagonal offset: positive above, negative below the main diagonal; default from ONNX.",
                default=0,
            ),
        ],
        inputs=[one("input", doc="Rank >= 2.")],
        outputs=[one("output")],
        types={"T": ALL},
    ),
    op(
        138,
        "Tuple",
        "Bundles its operands into one tuple value.",
        inputs=[many("inputs", "V", min_arity=0, homogeneous=False)],
        outputs=[one("output", TUPLE)],
        types={"V": ALL},
        completed_from="XLA operation semantics",
        notes="Title-only section. Completed from XLA's Tuple (vendor builder: Tuple(val)). A tuple "
        "has no schema type: the output's constraint `Tuple` is left undeclared (any type).",
    ),
    op(
        139,
        "Unsqueeze",
        "Inserts size-1 dims at the positions listed in axes.",
        inputs=[one("input"), one("axes", "Ta", doc="Positions in the output.")],
        outputs=[one("output")],
        types={"T": ALL, "Ta": INDEX},
    ),
    op(
        140,
        "While",
        "Runs `body` on the loop-carried values while `cond` holds for them; returns the final values.",
        attrs=[
            req("cond", "region", "Computation from the carried values to a scalar bool."),
            req("body", "region", "Computation from the carried values to their next values."),
        ],
        inputs=[many("inputs", "V", min_arity=0, homogeneous=False)],
        outputs=[many("outputs", "V", min_arity=0, homogeneous=False)],
        types={"V": ALL},
        completed_from="StableHLO specification",
        notes="Title-only section. Completed from StableHLO's `while`, whose loop-carried values are "
        "separate operands; XLA and the vendor builder (While(arg, region_list)) pass them as "
        "one tuple.",
    ),
    logical(141, "Xor", "Element-wise logical XOR of two boolean tensors."),
]

#: sections of the document that are only a title (completed from the reference in ``completed_from``)
TITLE_ONLY = (
    "BCELoss",
    "CustomCall",
    "DepthToSpace",
    "Dropout",
    "Erf",
    "Gemm",
    "GeneralSplit",
    "GetTupleElement",
    "GlobalMaxPool",
    "GroupNorm",
    "If",
    "PartialReduce",
    "ShiftRightArithmetic",
    "ShiftRightLogical",
    "SliceInDim",
    "Tile",
    "Tuple",
    "While",
)


def build_ops() -> list[OpSchema]:
    """Check the table above and turn it into schemas (in section order)."""
    sections = [s for s, _ in OPS]
    if sections != list(range(1, len(OPS) + 1)):
        raise AssertionError(f"section numbers are not 1..{len(OPS)} in order: {sections}")
    names = [raw["name"] for _, raw in OPS]
    if len(set(names)) != len(names):
        raise AssertionError("duplicate op names")
    completed = {raw["name"] for _, raw in OPS if raw.get("completed_from")}
    if completed != set(TITLE_ONLY):
        raise AssertionError(f"completed_from set on {sorted(completed ^ set(TITLE_ONLY))} by mistake")
    schemas = []
    for section, raw in OPS:
        where = f"{GENERATED_BY} §3.{section} {raw['name']}"
        _check_entry(raw, where)
        schemas.append(parse_op(DIALECT, raw, where))
    return schemas


def _check_entry(raw: dict, where: str) -> None:
    """Catch slips the loader would accept: unknown element types, undeclared constraints."""
    for name, types in raw["type_constraints"].items():
        for t in types:
            element = t[len("tensor(") : -1]
            if not t.startswith("tensor(") or element not in ELEMENT_TYPES:
                raise AssertionError(f"{where}: constraint {name} has unknown type {t}")
    for p in raw["inputs"] + raw["outputs"]:
        t = p["type"]
        if "(" in t:
            if t[len("tensor(") : -1] not in ELEMENT_TYPES:
                raise AssertionError(f"{where}: parameter {p['name']} has unknown type {t}")
        elif t not in raw["type_constraints"] and t != TUPLE:
            raise AssertionError(f"{where}: parameter {p['name']} uses undeclared constraint {t}")
    for a in raw["attributes"]:
        if a.get("allowed") is not None and "default" in a and a["default"] not in a["allowed"]:
            raise AssertionError(f"{where}: default of {a['name']} is not among its allowed values")


def render() -> str:
    """The text of ``hlo.json`` as this script produces it."""
    return dump(DIALECT, build_ops(), source=SOURCE, generated_by=GENERATED_BY)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if the committed file differs from a regeneration"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else None
        if current != text:
            print(f"{OUTPUT.relative_to(REPO)} is stale; run {GENERATED_BY}", file=sys.stderr)
            return 1
        print(f"{OUTPUT.relative_to(REPO)} is up to date ({len(OPS)} ops)")
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)} ({len(OPS)} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
