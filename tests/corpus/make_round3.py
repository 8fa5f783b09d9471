#!/usr/bin/env python3
"""Writes the third round of hostile cases, tests/corpus/round3/.

Usage: python3 tests/corpus/make_round3.py   (needs `pip install onnx`)

Deterministic, like make_corpus.py (whose cases it does not repeat): the
generated files are committed so that the tests need no Python.
expected.txt lists what memplan must answer for each one; corpus_test.sh
makes the cases that need the file system (links, FIFOs, devices) itself.
"""

import gzip
import os

from onnx import TensorProto, helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "round3")
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
IR = 8

written = []


def write_bytes(name, data):
    os.makedirs(HERE, exist_ok=True)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    written.append(name)


def write_model(name, model):
    data = model.SerializeToString()
    if len(data) > 65536:  # stored gzipped; corpus_test.sh unpacks it into its temp dir
        write_bytes(name + ".gz", gzip.compress(data, compresslevel=9, mtime=0))
    else:
        write_bytes(name, data)


def model_of(graph, opset=17, ir=IR, opsets=None, producer="make_round3"):
    if opsets is None:
        opsets = [helper.make_opsetid("", opset)]
    m = helper.make_model(graph, opset_imports=opsets, producer_name=producer)
    m.ir_version = ir
    return m


