#!/usr/bin/env python3
"""Writes the malformed and hostile ONNX models of tests/corpus/.

Usage: python3 tests/corpus/make_corpus.py   (needs `pip install onnx`)

Every case is deterministic (fixed seeds), so re-running the script gives
byte-identical files; the generated files are committed so that the tests
need no Python. expected.txt lists what memplan must answer for each one.
Cases that are cheap to make at test time (truncations of
models/resnet18.onnx at many offsets) are made by tests/corpus_test.sh.
"""

import gzip
import os
import random
import struct

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
FLOAT = TensorProto.FLOAT
IR = 8  # Debian's onnx.proto schema; newer fields arrive as unknown fields.

written = []


def write_bytes(name, data):
    path = os.path.join(HERE, name)
    with open(path, "wb") as f:
        f.write(data)
    written.append(name)


def write_model(name, model):
    write_bytes(name, model.SerializeToString())


def model_of(graph, opset=17, ir=IR, opsets=None):
    if opsets is None:
        opsets = [helper.make_opsetid("", opset)]
    m = helper.make_model(graph, opset_imports=opsets, producer_name="make_corpus")
    m.ir_version = ir
    return m


def vi(name, dims, dtype=FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


def relu_graph(in_dims=("batch", 4), out_dims=("batch", 4), name="g"):
    """x -> Relu -> y: the smallest valid graph, altered by the cases."""
    return helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        name,
        [vi("x", list(in_dims))],
        [vi("y", list(out_dims))],
    )


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    return varint((num << 3) | wire) + payload


def ld(num, payload):  # length-delimited field
    return field(num, 2, varint(len(payload)) + payload)


def load_shipped(name):
    return onnx.load(os.path.join(MODELS, name), load_external_data=False)


# ---------------------------------------------------------------------------
# Not ONNX at all.

write_bytes("empty.onnx", b"")
for seed in (1, 2, 3):
    rng = random.Random(seed)
    write_bytes("random_bytes_%d.onnx" % seed, bytes(rng.randrange(256) for _ in range(4096)))
write_bytes("text_file.onnx", b"this is not a model\n" * 10)

# Wrong wire types. A known field sent with another wire type is an unknown
# field to protobuf: the model parses but lacks what it needs.
good = model_of(relu_graph()).SerializeToString()
# ir_version (field 1) as a string, the rest intact: IR version 0.
write_bytes("wire_ir_version_as_string.onnx", ld(1, b"\x08") + good[2:])
# graph (field 7) as a varint, then an opset: "no graph".
write_bytes("wire_graph_as_varint.onnx", field(1, 0, varint(8)) + field(7, 0, varint(5)))
# wire type 7 does not exist: a parse error.
write_bytes("wire_type_invalid.onnx", good + field(9, 7, b""))
# a length that runs past the end of the file.
write_bytes("wire_length_past_end.onnx", field(1, 0, varint(8)) + field(7, 2, varint(1 << 20)) + b"xx")
# a group start (wire type 3) that never ends.
write_bytes("wire_unterminated_group.onnx", good + field(15, 3, b""))
# node.input (field 1 of NodeProto) as a varint inside an otherwise valid graph.
node_bad = field(1, 0, varint(3)) + ld(2, b"y") + ld(4, b"Relu")
graph_bad = ld(1, node_bad) + ld(2, b"g") + ld(11, vi("x", [2, 4]).SerializeToString()) + ld(
    12, vi("y", [2, 4]).SerializeToString())
write_bytes("wire_node_input_as_varint.onnx",
            field(1, 0, varint(8)) + ld(7, graph_bad) + ld(8, ld(1, b"") + field(2, 0, varint(17))))

# ---------------------------------------------------------------------------
# Structure.

write_model("ir_version_zero.onnx", model_of(relu_graph(), ir=0))
g = helper.make_graph([], "empty", [vi("x", ["batch", 4])], [vi("x", ["batch", 4])])
write_model("empty_graph.onnx", model_of(g))
write_model("no_opset.onnx", model_of(relu_graph(), opsets=[]))
write_model("only_custom_opset.onnx", model_of(relu_graph(), opsets=[helper.make_opsetid("com.x", 1)]))
write_model("huge_opset.onnx", model_of(relu_graph(), opset=1 << 40))
write_model("opset_negative.onnx", model_of(relu_graph(), opset=-1))

# Two nodes write the same tensor.
g = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="first"),
     helper.make_node("Neg", ["x"], ["y"], name="second")],
    "dup", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("duplicate_output.onnx", model_of(g))
# A node that lists the same output twice (found by the fuzzer: the error
# message read the node past the end of the node list).
g = helper.make_graph([helper.make_node("Split", ["x"], ["y", "y"], name="split_twice", axis=1)],
                      "dupout", [vi("x", ["batch", 4])], [vi("y", ["batch", 2])])
