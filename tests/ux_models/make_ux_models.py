#!/usr/bin/env python3
"""Writes the small models of tests/ux_models/: exports as torch.onnx writes them,
for the warnings a new user must see (the export's mode, a loss on an output
that is not class logits).

Usage: python3 tests/ux_models/make_ux_models.py   (needs `pip install onnx`)

Deterministic, like tests/corpus/make_corpus.py: re-running it gives
byte-identical files, which are committed so that the tests need no Python
package. The dynamo-style models carry the node metadata torch.onnx 2.11's
dynamo exporter writes (pkg.torch.onnx.fx_node, class_hierarchy,
name_scopes), with the ATen ops each mode gives: training batch norm is
aten._native_batch_norm_legit_functional, eval batch norm
aten._native_batch_norm_legit_no_training (folded into the convolution by
the optimizer), training dropout aten.native_dropout (a Dropout node whose
training_mode is a constant true); eval dropout exports no op at all. The
TorchScript-style ones carry none (training batch norm: training_mode=1 and
the running statistics as outputs). tests/cli_warnings_test.sh runs them.
"""

import os

from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
FLOAT = TensorProto.FLOAT
written = []


def vi(name, dims, dtype=FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


def weight(name, dims):
    # Weights are never read: external data that is never opened keeps the file small.
    t = helper.make_tensor(name, FLOAT, [1], [0.0])
    t.ClearField("float_data")
    t.ClearField("dims")
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value="weights.bin")
    return t


def scalar(name, dtype, value):
    return helper.make_node("Constant", [], [name], name="const_" + name,
                            value=helper.make_tensor(name + "_v", dtype, [], [value]))


def fx(node, fx_name, target, modules):
    """Dynamo metadata: the FX node made from `target` inside `modules` ((path, class) pairs)."""
    scopes = [""] + [m for m, _ in modules] + [fx_name]
    classes = ["test.Net"] + [c for _, c in modules] + [target]
    node.metadata_props.add(key="pkg.torch.onnx.class_hierarchy", value=repr(classes))
    node.metadata_props.add(key="pkg.torch.onnx.fx_node",
                            value="%%%s : [num_users=1] = call_function[target=torch.ops.%s]"
                                  "(args = (), kwargs = {})" % (fx_name, target))
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(scopes))
    return node


def write(name, nodes, inputs, outputs, inits, opset=20, ir=10):
    g = helper.make_graph(nodes, name.split(".")[0], inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="pytorch", producer_version="2.11.0")
    m.ir_version = ir
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(m.SerializeToString())
    written.append(name)


CONV = ("conv", "torch.nn.modules.conv.Conv2d")
BN = ("bn", "torch.nn.modules.batchnorm.BatchNorm2d")
FC = ("fc", "torch.nn.modules.linear.Linear")
DROP = ("drop", "torch.nn.modules.dropout.Dropout")
IMAGE = [vi("x", ["batch", 3, 8, 8])]
LOGITS = [vi("logits", ["batch", 10])]


def head(prev):
    """prev [batch, 4, 8, 8] -> global pool -> flatten -> Linear(4, 10) -> logits."""
    return [fx(helper.make_node("GlobalAveragePool", [prev], ["pool"], name="node_pool"),
               "mean", "aten.mean.dim", []),
            fx(helper.make_node("Flatten", ["pool"], ["flat"], name="node_flatten"),
               "flatten", "aten.flatten.using_ints", []),
            fx(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1,
                                name="node_linear"), "linear", "aten.linear.default", [FC])]


HEAD_W = [weight("fc.weight", [10, 4]), weight("fc.bias", [10])]
CONV_W = [weight("conv.weight", [4, 3, 3, 3])]
BN_W = [weight("bn.weight", [4]), weight("bn.bias", [4]), weight("bn.running_mean", [4]),
        weight("bn.running_var", [4])]


def conv():
    return fx(helper.make_node("Conv", ["x", "conv.weight"], ["c"], pads=[1, 1, 1, 1],
                               name="node_conv2d"), "conv2d", "aten.conv2d.default", [CONV])


# Dynamo, model.train(): batch norm with batch statistics (its ONNX node in the
# inference form, as torchlib writes it).
bn = fx(helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean",
                                                "bn.running_var"], ["b"], epsilon=1e-5,
                         momentum=0.9, name="node__native_batch_norm_legit_functional"),
        "_native_batch_norm_legit_functional",
        "aten._native_batch_norm_legit_functional.default", [BN])
write("dynamo_train_bn.onnx", [conv(), bn] + head("b"), IMAGE, LOGITS, CONV_W + BN_W + HEAD_W)

# Dynamo, model.eval(): the optimizer folded batch norm into the convolution,
# which keeps the batch norm's metadata.
folded = fx(helper.make_node("Conv", ["x", "conv.weight"], ["b"], pads=[1, 1, 1, 1],
                             name="node_conv2d"),
            "_native_batch_norm_legit_no_training",
            "aten._native_batch_norm_legit_no_training.default", [BN])
write("dynamo_eval_bn.onnx", [folded] + head("b"), IMAGE, LOGITS, CONV_W + HEAD_W)