def vi(name, dims, dtype=FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


def i64(name, values, dims=None):
    return helper.make_tensor(name, INT64, [len(values)] if dims is None else dims, values)


def relu_named(node_name="relu", x="x", y="y", in_dims=("batch", 4)):
    return helper.make_graph([helper.make_node("Relu", [x], [y], name=node_name)], "g",
                             [vi(x, list(in_dims))], [vi(y, list(in_dims))])


def external_weight(name, dims):
    t = helper.make_tensor(name, FLOAT, [1], [0.0])
    t.ClearField("float_data")
    t.ClearField("dims")
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL  # never opened: keeps the file small
    t.external_data.add(key="location", value="weights.bin")
    return t


def mlp_blocks(names, width=64, seq=None):
    """x -> [MatMul -> Relu -> MatMul -> Relu] per block, nodes named
    /MODULE/OP (TorchScript style), as make_corpus.py's mlp_blocks."""
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
    dims = ["batch", width] if seq is None else ["batch", seq, width]
    return helper.make_graph(nodes, "blocks", [vi("x", dims)], [vi("y", dims)], initializer=inits)


# ---------------------------------------------------------------------------
# Injection into generated output.

# A backslash before the quote: escaping only the quote would give \\" and
# end the Python string (advise's CHECKPOINT list).
write_model("advise_backslash_quote.onnx", model_of(mlp_blocks(
    ['b\\"),__import__("os").system("touch pwned"),("\\%d' % i for i in range(1, 9)], 256,
    seq=4096)))
# A newline and a carriage return in module names (a new Python statement
# after the list, or a new Markdown line).
write_model("advise_newline_module.onnx", model_of(mlp_blocks(
    ['n\r\nimport os; os.system("touch pwned")#%d' % i for i in range(1, 9)], 256, seq=4096)))
# A Markdown code fence and HTML in module names (advise --format md).
write_model("advise_code_fence_module.onnx", model_of(mlp_blocks(
    ['f```</code><img src=x onerror=alert(1)>%d' % i for i in range(1, 9)], 256, seq=4096)))
# Module names through the dynamo exporter's name scopes (node metadata),
# not the node name: a quote in the scope.
g = mlp_blocks(["blk%d" % i for i in range(1, 9)], 256, seq=4096)
for n in g.node:
    blk = int(n.name.split("/")[1][3:])
    entry = n.metadata_props.add()
    entry.key = "pkg.torch.onnx.name_scopes"
    entry.value = "['', 'm', \"m.h'),exec('import os'),('.%d\", '%s']" % (blk, n.op_type.lower())
    n.name = "node_%s_%d" % (n.op_type, len(n.input[0]) + blk * 100 + list(g.node).index(n))
write_model("advise_scope_metadata_quote.onnx", model_of(g, ir=10))
# Control characters, a bidi override and invalid UTF-8 in a name scope.
g = relu_named()
entry = g.node[0].metadata_props.add()
entry.key = "pkg.torch.onnx.name_scopes"
entry.value = "['', 'm\x1b]8;;http://evil\x07click\x1b]8;;\x07\u202e', 'relu']"
write_model("scope_metadata_escapes.onnx", model_of(g, ir=10))
# Bidi override (U+202E) and a C1 CSI (U+009B) in node and tensor names: the
# terminal would reorder or interpret them.
g = relu_named(node_name="relu\u202egnp.exe", x="x\u009b2J", y="y\u202e")
write_model("bidi_and_c1_names.onnx", model_of(g))
# An OSC hyperlink and a bell in producer_name and the graph name.
m = model_of(relu_named(), producer="\x1b]8;;http://evil/\x07trusted\x1b]8;;\x07\x07")
m.graph.name = "g\x1b]0;title\x07"
write_model("osc_in_producer.onnx", m)
# A NUL inside node and tensor names.
g = relu_named(node_name="re\x00lu", x="x\x00hidden", y="y")
write_model("nul_in_names.onnx", model_of(g))
# XML-invalid control characters (\x01, \x0b, \x0c) and ]]> in a node name:
# SVG, JUnit and HTML must stay well-formed.
g = relu_named(node_name="a\x01b\x0bc\x0cd]]><!--&amp;\"'")
write_model("xml_control_chars.onnx", model_of(g))
# GitHub-annotation metacharacters: %, ::, a newline.
g = relu_named(node_name="n%0A::error file=x::forged\n::error::forged2")
write_model("annotation_metachars.onnx", model_of(g))
# A quote and a backslash in a tensor name that reaches an error message.
g = helper.make_graph([helper.make_node("Add", ["x", 'gh"o\\st\x1b[31m'], ["y"], name="add")],
                      "g", [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
write_model("dangling_escape_name.onnx", model_of(g))
# A 4000-byte node name of pipes and backticks (within the name limit).
g = relu_named(node_name="|`" * 2000)
write_model("long_pipe_name_valid.onnx", model_of(g))
# A doc_string and metadata with markup (they must not reach reports raw).
m = model_of(relu_named())
m.doc_string = "<script>alert(1)</script>"
p = m.metadata_props.add()
p.key = "<b>k</b>"
p.value = "\x1b[2J"
write_model("markup_in_doc_and_metadata.onnx", m)

# Printable text only (it passes the import): a bidi override (U+202E), XML
# and HTML markup, a CDATA end, GitHub-annotation metacharacters.
g = relu_named(node_name="relu\u202egnp.exe", y="y\u202e")
write_model("bidi_names.onnx", model_of(g))
g = relu_named(node_name="]]><!--&amp;\"'<svg onload=alert(1)>-->")
write_model("markup_printable_name_valid.onnx", model_of(g))
g = relu_named(node_name="n%0A::error file=x,line=1::forged,title=t:%25")
write_model("annotation_printable_name_valid.onnx", model_of(g))
# Invalid UTF-8 in a name scope (written by hand: protobuf refuses it).
g = relu_named()
entry = g.node[0].metadata_props.add()
entry.key = "pkg.torch.onnx.name_scopes"
entry.value = "['', 'mXYZ', 'relu']"
data = model_of(g, ir=10).SerializeToString()
write_bytes("scope_metadata_invalid_utf8.onnx", data.replace(b"mXYZ", b"m\xff\xfeZ", 1))

# ---------------------------------------------------------------------------
# Blow-ups.

# Reshape with -1 beside a zero dim: the -1 cannot be inferred (0 / 0).
g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_0")],
                      "g", [vi("x", ["batch", 0])], [vi("y", None)],
                      initializer=[i64("shape", [0, -1])])
write_model("reshape_minus1_zero.onnx", model_of(g))
# Reshape to a target whose product overflows int64.
g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_big")],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)],
                      initializer=[i64("shape", [1 << 40, 1 << 40, -1])])
write_model("reshape_target_overflow.onnx", model_of(g))
# Expand to a 100,000-dim shape of ones.
g = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_rank")],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)],
                      initializer=[i64("shape", [1] * 100000)])
