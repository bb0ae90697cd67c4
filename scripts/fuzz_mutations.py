"""Mutations of model files for fuzzing opconv: ONNX at the protobuf-field level, IR at the XML level (and
its .bin), HLO at the text level (and its weights), and CLI argument nonsense.

Used by ``scripts/fuzz_campaign.py`` (thousands of inputs, each in a child process) and by
``tests/test_fuzz.py`` (a few dozen, in-process, driven by hypothesis).  Every mutant is still close to a
valid model, so that it gets past the parsers and reaches the validators, converters and kernels.
"""

from __future__ import annotations

import glob
import os
import random
import re
import shutil

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ("onnx", "ir", "hlo", "cli")

#: values a hostile file puts where a number belongs
_NUMBERS = (0, 1, -1, 2, 3, -7, 255, 2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, -(2**63), 10**12)
_FLOATS = (0.0, -0.0, 1e-30, -1.0, 1e30, float("inf"), float("-inf"), float("nan"), 0.5, 1e6)
_TEXTS = ("", "x", "\x00", "a\x01b", "..", "../../etc/passwd", "é", "\ud7ff", "<&>\"'", "ab" * 300)
_OPS = (
    "Add",
    "Relu",
    "Conv",
    "Reshape",
    "Einsum",
    "Range",
    "ConstantOfShape",
    "Resize",
    "Gather",
    "Loop",
    "If",
    "Scan",
    "Split",
    "Concat",
    "Expand",
    "Tile",
    "Pad",
    "TopK",
    "NonMaxSuppression",
    "Unknown",
    "",
)


class Seeds:
    """The valid inputs mutants are made from: ONNX protos, and IR / HLO files written by opconv."""

    def __init__(self, onnx_models: list, folder: str):
        self.onnx = onnx_models  # serialized ModelProtos
        self.ir: list[tuple[str, bytes]] = []  # (xml text, bin bytes)
        self.hlo: list[tuple[str, bytes | None]] = []  # (module text, weights bytes or None)
        import opconv
        from opconv.dialects.onnx.io import load as load_onnx

        for data in onnx_models:
            for to, store in (("openvino", self.ir), ("hlo", self.hlo)):
                try:
                    model = load_onnx(data)
                    shapes = {
                        v.name: tuple(d if isinstance(d, int) else 1 for d in v.shape)
                        for v in model.graph.inputs
                        if v.const is None and v.shape is not None
                    }
                    converted = opconv.convert(model, to=to, input_shapes=shapes)
                    path = os.path.join(folder, "seed.xml" if to == "openvino" else "seed.hlo")
                    opconv.save(converted, path)
                except Exception:  # noqa: BLE001 - only what converts makes a seed
                    continue
                side = path[:-4] + ".bin" if to == "openvino" else path + ".weights"
                with open(path, encoding="utf-8") as f:
                    text = f.read().replace("seed.hlo.weights", "m.hlo.weights")  # the mutant's sidecar name
                extra = open(side, "rb").read() if os.path.exists(side) else None
                store.append((text, extra if to == "hlo" else (extra or b"")))
                for p in (path, side):
                    if os.path.exists(p):
                        os.unlink(p)


