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

# ---------------------------------------------------------------------------
# Hostile input, round 2: injection, hangs, blow-ups, ignored semantics.


def external_weight(name, dims):
    t = helper.make_tensor(name, FLOAT, [1], [0.0])
    t.ClearField("float_data")
    t.ClearField("dims")
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL  # never opened: keeps the file small
    t.external_data.add(key="location", value="weights.bin")
    return t


def mlp_blocks(names, width=64, batch="batch", seq=None):
    """x -> [MatMul -> Relu -> MatMul -> Relu] per block (4x wider inside),
    each node named after its block's module path (TorchScript style:
    /MODULE/OP)."""
    nodes, inits, prev = [], [], "x"
    for i, mod in enumerate(names):
        inits += [external_weight("w%d_1" % i, [width, 4 * width]),
                  external_weight("w%d_2" % i, [4 * width, width])]
        nodes += [helper.make_node("MatMul", [prev, "w%d_1" % i], ["h%d" % i],
                                   name="/%s/fc1/MatMul" % mod),
                  helper.make_node("Relu", ["h%d" % i], ["a%d" % i], name="/%s/act1/Relu" % mod),
                  helper.make_node("MatMul", ["a%d" % i, "w%d_2" % i], ["m%d" % i],
                                   name="/%s/fc2/MatMul" % mod)]
        out = "y" if i == len(names) - 1 else "r%d" % i
        nodes.append(helper.make_node("Relu", ["m%d" % i], [out], name="/%s/act2/Relu" % mod))
        prev = out
    dims = [batch, width] if seq is None else [batch, seq, width]
    return helper.make_graph(nodes, "blocks", [vi("x", dims)], [vi("y", dims)], initializer=inits)


# Module names that would be live code if pasted raw into the CHECKPOINT list
# of advise's PyTorch snippet (and a backtick that would end its Markdown
# code block).
EVIL = 'evil"),__import__("os").system("echo pwned"),("`%d'
write_model("advise_injection.onnx",
            model_of(mlp_blocks([EVIL % i for i in range(1, 9)], 256, seq=4096)))
# An ESC sequence in producer_name would reach the terminal raw.
m = model_of(relu_graph())
m.producer_name = "evil\x1b[2J\x1b[1;1Hmemplan: error: forged"
write_model("escape_in_producer_name.onnx", m)
# A 3000-byte node name (within the limit): tables must stay one row.
g = relu_graph()
g.node[0].name = "n" * 3000
write_model("long_node_name_valid.onnx", model_of(g))
# A 5000-byte node name: over the 4096-byte limit.
g = relu_graph()
g.node[0].name = "n" * 5000
write_model("node_name_too_long.onnx", model_of(g))
# Markdown and HTML metacharacters in a node name (valid; escaped on output).
g = relu_graph()
g.node[0].name = "<script>alert(1)</script>|**x**|`y`"
write_model("markup_in_node_name.onnx", model_of(g))

# Invalid UTF-8 in a tensor name (written by hand: protobuf refuses it).
good = model_of(relu_graph()).SerializeToString()
write_bytes("invalid_utf8_tensor_name.onnx", good.replace(b"\x12\x01y", b"\x12\x01\xff", 1)
            if b"\x12\x01y" in good else good)

# The parameter classifier: nine levels of Expand, each listing its input 12
# times (the classifier followed every listing: 12^9 paths).
nodes, prev = [], "w"
for level in range(9):
    nodes.append(helper.make_node("Expand", [prev] * 12, ["e%d" % level], name="ex%d" % level))
    prev = "e%d" % level
nodes.append(helper.make_node("Add", ["x", prev], ["y"], name="add"))
w = helper.make_tensor("w", FLOAT, [1, 4], [0.0] * 4)
g = helper.make_graph(nodes, "fanout", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])],
                      initializer=[w])
write_model("expand_fanout.onnx", model_of(g))
# One initializer listed 12,000 times in a Sum.
w = helper.make_tensor("w", FLOAT, [4], [0.0] * 4)
g = helper.make_graph([helper.make_node("Sum", ["x"] + ["w"] * 12000, ["y"], name="sum")], "sum",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], initializer=[w])
data = model_of(g).SerializeToString()
with open(os.path.join(HERE, "sum_12k_copies_valid.onnx.gz"), "wb") as f:
    f.write(gzip.compress(data, compresslevel=9, mtime=0))
written.append("sum_12k_copies_valid.onnx.gz")
# 200,000 initializers into one Concat.
N = 200000
inits = [helper.make_tensor("c%d" % i, FLOAT, [1, 2], [0.0, 0.0]) for i in range(N)]
g = helper.make_graph([helper.make_node("Concat", ["c%d" % i for i in range(N)], ["cat"], axis=0),
                       helper.make_node("Add", ["x", "cat"], ["y"], name="add")],
                      "concat", [vi("x", [N, 2])], [vi("y", [N, 2])], initializer=inits)