write_model("duplicate_output_same_node.onnx", model_of(g))
# An initializer listed twice.
w = helper.make_tensor("w", FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "dupinit",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], initializer=[w, w])
write_model("duplicate_initializer.onnx", model_of(g))
# A graph input listed twice.
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "dupin",
                      [vi("x", ["batch", 4]), vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("duplicate_input.onnx", model_of(g))
# A node writes over a graph input.
g = helper.make_graph([helper.make_node("Relu", ["x"], ["x"], name="inplace")], "overwrite",
                      [vi("x", ["batch", 4])], [vi("x", ["batch", 4])])
write_model("output_is_input.onnx", model_of(g))

# A node input that nothing produces.
g = helper.make_graph([helper.make_node("Add", ["x", "ghost"], ["y"], name="add_ghost")], "dangling",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("dangling_input.onnx", model_of(g))
# A graph output that nothing produces.
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "dangling_out",
                      [vi("x", ["batch", 4])], [vi("nowhere", ["batch", 4])])
write_model("dangling_output.onnx", model_of(g))
# A cycle: a = Relu(b), b = Neg(a).
g = helper.make_graph(
    [helper.make_node("Add", ["x", "b"], ["a"], name="cyc_add"),
     helper.make_node("Neg", ["a"], ["b"], name="cyc_neg"),
     helper.make_node("Relu", ["a"], ["y"], name="relu")],
    "cycle", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("cycle.onnx", model_of(g))
# A node that reads its own output.
g = helper.make_graph([helper.make_node("Add", ["x", "s"], ["s"], name="self_loop")], "self",
                      [vi("x", ["batch", 4])], [vi("s", ["batch", 4])])
write_model("self_loop.onnx", model_of(g))
# Nodes out of file order (valid: memplan sorts them).
g = helper.make_graph(
    [helper.make_node("Neg", ["a"], ["y"], name="second"),
     helper.make_node("Relu", ["x"], ["a"], name="first")],
    "unsorted", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("unsorted_valid.onnx", model_of(g))
# A node with no op_type, an op nobody knows, an unnamed graph input.
g = relu_graph()
g.node[0].op_type = ""
write_model("empty_op_type.onnx", model_of(g))
g = helper.make_graph([helper.make_node("FrobnicateTensor", ["x"], ["y"], name="frob", domain="com.acme")],
                      "unknown", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("unknown_op.onnx", model_of(g, opsets=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.acme", 1)]))
g = relu_graph()
g.input[0].name = ""
write_model("unnamed_input.onnx", model_of(g))
# Control characters in names would forge extra lines in a CI log.
g = relu_graph()
g.output[0].name = "y\nmemplan: error: forged line"
g.node[0].output[0] = "y\nmemplan: error: forged line"
write_model("newline_in_tensor_name.onnx", model_of(g))
g = relu_graph()
g.node[0].name = "relu\x1b[2J"
write_model("escape_in_node_name.onnx", model_of(g))
g = relu_graph()
g.input[0].type.Clear()
write_model("input_without_type.onnx", model_of(g))

# ---------------------------------------------------------------------------
# Dims and dtypes.

write_model("negative_input_dim.onnx", model_of(relu_graph(in_dims=("batch", -3))))
w = helper.make_tensor("w", FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
w.dims[0] = -4
g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "neg_init",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], initializer=[w])
write_model("negative_initializer_dim.onnx", model_of(g))
# A zero-sized tensor is valid: 0 bytes.
write_model("zero_dim_valid.onnx", model_of(relu_graph(in_dims=("batch", 0), out_dims=("batch", 0))))
# An initializer of 2^40 x 2^40 floats: numel fits, bytes do not.
big = helper.make_tensor("w", FLOAT, [1], [0.0])
big.ClearField("float_data")
big.ClearField("dims")
big.dims.extend([1 << 40, 1 << 40])
big.data_location = TensorProto.EXTERNAL
big.external_data.add(key="location", value="never_read.bin")
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "ovf_init",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], initializer=[big])
write_model("overflow_initializer_dims.onnx", model_of(g))
# A graph input whose dims multiply past int64.
write_model("overflow_input_dims.onnx",
            model_of(relu_graph(in_dims=("batch", 1 << 31, 1 << 31, 1 << 31),
                                out_dims=("batch", 1 << 31, 1 << 31, 1 << 31))))
# Inputs that fit, an op whose output does not: MatMul [b, 2^31, 1] x [1, 2^33].
g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm_big")], "ovf_mm",
                      [vi("a", ["batch", 1 << 31, 1]), vi("b", [1, 1 << 33])],
                      [vi("y", ["batch", 1 << 31, 1 << 33])])
write_model("overflow_matmul_output.onnx", model_of(g))
# Expand to a constant shape that overflows.
shape = helper.make_tensor("shape", TensorProto.INT64, [3], [1 << 30, 1 << 30, 1 << 30])
g = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_big")],
                      "ovf_expand", [vi("x", ["batch", 1, 1])], [vi("y", None)], initializer=[shape])
write_model("overflow_expand.onnx", model_of(g))
# Reshape to a negative size other than -1.
shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-5, 4])
g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_neg")],
                      "neg_reshape", [vi("x", ["batch", 4])], [vi("y", None)], initializer=[shape])