write_model("expand_rank_100k.onnx", model_of(g))
# Tile with repeats that overflow.
g = helper.make_graph([helper.make_node("Tile", ["x", "reps"], ["y"], name="tile_big")],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)],
                      initializer=[i64("reps", [1 << 62, 1 << 62])])
write_model("tile_overflow.onnx", model_of(g))
# Tile with a negative repeat.
g = helper.make_graph([helper.make_node("Tile", ["x", "reps"], ["y"], name="tile_neg")],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)],
                      initializer=[i64("reps", [1, -3])])
write_model("tile_negative.onnx", model_of(g))
# ConstantOfShape of [2^31, 2^31, 2^31] (its value: one float).
g = helper.make_graph([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos_big"),
                       helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)],
                      initializer=[i64("shape", [1 << 31, 1 << 31, 1 << 31])])
write_model("constant_of_shape_overflow.onnx", model_of(g))
# ConstantOfShape with a negative dim.
g = helper.make_graph([helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos_neg"),
                       helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)],
                      initializer=[i64("shape", [4, -2])])
write_model("constant_of_shape_negative.onnx", model_of(g))
# Range(0, 10^12, 1) feeding a Reshape: evaluating it would make 10^12
# values; Range(0, 10, 0): a zero delta.
for case, (start, limit, delta) in (("range_1e12.onnx", (0, 10 ** 12, 1)),
                                    ("range_zero_delta.onnx", (0, 10, 0))):
    g = helper.make_graph(
        [helper.make_node("Range", ["s", "l", "d"], ["r"], name="range"),
         helper.make_node("Reshape", ["x", "r"], ["y"], name="reshape")],
        "g", [vi("x", ["batch", 4])], [vi("y", None)],
        initializer=[i64("s", [start], []), i64("l", [limit], []), i64("d", [delta], [])])
    write_model(case, model_of(g))
# Range of floats with a tiny delta into an activation (not shape data).
g = helper.make_graph(
    [helper.make_node("Range", ["s", "l", "d"], ["r"], name="range_f"),
     helper.make_node("Add", ["x", "r"], ["y"], name="add")],
    "g", [vi("x", ["batch", 1])], [vi("y", None)],
    initializer=[helper.make_tensor("s", FLOAT, [], [0.0]), helper.make_tensor("l", FLOAT, [], [1e9]),
                 helper.make_tensor("d", FLOAT, [], [1e-9])])
write_model("range_float_1e18.onnx", model_of(g))
# A Concat of one graph input listed 300,000 times (wide, not initializers).
g = helper.make_graph([helper.make_node("Concat", ["x"] * 300000, ["y"], name="cat", axis=1)],
                      "g", [vi("x", ["batch", 1])], [vi("y", None)])
write_model("concat_300k_same_input_valid.onnx", model_of(g))
# A chain of 20,000 local functions, each calling the next.
fns = []
N = 20000
for i in range(N):
    body = [helper.make_node("F%d" % (i + 1), ["a"], ["b"], domain="local")] if i < N - 1 else \
        [helper.make_node("Relu", ["a"], ["b"])]
    fns.append(helper.make_function("local", "F%d" % i, ["a"], ["b"], body,
                                    [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]))
g = helper.make_graph([helper.make_node("F0", ["x"], ["y"], name="call", domain="local")],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)])
m = model_of(g, opsets=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
m.functions.extend(fns)
write_model("local_function_chain_20k.onnx", m)
# A local function called only inside an If branch.
fn = helper.make_function("local", "Hidden", ["a"], ["b"],
                          [helper.make_node("Relu", ["a"], ["b"])], [helper.make_opsetid("", 17)])
then_g = helper.make_graph([helper.make_node("Hidden", ["x"], ["t"], name="hidden_call",
                                             domain="local")], "then", [], [vi("t", ["batch", 4])])
else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="else_id")], "else", [],
                           [vi("e", ["batch", 4])])
g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g,
                                        else_branch=else_g)],
                      "g", [vi("x", ["batch", 4]), vi("cond", [], TensorProto.BOOL)],
                      [vi("y", ["batch", 4])])
