"""opconv's Python API: what ``import opconv`` offers (re-exported by the package).

A function hands back what it was given: an ``onnx.ModelProto`` in gives a ModelProto out where the result
is ONNX (:func:`convert_version`, :func:`convert` to ``"onnx"``, :func:`decompose`), so ``onnx.checker``,
onnxruntime and onnx's own tools take it directly; an :class:`opconv.Model` (or a path) gives a Model.
:func:`to_onnx` and :func:`to_openvino` hand a Model to the runtimes' own types.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, Union, overload

from .errors import OpconvError
from .ir import Model

if TYPE_CHECKING:
    import numpy.typing as npt
    import onnx
    import openvino

    from .executor import Session
    from .validation import Problem
    from .verification import VerifyReport

#: the dialects a model can be in, and a conversion can go to, with the names messages give them
DIALECT_NAMES = {"onnx": "ONNX", "openvino": "OpenVINO IR", "hlo": "HLO"}
DIALECTS = tuple(DIALECT_NAMES)

#: ai.onnx opset an ONNX model converted from OpenVINO IR or HLO gets when no ``opset`` is given: every
#: deployed runtime the test extras allow reads it (onnxruntime 1.20, the oldest, reads up to 21).
DEFAULT_ONNX_OPSET = 21


class HasModelProto(Protocol):
    """An object carrying an ONNX model, such as the ``ONNXProgram`` that ``torch.onnx.export`` returns."""

    @property
    def model_proto(self) -> onnx.ModelProto: ...


#: what :func:`load` (and so every function taking a model) accepts
ModelSource = Union[str, "os.PathLike[str]", bytes, "onnx.ModelProto", Model, HasModelProto]
#: ``{input name: shape}``, e.g. ``{"input_ids": (2, 12)}``
InputShapes = Mapping[str, Sequence[int]]
#: ``{symbol: size}``, e.g. ``{"batch": 1, "seq": 128}``
Dims = Mapping[str, int]


def load(source: ModelSource, dialect: str | None = None, *, base_dir: str | None = None) -> Model:
    """Load a model into opconv's graph core.

    ``source`` is a path (the dialect from its suffix, else its content: ``.onnx``, an OpenVINO IR ``.xml``
    with its ``.bin`` beside it, an HLO ``.hlo``/``.mlir``), the bytes of a serialized ONNX model, an
    ``onnx.ModelProto``, anything with a ``.model_proto`` (torch.onnx's ``ONNXProgram``), or a
    :class:`Model` (returned as it is).  ``dialect`` insists on one dialect (``"onnx"``, ``"openvino"``,
    ``"hlo"``).  ``base_dir`` is the folder an ONNX model given as bytes or a protobuf reads its external
    data from.  Raises :class:`~opconv.ModelReadError` naming the file and what is wrong.
    """
    from . import dialects
    from .errors import ModelReadError

    if dialect is not None and dialect not in DIALECTS:
        raise OpconvError(f"unknown dialect {dialect!r}; the dialects are {_listed(DIALECTS)}")
    if isinstance(source, Model):
        if dialect is not None and source.dialect != dialect:
            raise ModelReadError(
                f"the model is {DIALECT_NAMES[source.dialect]}, not {DIALECT_NAMES[dialect]}", where=source.path
            )
        return source
    if isinstance(source, (str, os.PathLike)):
        return dialects.load_model(source, dialect, **({"base_dir": base_dir} if base_dir else {}))
    proto = _onnx_message(source)
    if dialect not in (None, "onnx"):
        raise ModelReadError(f"a {type(source).__name__} holds an ONNX model, not {DIALECT_NAMES[dialect]}")
    return dialects.get("onnx").load(proto, base_dir=base_dir)


def _onnx_message(source: Any) -> Any:
    """``source`` as something the ONNX loader reads (a ModelProto or its bytes), or a one-line refusal."""
    from .dialects.onnx.proto import messages

    if isinstance(source, (messages.ModelProto, bytes, bytearray, memoryview)):
        if not isinstance(source, messages.ModelProto) and b"<net" in bytes(source[:512]):
            raise OpconvError(
                "these bytes are OpenVINO IR XML, whose weights are in a separate .bin; "
                "save both and load the .xml path"
            )
        return source if isinstance(source, (messages.ModelProto, bytes)) else bytes(source)
    proto = getattr(source, "model_proto", None)
    if isinstance(proto, messages.ModelProto):
        return proto
    raise OpconvError(
        f"cannot load a {type(source).__name__}: pass a path, an opconv.Model, an onnx.ModelProto, "
        "the bytes of an ONNX model, or an object with .model_proto (torch.onnx's ONNXProgram)"
    )


def _is_proto(source: Any) -> TypeGuard[onnx.ModelProto]:
    from .dialects.onnx.proto import messages

    return isinstance(source, messages.ModelProto)


def save(
    model: Model | onnx.ModelProto,
    path: str | os.PathLike[str],
    *,
    external_data: bool | None = None,
    format: str | None = None,
    **options: Any,
) -> None:
    """Save ``model`` (a :class:`Model` or an ``onnx.ModelProto``) to ``path`` in its dialect's file format,
    atomically (on failure nothing is left behind).

    The suffix of ``path`` must be the dialect's: ``.onnx``; ``.xml`` for OpenVINO IR (its ``.bin`` is written beside
    it); ``.hlo``, or ``.mlir`` for StableHLO.  ``external_data`` (ONNX only): True puts large tensors in
    ``<file>.data`` beside the model, False embeds them, None decides (external when the model was loaded
    that way or is too large for one protobuf).  ``format`` (HLO only): ``"text"`` or ``"stablehlo"``.
    Other ``options`` go to the dialect's writer (ONNX: ``location``, the data file's name, and
    ``threshold``, the smallest tensor in bytes that goes there; HLO: ``inline_limit``).
    """
    from . import dialects

    model = load(model)
    if external_data is not None:
        _only_for(model, "onnx", "external_data")
        options["external_data"] = external_data
    if format is not None:
        _only_for(model, "hlo", "format")
        options["format"] = format
    dialects.save_model(model, path, **options)


def _only_for(model: Model, dialect: str, option: str) -> None:
    if model.dialect != dialect:
        raise OpconvError(f"{option}= applies to {dialect} models; this one is {model.dialect}")


def check(model: ModelSource) -> list[Problem]:
    """Validate ``model`` (anything :func:`load` takes) against its dialect's schemas.

    Returns every problem found (empty when valid).

    Each problem has ``code`` (e.g. ``"unknown-op"``), ``message``, ``node`` and ``graph``.
    """
    from .validation import check_model

    return check_model(load(model))


def prepare(model: ModelSource, *, seed: int = 0) -> Session:
    """Prepare ``model`` (anything :func:`load` takes) to run many times.

    Returns a session whose ``.run(inputs)`` returns a dict.

    Kernels are bound and constant subgraphs folded once, as a runtime's session does; make a new
    session after changing the model.  ``seed`` seeds the model's random ops (a non-negative integer).
    """
    from . import dialects
    from .errors import NotImplementedFeature

    if not (hasattr(seed, "__index__") and seed.__index__() >= 0):
        raise OpconvError(f"the seed must be a non-negative integer, got {seed!r}")
    from .validation import require_valid

    model = require_valid(load(model))
    d = dialects.get(model.dialect)
    if d.prepare is None:
        raise NotImplementedFeature(f"the {model.dialect} reference executor")
    session: Session = d.prepare(model, seed=seed)
    return session


def run(model: ModelSource, inputs: Mapping[str, npt.ArrayLike | list[Any] | None], *, seed: int = 0) -> dict[str, Any]:
    """Run ``model`` (anything :func:`load` takes) once with opconv's reference executor.

    Returns ``{output name: numpy array}``.

    ``inputs`` maps graph input names to anything ``numpy.asarray`` takes (arrays, lists, torch tensors
    on the CPU); element types must be the declared ones (float32 stays float32: no silent casts).
    A sequence input takes a list of arrays, an optional None.  Random ops draw from generators seeded
    by ``seed`` (or their own seed attribute).
    """
    return prepare(model, seed=seed).run(inputs)


@overload
def convert(
    model: onnx.ModelProto,
    to: str,
    *,
    input_shapes: InputShapes | None = None,
    dims: Dims | None = None,
    opset: int | None = None,
) -> onnx.ModelProto | Model: ...
@overload
def convert(
    model: ModelSource,
    to: str,
    *,
    input_shapes: InputShapes | None = None,
    dims: Dims | None = None,
    opset: int | None = None,
) -> Model: ...
def convert(
    model: ModelSource,
    to: str,
    *,
    input_shapes: InputShapes | None = None,
    dims: Dims | None = None,
    opset: int | None = None,
) -> Model | onnx.ModelProto:
    """Convert ``model`` (anything :func:`load` takes) to another dialect.

    ``to`` is ``"onnx"``, ``"openvino"`` or ``"hlo"``.

    Directions: ONNX to OpenVINO IR v10 (opset1 layers) or to HLO; OpenVINO IR or HLO to ONNX; ONNX to
    ONNX at another ``opset`` (as :func:`convert_version`).  The result is a new :class:`Model`, or an
    ``onnx.ModelProto`` when ``model`` was one and the result is ONNX; ``model`` itself is never changed.

    ``input_shapes`` (from ONNX only) ``{name: shape}``, e.g. ``{"input_ids": (2, 12)}``: fixes inputs
    declared with symbolic or unknown dims, and binds those dims' symbols for every other input
    (``attention_mask`` declared ``[batch, seq]`` too).  ``dims`` (from ONNX only) ``{symbol: size}``,
    e.g. ``{"batch": 1, "seq": 128}``: fixes symbols everywhere.  OpenVINO opset1 and HLO need every
    input shape static; shape computations then fold to constants until nothing changes, and an input
    left open is a :class:`~opconv.ConversionError` naming every such input.
    ``opset`` (to ONNX only): the ai.onnx opset to write; default 21 from IR/HLO (onnxruntime 1.20
    reads it), the model's own from ONNX.

    A node with no form in the target is a :class:`~opconv.ConversionError` whose ``refused`` lists every
    such node (``node``, ``op``, ``domain``, ``reason``).
    """
    from . import converters

    if to not in DIALECTS:
        hint = " (OpenVINO IR is to='openvino')" if str(to).lower() in ("ir", "ov", "xml", "openvino_ir") else ""
        raise OpconvError(f"cannot convert to {to!r}: to= takes one of {_listed(DIALECTS)}{hint}")
    if to == "onnx" and _is_proto(model):  # a protobuf stays one
        _no_shape_options(input_shapes, dims, "a version conversion")
        return model if opset is None else convert_version(model, opset)
    source = load(model)
    if to == "onnx" and source.dialect == "onnx":
        _no_shape_options(input_shapes, dims, "a version conversion")
        return source if opset is None else convert_version(source, opset)
    if source.dialect != "onnx":
        _no_shape_options(input_shapes, dims, f"a conversion from {source.dialect}")
    if to != "onnx" and opset is not None:
        raise OpconvError(f"opset= applies to conversions to ONNX; {to} has no ai.onnx opset")
    if to == source.dialect:
        return source
    directions = [tuple(d.split("_to_")) for d in converters.DIRECTIONS if "_to_" in d]
    if (source.dialect, to) not in directions:
        targets = [t for s, t in directions if s == source.dialect]
        raise OpconvError(f"opconv converts {source.dialect} to {_listed(targets)}, not to {to}; convert to onnx first")
    options: dict[str, Any] = {}
    if to == "onnx":
        options["opset"] = DEFAULT_ONNX_OPSET if opset is None else opset
    else:
        options.update(input_shapes=input_shapes, dims=dims)
    converted: Model = converters.convert(source, to, **options)
    return converted


def _no_shape_options(input_shapes: InputShapes | None, dims: Dims | None, what: str) -> None:
    if input_shapes is not None or dims is not None:
        raise OpconvError(f"input_shapes= and dims= apply to conversions from ONNX to openvino or hlo, not to {what}")


def _listed(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in names)


@overload
def convert_version(model: onnx.ModelProto, opset: int, *, decompose: bool = False) -> onnx.ModelProto: ...
@overload
def convert_version(model: ModelSource, opset: int, *, decompose: bool = False) -> Model: ...
def convert_version(model: ModelSource, opset: int, *, decompose: bool = False) -> Model | onnx.ModelProto:
    """Move an ONNX ``model`` to another ai.onnx ``opset``, up or down (``model`` is never changed).

    Returns an ``onnx.ModelProto`` when given one, else a :class:`Model`.  ``decompose`` first rewrites
    ONNX Runtime's contrib operators into standard ones (else contrib nodes stay as they are).  A node
    that cannot move is a :class:`~opconv.ConversionError` whose ``refused`` names every such node with
    the reason (``problems`` adds the opsets each would need); nothing is returned then.
    """
    from .converters.onnx_versions import convert as convert_model
    from .converters.onnx_versions import convert_proto
    from .dialects.onnx.io import to_proto

    if _is_proto(model):
        proto: onnx.ModelProto = (
            to_proto(convert_model(model, opset, decompose=True)) if decompose else convert_proto(model, opset)
        )
        return proto
    source = model if isinstance(model, (Model, str, os.PathLike)) else load(model, "onnx")
    converted: Model = convert_model(source, opset, decompose=decompose)
    return converted


@overload
def decompose(model: onnx.ModelProto, domains: Sequence[str] = ..., *, composites: bool = ...) -> onnx.ModelProto: ...
@overload
def decompose(model: ModelSource, domains: Sequence[str] = ..., *, composites: bool = ...) -> Model: ...
def decompose(
    model: ModelSource, domains: Sequence[str] = ("com.microsoft",), *, composites: bool = False
) -> Model | onnx.ModelProto:
    """Rewrite the contrib operators of ``model`` in ``domains`` (and onnxruntime's ai.onnx-domain ones) into standard
    ai.onnx operators at the model's opset, so that any runtime reads the result.  With ``composites``, the ai.onnx
    composites too (Attention, RNN/GRU/LSTM unrolled, RotaryEmbedding, the RMS, mean-variance and Lp normalizations,
    NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), as the converters to OpenVINO and HLO do; those need the
    static shapes of their inputs (an RNN's sequence length).

    Returns an ``onnx.ModelProto`` when given one, else a :class:`Model`; raises
    :class:`~opconv.ConversionError` naming every node it cannot rewrite.
    """
    from .converters.decompose import decompose as decompose_model
    from .dialects.onnx.io import to_proto

    result: Model = decompose_model(load(model, "onnx"), tuple(domains), composites=composites)
    return to_proto(result) if _is_proto(model) else result


def to_onnx(model: ModelSource, *, opset: int | None = None) -> onnx.ModelProto:
    """``model`` as an ``onnx.ModelProto`` (tensors embedded), for onnx.checker, onnxruntime and onnx's tools.

    A model of another dialect is converted first (``opset`` as in :func:`convert`, default 21).  A model
    of 2 GiB or more does not fit one protobuf: :func:`save` it with external data instead.
    """
    from .dialects.onnx.io import to_proto

    if _is_proto(model) and opset is None:
        return model
    source = load(model)
    if source.dialect != "onnx" or opset is not None:
        source = convert(source, to="onnx", opset=opset)
    proto: onnx.ModelProto = to_proto(source)
    return proto


def to_openvino(
    model: ModelSource, *, input_shapes: InputShapes | None = None, dims: Dims | None = None
) -> openvino.Model:
    """``model`` as an ``openvino.Model``, read from opconv's IR v10 in memory (no file is written).

    An ONNX model is converted first (``input_shapes`` and ``dims`` as in :func:`convert`).  Needs the
    openvino package; compile the result with ``openvino.Core().compile_model(m, "CPU",
    {"INFERENCE_PRECISION_HINT": "f32"})`` (without the hint, a CPU with bf16 computes in bf16).
    """
    from .dialects.openvino.io import to_bytes

    source = load(model)
    if source.dialect != "openvino":
        source = convert(source, to="openvino", input_shapes=input_shapes, dims=dims)
    elif input_shapes is not None or dims is not None:
        _no_shape_options(input_shapes, dims, "an OpenVINO IR model")
    try:
        import openvino
    except ImportError:
        raise OpconvError("to_openvino needs the openvino package (pip install openvino)") from None
    xml, weights = to_bytes(source)
    return openvino.Core().read_model(xml, weights)


def verify(
    a: ModelSource,
    b: ModelSource | None = None,
    inputs: Mapping[str, npt.ArrayLike | list[Any] | None] | None = None,
    rtol: float | Mapping[str, float] | None = None,
    atol: float | Mapping[str, float] | None = None,
    *,
    seed: int = 0,
    input_shapes: InputShapes | None = None,
    dims: Dims | None = None,
    backends: str | tuple[str, str] | None = None,
    openvino_precision: str = "f32",
    expected: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    save_outputs: str | os.PathLike[str] | None = None,
    progress: Callable[[str, str, float | None], None] | None = None,
    bisect: bool = False,
    histograms: bool = False,
) -> VerifyReport:
    """Run both models on the same inputs and compare every output; returns a :class:`opconv.VerifyReport`.

    ``a`` and ``b`` are models of any dialect (anything :func:`load` takes); inputs and outputs pair by
    name, or by position when the names differ.  ``inputs`` maps A's input names to anything
    ``numpy.asarray`` takes (torch tensors too); without it, seeded random inputs are generated (``seed``,
    default 0, also seeds random ops) with these shapes: ``input_shapes`` ({name: shape}) fixes inputs and
    binds the symbols of their declared dims, ``dims`` ({symbol: size}) fixes symbols, without either an
    input of A with symbolic dims takes B's static shape, and any dim still open is 1 (said in
    ``report.notes``).

    ``backends`` runs the sides on deployed runtimes: one name or (A's, B's) of ``opconv`` (the
    reference executors, default), ``onnxruntime``, ``openvino`` (CPU at ``openvino_precision``,
    default f32) and ``iree``.  ``rtol``/``atol`` override the per-dtype tolerance table: a number for
    every output, a dict {output: value} per output ("*" for the rest); by default a float16 model is
    compared at float16 tolerance.  ``expected`` (an .npz of ``input:NAME``/``output:NAME`` arrays, or a
    dict) replaces B: ``a`` is then compared with those stored outputs; ``save_outputs`` writes the inputs
    and A's outputs in that layout.  ``progress``, a function ``progress(side, what, seconds)``, hears
    when each side starts (seconds None) and ends.  ``report.ok`` is True when every output of B equals A's;
    ``report.outputs`` has each comparison (max, mean, median, p99 of absolute and relative errors,
    mismatch count).  Raises :class:`~opconv.ExecutionError` naming model A or B when one cannot run.
    ``bisect`` (True): when outputs differ, ``report.bisect.divergence`` is the first node of A whose output
    B does not reproduce, run on the same backends (:mod:`opconv.bisect`); ``histograms`` (True) keeps each
    output's error histogram for :func:`opconv.html_report.render`.
    """
    from .verification import verify as compare_models

    return compare_models(
        a,
        b,
        inputs,
        rtol,
        atol,
        seed=seed,
        input_shapes=input_shapes,
        dims=dims,
        backends=backends,
        openvino_precision=openvino_precision,
        expected=expected,
        save_outputs=save_outputs,
        progress=progress,
        bisect=bisect,
        histograms=histograms,
    )