write_model("reshape_negative.onnx", model_of(g))
# Unknown dtypes: on an input, on an initializer.
write_model("unknown_dtype_input.onnx", model_of(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="relu")], "udt",
    [vi("x", ["batch", 4], dtype=99)], [vi("y", ["batch", 4])])))
w = helper.make_tensor("w", FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
w.data_type = 77
g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "udt_init",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], initializer=[w])
write_model("unknown_dtype_initializer.onnx", model_of(g))
# raw_data shorter than the dims say (a Reshape shape constant).
shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 4])
shape.ClearField("int64_data")
shape.raw_data = struct.pack("<q", -1)  # 8 bytes for 2 elements
g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_short")],
                      "short_raw", [vi("x", ["batch", 4])], [vi("y", None)], initializer=[shape])
write_model("short_raw_data.onnx", model_of(g))
# value_info that contradicts inference: shape, then dtype.
g = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["h"], name="relu"),
     helper.make_node("Neg", ["h"], ["y"], name="neg")],
    "vi_shape", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])],
    value_info=[vi("h", ["batch", 5])])
write_model("value_info_wrong_shape.onnx", model_of(g))
# value_info and the graph output disagree about the same tensor.
g = relu_graph()
g.value_info.append(vi("y", ["batch", 5]))
write_model("value_info_conflicts_output.onnx", model_of(g))
g = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["h"], name="relu"),
     helper.make_node("Neg", ["h"], ["y"], name="neg")],
    "vi_dtype", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])],
    value_info=[vi("h", ["batch", 4], dtype=TensorProto.INT32)])
write_model("value_info_wrong_dtype.onnx", model_of(g))
g = relu_graph(out_dims=("batch", 4, 1))
write_model("output_wrong_rank.onnx", model_of(g))

# ---------------------------------------------------------------------------
# Subgraphs.


def nested_if(depth):
    """An If whose then-branch holds an If, `depth` levels (else: a leaf)."""
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["r0"], name="leaf")], "leaf", [],
                             [vi("r0", ["batch", 4])])
    body = leaf
    for level in range(1, depth + 1):
        out = "r%d" % level
        node = helper.make_node("If", ["cond"], [out], name="if_%d" % level,
                                then_branch=body, else_branch=leaf)
        body = helper.make_graph([node], "level_%d" % level, [], [vi(out, ["batch", 4])])
    return body


def nested_model(depth):
    inner = nested_if(depth)
    g = helper.make_graph(list(inner.node), "nested",
                          [vi("x", ["batch", 4]), vi("cond", [], dtype=TensorProto.BOOL)],
                          [vi("r%d" % depth, ["batch", 4])])
    return model_of(g)


write_model("nested_if_8_valid.onnx", nested_model(8))  # within the limit: valid
write_model("nested_if_17.onnx", nested_model(17))     # one past max_subgraph_depth


def nested_if_bytes(depth):
    """nested_model(depth) serialized by hand: Python's protobuf refuses to
    build messages nested this deeply."""
    leaf = nested_if(0).SerializeToString()
    body = leaf
    for level in range(1, depth + 1):
        out = b"r%d" % level
        attrs = (ld(5, ld(1, b"then_branch") + ld(6, body) + field(20, 0, varint(5))) +
                 ld(5, ld(1, b"else_branch") + ld(6, leaf) + field(20, 0, varint(5))))
        node = ld(1, b"cond") + ld(2, out) + ld(3, b"if_%d" % level) + ld(4, b"If") + attrs
        body = ld(1, node) + ld(2, b"level_%d" % level) + ld(12, vi(out.decode(), ["batch", 4]).SerializeToString())
    top = nested_model(1)
    inputs = b"".join(ld(11, i.SerializeToString()) for i in top.graph.input)
    graph_bytes = body + inputs
    return (field(1, 0, varint(IR)) + ld(2, b"make_corpus") + ld(7, graph_bytes) +
            ld(8, ld(1, b"") + field(2, 0, varint(17))))


write_bytes("nested_if_40.onnx", nested_if_bytes(40))  # past protobuf's recursion limit