m = model_of(g, opsets=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
m.functions.append(fn)
write_model("local_function_in_if_branch.onnx", m)
# A local function in the default domain named like a standard op: its body
# (a 4 GB Expand) would replace Relu.
shape_c = helper.make_node("Constant", [], ["shp"], value=i64("shp", [1 << 15, 1 << 15]))
fn = helper.make_function("", "Relu", ["a"], ["b"],
                          [shape_c, helper.make_node("Expand", ["a", "shp"], ["b"])],
                          [helper.make_opsetid("", 17)])
m = model_of(relu_named())
m.functions.append(fn)
write_model("local_function_shadows_relu.onnx", m)
# Conv with a 300,000-entry pads and kernel_shape, Split with a 300,000-entry
# split attribute (opset 11), Pad with 300,000 pads.
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv",
                                        kernel_shape=[3] * 300000, pads=[1] * 600000)],
                      "g", [vi("x", ["batch", 3, 8, 8])], [vi("y", None)],
                      initializer=[external_weight("w", [4, 3, 3, 3])])
write_model("conv_300k_attrs.onnx", model_of(g))
g = helper.make_graph([helper.make_node("Split", ["x"], ["y"], name="split", axis=1,
                                        split=[0] * 300000)],
                      "g", [vi("x", ["batch", 4])], [vi("y", None)])
write_model("split_300k_attr.onnx", model_of(g, opset=11))
# OneHot with a depth of 10^15 (a [batch, 4, 10^15] float output).
g = helper.make_graph([helper.make_node("OneHot", ["idx", "depth", "vals"], ["y"], name="onehot")],
                      "g", [vi("idx", ["batch", 4], INT64)], [vi("y", None)],
                      initializer=[i64("depth", [10 ** 15], []),
                                   helper.make_tensor("vals", FLOAT, [2], [0.0, 1.0])])
write_model("onehot_depth_1e15.onnx", model_of(g))
# 12 levels of If, each level's two branches the same subgraph: 2^12 leaves
# (the file holds every copy; 16 levels would be 2^16).
leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["r0"], name="leaf")], "leaf", [],
                         [vi("r0", ["batch", 4])])
body = leaf
for level in range(1, 13):
    out = "r%d" % level
    node = helper.make_node("If", ["cond"], [out], name="if_%d" % level, then_branch=body,
                            else_branch=body)
    body = helper.make_graph([node], "level_%d" % level, [], [vi(out, ["batch", 4])])
g = helper.make_graph(list(body.node), "g",
                      [vi("x", ["batch", 4]), vi("cond", [], TensorProto.BOOL)],
                      [vi("r12", ["batch", 4])])
write_model("if_both_branches_12_valid.onnx", model_of(g))

# ---------------------------------------------------------------------------
# Wrong attribute types on other ops, and attribute misuse.

cases = [
    ("attr_transpose_perm_floats.onnx", "Transpose", ["x"], {"perm": [1.0, 0.0]}, 17),
    ("attr_concat_axis_string.onnx", "Concat", ["x", "x"], {"axis": "1"}, 17),
    ("attr_softmax_axis_ints.onnx", "Softmax", ["x"], {"axis": [1]}, 17),
    ("attr_gemm_transb_float.onnx", "Gemm", ["x", "w"], {"transB": 1.0}, 17),
    ("attr_cast_to_string.onnx", "Cast", ["x"], {"to": "float16"}, 17),
    ("attr_flatten_axis_float.onnx", "Flatten", ["x"], {"axis": 1.0}, 17),
    ("attr_leakyrelu_alpha_string.onnx", "LeakyRelu", ["x"], {"alpha": "0.1"}, 17),
    ("attr_split_split_floats.onnx", "Split", ["x"], {"axis": 1, "split": [2.0, 2.0]}, 11),
]
for case, op, inputs, attrs, opset in cases:
    node = helper.make_node(op, inputs, ["y"], name="n_" + op.lower())
    for k, v in attrs.items():
        node.attribute.append(helper.make_attribute(k, v))
    inits = [helper.make_tensor("w", FLOAT, [4, 4], [0.0] * 16)] if "w" in inputs else []
    g = helper.make_graph([node], "g", [vi("x", ["batch", 4])], [vi("y", None)], initializer=inits)
    write_model(case, model_of(g, opset=opset))
