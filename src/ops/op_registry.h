// Internal: how op declaration files add their ops to the table. Each family
// file defines one register_*_ops function; op_table.cpp calls them in order.
#pragma once

#include <vector>

#include "ops/op_def.h"

namespace kiln::ops_internal {

using OpList = std::vector<OpDef>;

void register_elementwise_ops(OpList& ops);
void register_cast_ops(OpList& ops);
void register_reduction_ops(OpList& ops);
void register_linalg_ops(OpList& ops);      // matmul, conv2d
void register_norm_ops(OpList& ops);        // batch_norm, layer_norm, softmax, log_softmax
void register_pool_ops(OpList& ops);        // max/avg/adaptive-avg pool 2d
void register_shape_ops(OpList& ops);       // reshape, permute, expand, slice, select, concat, pad, ...
void register_index_ops(OpList& ops);       // gather, index_select, embedding
void register_creation_ops(OpList& ops);    // full, arange
void register_attention_ops(OpList& ops);   // attention
void register_fused_ops(OpList& ops);       // fused (elementwise group with a body graph)
void register_epilogue_ops(OpList& ops);    // conv2d_fused, matmul_epilogue (made by passes)

// The attributes of a 2-D convolution (stride, padding, dilation, groups), shared by
// conv2d and the conv2d_fused op the epilogue pass makes from it.
std::vector<AttrSpec> conv2d_attrs();

}  // namespace kiln::ops_internal
