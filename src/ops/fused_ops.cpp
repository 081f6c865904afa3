// The "fused" op: a group of elementwise ops (and casts) that runs as one
// kernel, made by the fuse_elementwise pass (src/passes/fuse_elementwise.cpp).
//
// Note [Fused groups]
// A fused node holds its computation in Node::body, a Graph whose inputs
// correspond one to one (same types) to the node's inputs and whose outputs
// correspond to the node's outputs. Body literals are scalars moved into the
// group. Every op in a body is elementwise or a cast and produces the group's
// output dims, so all outputs share one shape; inputs broadcast into it.
// Its traits are only kFusedGroup, not kElementwise: it has several outputs
// and no scalar expression, and passes that look at kElementwise ops (CSE of
// commutative ops, fusion itself) must not treat it as one.
// Inference cannot see the body, so `infer` always fails: create fused nodes
// with Graph::add_node_typed, giving the body's output types (the parser and
// the verifier, which checks the body instead, do the same).
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

void register_fused_ops(OpList& ops) {
  OpDef op;
  op.name = "fused";
  op.inputs = {"xs"};
  op.variadic = true;
  op.num_outputs = 0;  // any number: one per body output
  op.traits = kFusedGroup;
  op.infer = [](std::span<const TensorType>, const Attrs&) -> std::vector<TensorType> {
    fail(ErrorKind::invalid_argument,
         "a fused group's output types come from its body; create it with Graph::add_node_typed");
  };
  ops.push_back(std::move(op));
}

}  // namespace kiln::ops_internal