# An If whose then_branch is an INT, not a GRAPH.
node = helper.make_node("If", ["cond"], ["y"], name="if_int")
node.attribute.append(helper.make_attribute("then_branch", 3))
node.attribute.append(helper.make_attribute("else_branch", relu_named(x="x", y="e", in_dims=("batch", 4))))
g = helper.make_graph([node], "g", [vi("x", ["batch", 4]), vi("cond", [], TensorProto.BOOL)],
                      [vi("y", ["batch", 4])])
write_model("attr_if_branch_int.onnx", model_of(g))
# The same attribute twice on one node, with different values.
node = helper.make_node("Concat", ["x", "x"], ["y"], name="cat2", axis=0)
node.attribute.append(helper.make_attribute("axis", 1))
g = helper.make_graph([node], "g", [vi("x", ["batch", 4])], [vi("y", None)])
write_model("attr_duplicate_axis.onnx", model_of(g))
# A reference attribute (ref_attr_name) outside any function.
node = helper.make_node("Softmax", ["x"], ["y"], name="softmax_ref")
a = node.attribute.add()
a.name = "axis"
a.ref_attr_name = "outer_axis"
a.type = helper.AttributeProto.INT
g = helper.make_graph([node], "g", [vi("x", ["batch", 4])], [vi("y", None)])
write_model("attr_ref_outside_function.onnx", model_of(g))

# ---------------------------------------------------------------------------
# Inputs shadowed by initializers, in other forms.

# IR 3 (the TorchScript exporter of old): every weight is listed as an input
# too; they are weights, and --batch binds the real input.
w = helper.make_tensor("w", FLOAT, [4, 4], [0.0] * 16)
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                      [vi("w", [4, 4]), vi("x", ["batch", 4])], [vi("y", ["batch", 4])],
                      initializer=[w])
write_model("ir3_weights_as_inputs_valid.onnx", model_of(g, ir=3, opset=9))
# A shape input that an initializer shadows: the value fed may differ from
# the initializer's, so the Reshape target is not a constant.
g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_fed")],
                      "g", [vi("x", ["batch", 4]), vi("shape", [2], INT64)], [vi("y", None)],
                      initializer=[i64("shape", [-1, 2])])
write_model("shadowed_shape_input.onnx", model_of(g))
# An input shadowed by an initializer of another dtype and rank.
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4])],
                      initializer=[i64("x", [1, 2, 3])])
write_model("shadowed_input_other_dtype.onnx", model_of(g))
# A sparse initializer that a node reads, with dims past int64.
sp_vals = helper.make_tensor("sp", FLOAT, [1], [1.0])
sp_idx = helper.make_tensor("sp_idx", INT64, [1], [0])
sp = helper.make_sparse_tensor(sp_vals, sp_idx, [1 << 40, 1 << 40])
g = helper.make_graph([helper.make_node("Add", ["x", "sp"], ["y"], name="add_sparse")], "g",
                      [vi("x", ["batch", 4])], [vi("y", None)])
g.sparse_initializer.append(sp)
write_model("sparse_initializer_overflow.onnx", model_of(g))
# A graph output that is an initializer (no node makes it), beside one that is.
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                      [vi("x", ["batch", 4])], [vi("y", ["batch", 4]), vi("w", [4])],
                      initializer=[helper.make_tensor("w", FLOAT, [4], [0.0] * 4)])
write_model("output_is_initializer_valid.onnx", model_of(g))
# An If branch with an initializer named like the outer graph input.
then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
                           [vi("t", ["batch", 4])],
                           initializer=[helper.make_tensor("x", FLOAT, [1, 4], [0.0] * 4)])
else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="else_id")], "else", [],
                           [vi("e", ["batch", 4])])
g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g,
                                        else_branch=else_g)],
                      "g", [vi("x", ["batch", 4]), vi("cond", [], TensorProto.BOOL)],
                      [vi("y", ["batch", 4])])
write_model("subgraph_initializer_shadows_input.onnx", model_of(g))