def nested_loop(depth):
    body = None
    for level in range(depth, 0, -1):
        nodes = [helper.make_node("Identity", ["v_in"], ["v_out"], name="id_%d" % level),
                 helper.make_node("Identity", ["c_in"], ["c_out"], name="c_%d" % level)]
        if body is not None:
            nodes.append(helper.make_node("Loop", ["", "c_in", "v_in"], ["w_%d" % level],
                                          name="loop_%d" % level, body=body))
        body = helper.make_graph(nodes, "body_%d" % level,
                                 [vi("i", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL),
                                  vi("v_in", [4])],
                                 [vi("c_out", [], TensorProto.BOOL), vi("v_out", [4])])
    return body


g = helper.make_graph(
    [helper.make_node("Loop", ["n", "cond", "x"], ["y"], name="outer_loop", body=nested_loop(20))],
    "loops", [vi("x", [4]), vi("n", [], TensorProto.INT64), vi("cond", [], TensorProto.BOOL)],
    [vi("y", [4])])
write_model("nested_loop_20.onnx", model_of(g))

scan_body = helper.make_graph([helper.make_node("Add", ["s_in", "e"], ["s_out"], name="scan_add")],
                              "scan_body", [vi("s_in", [4]), vi("e", [4])], [vi("s_out", [4])])
for level in range(18):
    scan_body = helper.make_graph(
        [helper.make_node("Scan", ["s_in", "e"], ["s_out"], name="scan_%d" % level, body=scan_body,
                          num_scan_inputs=1)],
        "scan_%d" % level, [vi("s_in", [4]), vi("e", [4])], [vi("s_out", [4])])
g = helper.make_graph(
    [helper.make_node("Scan", ["s", "xs"], ["y"], name="outer_scan", body=scan_body, num_scan_inputs=1)],
    "scans", [vi("s", [4]), vi("xs", ["batch", 4])], [vi("y", [4])])
write_model("nested_scan_19.onnx", model_of(g))

# ---------------------------------------------------------------------------
# Size: a valid chain of 100,000 nodes (stored gzipped; the test unpacks it).

N = 100000
nodes = []
prev = "x"
for i in range(N):
    out = "y" if i == N - 1 else "t%d" % i
    nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [out]))
    prev = out
g = helper.make_graph(nodes, "chain", [vi("x", ["batch", 8])], [vi("y", ["batch", 8])])
data = model_of(g).SerializeToString()
with open(os.path.join(HERE, "chain_100k_valid.onnx.gz"), "wb") as f:
    f.write(gzip.compress(data, compresslevel=9, mtime=0))
written.append("chain_100k_valid.onnx.gz")

# 100,000 Relus side by side (wide, not deep): all outputs are graph outputs.
# Too big to keep; the chain covers the node count.

# ---------------------------------------------------------------------------
# External data: absolute paths and "..". They are recorded, never opened;
# the test points them at a FIFO (opening it would block) and checks with
# strace when it is there.

FIFO = "/tmp/memplan_corpus_fifo"
for case, location in (("external_absolute_path.onnx", FIFO),
                       ("external_dotdot_path.onnx", "../../../../../../../../../.." + FIFO),
                       ("external_missing_file.onnx", "does/not/exist.bin")):
    w = helper.make_tensor("w", FLOAT, [4], [0.0] * 4)
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    w.external_data.add(key="offset", value="0")
    w.external_data.add(key="length", value="16")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "ext",
                          [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], initializer=[w])
    write_model(case, model_of(g))

# The shipped ResNet-18 with every weight redirected to /etc/shadow-like paths.
m = load_shipped("resnet18.onnx")
for i, init in enumerate(m.graph.initializer):
    for kv in init.external_data:
        if kv.key == "location":
            kv.value = FIFO if i % 2 else "../../../../../../.." + FIFO
write_model("resnet18_hostile_external.onnx", m)

# ---------------------------------------------------------------------------
# Real models, altered.

# ResNet-18 with a node input renamed to something nobody produces.
m = load_shipped("resnet18.onnx")
m.graph.node[5].input[0] = "no_such_tensor"
write_model("resnet18_dangling.onnx", m)
# ResNet-18 whose first Conv weight has one dim too few.
m = load_shipped("resnet18.onnx")
del m.graph.initializer[0].dims[-1]
write_model("resnet18_bad_weight_rank.onnx", m)
# ResNet-18 whose value_info for one activation has a wrong channel count.
m = load_shipped("resnet18.onnx")
v = m.graph.value_info[3]
v.type.tensor_type.shape.dim[1].dim_value += 1
write_model("resnet18_wrong_value_info.onnx", m)

total = sum(os.path.getsize(os.path.join(HERE, n)) for n in written)
print("wrote %d files, %d bytes" % (len(written), total))
