"""Generate ``opconv/schemas/openvino.json``: every operation of OpenVINO's ``opset1``.

Usage::

    python scripts/gen_openvino_schemas.py            # (re)write opconv/schemas/openvino.json
    python scripts/gen_openvino_schemas.py --check    # exit 1 if the committed file is stale

Unlike the ONNX generator there is no machine-readable source to convert: the
project's copy of the opset1 specification (``shared/specs/openvino-opset1.txt``)
lost nearly every attribute, input, output and type table in extraction.  The
operations are therefore written out here by hand, one entry per op in
alphabetical order, from three sources:

* the text spec (which ops exist, what they compute, the IR examples' attributes);
* OpenVINO's published opset1 operation specifications (attribute types, defaults
  and whether they are required; inputs in port order and which are optional;
  type constraints);
* the installed OpenVINO runtime, which is authoritative for the attribute names
  an IR file carries (``node.get_attributes()`` is what the IR serializer writes).
  ``tests/test_schemas_openvino.py`` builds every op that ``openvino.opset1`` can
  create and fails if the runtime reports an attribute this file lacks.

Which ops are opset1
--------------------
The 113 entries are the union of

* the published opset1 list (106 ops);
* the runtime's opset1 registry (``openvino/opsets/opset1_tbl.hpp``), which adds
  RNNCell, Reverse, ShuffleChannels and Xor (the v0 spelling of LogicalXor);
* MVN, ROIPooling and ReorgYolo: sections of the text spec whose runtime classes
  moved to opset2, but which OpenVINO's IR reader still accepts with
  ``version="opset1"`` because older IR files were written that way.

LSTMSequence is in the published list and the text spec although OpenVINO 2026
no longer registers it in opset1.  Acosh, Asinh and Atanh have sections in the
text spec but are opset4 operations (the IR reader rejects them as opset1), so
they are left out.

Op names are the spec's (``ReLU``, ``PReLU``, ``SoftMax``, ``Constant``), which are
also what IR XML carries, except that IR writes ``Const`` for Constant.  The runtime
spells three of them differently (``Relu``, ``PRelu``, ``Softmax``); each such op
says so in its ``notes``.

The output depends only on this file, so it is byte-for-byte reproducible.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

# Scripts run from a checkout where opconv is usually not installed.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from opconv.schemas import dump, parse_op  # noqa: E402

DIALECT = "openvino"
DOMAIN = "opset1"
VERSION = 1
OUTPUT = ROOT / "opconv" / "schemas" / "openvino.json"
GENERATED_BY = "scripts/gen_openvino_schemas.py"
SOURCE = (
    "OpenVINO opset1 specification (shared/specs/openvino-opset1.txt), whose attribute, input, "
    "output and type tables were completed from OpenVINO's published opset1 operation "
    "specifications and checked against the openvino runtime (2026.4): openvino.opset1 and "
    "the opset1 operation registry"
)

# --------------------------------------------------------------------------- element types

FLOAT = ("float16", "bfloat16", "float32", "float64")
INTEGER = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
NUMERIC = FLOAT + INTEGER
ANY = NUMERIC + ("bool",)  # "any supported type" of the spec
INDEX = ("int32", "int64")  # index, axis and shape inputs
BOOL = ("bool",)


def tensors(element_types) -> list[str]:
    return [f"tensor({e})" for e in element_types]


# --------------------------------------------------------------------------- building blocks

REQUIRED = object()  # marks an attribute without a default that a node must carry
AUTO_PAD = ["explicit", "same_upper", "same_lower", "valid"]
AUTO_BROADCAST = ["none", "numpy", "pdpd"]
LSTM_ACTIVATIONS = ["sigmoid", "tanh", "tanh"]


def attr(name, type_, default=None, allowed=None, doc=""):
    """One attribute; ``default=REQUIRED`` makes it required, ``None`` optional without default."""
    entry = {"name": name, "type": type_, "required": default is REQUIRED}
    if default is not None and default is not REQUIRED:
        entry["default"] = default
    if allowed is not None:
        entry["allowed"] = list(allowed)
    if doc:
        entry["doc"] = doc
    return entry


def inp(name, type_="T", option="single", doc="", homogeneous=True):
    """One input (or, through :func:`out`, output) of type constraint or concrete type ``type_``."""
    entry = {"name": name, "type": type_, "option": option}
    if option == "variadic" and not homogeneous:
        entry["homogeneous"] = False
    if doc:
        entry["doc"] = doc
    return entry


def opt(name, type_="T", doc=""):
    """An optional input."""
    return inp(name, type_, "optional", doc)


def out(name="output", type_="T", option="single", doc="", homogeneous=True):
    return inp(name, type_, option, doc, homogeneous)


AUTO_BROADCAST_ATTR = attr(
    "auto_broadcast", "string", "numpy", AUTO_BROADCAST, doc="how inputs of different shapes are broadcast"
)


#: what the text spec lost for most ops: every table
LOST_ALL = "attribute, input, output and type tables"
#: ... for ops whose text states they have no attributes
LOST_IO = "input, output and type tables"


def op(name, doc, *, attrs=(), inputs=(), outputs=None, types=None, lost=LOST_ALL, note="", completed_from=None):
    """One opset1 operation as a raw JSON entry.

    ``outputs`` defaults to one output ``output`` of type ``T``; ``types`` maps
    constraint names to element-type tuples (default: ``T`` = any numeric type).
    ``lost`` names what the text spec's section was missing and becomes the start
    of ``notes``; ``note`` adds op-specific remarks.
    """
    if outputs is None:
        outputs = [out()]
    if types is None:
        types = {"T": NUMERIC}
    notes = []
    if lost:
        notes.append(
            f"The text spec's {lost} are empty; completed from OpenVINO's published "
            "opset1 specification and the openvino runtime."
        )
    if note:
        notes.append(note)
    raw = {
        "name": name,
        "domain": DOMAIN,
        "version": VERSION,
        "doc": doc,
        "attributes": list(attrs),
        "inputs": list(inputs),
        "outputs": list(outputs),
        "type_constraints": {k: tensors(v) for k, v in types.items()},
        "notes": " ".join(notes),
    }
    if completed_from:
        raw["completed_from"] = completed_from
    # The loader's default minimum counts only single parameters; a variadic one adds its
    # least number of arguments (Concat needs at least one input, Split yields at least one output).
    raw["min_inputs"] = least_arity(raw["inputs"])
    raw["min_outputs"] = least_arity(raw["outputs"])
    return raw


def least_arity(params) -> int:
    """Fewest actual arguments a parameter list accepts."""
    least = 0
    for p in params:
        if p["option"] == "single":
            least += 1
        elif p["option"] == "variadic":
            least += p.get("min_arity", 1)
    return least


def unary(name, doc, types=NUMERIC, note=""):
    """Element-wise op of one tensor, no attributes."""
    return op(name, doc, inputs=[inp("data")], types={"T": types}, lost=LOST_IO, note=note)


def binary(name, doc, types=NUMERIC, extra_attrs=(), note=""):
    """Element-wise op of two tensors with numpy-style broadcasting by default."""
    return op(
        name, doc, attrs=[AUTO_BROADCAST_ATTR, *extra_attrs], inputs=[inp("a"), inp("b")], types={"T": types}, note=note
    )


def comparison(name, doc, types=NUMERIC):
    """Element-wise comparison: two tensors of one type in, a boolean tensor out."""
    return op(
        name,
        doc,
        attrs=[AUTO_BROADCAST_ATTR],
        inputs=[inp("a"), inp("b")],
        outputs=[out("output", "T_BOOL")],
        types={"T": types, "T_BOOL": BOOL},
    )


def logical(name, doc, note="", completed_from=None, lost=LOST_ALL):
    """Element-wise logical op of two boolean tensors."""
    return op(
        name,
        doc,
        attrs=[AUTO_BROADCAST_ATTR],
        inputs=[inp("a", "T_BOOL"), inp("b", "T_BOOL")],
        outputs=[out("output", "T_BOOL")],
        types={"T_BOOL": BOOL},
        note=note,
        completed_from=completed_from,
        lost=lost,
    )


def reduction(name, doc, types=NUMERIC):
    """Reduction of ``data`` over the axes given by the second input."""
    return op(
        name,
        doc,
        attrs=[attr("keep_dims", "bool", False, doc="keep reduced axes with size 1")],
        inputs=[inp("data"), inp("axes", "T_IND")],
        types={"T": types, "T_IND": INDEX},
    )


def conv_attrs(*extra):
    """The attributes every convolution of opset1 shares, then ``extra``."""
    return [
        attr("strides", "ints", REQUIRED, doc="step of the window along each spatial axis"),
        attr(
            "pads_begin",
            "ints",
            REQUIRED,
            doc="padding added before each spatial axis; ignored unless auto_pad is explicit",
        ),
        attr(
            "pads_end",
            "ints",
            REQUIRED,
            doc="padding added after each spatial axis; ignored unless auto_pad is explicit",
        ),
        attr("dilations", "ints", REQUIRED, doc="spacing between kernel elements along each spatial axis"),
        *extra,
        attr("auto_pad", "string", "explicit", AUTO_PAD),
    ]


OUTPUT_PADDING = attr(
    "output_padding", "ints", doc="extra size added to each spatial axis of the output; zeros when absent"
)


def pool_attrs(*extra):
    return [
        attr("strides", "ints", REQUIRED),
        attr("pads_begin", "ints", REQUIRED),
        attr("pads_end", "ints", REQUIRED),
        attr("kernel", "ints", REQUIRED, doc="window size along each spatial axis"),
        *extra,
        attr("rounding_type", "string", "floor", ["floor", "ceil"], doc="how the output size is rounded"),
        attr("auto_pad", "string", "explicit", AUTO_PAD),
    ]


def rnn_attrs(activations, *extra):
    """Attributes shared by the recurrent cells and LSTMSequence."""
    return [
        attr("hidden_size", "int", REQUIRED),
        attr("activations", "strings", activations, doc="activation function of each gate"),
        attr("activations_alpha", "floats", doc="alpha parameter of the activations that take one"),
        attr("activations_beta", "floats", doc="beta parameter of the activations that take one"),
        attr("clip", "float", 0.0, doc="clip gate inputs to [-clip, clip]; 0 disables clipping"),
        *extra,
    ]


#: opset1 names whose runtime class is registered only in opset2, read as opset1 for legacy IR
LEGACY_OPSET2 = (
    "OpenVINO's runtime registers this class in opset2, but its IR reader still "
    'accepts it under version="opset1" because older IR files used that version.'
)
CLIP_NOTE = (
    "The published spec describes clip's default as 'no clipping' (infinity); the runtime "
    "writes that as 0, which is the default recorded here."
)
ONLY_REGISTRY = (
    "Not in the published opset1 list, but a section of the text spec and registered in the runtime's opset1 table."
)

# --------------------------------------------------------------------------- the operations

OPS = [
    unary("Abs", "Absolute value of each element."),
    unary("Acos", "Inverse cosine (arccos) of each element."),
    binary("Add", "Element-wise sum of two tensors, broadcasting them as auto_broadcast specifies."),
    unary("Asin", "Inverse sine (arcsin) of each element."),
    unary("Atan", "Inverse tangent (arctan) of each element."),
    op(
        "AvgPool",
        "Average pooling over sliding windows of the spatial axes.",
        attrs=pool_attrs(attr("exclude-pad", "bool", REQUIRED, doc="leave padded positions out of each average")),
        inputs=[inp("data")],
        types={"T": FLOAT},
        note="The text spec's example writes exclude_pad; OpenVINO's IR and runtime spell it exclude-pad.",
    ),
    op(
        "BatchNormInference",
        "Normalizes the input per channel with given mean and variance, then scales by gamma and shifts by beta.",
        attrs=[attr("epsilon", "float", REQUIRED, doc="added to the variance for numerical stability")],
        # opset1 takes the data third (opset5 moved it first); the OpenVINO runtime confirms this order.
        inputs=[inp("gamma"), inp("beta"), inp("data"), inp("mean"), inp("variance")],
        types={"T": FLOAT},
    ),
    op(
        "BinaryConvolution",
        "Convolution of a binarised input with binary weights, computed with XNOR and popcount.",
        attrs=conv_attrs(
            attr("mode", "string", REQUIRED, ["xnor-popcount"]),
            attr("pad_value", "float", REQUIRED, doc="value written into the padded area"),
        ),
        inputs=[inp("data", "T"), inp("filters", "T_BIN")],
        types={"T": NUMERIC, "T_BIN": NUMERIC},
        note="The spec stores the filters as u1 (1-bit), which has no opconv element type; T_BIN is left "
        "as any numeric type, which the runtime also accepts.",
    ),
    op(
        "Broadcast",
        "Replicates the data tensor to the shape given by the second input, using numpy rules or "
        "an explicit axes mapping.",
        attrs=[attr("mode", "string", "numpy", ["numpy", "explicit"])],
        inputs=[inp("data"), inp("target_shape", "T_SHAPE"), opt("axes_mapping", "T_SHAPE")],
        types={"T": ANY, "T_SHAPE": INDEX},
    ),
    op(
        "CTCGreedyDecoder",
        "Greedy (best path) decoding of CTC logits; sequence lengths come from a 0/1 mask.",
        attrs=[attr("ctc_merge_repeated", "bool", True, doc="merge repeated labels")],
        inputs=[inp("data"), inp("sequence_mask")],
        types={"T": FLOAT},
    ),
    unary("Ceiling", "Rounds each element up to the nearest integer."),
    op(
        "Clamp",
        "Limits every element to the range [min, max].",
        attrs=[attr("min", "float", REQUIRED), attr("max", "float", REQUIRED)],
        inputs=[inp("data")],
    ),
    op(
        "Concat",
        "Joins any number of tensors along one axis.",
        attrs=[attr("axis", "int", REQUIRED)],
        inputs=[inp("inputs", option="variadic")],
        types={"T": ANY},
    ),
    op(
        "Constant",
        "A tensor whose value is stored in the model (in IR, in the weights file).",
        attrs=[
            attr("element_type", "element_type", REQUIRED),
            attr("shape", "shape", REQUIRED),
            attr("offset", "int", doc="byte offset of the value in the IR weights file"),
            attr("size", "int", doc="byte size of the value in the IR weights file"),
        ],
        inputs=[],
        types={"T": ANY},
        note="IR XML names this op Const. offset and size locate the value in the IR weights file; the "
        "spec requires them there, but a constant built in memory has none, so they are optional here.",
    ),
    op(
        "Convert",
        "Converts every element to the element type given by destination_type.",
        attrs=[attr("destination_type", "element_type", REQUIRED)],
        inputs=[inp("data", "T")],
        outputs=[out("output", "T_OUT")],
        types={"T": ANY, "T_OUT": ANY},
    ),
    op(
        "ConvertLike",
        "Converts every element of the first input to the element type of the second input.",
        inputs=[inp("data", "T"), inp("like", "T_LIKE")],
        outputs=[out("output", "T_LIKE")],
        types={"T": ANY, "T_LIKE": ANY},
        lost=LOST_IO,
    ),
    op(
        "Convolution",
        "1D, 2D or 3D convolution (cross-correlation) of an NC... input with an OI... kernel.",
        attrs=conv_attrs(),
        inputs=[inp("data"), inp("filters")],
    ),
    op(
        "ConvolutionBackpropData",
        "Transposed convolution: the gradient of Convolution with respect to its "
        "input; the output spatial shape may be given explicitly.",
        attrs=conv_attrs(OUTPUT_PADDING),
        inputs=[inp("data"), inp("filters"), opt("output_shape", "T_SHAPE")],
        types={"T": NUMERIC, "T_SHAPE": INDEX},
    ),
    unary("Cos", "Cosine of each element."),
    unary("Cosh", "Hyperbolic cosine of each element."),
    op(
        "DeformableConvolution",
        "2D convolution whose sampling positions are shifted by learned offsets given as the second input.",
        attrs=conv_attrs(
            attr("group", "int", 1, doc="number of groups input and output channels are split into"),
            attr("deformable_group", "int", 1, doc="number of groups the offsets are split into"),
        ),
        inputs=[inp("data"), inp("offsets"), inp("filters")],
    ),
    op(
        "DeformablePSROIPooling",
        "Position-sensitive ROI pooling whose bins may be shifted by optional learned offsets.",
        attrs=[
            attr("output_dim", "int", REQUIRED),
            attr("spatial_scale", "float", REQUIRED),
            attr("group_size", "int", 1),
            attr("mode", "string", "bilinear_deformable"),
            attr("spatial_bins_x", "int", 1),
            attr("spatial_bins_y", "int", 1),
            attr("trans_std", "float", 1.0, doc="multiplier applied to the offsets"),
            attr("part_size", "int", 1, doc="size of the offsets grid"),
        ],
        inputs=[inp("data"), inp("rois"), opt("offsets")],
        types={"T": FLOAT},
        note="The text spec's example also carries no_trans, pooled_height and pooled_width, which are not "
        "attributes of the opset1 operation.",
    ),
    op(
        "DepthToSpace",
        "Moves blocks of channels into the spatial axes, multiplying each spatial size by block_size.",
        attrs=[attr("block_size", "int", 1), attr("mode", "string", REQUIRED, ["blocks_first", "depth_first"])],
        inputs=[inp("data")],
        types={"T": ANY},
    ),
    op(
        "DetectionOutput",
        "SSD-style post-processing: decodes box predictions against prior boxes and applies "
        "per-class non-maximum suppression.",
        attrs=[
            attr("num_classes", "int", REQUIRED),
            attr("background_label_id", "int", 0),
            attr("top_k", "int", -1),
            attr("variance_encoded_in_target", "bool", False),
            attr("keep_top_k", "ints", REQUIRED),
            attr(
                "code_type",
                "string",
                "caffe.PriorBoxParameter.CORNER",
                ["caffe.PriorBoxParameter.CORNER", "caffe.PriorBoxParameter.CENTER_SIZE"],
            ),
            attr("share_location", "bool", True),
            attr("nms_threshold", "float", REQUIRED),
            attr("confidence_threshold", "float", 0.0),
            attr("clip_after_nms", "bool", False),
            attr("clip_before_nms", "bool", False),
            attr("decrease_label_id", "bool", False),
            attr("normalized", "bool", False),
            attr("input_height", "int", 1),
            attr("input_width", "int", 1),
            attr("objectness_score", "float", 0.0),
        ],
        inputs=[inp("box_logits"), inp("class_preds"), inp("proposals"), opt("aux_class_preds"), opt("aux_box_preds")],
        types={"T": FLOAT},
        note="The published spec types the flags as 0/1 integers; the runtime holds them as booleans.",
    ),
    binary(
        "Divide",
        "Element-wise quotient of two tensors.",
        extra_attrs=[
            attr("m_pythondiv", "bool", True, doc="integer division rounds toward negative infinity, as in Python")
        ],
        note="m_pythondiv is not in the text spec; it comes from the runtime's opset1 class, which writes it to IR.",
    ),
    op(
        "Elu",
        "Exponential linear unit: x for positive x, alpha * (exp(x) - 1) otherwise.",
        attrs=[attr("alpha", "float", REQUIRED)],
        inputs=[inp("data")],
        types={"T": FLOAT},
    ),
    comparison("Equal", "Element-wise test a == b.", ANY),
    unary("Erf", "Gauss error function of each element.", FLOAT),
    unary("Exp", "Natural exponential of each element."),
    op(
        "FakeQuantize",
        "Clamps each element to an input range, quantizes it to a number of levels and maps it "
        "to an output range, staying in floating point.",
        attrs=[attr("levels", "int", REQUIRED, doc="number of quantization levels"), AUTO_BROADCAST_ATTR],
        inputs=[inp("data"), inp("input_low"), inp("input_high"), inp("output_low"), inp("output_high")],
        types={"T": FLOAT},
    ),
    unary("Floor", "Rounds each element down to the nearest integer."),
    binary("FloorMod", "Element-wise remainder of a floored division; the result takes the divisor's sign."),
    op(
        "GRN",
        "Global response normalization: divides each element by the L2 norm across channels.",
        attrs=[attr("bias", "float", REQUIRED, doc="added to the sum of squares before the square root")],
        inputs=[inp("data")],
        types={"T": FLOAT},
    ),
    op(
        "Gather",
        "Takes slices of data along an axis at the given indices.",
        inputs=[inp("data"), inp("indices", "T_IND"), inp("axis", "T_AXIS")],
        types={"T": ANY, "T_IND": INDEX, "T_AXIS": INDEX},
        lost=LOST_IO,
    ),
    op(
        "GatherTree",
        "Rebuilds full beam-search sequences from per-step ids and parent beam indices.",
        inputs=[inp("step_ids"), inp("parent_idx"), inp("max_seq_len"), inp("end_token")],
        types={"T": ("float32", "int32")},
        lost=LOST_IO,
    ),
    comparison("Greater", "Element-wise test a > b."),
    comparison("GreaterEqual", "Element-wise test a >= b."),
    op(
        "GroupConvolution",
        "Convolution whose channels are split into groups, each convolved with its own kernels.",
        attrs=conv_attrs(),
        inputs=[inp("data"), inp("filters")],
    ),
    op(
        "GroupConvolutionBackpropData",
        "Transposed group convolution: the gradient of GroupConvolution with respect to its input.",
        attrs=conv_attrs(OUTPUT_PADDING),
        inputs=[inp("data"), inp("filters"), opt("output_shape", "T_SHAPE")],
        types={"T": NUMERIC, "T_SHAPE": INDEX},
    ),
    op(
        "HardSigmoid",
        "Piecewise-linear sigmoid max(0, min(1, alpha * x + beta)); alpha and beta are scalar inputs.",
        inputs=[inp("data"), inp("alpha"), inp("beta")],
        types={"T": FLOAT},
        lost=LOST_IO,
    ),
    op(
        "Interpolate",
        "Resizes the given spatial axes of a tensor to a target size by nearest, linear, cubic or area interpolation.",
        attrs=[
            attr("axes", "ints", REQUIRED, doc="axes to resize, in the order of the target sizes"),
            attr("mode", "string", REQUIRED, ["nearest", "linear", "cubic", "area"]),
            attr("align_corners", "bool", True),
            attr("antialias", "bool", False),
            attr("pads_begin", "ints", doc="padding before each axis; zeros when absent"),
            attr("pads_end", "ints", doc="padding after each axis; zeros when absent"),
        ],
        inputs=[inp("data"), inp("target_spatial_shape", "T_SHAPE")],
        types={"T": NUMERIC, "T_SHAPE": INDEX},
    ),
    op(
        "LRN",
        "Local response normalization over the axes given by the second input.",
        attrs=[
            attr("alpha", "float", REQUIRED),
            attr("beta", "float", REQUIRED),
            attr("bias", "float", REQUIRED),
            attr("size", "int", REQUIRED, doc="width of the normalization window"),
        ],
        inputs=[inp("data"), inp("axes", "T_IND")],
        types={"T": FLOAT, "T_IND": INDEX},
    ),
    op(
        "LSTMCell",
        "One step of a long short-term memory cell: new hidden and cell states from the input and the previous states.",
        attrs=rnn_attrs(
            LSTM_ACTIVATIONS,
            attr("input_forget", "bool", False, doc="couple the input and forget gates"),
            attr(
                "weights_format",
                "string",
                "fico",
                ["fico", "icof", "ifco", "ifoc", "iofc"],
                doc="order of the gates in W, R and B",
            ),
        ),
        inputs=[
            inp("X"),
            inp("initial_hidden_state"),
            inp("initial_cell_state"),
            inp("W"),
            inp("R"),
            opt("B"),
            opt("P", doc="peephole weights"),
        ],
        outputs=[out("Ho"), out("Co")],
        types={"T": FLOAT},
        note="input_forget, weights_format and the peephole input P are not in the published spec; the runtime's "
        "opset1 class has them and writes them to IR. " + CLIP_NOTE,
    ),
    op(
        "LSTMSequence",
        "A sequence of LSTM cells run over the time axis, forward, reverse or in both directions.",
        attrs=rnn_attrs(
            LSTM_ACTIVATIONS, attr("direction", "string", REQUIRED, ["forward", "reverse", "bidirectional"])
        ),
        inputs=[
            inp("X"),
            inp("initial_hidden_state"),
            inp("initial_cell_state"),
            inp("sequence_lengths", "T_IND"),
            inp("W"),
            inp("R"),
            inp("B"),
        ],
        outputs=[out("Y"), out("Ho"), out("Co")],
        types={"T": FLOAT, "T_IND": INTEGER},
        note="In the published opset1 list, but OpenVINO 2026.4 no longer registers it in opset1 (its IR reader "
        "rejects it there), so it cannot be checked against the runtime. " + CLIP_NOTE,
    ),
    comparison("Less", "Element-wise test a < b."),
    comparison("LessEqual", "Element-wise test a <= b."),
    unary("Log", "Natural logarithm of each element."),
    logical("LogicalAnd", "Element-wise logical AND of two boolean tensors."),
    op(
        "LogicalNot",
        "Element-wise logical negation of a boolean tensor.",
        inputs=[inp("data", "T_BOOL")],
        outputs=[out("output", "T_BOOL")],
        types={"T_BOOL": BOOL},
        lost=LOST_IO,
    ),
    logical("LogicalOr", "Element-wise logical OR of two boolean tensors."),
    logical(
        "LogicalXor",
        "Element-wise logical exclusive OR of two boolean tensors.",
        note="The runtime's class reports version opset2 although its opset1 table registers it; the text "
        "spec repeats this section twice.",
    ),
    op(
        "MVN",
        "Mean-variance normalization: subtracts the mean and optionally divides by the standard deviation, "
        "per channel or across channels.",
        attrs=[
            attr("across_channels", "bool", False, doc="compute the statistics over channels too"),
            attr("normalize_variance", "bool", False, doc="also divide by the standard deviation"),
            attr("eps", "float", REQUIRED, doc="added to the variance for numerical stability"),
            attr(
                "reduction_axes",
                "ints",
                doc="axes the statistics are taken over; derived from across_channels when absent",
            ),
        ],
        inputs=[inp("data")],
        types={"T": FLOAT},
        note=LEGACY_OPSET2 + " reduction_axes is written by the runtime, not listed in the spec.",
    ),
    op(
        "MatMul",
        "Matrix product of two tensors with batch broadcasting; either operand may be transposed first.",
        attrs=[attr("transpose_a", "bool", False), attr("transpose_b", "bool", False)],
        inputs=[inp("a"), inp("b")],
    ),
    op(
        "MaxPool", "Maximum pooling over sliding windows of the spatial axes.", attrs=pool_attrs(), inputs=[inp("data")]
    ),
    binary("Maximum", "Element-wise maximum of two tensors."),
    binary("Minimum", "Element-wise minimum of two tensors."),
    binary("Mod", "Element-wise remainder of a truncated division; the result takes the dividend's sign."),
    binary("Multiply", "Element-wise product of two tensors."),
    unary("Negative", "Negates each element."),
    op(
        "NonMaxSuppression",
        "Selects boxes per batch and class in decreasing score order, dropping boxes that "
        "overlap a selected one too much.",
        attrs=[
            attr("box_encoding", "string", "corner", ["corner", "center"]),
            attr("sort_result_descending", "bool", True, doc="sort the selection across batches and classes"),
        ],
        inputs=[
            inp("boxes"),
            inp("scores"),
            opt("max_output_boxes_per_class", "T_MAX_BOXES"),
            opt("iou_threshold", "T_THRESHOLD"),
            opt("score_threshold", "T_THRESHOLD"),
        ],
        outputs=[out("selected_indices", "T_OUT", doc="[batch, class, box] triplets")],
        types={"T": FLOAT, "T_MAX_BOXES": INDEX, "T_THRESHOLD": FLOAT, "T_OUT": ("int64",)},
    ),
    op(
        "NormalizeL2",
        "Divides each element by the L2 norm taken over the given axes.",
        attrs=[
            attr("eps", "float", REQUIRED),
            attr("eps_mode", "string", REQUIRED, ["add", "max"], doc="how eps is combined with the sum of squares"),
        ],
        inputs=[inp("data"), inp("axes", "T_IND")],
        types={"T": FLOAT, "T_IND": INDEX},
    ),
    comparison("NotEqual", "Element-wise test a != b.", ANY),
    op(
        "OneHot",
        "Expands integer indices into one-hot vectors along a new axis, filled with on_value and off_value.",
        attrs=[attr("axis", "int", REQUIRED, doc="position of the new axis")],
        inputs=[inp("indices", "T_IND"), inp("depth", "T_IND"), inp("on_value", "T"), inp("off_value", "T")],
        types={"T": ANY, "T_IND": INDEX},
    ),
    op(
        "PReLU",
        "Parametric ReLU: negative elements are multiplied by a slope tensor broadcast to the input.",
        inputs=[inp("data"), inp("slope")],
        types={"T": FLOAT},
        lost=LOST_IO,
        note="The runtime names this op PRelu; IR XML uses PReLU.",
    ),
    op(
        "PSROIPooling",
        "Position-sensitive pooling of regions of interest, averaged or bilinearly interpolated.",
        attrs=[
            attr("output_dim", "int", REQUIRED),
            attr("group_size", "int", 1),
            attr("spatial_scale", "float", REQUIRED, doc="ratio of feature map size to image size"),
            attr("mode", "string", "average", ["average", "bilinear"]),
            attr("spatial_bins_x", "int", 1),
            attr("spatial_bins_y", "int", 1),
        ],
        inputs=[inp("data"), inp("rois")],
        types={"T": FLOAT},
    ),
    op(
        "Pad",
        "Extends a tensor at both ends of each axis with a constant or with values taken from its own edges.",
        attrs=[attr("pad_mode", "string", REQUIRED, ["constant", "edge", "reflect", "symmetric"])],
        inputs=[inp("data"), inp("pads_begin", "T_INT"), inp("pads_end", "T_INT"), opt("pad_value")],
        types={"T": NUMERIC, "T_INT": INDEX},
    ),
    op(
        "Parameter",
        "An input of the model.",
        attrs=[attr("element_type", "element_type", REQUIRED), attr("shape", "shape", REQUIRED)],
        inputs=[],
        types={"T": ANY},
    ),
    binary("Power", "Element-wise power: a raised to b."),
    op(
        "PriorBox",
        "Generates SSD prior boxes of given sizes and aspect ratios for every cell of a feature map.",
        attrs=[
            attr("min_size", "floats", []),
            attr("max_size", "floats", []),
            attr("aspect_ratio", "floats", []),
            attr("flip", "bool", False),
            attr("clip", "bool", False),
            attr("step", "float", 0.0),
            attr("offset", "float", REQUIRED),
            attr("variance", "floats", []),
            attr("scale_all_sizes", "bool", True),
            attr("fixed_ratio", "floats", []),
            attr("fixed_size", "floats", []),
            attr("density", "floats", []),
        ],
        inputs=[inp("output_size", "T_INT"), inp("image_size", "T_INT")],
        outputs=[out("output", "T_OUT")],
        types={"T_INT": INDEX, "T_OUT": ("float32",)},
    ),
    op(
        "PriorBoxClustered",
        "Generates prior boxes of explicitly given widths and heights for every cell of a "
        "feature map, normalized to the image size.",
        attrs=[
            attr("width", "floats", [1.0]),
            attr("height", "floats", [1.0]),
            attr("clip", "bool", True),
            attr("step", "float", 0.0),
            attr("step_w", "float", 0.0),
            attr("step_h", "float", 0.0),
            attr("offset", "float", REQUIRED),
            attr("variance", "floats", []),
        ],
        inputs=[inp("output_size", "T_INT"), inp("image_size", "T_INT")],
        outputs=[out("output", "T_OUT")],
        types={"T_INT": INDEX, "T_OUT": ("float32",)},
        note="The text spec's example also carries flip, which is not an attribute of this operation.",
    ),
    op(
        "Proposal",
        "Region proposal: decodes anchor boxes with predicted deltas, filters them by size and score, "
        "and keeps the best after non-maximum suppression.",
        attrs=[
            attr("base_size", "int", REQUIRED),
            attr("pre_nms_topn", "int", REQUIRED),
            attr("post_nms_topn", "int", REQUIRED),
            attr("nms_thresh", "float", REQUIRED),
            attr("feat_stride", "int", REQUIRED),
            attr("min_size", "int", REQUIRED),
            attr("ratio", "floats", REQUIRED),
            attr("scale", "floats", REQUIRED),
            attr("clip_before_nms", "bool", True),
            attr("clip_after_nms", "bool", False),
            attr("normalize", "bool", False),
            attr("box_size_scale", "float", 1.0),
            attr("box_coordinate_scale", "float", 1.0),
            # The default is the empty string (Caffe-style boxes), which the file format cannot
            # store as a default, so the attribute is optional and its doc says so.
            attr(
                "framework",
                "string",
                allowed=["", "tensorflow"],
                doc="box decoding convention; empty (Caffe style) when absent",
            ),
        ],
        inputs=[inp("class_probs"), inp("bbox_deltas"), inp("image_shape")],
        types={"T": FLOAT},
    ),
    op(
        "RNNCell",
        "One step of a simple recurrent cell: a new hidden state from the input and the previous hidden state.",
        attrs=rnn_attrs(["tanh"]),
        inputs=[inp("X"), inp("initial_hidden_state"), inp("W"), inp("R"), inp("B")],
        outputs=[out("Ho")],
        types={"T": FLOAT},
        note="Not in the published opset1 list (published as RNNCell-3), but a section of the text spec and "
        "registered in the runtime's opset1 table. " + CLIP_NOTE,
    ),
    op(
        "ROIPooling",
        "Max or bilinear pooling of each region of interest to a fixed output size.",
        attrs=[
            attr("pooled_h", "int", REQUIRED),
            attr("pooled_w", "int", REQUIRED),
            attr("spatial_scale", "float", REQUIRED, doc="ratio of feature map size to image size"),
            attr("method", "string", "max", ["max", "bilinear"]),
            attr("output_size", "ints", doc="[pooled_h, pooled_w], written by recent runtimes"),
            attr("output_roi", "ints", doc="[pooled_h, pooled_w], written by recent runtimes"),
        ],
        inputs=[inp("data"), inp("rois")],
        types={"T": FLOAT},
        note=LEGACY_OPSET2 + " output_size and output_roi repeat pooled_h and pooled_w; recent runtimes write "
        "them to IR.",
    ),
    op(
        "Range",
        "A 1D sequence from start (inclusive) to stop (exclusive) in increments of step.",
        inputs=[inp("start"), inp("stop"), inp("step")],
        lost=LOST_IO,
    ),
    op(
        "ReLU",
        "Rectified linear unit: max(0, x) for each element.",
        inputs=[inp("data")],
        lost=LOST_IO,
        note="The runtime names this op Relu; IR XML uses ReLU.",
    ),
    reduction("ReduceLogicalAnd", "Logical AND of the elements over the given axes.", BOOL),
    reduction("ReduceLogicalOr", "Logical OR of the elements over the given axes.", BOOL),
    reduction("ReduceMax", "Maximum of the elements over the given axes."),
    reduction("ReduceMean", "Arithmetic mean of the elements over the given axes."),
    reduction("ReduceMin", "Minimum of the elements over the given axes."),
    reduction("ReduceProd", "Product of the elements over the given axes."),
    reduction("ReduceSum", "Sum of the elements over the given axes."),
    op(
        "RegionYolo",
        "YOLO region layer: computes box coordinates, objectness and class scores from a feature map.",
        attrs=[
            attr("anchors", "floats", [], doc="prior box sizes as flattened [width, height] pairs"),
            attr("axis", "int", REQUIRED, doc="first axis flattened in the output"),
            attr("coords", "int", REQUIRED),
            attr("classes", "int", REQUIRED),
            attr("end_axis", "int", REQUIRED, doc="last axis flattened in the output"),
            attr("num", "int", REQUIRED, doc="number of regions"),
            attr("do_softmax", "bool", True),
            attr("mask", "ints", [], doc="regions to use when do_softmax is false"),
        ],
        inputs=[inp("data")],
        types={"T": FLOAT},
    ),
    op(
        "ReorgYolo",
        "Reorganizes a feature map by moving stride x stride spatial blocks into channels.",
        attrs=[attr("stride", "int", REQUIRED)],
        inputs=[inp("data")],
        types={"T": ANY},
        note=LEGACY_OPSET2 + " The runtime holds stride as a one-element list.",
    ),
    op(
        "Reshape",
        "Gives a tensor a new shape with the same number of elements; -1 infers one dimension and, "
        "with special_zero, 0 copies the input's.",
        attrs=[attr("special_zero", "bool", REQUIRED, doc="0 in the shape means: keep the input's dimension")],
        inputs=[inp("data"), inp("shape", "T_SHAPE")],
        types={"T": ANY, "T_SHAPE": INDEX},
    ),
    op("Result", "An output of the model.", inputs=[inp("data")], outputs=[], types={"T": ANY}, lost=LOST_IO),
    op(
        "Reverse",
        "Reverses the order of elements along the axes given by index or by boolean mask.",
        attrs=[attr("mode", "string", REQUIRED, ["index", "mask"], doc="how the second input names the axes")],
        inputs=[inp("data"), inp("axis", "T_AXIS")],
        types={"T": ANY, "T_AXIS": INTEGER + BOOL},
        note=ONLY_REGISTRY,
    ),
    op(
        "ReverseSequence",
        "Reverses the first seq_lengths[i] elements along seq_axis of every slice i along batch_axis.",
        attrs=[attr("batch_axis", "int", 0), attr("seq_axis", "int", 1)],
        inputs=[inp("data"), inp("seq_lengths", "T_IND")],
        types={"T": ANY, "T_IND": INDEX},
    ),
    op(
        "Select",
        "Element-wise choice between two tensors by a boolean condition, with broadcasting.",
        attrs=[AUTO_BROADCAST_ATTR],
        inputs=[inp("cond", "T_COND"), inp("then"), inp("else")],
        types={"T": ANY, "T_COND": BOOL},
    ),
    op(
        "Selu",
        "Scaled exponential linear unit; alpha and lambda are inputs.",
        inputs=[inp("data"), inp("alpha"), inp("lambda")],
        types={"T": FLOAT},
        lost=LOST_IO,
    ),
    op(
        "ShapeOf",
        "The shape of its input as a 1D int64 tensor.",
        inputs=[inp("data")],
        outputs=[out("output", "T_OUT")],
        types={"T": ANY, "T_OUT": ("int64",)},
        lost=LOST_IO,
    ),
    op(
        "ShuffleChannels",
        "Permutes channels by splitting them into groups and transposing the group and in-group axes.",
        attrs=[attr("axis", "int", 1), attr("group", "int", 1)],
        inputs=[inp("data")],
        types={"T": ANY},
        note=ONLY_REGISTRY,
    ),
    unary("Sigmoid", "Logistic sigmoid 1 / (1 + exp(-x)) of each element."),
    unary("Sign", "Sign of each element: -1, 0 or 1."),
    unary("Sin", "Sine of each element."),
    unary("Sinh", "Hyperbolic sine of each element."),
    op(
        "SoftMax",
        "Softmax along one axis: exponentials normalized to sum to one.",
        attrs=[attr("axis", "int", 1)],
        inputs=[inp("data")],
        types={"T": FLOAT},
        note="The runtime names this op Softmax; IR XML uses SoftMax.",
    ),
    op(
        "SpaceToDepth",
        "Moves spatial blocks of size block_size into channels.",
        attrs=[attr("block_size", "int", 1), attr("mode", "string", REQUIRED, ["blocks_first", "depth_first"])],
        inputs=[inp("data")],
        types={"T": ANY},
    ),
    op(
        "Split",
        "Splits a tensor along an axis into num_splits equal parts.",
        attrs=[attr("num_splits", "int", REQUIRED)],
        inputs=[inp("data"), inp("axis", "T_AXIS")],
        outputs=[out("outputs", option="variadic")],
        types={"T": ANY, "T_AXIS": INDEX},
    ),
    unary("Sqrt", "Square root of each element."),
    binary("SquaredDifference", "Element-wise (a - b) squared."),
    op(
        "Squeeze",
        "Removes axes of size one: those listed in the second input, or all of them when it is absent.",
        inputs=[inp("data"), opt("axes", "T_IND")],
        types={"T": ANY, "T_IND": INDEX},
        lost="",
        completed_from="OpenVINO's published Squeeze-1 specification and openvino.opset1.squeeze",
        note="The text spec has only this op's short description; inputs and types come from the published "
        "specification and the runtime.",
    ),
    op(
        "StridedSlice",
        "Extracts a strided slice, with masks that ignore begin or end, add or remove axes, or expand an ellipsis.",
        attrs=[
            attr("begin_mask", "ints", REQUIRED, doc="1 ignores begin for that axis"),
            attr("end_mask", "ints", REQUIRED, doc="1 ignores end for that axis"),
            attr("new_axis_mask", "ints", doc="1 inserts an axis of size one; zeros when absent"),
            attr("shrink_axis_mask", "ints", doc="1 removes that axis; zeros when absent"),
            attr("ellipsis_mask", "ints", doc="1 marks the ellipsis position; zeros when absent"),
        ],
        inputs=[inp("data"), inp("begin", "T_IND"), inp("end", "T_IND"), opt("stride", "T_IND")],
        types={"T": ANY, "T_IND": INDEX},
        lost="",
        completed_from="OpenVINO's published StridedSlice-1 specification and openvino.opset1.strided_slice",
        note="The text spec has only this op's short description and an example; attributes, inputs and "
        "types come from the published specification and the runtime.",
    ),
    binary(
        "Subtract",
        "Element-wise difference a - b.",
        note="The text spec's first example misspells the type as Substract.",
    ),
    unary("Tan", "Tangent of each element."),
    unary("Tanh", "Hyperbolic tangent of each element."),
    op(
        "TensorIterator",
        "Runs a body network repeatedly, slicing inputs along an axis, carrying values between "
        "iterations and concatenating or taking the last of the outputs.",
        attrs=[attr("body", "graph", REQUIRED, doc="the network run on every iteration")],
        inputs=[inp("inputs", "T", "variadic", homogeneous=False)],
        outputs=[out("outputs", "T", "variadic", homogeneous=False)],
        types={"T": ANY},
        note="IR carries the body, port_map and back_edges as child elements rather than data attributes; "
        "port_map and back_edges are structure of the body, not schema attributes.",
    ),
    op(
        "Tile",
        "Repeats a tensor along each axis the number of times given by the second input.",
        inputs=[inp("data"), inp("repeats", "T_IND")],
        types={"T": ANY, "T_IND": INDEX},
        lost=LOST_IO,
    ),
    op(
        "TopK",
        "The k largest or smallest values along an axis, with their indices.",
        attrs=[
            attr("axis", "int", REQUIRED),
            attr("mode", "string", REQUIRED, ["min", "max"]),
            attr("sort", "string", REQUIRED, ["value", "index", "none"], doc="order of the results"),
            attr("index_element_type", "element_type", "int32", doc="element type of the indices output"),
        ],
        inputs=[inp("data"), inp("k", "T_K")],
        outputs=[out("values"), out("indices", "T_IND")],
        types={"T": NUMERIC, "T_K": INDEX, "T_IND": INDEX},
        note="index_element_type is not in the text spec; the runtime's opset1 class has it and writes it to IR.",
    ),
    op(
        "Transpose",
        "Permutes the axes of a tensor in the order given by the second input.",
        inputs=[inp("data"), inp("input_order", "T_AXIS")],
        types={"T": ANY, "T_AXIS": INDEX},
        lost=LOST_IO,
    ),
    op(
        "Unsqueeze",
        "Inserts axes of size one at the positions given by the second input.",
        inputs=[inp("data"), inp("axes", "T_IND")],
        types={"T": ANY, "T_IND": INDEX},
        lost="",
        completed_from="OpenVINO's published Unsqueeze-1 specification and openvino.opset1.unsqueeze",
        note="The text spec has only this op's short description; inputs and types come from the published "
        "specification and the runtime.",
    ),
    op(
        "VariadicSplit",
        "Splits a tensor along an axis into parts of the given lengths.",
        inputs=[inp("data"), inp("axis", "T_AXIS"), inp("split_lengths", "T_IND")],
        outputs=[out("outputs", option="variadic")],
        types={"T": ANY, "T_AXIS": INDEX, "T_IND": INDEX},
        lost=LOST_IO,
    ),
    logical(
        "Xor",
        "Element-wise logical exclusive OR of two boolean tensors (the older name of LogicalXor).",
        lost="",
        completed_from="OpenVINO's opset1 operation registry (ov::op::v0::Xor)",
        note="Absent from the text spec and the published list; the runtime registers it in opset1 and reads "
        'type="Xor" version="opset1" from IR.',
    ),
]


# --------------------------------------------------------------------------- output


def generate() -> str:
    """The JSON text of ``opconv/schemas/openvino.json``."""
    names = [raw["name"] for raw in OPS]
    # Same order as the JSON file (dump sorts by name, upper case first), so the two read alike.
    if names != sorted(names) or len(set(names)) != len(names):
        raise SystemExit("OPS must list each op once, sorted by name")
    schemas = [parse_op(DIALECT, raw, where=GENERATED_BY) for raw in OPS]
    return dump(DIALECT, schemas, source=SOURCE, generated_by=GENERATED_BY)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Generate opconv/schemas/openvino.json (OpenVINO opset1).")
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if the committed file differs from a fresh generation",
    )
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"file to write or check (default {OUTPUT})")
    args = parser.parse_args(argv)
    fresh = generate()
    if args.check:
        committed = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if committed == fresh:
            print(f"{args.output}: up to date")
            return 0
        print(f"{args.output}: differs from a fresh generation; run scripts/gen_openvino_schemas.py", file=sys.stderr)
        diff = difflib.unified_diff(
            committed.splitlines(), fresh.splitlines(), "committed", "generated", lineterm="", n=1
        )
        for line in list(diff)[:40]:
            print(f"  {line}", file=sys.stderr)
        return 1
    args.output.write_text(fresh, encoding="utf-8")
    print(f"wrote {args.output} ({len(OPS)} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
