#!/usr/bin/env python3
"""Writes a MatMul+Add+Relu chain of about N nodes as an ONNX model.

The input is [batch, 64] (symbolic batch); every block multiplies by a 64x64
weight, adds a 64-element bias and applies Relu, so the graph has 3 nodes and
2 initializers per block. Weights are declared as external data that does not
exist (memplan never reads weights), so a 1 M-node file stays small.

usage: make_chain.py NODES OUT.onnx
"""
import sys

import onnx
from onnx import TensorProto, helper


def make_chain(nodes, path):
    blocks = max(1, nodes // 3)
    width = 64
    inits = []
    graph_nodes = []
    prev = "x"
    for i in range(blocks):
        w, b = f"w{i}", f"b{i}"
        for name, dims in ((w, [width, width]), (b, [width])):
            t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "0")):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
        graph_nodes.append(helper.make_node("MatMul", [prev, w], [f"m{i}"], name=f"l{i}.mm"))
        graph_nodes.append(helper.make_node("Add", [f"m{i}", b], [f"a{i}"], name=f"l{i}.add"))
        graph_nodes.append(helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"l{i}.relu"))
        prev = f"r{i}"
    graph = helper.make_graph(
        graph_nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["batch", width])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    make_chain(int(sys.argv[1]), sys.argv[2])