def fixture_models() -> list[bytes]:
    """The committed fixtures (inline ones) and a few hand-built models that convert everywhere."""
    from onnx import TensorProto, helper, numpy_helper

    models = []
    for path in sorted(glob.glob(os.path.join(ROOT, "fixtures", "*.onnx"))):
        if "external" not in path:
            with open(path, "rb") as f:
                models.append(f.read())
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    shape = numpy_helper.from_array(np.array([3, 2], np.int64), "shape")
    for nodes in (
        [helper.make_node("Add", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        [helper.make_node("Reshape", ["x", "shape"], ["t"]), helper.make_node("Softmax", ["t"], ["y"])],
        [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("ReduceSum", ["t"], ["y"])],
    ):
        graph = helper.make_graph(nodes, "g", [x], [y], [w, shape])
        models.append(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return models


def node_case_models(limit: int, rng: random.Random) -> list[bytes]:
    """Up to ``limit`` models of ONNX's backend node cases (collecting them takes ~10 s)."""
    from opconv import testdata

    cases = list(testdata.node_cases())
    rng.shuffle(cases)
    return [c.model.SerializeToString() for c in cases[:limit]]


def seed_inputs(node_cases: int = 300, seed: int = 0) -> Seeds:
    import tempfile

    models = fixture_models() + (node_case_models(node_cases, random.Random(seed)) if node_cases else [])
    with tempfile.TemporaryDirectory() as folder:
        return Seeds(models, folder)


# ---------------------------------------------------------------------------
# ONNX: protobuf fields
# ---------------------------------------------------------------------------


def mutate_onnx(data: bytes, rng: random.Random) -> bytes:
    from opconv.dialects.onnx.proto import messages as pb

    m = pb.ModelProto()
    m.ParseFromString(data)
    for _ in range(rng.choice((1, 1, 2, 3))):
        try:
            rng.choice(_ONNX_MUTATIONS)(m, rng)
        except (ValueError, TypeError, IndexError):  # a value protobuf itself refuses to hold: try another
            continue
    out = m.SerializeToString()
    if rng.random() < 0.1:  # text that is not UTF-8 where protobuf wants a string
        names = [n.name for n in m.graph.node if len(n.name) >= 2] or [m.graph.name] if m.graph.name else []
        if names:
            name = rng.choice(names).encode()
            out = out.replace(name, name[:1] + b"\xff" + name[2:], 1)
    if rng.random() < 0.05:  # a few raw byte flips
        out = bytearray(out)
        for _ in range(rng.randint(1, 4)):
            if out:
                out[rng.randrange(len(out))] = rng.randrange(256)
        out = bytes(out)
    return out


def _pick_node(m, rng):
    graphs = [m.graph]
    nodes = []
    while graphs:
        g = graphs.pop()
        for n in g.node:
            nodes.append(n)
            for a in n.attribute:
                if a.HasField("g"):
                    graphs.append(a.g)
                graphs.extend(a.graphs)
    return rng.choice(nodes) if nodes else None


def _mut_dims(m, rng):
    values = list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info)
    tensors = list(m.graph.initializer)
    if values and (not tensors or rng.random() < 0.5):
        t = rng.choice(values).type.tensor_type
        if t.shape.dim:
            d = rng.choice(t.shape.dim)
            if rng.random() < 0.2:
                d.dim_param = rng.choice(_TEXTS)
            else:
                d.dim_value = rng.choice(_NUMBERS)
        else:
            t.shape.dim.add().dim_value = rng.choice(_NUMBERS)
    elif tensors:
        t = rng.choice(tensors)
        if t.dims and rng.random() < 0.7:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(_NUMBERS)
        else:
            t.dims.append(rng.choice(_NUMBERS))


def _mut_attribute(m, rng):
    n = _pick_node(m, rng)
    if n is None:
        return
    if not n.attribute or rng.random() < 0.2:
        a = n.attribute.add()
        a.name = rng.choice(("axis", "axes", "perm", "equation", "mode", "kernel_shape", "pads", "to", "junk"))
        a.type = rng.choice((1, 2, 3, 6, 7))
    a = rng.choice(n.attribute)
    if a.type == 1:
        a.f = rng.choice(_FLOATS)
    elif a.type == 2:
        a.i = rng.choice(_NUMBERS)
    elif a.type == 3:
        a.s = rng.choice(_TEXTS).encode("utf-8", "surrogatepass") if rng.random() < 0.9 else b"\xff\xfe"
    elif a.type == 6:
        a.floats[:] = [rng.choice(_FLOATS) for _ in range(rng.randint(0, 5))]
    elif a.type == 7:
        a.ints[:] = [rng.choice(_NUMBERS) for _ in range(rng.randint(0, 6))]
    else:
        a.type = rng.choice((0, 1, 2, 3, 7, 14))


def _mut_node_io(m, rng):
    n = _pick_node(m, rng)
    if n is None:
        return
    names = (
        [v.name for v in m.graph.input]
        + [t.name for t in m.graph.initializer]
        + [o for x in m.graph.node for o in x.output]
    )
    choice = rng.random()
    if choice < 0.3 and n.input:
        del n.input[rng.randrange(len(n.input))]
    elif choice < 0.6:
        n.input.append(rng.choice(names + ["", "missing"]))
    elif choice < 0.8 and n.input:
        n.input[rng.randrange(len(n.input))] = rng.choice(names + ["", "missing"])
    else:
        n.output.append(rng.choice(("extra", "", names[0] if names else "x")))


def _mut_op(m, rng):
    n = _pick_node(m, rng)
    if n is not None:
        if rng.random() < 0.8:
            n.op_type = rng.choice(_OPS)
        else:
            n.domain = rng.choice(("ai.onnx.ml", "com.microsoft", "x", "ai.onnx"))


def _mut_tensor(m, rng):
    tensors = list(m.graph.initializer)
    n = _pick_node(m, rng)
    if n is not None:
        tensors += [a.t for a in n.attribute if a.HasField("t")]
    if not tensors:
        return
    t = rng.choice(tensors)
    choice = rng.random()
    if choice < 0.3:
        t.data_type = rng.choice((0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 16, 17, 21, 22, 40))
    elif choice < 0.6 and t.raw_data:
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)] + bytes(rng.choice((0, 0, 1, 7)))
    elif choice < 0.8:
        t.data_location = 1
        entry = t.external_data.add()
        entry.key, entry.value = rng.choice(
            (
                ("location", "../x.bin"),
                ("location", "/etc/passwd"),
                ("location", "missing.bin"),
                ("offset", "-5"),
                ("length", "9e99"),
            )
        )
    else:
        t.raw_data = np.asarray([rng.choice(_NUMBERS) % 2**31], np.int64).tobytes()


