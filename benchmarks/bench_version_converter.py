"""opconv's version converter vs onnx.version_converter on a generated ~20,000-node opset-9 model.

The model is what the issue describes: a chain of 953 identical 21-node blocks (20,013 nodes) at opset 9,
every value flowing into the next node, built from a realistic mix of operators that change between
opset 9 and 21 (every one of them needs onnx.version_converter's adapters, since it visits each version):

* 11 of the 21 need a rewrite, not just a new version number: Clip (min/max become inputs), Softmax
  (2-D coercion becomes a single axis), ReduceMean and ReduceSum (axes become an input), Pad, Slice,
  Squeeze, Unsqueeze, Dropout (ratio becomes an input), Split, Upsample (becomes Resize);
* the other 10 change only compatibly (new attributes or outputs with defaults, wider type sets):
  BatchNormalization, Reshape x2, MaxPool, Add, Concat, MatMul, Tanh, Mul, Sub.

Constants are initializers (per-block BatchNormalization/MatMul weights; a few shapes and scales shared
by every block, as exporters write them).  onnx.version_converter's peak RSS on it (about 210 MB) is
the issue's reference figure (214 MB), so this is a model of the same size and kind; it is not weighted
towards the operators onnx handles slowest.

Both converters do the same work, timed alike: ModelProto in, converted ModelProto out (for opconv
``opconv.converters.onnx_versions.convert_proto``: convert the nodes that change, the first of each
repeated form through the graph core and the others from its memo template, write them back into a
copy of the protobuf, and take the partial graph apart so its memory is freed inside the call, as
onnx's C++ converter frees its own; see docs/version-converter.md).  A full garbage collection runs
before each timed call, outside the timing, so that neither pays for the other's leftovers.  Two
conversions are timed, the converters alternating per round, medians reported:

* upgrade 9 -> 21 of the generated model;
* downgrade of opconv's opset-21 result back to 13 (onnx.version_converter has no Pad 18 -> 17 adapter
  and fails it).

    CI=true python benchmarks/bench_version_converter.py               # 20,013 nodes, 3 rounds
    CI=true python benchmarks/bench_version_converter.py --blocks 100 --rounds 1

Each run also checks (outside the timing) that opconv's results pass onnx.checker and compute the same
outputs as the source model (opconv's executor, one seeded input).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper, version_converter  # noqa: E402

# Both converters are imported before any timing (the first round still pays each one's first-use
# costs, such as opconv's schema tables; the median leaves that round out).
from opconv.converters.onnx_versions import convert_proto  # noqa: E402

C, H = 8, 16


def build_model(blocks: int) -> onnx.ModelProto:
    """``blocks`` copies of a 21-node block at opset 9; input and output (1, C, H, H)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    const("shape_flat", np.array([1, C, H * H], np.int64))
    const("shape_back", np.array([1, C, H, H], np.int64))
    const("scales", np.array([1, 1, 2, 2], np.float32))
    const("half", np.array(0.5, np.float32))
    x = "x"
    for b in range(blocks):

        def n(op, inputs, outputs=1, **attrs):  # called within this block's iteration only
            names = [f"b{b}_{op}_{len(nodes)}_{i}" for i in range(outputs)]  # noqa: B023
            nodes.append(helper.make_node(op, inputs, names, name=f"b{b}_{len(nodes)}", **attrs))  # noqa: B023
            return names[0] if outputs == 1 else names

        scale = const(f"b{b}_scale", rng.uniform(0.5, 1.5, C).astype(np.float32))
        bias = const(f"b{b}_bias", rng.uniform(-0.1, 0.1, C).astype(np.float32))
        mean = const(f"b{b}_mean", rng.uniform(-0.1, 0.1, C).astype(np.float32))
        var = const(f"b{b}_var", rng.uniform(0.5, 1.5, C).astype(np.float32))
        w = const(f"b{b}_w", (rng.standard_normal((H, H)) * 0.1).astype(np.float32))
        c = n("Clip", [x], min=-2.0, max=2.0)
        s = n("Softmax", [c], axis=3)
        r = n("ReduceMean", [s], axes=[1], keepdims=1)
        a = n("Add", [s, r])
        p = n("Pad", [a], pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="constant", value=0.0)
        sl = n("Slice", [p], starts=[1, 1], ends=[H + 1, H + 1], axes=[2, 3])
        u = n("Unsqueeze", [sl], axes=[0])
        q = n("Squeeze", [u], axes=[0])
        d = n("Dropout", [q], ratio=0.1)
        left, right = n("Split", [d], outputs=2, axis=1, split=[C // 2, C // 2])
        cat = n("Concat", [right, left], axis=1)
        flat = n("Reshape", [cat, "shape_flat"])
        back = n("Reshape", [flat, "shape_back"])
        up = n("Upsample", [back, "scales"], mode="nearest")
        pooled = n("MaxPool", [up], kernel_shape=[2, 2], strides=[2, 2])
        bn = n("BatchNormalization", [pooled, scale, bias, mean, var], epsilon=1e-5)
        mm = n("MatMul", [bn, w])
        t = n("Tanh", [mm])
        h = n("Mul", [t, "half"])
        m = n("ReduceSum", [h], axes=[3], keepdims=1)
        x = n("Sub", [h, m])
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, C, H, H])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], producer_name="bench")
    model.ir_version = 4
    return model