# Dynamo, model.train(): Linear -> Dropout(p=0.1) -> Linear.
VEC = [vi("x", ["batch", 16])]
MLP_W = [weight("fc1.weight", [16, 32]), weight("fc2.weight", [32, 10])]


def fc1():
    return fx(helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="node_mm"),
              "mm", "aten.mm.default", [("fc1", FC[1])])


def fc2(prev):
    return fx(helper.make_node("MatMul", [prev, "fc2.weight"], ["logits"], name="node_mm_1"),
              "mm_1", "aten.mm.default", [("fc2", FC[1])])


drop = [fx(scalar("ratio", FLOAT, 0.1), "native_dropout", "aten.native_dropout.default", [DROP]),
        fx(scalar("train", TensorProto.BOOL, True), "native_dropout",
           "aten.native_dropout.default", [DROP]),
        fx(helper.make_node("Dropout", ["h", "ratio", "train"], ["d"], name="node_native_dropout"),
           "native_dropout", "aten.native_dropout.default", [DROP])]
write("dynamo_train_dropout.onnx", [fc1()] + drop + [fc2("d")], VEC, LOGITS, MLP_W)

# Dynamo, model.eval() of the same model: the dropout exports no op, nothing
# tells the mode.
write("dynamo_eval_dropout.onnx", [fc1(), fc2("h")], VEC, LOGITS, MLP_W)

# Dynamo, model.train() with nn.Dropout(p=0.0) (torchvision's ViT): a clone
# inside the dropout module.
clone = fx(helper.make_node("Identity", ["h"], ["d"], name="node_clone"), "clone",
           "aten.clone.default", [DROP])
write("dynamo_train_dropout_p0.onnx", [fc1(), clone, fc2("d")], VEC, LOGITS, MLP_W)

# TorchScript exporter, TrainingMode.TRAINING: training_mode=1 and the running
# statistics as outputs; TrainingMode.EVAL where the batch norm could not be
# folded: the inference form.
ts_bn_train = helper.make_node("BatchNormalization",
                               ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                               ["b", "rm", "rv"], epsilon=1e-5, momentum=0.9, training_mode=1,
                               name="/bn/BatchNormalization")
ts_conv = helper.make_node("Conv", ["x", "conv.weight"], ["c"], pads=[1, 1, 1, 1],
                           name="/conv/Conv")
ts_head = [helper.make_node("GlobalAveragePool", ["b"], ["pool"], name="/pool/GlobalAveragePool"),
           helper.make_node("Flatten", ["pool"], ["flat"], name="/Flatten"),
           helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1,
                            name="/fc/Gemm")]
write("ts_train_bn.onnx", [ts_conv, ts_bn_train] + ts_head, IMAGE, LOGITS,
      CONV_W + BN_W + HEAD_W, opset=17, ir=8)
ts_bn_eval = helper.make_node("BatchNormalization",
                              ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                              ["b"], epsilon=1e-5, momentum=0.9, name="/bn/BatchNormalization")
write("ts_eval_bn.onnx", [ts_conv, ts_bn_eval] + ts_head, IMAGE, LOGITS, CONV_W + BN_W + HEAD_W,
      opset=17, ir=8)

# Outputs that are not class logits, in train-mode exports (a training
# dropout in each, so that only the loss is in question).

# An image-to-image model: [batch, 4, 8, 8] in, the same shape out.
LATENT = [vi("latent", ["batch", 4, 8, 8])]
denoise = [fx(helper.make_node("Conv", ["latent", "conv.weight"], ["c"], pads=[1, 1, 1, 1],
                               name="node_conv2d"), "conv2d", "aten.conv2d.default", [CONV]),
           fx(scalar("ratio", FLOAT, 0.1), "native_dropout", "aten.native_dropout.default", [DROP]),
           fx(scalar("train", TensorProto.BOOL, True), "native_dropout",
              "aten.native_dropout.default", [DROP]),
           fx(helper.make_node("Dropout", ["c", "ratio", "train"], ["noise"],
                               name="node_native_dropout"),
              "native_dropout", "aten.native_dropout.default", [DROP])]
write("loss_image_to_image.onnx", denoise, LATENT, [vi("noise", ["batch", 4, 8, 8])],
      [weight("conv.weight", [4, 4, 3, 3])])
# A Sigmoid head (multi-label or bounded regression).
sig = fx(helper.make_node("Sigmoid", ["logits"], ["probs"], name="node_sigmoid"), "sigmoid",
         "aten.sigmoid.default", [])
write("loss_sigmoid.onnx", [fc1()] + drop + [fc2("d"), sig], VEC, [vi("probs", ["batch", 10])],
      MLP_W)
# One score per sample.
one = [fx(helper.make_node("MatMul", ["d", "fc2.weight"], ["score"], name="node_mm_1"), "mm_1",
          "aten.mm.default", [("fc2", FC[1])])]
write("loss_one_score.onnx", [fc1()] + drop + one, VEC, [vi("score", ["batch", 1])],
      [weight("fc1.weight", [16, 32]), weight("fc2.weight", [32, 1])])

print("wrote %d files" % len(written))
