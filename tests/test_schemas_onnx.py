"""The ONNX schema files: up to date with their sources, complete, and read back as intended.

``opconv/schemas/onnx.json`` is generated from the pinned onnx package and
``onnx_contrib.json`` from ONNX Runtime plus ``shared/specs/onnx-contrib-operators.txt``;
these tests regenerate them in memory and compare, then check what the loader makes of them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import helper

from opconv.errors import SchemaError
from opconv.schemas import dialect_schemas, lookup

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "opconv" / "schemas"
sys.path.insert(0, str(ROOT / "scripts"))

import gen_onnx_schemas as gen  # noqa: E402


def f32(x: float) -> float:
    """What a float attribute default is stored as: the float32 nearest ``x``."""
    return float(np.float32(x))


def onnx_keys(domain: str) -> set[tuple[str, int]]:
    return {(s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain}


def loaded_keys(domain: str) -> list[tuple[str, int]]:
    return [(s.name, s.version) for s in dialect_schemas("onnx") if s.domain == domain]


# --------------------------------------------------------------------------- generated files are current


def test_onnx_json_matches_a_fresh_generation():
    committed = (SCHEMAS / "onnx.json").read_text(encoding="utf-8")
    fresh = gen.generate()
    assert committed == fresh, "\n".join(gen.diff_summary(committed, fresh))


def test_generation_is_deterministic():
    assert gen.generate() == gen.generate()


@pytest.mark.slow
def test_check_option_reports_a_stale_file(tmp_path, capsys):
    stale = tmp_path / "onnx.json"
    data = json.loads((SCHEMAS / "onnx.json").read_text(encoding="utf-8"))
    data["ops"] = [op for op in data["ops"] if op["name"] != "Relu"]
    stale.write_text(json.dumps(data), encoding="utf-8")
    assert gen.main(["--check", "--output", str(stale)]) == 1
    assert "ai.onnx::Relu-" in capsys.readouterr().err
    assert gen.main(["--check"]) == 0


def test_onnx_contrib_json_matches_a_fresh_generation():
    ort = pytest.importorskip("onnxruntime")
    import gen_onnx_contrib_schemas as contrib

    committed = (SCHEMAS / "onnx_contrib.json").read_text(encoding="utf-8")
    if f"ONNX Runtime {ort.__version__} " not in json.loads(committed)["source"]:
        pytest.skip(f"onnx_contrib.json was generated with another ONNX Runtime than {ort.__version__}")
    if not contrib.TEXT.exists():
        pytest.skip(f"{contrib.TEXT} is not available")
    fresh = contrib.generate()
    assert committed == fresh, "\n".join(gen.diff_summary(committed, fresh))


# --------------------------------------------------------------------------- completeness


def ort_onnx_domain_keys(domain: str) -> set[tuple[str, int]]:
    """ONNX Runtime's own ai.onnx-domain schemas (LayerNormalization-1 ...), from onnx_contrib.json."""
    ops = json.loads((SCHEMAS / "onnx_contrib.json").read_text(encoding="utf-8"))["ops"]
    return {(op["name"], op["version"]) for op in ops if op["domain"] == domain}


