#pragma once
/// The tensors Python local variables keep alive.

#include "planner/graph.h"
#include "planner/schedule.h"

namespace memplan {

/// Raises Val::held_until for every tensor a Python local variable refers
/// to. PyTorch frees a tensor when its last reference goes; in eager code a
/// name bound by an assignment (`q, k, v = qkv.unbind(0)`) refers to its
/// value until the name is bound again in the same frame (`x = block(x)`) or
/// the frame returns, after the value's last reader. Statements come from
/// the dynamo exporter's stack traces (Node::stack: the module forwards that
/// ran a node and the line each ran): a frame invocation is a maximal run of
/// ops whose callers ran the same lines in the same modules, a statement
/// execution a run of one line in it, and what it binds is what its ops made
/// that ops after it read (its temporaries die with it), mapped to the
/// targets of the line's assignment (one name: all of it; as many names as
/// values: in order; else each value goes with the first of the names to be
/// bound again). Nodes without a usable stack belong to the statement
/// before them, synthetic ops to the op after them. A region the exporter
/// traced into a subgraph (Node::fx_region) has no Python lines of its own:
/// a value two of its ops read is held until the region ends. Never
/// shortens a lifetime; graphs without stack traces (TorchScript exports)
/// are left alone.
void MarkPythonLocals(const Graph& g, Schedule* s);

}  // namespace memplan