def _mut_graph(m, rng):
    choice = rng.random()
    if choice < 0.3 and m.graph.node:
        del m.graph.node[rng.randrange(len(m.graph.node))]
    elif choice < 0.5 and m.graph.node:
        m.graph.node.append(m.graph.node[rng.randrange(len(m.graph.node))])
    elif choice < 0.7:
        m.graph.name = rng.choice(_TEXTS)
    elif choice < 0.85 and m.graph.output:
        del m.graph.output[rng.randrange(len(m.graph.output))]
    else:
        n = _pick_node(m, rng)
        if n is not None:
            n.name = rng.choice(_TEXTS)


def _mut_opset(m, rng):
    if m.opset_import:
        m.opset_import[0].version = rng.choice((0, 1, 6, 7, 11, 13, 17, 21, 25, 99, -1, 2**40))
    else:
        m.opset_import.add().version = 17
    if rng.random() < 0.3:
        m.ir_version = rng.choice((0, 1, 3, 4, 7, 10, 99))


_ONNX_MUTATIONS = (
    _mut_dims,
    _mut_dims,
    _mut_attribute,
    _mut_attribute,
    _mut_node_io,
    _mut_op,
    _mut_tensor,
    _mut_graph,
    _mut_opset,
)


# ---------------------------------------------------------------------------
# IR and HLO: text
# ---------------------------------------------------------------------------

_XML_ATTRIBUTE = re.compile(r'(\w[\w-]*)="([^"]*)"')
_XML_DIM = re.compile(r"<dim>(-?\d+)</dim>")
_XML_TYPES = (
    "Convolution",
    "Add",
    "Reshape",
    "Const",
    "Parameter",
    "Result",
    "TensorIterator",
    "Loop",
    "Foo",
    "Interpolate",
    "Broadcast",
    "Gather",
    "Split",
    "",
)


def mutate_ir(xml: str, weights: bytes, rng: random.Random) -> tuple[str, bytes]:
    for _ in range(rng.choice((1, 1, 2, 3))):
        choice = rng.random()
        if choice < 0.45:
            xml = _replace_one(
                xml,
                _XML_ATTRIBUTE,
                2,
                rng,
                lambda a: _xml_escape(
                    rng.choice(_XML_TYPES)
                    if a.group(1) == "type" and rng.random() < 0.7
                    else _text_value(a.group(1), a.group(2), rng)
                ),
            )
        elif choice < 0.65:
            xml = _replace_one(xml, _XML_DIM, 1, rng, lambda d: str(rng.choice(_NUMBERS)))
        elif choice < 0.85:
            xml = _mutate_lines(xml, rng)
        else:
            weights = _mutate_bytes(weights, rng)
    return xml, weights


