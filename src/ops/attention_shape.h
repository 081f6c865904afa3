// Shape rules of the attention op (attention_ops.cpp) that its kernels share:
// the broadcast of q, k and v's batch dims with grouped-query heads.
#pragma once

#include "ir/tensor_type.h"

namespace kiln {

// The output batch dims (all but the last two) of attention over q, k and v
// dims; throws kiln::Error when they do not broadcast. The last batch dim of k
// and v may divide q's (grouped-query heads).
Dims attention_batch_dims(const Dims& q, const Dims& k, const Dims& v);

// The index along one operand batch dim of size operand_dim that output index
// out_index (of out_dim) reads: 0 when broadcast, the group's head for GQA.
int64_t attention_batch_index(int64_t out_index, int64_t out_dim, int64_t operand_dim);

}  // namespace kiln