data = model_of(g).SerializeToString()
with open(os.path.join(HERE, "concat_200k_initializers_valid.onnx.gz"), "wb") as f:
    f.write(gzip.compress(data, compresslevel=9, mtime=0))
written.append("concat_200k_initializers_valid.onnx.gz")
# A Transpose with a 600,000-entry perm, an Unsqueeze with 600,000 axes.
g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], name="tr",
                                        perm=list(range(600000)))],
                      "tr", [vi("x", ["batch", 4])], [vi("y", None)])
data = model_of(g).SerializeToString()
with open(os.path.join(HERE, "transpose_rank_600k.onnx.gz"), "wb") as f:
    f.write(gzip.compress(data, compresslevel=9, mtime=0))
written.append("transpose_rank_600k.onnx.gz")
axes = helper.make_tensor("axes", TensorProto.INT64, [600000], list(range(600000)))
g = helper.make_graph([helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsq")],
                      "unsq", [vi("x", ["batch", 4])], [vi("y", None)], initializer=[axes])
data = model_of(g).SerializeToString()
with open(os.path.join(HERE, "unsqueeze_600k_axes.onnx.gz"), "wb") as f:
    f.write(gzip.compress(data, compresslevel=9, mtime=0))
written.append("unsqueeze_600k_axes.onnx.gz")
# Module paths: 12 TorchScript names 12,000 levels deep; one 600 KB name.
nodes, prev = [], "x"
for i in range(12):
    out = "y" if i == 11 else "t%d" % i
    nodes.append(helper.make_node("Relu", [prev], [out], name="/a" * 12000 + "/Relu%d" % i))
    prev = out
g = helper.make_graph(nodes, "deep", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("module_path_12k_levels.onnx", model_of(g))
g = relu_graph()
g.node[0].name = "/m" * 300000 + "/Relu"
write_model("module_path_600kb_name.onnx", model_of(g))
# Within the name limit (4005 bytes), 2,000 levels: over the module depth limit.
g = relu_graph()
g.node[0].name = "/a" * 2000 + "/Relu"
write_model("module_path_2k_levels.onnx", model_of(g))
# SplitToSequence over a [batch, 3e8] tensor: one entry per element.
g = helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["s"], name="split", axis=1)],
                      "seq", [vi("x", ["batch", 300000000])],
                      [helper.make_tensor_sequence_value_info("s", FLOAT, None)])
write_model("split_to_sequence_3e8.onnx", model_of(g))
# SequenceEmpty of dtype 999.
g = helper.make_graph([helper.make_node("SequenceEmpty", [], ["s"], name="empty", dtype=999),
                       helper.make_node("Relu", ["x"], ["y"], name="relu")],
                      "seqe", [vi("x", ["batch", 4])],
                      [vi("y", ["batch", 4]), helper.make_tensor_sequence_value_info("s", FLOAT, None)])
write_model("sequence_empty_dtype_999.onnx", model_of(g))
# A huge doc_string (1 MiB here; the model itself is tiny).
m = model_of(relu_graph())
m.doc_string = "d" * (1 << 20)
m.graph.node[0].doc_string = "d" * (1 << 20)
data = m.SerializeToString()
with open(os.path.join(HERE, "huge_doc_string_valid.onnx.gz"), "wb") as f:
    f.write(gzip.compress(data, compresslevel=9, mtime=0))
written.append("huge_doc_string_valid.onnx.gz")
# A valid chain of 999,000 nodes: over the default 500,000-node limit, within
# --max-nodes 1000000.
N = 999000
nodes, prev = [], "x"
for i in range(N):
    out = "y" if i == N - 1 else "t%d" % i
    nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [out]))
    prev = out
g = helper.make_graph(nodes, "chain", [vi("x", ["batch", 8])], [vi("y", ["batch", 8])])
data = model_of(g).SerializeToString()
with open(os.path.join(HERE, "chain_999k_valid.onnx.gz"), "wb") as f:
    f.write(gzip.compress(data, compresslevel=9, mtime=0))
written.append("chain_999k_valid.onnx.gz")
del nodes, g, data

# An Einsum equation of 256 KB: the message must not echo it whole.
g = helper.make_graph([helper.make_node("Einsum", ["x"], ["y"], name="ein",
                                        equation="ij" + "," * (1 << 18) + "->ij")],
                      "ein", [vi("x", ["batch", 4])], [vi("y", None)])
write_model("einsum_256kb_equation.onnx", model_of(g))

# A graph input shadowed by an initializer (IR >= 4): still an input.
w = helper.make_tensor("x", FLOAT, [1, 4], [0.0] * 4)
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "shadow",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], initializer=[w])
write_model("input_shadowed_by_initializer_valid.onnx", model_of(g))
# An attribute of the wrong type: axes as FLOATS.
g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["y"], name="rsum", keepdims=1)],
                      "wrongattr", [vi("x", ["batch", 4])], [vi("y", None)])