_HLO_NUMBER = re.compile(r"(?<![\w.%])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_HLO_OP = re.compile(r"= (\w+)\(")
_HLO_OPS = (
    "Add",
    "Multiply",
    "DotGeneral",
    "Convolution",
    "ConvBias",
    "Reshape",
    "BroadcastInDim",
    "Reduce",
    "Slice",
    "Gather",
    "Concatenate",
    "Transpose",
    "Iota",
    "While",
    "Conditional",
    "Tuple",
    "Relu",
    "Softmax",
    "MaxPool",
    "Foo",
)
_HLO_TYPE = re.compile(r"\b(f32|s64|s32|pred|f16)\[")
_HLO_TYPES = ("f32", "f16", "s32", "s64", "pred", "u8", "bf16", "c64", "token", "f99")


def mutate_hlo(text: str, weights: bytes | None, rng: random.Random) -> tuple[str, bytes | None]:
    for _ in range(rng.choice((1, 1, 2, 3))):
        choice = rng.random()
        if choice < 0.45:
            text = _replace_one(text, _HLO_NUMBER, 0, rng, lambda n: str(rng.choice(_NUMBERS + _FLOATS)))
        elif choice < 0.6:
            text = _replace_one(text, _HLO_OP, 1, rng, lambda o: rng.choice(_HLO_OPS))
        elif choice < 0.7:
            text = _replace_one(text, _HLO_TYPE, 1, rng, lambda t: rng.choice(_HLO_TYPES))
        elif choice < 0.9:
            text = _mutate_lines(text, rng)
        elif weights is not None:
            weights = _mutate_bytes(weights, rng)
    return text, weights


def _replace_one(text: str, pattern: re.Pattern, group: int, rng: random.Random, value) -> str:
    """``text`` with one match of ``pattern`` (its ``group``), drawn at random, replaced by ``value(match)``."""
    found = list(pattern.finditer(text))
    if not found:
        return text
    match = rng.choice(found)
    return text[: match.start(group)] + value(match) + text[match.end(group) :]


def _text_value(name: str, value: str, rng: random.Random) -> str:
    if re.fullmatch(r"-?\d+", value):
        return str(rng.choice(_NUMBERS))
    if re.fullmatch(r"[-\d,\s]+", value):
        return ",".join(str(rng.choice(_NUMBERS)) for _ in range(rng.randint(0, 5)))
    if rng.random() < 0.5:
        return rng.choice(_TEXTS)
    return value[::-1]


def _xml_escape(text: str) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
    return "".join(c if c >= " " or c in "\t\n" else f"&#{ord(c)};" for c in text.replace("\x00", ""))


def _mutate_lines(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    if len(lines) < 2:
        return text
    i = rng.randrange(len(lines))
    choice = rng.random()
    if choice < 0.4:
        del lines[i]
    elif choice < 0.7:
        lines.insert(rng.randrange(len(lines)), lines[i])
    else:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    if not data or rng.random() < 0.5:
        return data[: rng.randrange(len(data) + 1)] if data else bytes(rng.randrange(64))
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

_OPTION_VALUES = (
    "-1",
    "0",
    "nan",
    "inf",
    "1e400",
    "x",
    "",
    "=",
    "x=",
    "x=-1",
    "x=1,,2",
    "image=0,3,32,32",
    "image=99999999,99999,9999",
    "a=b=c",
    "-",
    "/dev/null",
    "99999999999999999999",
)


def cli_nonsense(rng: random.Random, model: str, out: str) -> list[str]:
    """One command line: a real command with a valid model and nonsense options."""
    command = rng.choice(
        (
            ["run", model],
            ["verify", model, model],
            ["onnx-to-ir", model, "-o", out + ".xml"],
            ["onnx-to-hlo", model, "-o", out + ".hlo"],
            ["upgrade", model, "-o", out + ".onnx"],
            ["downgrade", model, "-o", out + ".onnx"],
            ["check", model],
            ["inspect", model],
            ["schema", "show", "onnx", rng.choice(_OPS)],
            ["run", model, "--inputs", model],
        )
    )
    options = (
        "--seed",
        "--shape",
        "--input-shape",
        "--opset",
        "--rtol",
        "--atol",
        "--json",
        "--junit",
        "-o",
        "--dim",
        "--format",
        "--max-tensor-bytes",
        "--version",
        "--kind",
        "-k",
    )
    for _ in range(rng.randint(1, 3)):
        option = rng.choice(options)
        if option == "--max-tensor-bytes":
            command = [option, rng.choice(_OPTION_VALUES)] + command
        else:
            command += [option, rng.choice(_OPTION_VALUES)]
    return command


# ---------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------


def write_mutant(kind: str, seeds: Seeds, rng: random.Random, folder: str) -> str:
    """Write one mutant of ``kind`` into ``folder``; returns the path to give opconv."""
    if kind in ("onnx", "cli"):
        path = os.path.join(folder, "m.onnx")
        data = rng.choice(seeds.onnx)
        with open(path, "wb") as f:
            f.write(mutate_onnx(data, rng) if kind == "onnx" else data)
        return path
    if kind == "ir":
        xml, weights = mutate_ir(*rng.choice(seeds.ir), rng)
        path = os.path.join(folder, "m.xml")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(xml)
        with open(os.path.join(folder, "m.bin"), "wb") as f:
            f.write(weights)
        return path
    text, weights = rng.choice(seeds.hlo)
    text, weights = mutate_hlo(text, weights, rng)
    path = os.path.join(folder, "m.hlo")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)
    if weights is not None:
        with open(path + ".weights", "wb") as f:
            f.write(weights)
    return path


def keep(path: str, folder: str, number: int) -> str:
    """Copy a mutant (with its sidecars) to ``folder`` as crash number ``number``; returns the new path."""
    os.makedirs(folder, exist_ok=True)
    stem, ext = os.path.splitext(os.path.basename(path))
    target = os.path.join(folder, f"crash{number}{ext}")
    shutil.copy(path, target)
    for side, new in ((path[:-4] + ".bin", target[:-4] + ".bin"), (path + ".weights", target + ".weights")):
        if os.path.exists(side):
            shutil.copy(side, new)
    return target