# ---------------------------------------------------------------------------
# Checkpoint patterns.
names = ["layer1/layer1.0", "layer1/layer1.1", "layer2/layer2.0", "layer2/layer2.1"]
write_model("blocks_valid.onnx", model_of(mlp_blocks(names, 128)))

# ---------------------------------------------------------------------------
# Budget files, baselines, traces.

CHECK = '{"model": "../unsorted_valid.onnx", "batch": 2, "budget": "1GiB"%s}'


def budget(name, text):
    write_bytes(name, text.encode() if isinstance(text, str) else text)


budget("budget_duplicate_key.json", '{"checks": [' + CHECK % ', "batch": 64' + ']}')
budget("budget_duplicate_top_key.json", '{"checks": [' + CHECK % '' + '], "checks": []}')
budget("budget_batch_string.json",
       '{"checks": [{"model": "../unsorted_valid.onnx", "batch": "8", "budget": "1GiB"}]}')
budget("budget_batch_fraction.json",
       '{"checks": [{"model": "../unsorted_valid.onnx", "batch": 2.5, "budget": "1GiB"}]}')
budget("budget_batch_1e300.json",
       '{"checks": [{"model": "../unsorted_valid.onnx", "batch": 1e300, "budget": "1GiB"}]}')
budget("budget_batch_u64.json",
       '{"checks": [{"model": "../unsorted_valid.onnx", "batch": 18446744073709551615, '
       '"budget": "1GiB"}]}')
budget("budget_budget_number.json",
       '{"checks": [{"model": "../unsorted_valid.onnx", "batch": 2, "budget": 1e30}]}')
budget("budget_bom_valid.json", b"\xef\xbb\xbf" + ('{"checks": [' + CHECK % '' + ']}').encode())
budget("budget_comment.json", '// a comment\n{"checks": [' + CHECK % '' + ']}')
budget("budget_trailing_object.json", '{"checks": [' + CHECK % '' + ']} {"checks": []}')
budget("budget_unknown_key.json", '{"checks": [' + CHECK % ', "bach": 64' + ']}')
budget("budget_checks_object.json", '{"checks": {"model": "../unsorted_valid.onnx"}}')
budget("budget_margin_nan.json", '{"checks": [' + CHECK % ', "margin": "nan"' + ']}')
budget("budget_nul_in_model.json",
       '{"checks": [{"model": "../unsorted_valid.onnx\\u0000.evil", "batch": 2, "budget": "1GiB"}]}')
budget("budget_lone_surrogate.json", '{"checks": [' + CHECK % ', "name": "a\\ud800b"' + ']}')
budget("budget_model_is_itself.json",
       '{"checks": [{"model": "budget_model_is_itself.json", "batch": 2, "budget": "1GiB"}]}')
budget("budget_empty_checks.json", '{"checks": []}')
BASELINE = ('{"checks": [{"name": "unsorted_valid.onnx train b2 fp32 adamw", "plan": {"peak": '
            '{"allocated_bytes": %s, "reserved_bytes": 2097152, "device_bytes": %s}}}]%s}')
budget("baseline_fraction.json", BASELINE % ("4096", "1.5e9", ""))
budget("baseline_string_bytes.json", BASELINE % ("4096", '"806354944"', ""))
ENTRY = ('{"name": "unsorted_valid.onnx train b2 fp32 adamw", "plan": {"peak": '
         '{"allocated_bytes": 4096, "reserved_bytes": 2097152, "device_bytes": %d}}}')
budget("baseline_duplicate_name.json",
       '{"checks": [' + ENTRY % 1 + ', ' + ENTRY % 999999999999 + ']}')
budget("baseline_version_999.json", BASELINE % ("4096", "806354944", ', "memplan_check": 999'))
budget("trace_empty_object.json", "{}")
budget("trace_number_overflow.json", '{"schema": "memplan-trace", "version": 1e400}')
budget("trace_duplicate_key.json", '{"schema": "memplan-trace", "schema": "x", "version": 1}')

total = sum(os.path.getsize(os.path.join(HERE, n)) for n in written)
print("wrote %d files, %d bytes" % (len(written), total))