@pytest.mark.parametrize("domain", ["", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training"])
def test_every_onnx_op_version_is_loaded_once(domain):
    loaded = loaded_keys(domain)
    ort_own = ort_onnx_domain_keys(domain)
    assert not ort_own & onnx_keys(domain), "ONNX Runtime's additions must not redefine ONNX's versions"
    assert len(loaded) == len(set(loaded))
    assert set(loaded) == onnx_keys(domain) | ort_own
    assert len(loaded) == len(onnx_keys(domain)) + len(ort_own)


def test_onnx_runtime_own_onnx_domain_schemas_are_loaded():
    # A model ORT runs with its ai.onnx-domain LayerNormalization-1 is valid for opconv too.
    assert {("LayerNormalization", 1), ("SimplifiedLayerNormalization", 1)} <= ort_onnx_domain_keys("")
    assert dialect_schemas("onnx").find("LayerNormalization", 16, "").version == 1
    assert dialect_schemas("onnx").find("LayerNormalization", 17, "").version == 17


def test_contrib_domains_are_loaded():
    domains = dialect_schemas("onnx").domains()
    assert {"com.microsoft", "com.microsoft.nchwc", "ai.onnx.training"} <= set(domains)
    assert "com.ms.internal.nhwc" not in domains


def text_ops() -> list[dict]:
    return json.loads((ROOT / "scripts" / "contrib_text_ops.json").read_text(encoding="utf-8"))["ops"]


@pytest.mark.parametrize("record", text_ops(), ids=lambda r: f"{r['domain']}::{r['name']}")
def test_every_op_of_the_contrib_text_is_in_the_schemas(record):
    # Experimental (unversioned) ops of the text are registered at version 1.
    schema = lookup("onnx", record["name"], record["version"] or 1, domain=record["domain"])
    assert schema.domain == record["domain"]
    assert schema.inputs or schema.outputs
    assert schema.type_constraints or all("(" in p.type for p in schema.inputs + schema.outputs)


def test_contrib_text_names_are_complete():
    names = {(r["domain"], r["name"]) for r in text_ops()}
    assert len(names) == 45
    assert {("ai.onnx.training", n) for n in ("Adagrad", "Gradient", "GraphCall", "Momentum")} <= names
    assert ("com.microsoft", "Irfft") in names and ("com.microsoft", "Rfft") in names


# --------------------------------------------------------------------------- lookup semantics


def test_lookup_finds_the_version_in_force():
    assert lookup("onnx", "Softmax", 12).version == 11
    assert lookup("onnx", "Softmax", 13).version == 13
    assert lookup("onnx", "Clip", 10).version == 6
    assert lookup("onnx", "Abs").version == max(v for n, v in onnx_keys("") if n == "Abs")


def test_lookup_rejects_unknown_ops_and_versions():
    with pytest.raises(SchemaError, match="unknown onnx op"):
        lookup("onnx", "NoSuchOperator", 13)
    with pytest.raises(SchemaError, match="first defined at version"):
        lookup("onnx", "Gelu", 19)  # Gelu arrived in opset 20
    with pytest.raises(SchemaError):
        lookup("onnx", "Conv", 11, domain="com.example")


# --------------------------------------------------------------------------- content spot checks


def test_conv_attributes():
    conv = lookup("onnx", "Conv", 11)
    assert conv.attribute("auto_pad").type == "string"
    assert conv.attribute("auto_pad").default == "NOTSET"
    assert conv.attribute("group").default == 1
    assert conv.attribute("kernel_shape").type == "ints" and conv.attribute("kernel_shape").default is None
    assert [p.option for p in conv.inputs] == ["single", "single", "optional"]
    assert (conv.min_inputs, conv.max_inputs) == (2, 3)


def test_float_defaults_are_float32_values():
    assert lookup("onnx", "LeakyRelu", 16).attribute("alpha").default == f32(0.01)
    assert lookup("onnx", "BatchNormalization", 15).attribute("epsilon").default == f32(1e-5)
    assert lookup("onnx", "Gemm", 13).attribute("beta").default == 1.0


@pytest.mark.parametrize(
    "op, version, domain",
    [
        ("LeakyRelu", 16, ""),
        ("Conv", 22, ""),
        ("Resize", 19, ""),
        ("LabelEncoder", 4, "ai.onnx.ml"),
        ("Adagrad", 1, "ai.onnx.preview.training"),
    ],
)
def test_defaults_agree_with_onnx_defs(op, version, domain):
    ref = onnx.defs.get_schema(op, version, domain)
    mine = lookup("onnx", op, version, domain=domain)
    for name, attr in ref.attributes.items():
        expected = None
        if attr.default_value.type:
            expected = helper.get_attribute_value(attr.default_value)
            if isinstance(expected, bytes):
                expected = expected.decode()
            elif isinstance(expected, list):
                expected = [v.decode() if isinstance(v, bytes) else v for v in expected]
        assert mine.attribute(name).default == expected, name
        assert mine.attribute(name).required == attr.required, name


def test_attribute_kinds():
    assert lookup("onnx", "Loop", 21).attribute("body").type == "graph"
    assert lookup("onnx", "Loop", 21).attribute("body").required
    constant = lookup("onnx", "Constant", 21)
    assert constant.attribute("value").type == "tensor"
    assert constant.attribute("sparse_value").type == "sparse_tensor"
    assert lookup("onnx", "Cast", 21).attribute("to").required


def test_type_strings_are_canonical():
    assert lookup("onnx", "Relu", 14).type_constraints["T"][:3] == ("tensor(float32)", "tensor(int32)", "tensor(int8)")
    zipmap = lookup("onnx", "ZipMap", 1, domain="ai.onnx.ml")
    assert set(zipmap.type_constraints["T"]) == {"seq(map(string,float32))", "seq(map(int64,float32))"}
    assert lookup("onnx", "NonZero", 13).outputs[0].type == "tensor(int64)"
    for schema in dialect_schemas("onnx"):
        for types in schema.type_constraints.values():
            for t in types:
                assert gen.canonical_type(t) == t


def test_variadic_parameters():
    concat = lookup("onnx", "Concat", 13)
    assert concat.inputs[0].option == "variadic" and concat.inputs[0].min_arity == 1
    assert concat.max_inputs == 2**31 - 1
    loop = lookup("onnx", "Loop", 21)
    assert loop.inputs[-1].option == "variadic" and not loop.inputs[-1].homogeneous
    assert loop.inputs[-1].min_arity == 0


def test_docs_are_short_plain_text():
    for schema in dialect_schemas("onnx"):
        assert len(schema.doc) <= gen.OP_DOC_LIMIT, schema.key
        assert "```" not in schema.doc and "\n" not in schema.doc, schema.key
    assert lookup("onnx", "MatMul", 13).doc.startswith("Matrix product that behaves like numpy.matmul")


def test_deprecated_ops_are_marked():
    assert lookup("onnx", "Upsample", 10).deprecated
    assert not lookup("onnx", "Resize", 10).deprecated


# --------------------------------------------------------------------------- contrib content


def test_training_ops_from_the_text_agree_with_their_onnx_successors():
    for name in ("Adagrad", "Gradient", "Momentum"):
        mine = lookup("onnx", name, 1, domain="ai.onnx.training")
        ref = onnx.defs.get_schema(name, 1, "ai.onnx.preview.training")
        assert [a.name for a in mine.attributes] == sorted(ref.attributes)
        assert [(p.name, p.option) for p in mine.inputs] == [(p.name, p.option.name.lower()) for p in ref.inputs]
        assert [p.name for p in mine.outputs] == [p.name for p in ref.outputs]
        assert (mine.min_inputs, mine.max_inputs) == (ref.min_input, ref.max_input)
    adagrad = lookup("onnx", "Adagrad", 1, domain="ai.onnx.training")
    assert adagrad.attribute("epsilon").default == f32(1e-6)
    assert "ai.onnx.preview.training" in adagrad.notes


def test_graphcall_is_recovered_from_the_text():
    graphcall = lookup("onnx", "GraphCall", 1, domain="ai.onnx.training")
    assert graphcall.attribute("graph_name").required
    assert graphcall.inputs[0].option == "variadic" and not graphcall.inputs[0].homogeneous
    assert "tensor(float32)" in graphcall.type_constraints["T"]


def test_contrib_ops_follow_onnx_runtime_and_note_the_text():
    fused_gemm = lookup("onnx", "FusedGemm", 1, domain="com.microsoft")
    assert fused_gemm.attribute("activation") is not None
    assert "leaky_relu_alpha is gone" in fused_gemm.notes
    assert lookup("onnx", "ReorderInput", 1, domain="com.microsoft.nchwc").type_constraints["T"]


# --------------------------------------------------------------------------- converters


@pytest.mark.parametrize(
    "raw, canonical",
    [
        ("tensor(float)", "tensor(float32)"),
        ("seq(tensor(double))", "seq(tensor(float64))"),
        ("map(int64, tensor(float))", "map(int64,tensor(float32))"),
        ("optional(seq(tensor(bfloat16)))", "optional(seq(tensor(bfloat16)))"),
        ("sparse_tensor(float8e4m3fn)", "sparse_tensor(float8e4m3fn)"),
        ("map(string, double)", "map(string,float64)"),
    ],
)
def test_canonical_type(raw, canonical):
    assert gen.canonical_type(raw) == canonical


@pytest.mark.parametrize(
    "bad", ["tensor(quaternion)", "tensor(float", "tensor(float))", "list(float)", "map(int64)", "tensor(float; int8)"]
)
def test_canonical_type_rejects_what_it_does_not_know(bad):
    with pytest.raises(ValueError):
        gen.canonical_type(bad)


def test_tensor_defaults_are_encoded_when_representable():
    tensor = helper.make_tensor("t", onnx.TensorProto.FLOAT, [2], [0.1, 2.0])
    assert gen.decode_default(helper.make_attribute("v", tensor)) == {
        "dtype": "float32",
        "shape": [2],
        "values": [f32(0.1), 2.0],
    }
    ints = helper.make_tensor("t", onnx.TensorProto.INT64, [1, 2], [3, 4])
    assert gen.encode_tensor(ints) == {"dtype": "int64", "shape": [1, 2], "values": [3, 4]}
    nan = helper.make_tensor("t", onnx.TensorProto.FLOAT, [1], [float("nan")])
    assert gen.encode_tensor(nan) is gen.NO_DEFAULT


def test_summarize():
    doc = "\nComputes `x`, see [the paper](https://x.y).\nMore here. And more.\n\n```\ncode\n```"
    assert gen.summarize(doc) == "Computes x, see the paper. More here."
    assert gen.summarize("Gathers slices. Example 1:") == "Gathers slices."
    long = "word " * 100 + "."
    assert len(gen.summarize(long)) <= gen.OP_DOC_LIMIT and gen.summarize(long).endswith("...")


def test_deferred_schema_files_are_read_when_an_op_is_missing():
    from opconv.schemas import DialectSchemas, SchemaError

    def entry(name, version, domain=""):
        return ({"name": name, "version": version, "domain": domain, "inputs": [], "outputs": []}, "test.json")

    reads = []

    def contrib():
        reads.append(1)
        return [entry("Fused", 1, "com.example"), entry("Relu", 3)]

    schemas = DialectSchemas("onnx", raw=[entry("Relu", 1), entry("Relu", 6)], later=[contrib])
    assert schemas.find("Relu", 5).version == 1 and reads == []
    assert schemas.find("Fused", 1, "com.example").name == "Fused" and reads == [1]
    assert [s.version for s in schemas.versions("Relu")] == [1, 3, 6]
    assert len(schemas) == 4
    clash = DialectSchemas("onnx", raw=[entry("Relu", 1)], later=[lambda: [entry("Relu", 1)]])
    with pytest.raises(SchemaError, match="duplicate versions"):
        clash.find("Missing")