def opconv_convert(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    return convert_proto(model, opset)


def onnx_convert(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    return version_converter.convert_version(model, opset)


def timed(fn, *args):
    gc.collect()  # neither converter pays for the other's (or an earlier round's) garbage
    start = time.perf_counter()
    try:
        result = fn(*args)
    except Exception as e:  # noqa: BLE001 - a converter that fails is reported, not fatal
        return time.perf_counter() - start, None, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return time.perf_counter() - start, result, ""


def same_outputs(a: onnx.ModelProto, b: onnx.ModelProto) -> bool:
    import opconv

    x = np.random.default_rng(1).standard_normal((1, C, H, H)).astype(np.float32)
    ya = next(iter(opconv.run(a, {"x": x}).values()))
    yb = next(iter(opconv.run(b, {"x": x}).values()))
    return bool(np.allclose(ya, yb, rtol=1e-4, atol=1e-5))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--blocks", type=int, default=953, help="blocks of 21 nodes (953: 20,013 nodes)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-check", action="store_true", help="skip the checker/numeric check of opconv's results")
    args = ap.parse_args(argv)

    model = build_model(args.blocks)
    print(f"model: {len(model.graph.node):,} nodes at opset 9, {args.rounds} rounds, alternating")
    times = {(conv, step): [] for conv in ("opconv", "onnx") for step in ("up", "down")}
    errors: dict[tuple[str, str], str] = {}
    converters = {"opconv": opconv_convert, "onnx": onnx_convert}
    up21 = None
    for r in range(args.rounds):
        order = ("opconv", "onnx") if r % 2 == 0 else ("onnx", "opconv")
        for conv in order:
            seconds, result, error = timed(converters[conv], model, 21)
            times[(conv, "up")].append(seconds)
            if error:
                errors[(conv, "up")] = error
            if conv == "opconv":
                up21 = result
        # Both downgrade the same opset-21 model (opconv's: onnx's own result is not always valid).
        for conv in order:
            seconds, result, error = timed(converters[conv], up21, 13)
            times[(conv, "down")].append(seconds)
            if error:
                errors[(conv, "down")] = error
            elif conv == "opconv" and r == 0 and not args.no_check:
                onnx.checker.check_model(result, full_check=True)
                print(f"  opconv 21 -> 13: checker ok, same outputs as the source: {same_outputs(model, result)}")
        if r == 0 and not args.no_check:
            onnx.checker.check_model(up21, full_check=True)
            print(f"  opconv 9 -> 21: checker ok, same outputs as the source: {same_outputs(model, up21)}")

    print(f"{'step':18s} {'opconv (s)':>11s} {'onnx (s)':>10s} {'onnx/opconv':>12s}")
    for step, label in (("up", "upgrade 9 -> 21"), ("down", "downgrade 21 -> 13")):
        ours = statistics.median(times[("opconv", step)])
        theirs = statistics.median(times[("onnx", step)])
        failed = errors.get(("onnx", step))
        ratio = f"{theirs / ours:11.1f}x" if not failed else "     (failed)"
        print(f"{label:18s} {ours:11.2f} {theirs:10.2f} {ratio}")
    for (conv, step), error in errors.items():
        print(f"  {conv} {step}: {error}")
    return 1 if any(conv == "opconv" for conv, _ in errors) else 0


if __name__ == "__main__":
    sys.exit(main())