g.node[0].attribute.append(helper.make_attribute("axes", [1.0]))
write_model("attribute_wrong_type.onnx", model_of(g, opset=11))
# A model-local function whose body builds a 4 GB tensor.
shape_c = helper.make_node("Constant", [], ["shp"], value=helper.make_tensor(
    "shp", TensorProto.INT64, [2], [1 << 15, 1 << 15]))
body = [shape_c, helper.make_node("Expand", ["a", "shp"], ["big"]),
        helper.make_node("ReduceSum", ["big"], ["b"], keepdims=0)]
fn = helper.make_function("local", "Blowup", ["a"], ["b"], body,
                          [helper.make_opsetid("", 17)])
g = helper.make_graph([helper.make_node("Blowup", ["x"], ["y"], name="call", domain="local")],
                      "fn", [vi("x", ["batch", 4])], [vi("y", None)])
m = model_of(g, opsets=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
m.functions.append(fn)
write_model("local_function_4gb.onnx", m)
# Self- and mutually recursive local functions.
f1 = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain="local")],
                          [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
g = helper.make_graph([helper.make_node("F", ["x"], ["y"], name="call", domain="local")],
                      "rec", [vi("x", ["batch", 4])], [vi("y", None)])
m = model_of(g, opsets=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
m.functions.append(f1)
write_model("local_function_self_recursive.onnx", m)
fa = helper.make_function("local", "A", ["a"], ["b"], [helper.make_node("B", ["a"], ["b"], domain="local")],
                          [helper.make_opsetid("local", 1)])
fb = helper.make_function("local", "B", ["a"], ["b"], [helper.make_node("A", ["a"], ["b"], domain="local")],
                          [helper.make_opsetid("local", 1)])
g = helper.make_graph([helper.make_node("A", ["x"], ["y"], name="call", domain="local")],
                      "mrec", [vi("x", ["batch", 4])], [vi("y", None)])
m = model_of(g, opsets=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
m.functions.extend([fa, fb])
write_model("local_function_mutually_recursive.onnx", m)
# An If branch that reads a name defined nowhere.
then_g = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["t"], name="then_relu")], "then",
                           [], [vi("t", ["batch", 4])])
else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="else_id")], "else",
                           [], [vi("e", ["batch", 4])])
g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g,
                                        else_branch=else_g)],
                      "ifundef", [vi("x", ["batch", 4]), vi("cond", [], TensorProto.BOOL)],
                      [vi("y", ["batch", 4])])
write_model("if_branch_undefined_name.onnx", model_of(g))
# Opset 99 overridden by a second ai.onnx entry.
write_model("duplicate_default_opset.onnx", model_of(relu_graph(), opsets=[
    helper.make_opsetid("", 99), helper.make_opsetid("ai.onnx", 17)]))
# Checkpoint patterns that overlap (layer1 and layer1.0): order must not matter.
names = ["layer1/layer1.0", "layer1/layer1.1", "layer2/layer2.0", "layer2/layer2.1"]
write_model("checkpoint_overlap_valid.onnx", model_of(mlp_blocks(names, 128)))

# Budget files (check --config) and baselines (check --baseline).
write_bytes("budget_valid.json", b'{"checks": [{"model": "unsorted_valid.onnx", "batch": 2, '
            b'"budget": "1GiB"}]}\n')
write_bytes("budget_nested_300k.json", b"[" * 300000 + b"]" * 300000)
write_bytes("budget_trailing_nul.json", b'{"checks": [{"model": "unsorted_valid.onnx", '
            b'"batch": 2, "budget": "1GiB"}]}\x00\x00garbage{')
write_bytes("budget_control_char_name.json", b'{"checks": [{"name": "a\\u001b[2Jb", '
            b'"model": "unsorted_valid.onnx", "batch": 2, "budget": "1GiB"}]}')
write_bytes("budget_long_value.json", b'{"checks": [{"model": "unsorted_valid.onnx", "batch": 2, '
            b'"budget": "1GiB", "precision": "' + b"x" * 100000 + b'"}]}')
BASELINE = ('{"checks": [{"name": "unsorted_valid.onnx train b2 fp32 adamw", "plan": {"peak": '
            '{"allocated_bytes": 4096, "reserved_bytes": 2097152, "device_bytes": %s}}}]}')
write_bytes("baseline_negative.json", (BASELINE % "-1").encode())
write_bytes("baseline_u64_max.json", (BASELINE % str(2 ** 64 - 1)).encode())

total = sum(os.path.getsize(os.path.join(HERE, n)) for n in written)
print("wrote %d files, %d bytes" % (len(written), total))
