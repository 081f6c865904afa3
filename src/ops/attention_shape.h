// Shape rules of the attention op (attention_ops.cpp) that its kernels share:
// the broadcast of q, k and v's batch dims with grouped-query heads.
#pragma once

#include "ir/tensor_type.h"

namespace kiln {

// The output batch dims (all but the last two) of attention over q, k and v
// dims; throws kiln::Error when they do not broadcast. The last batch dim of k
// and v may divide q's (grouped-query heads).
Dims attention_batch_dims(const Dims& q, const Dims& k, const Dims& v);

// Where attention's output puts batch entry b's [L, Ev] rows. Normally the
// output is [..., H, L, Ev] and the rows are contiguous; with heads_last it is
// [..., L, H, Ev] (the layout a model's "merge heads" transpose wants), so a
// batch entry's rows are H * Ev apart. heads is the last batch dim's size
// under heads_last, 1 otherwise.
struct AttentionOutputLayout {
  int64_t heads = 1, L = 0, Ev = 0;
  int64_t base(int64_t b) const { return (b / heads) * L * heads * Ev + (b % heads) * Ev; }
  int64_t row_stride() const { return heads * Ev; }
};

// The output's batch dims (those q, k and v broadcast to) from its dims.
Dims attention_output_batch(const Dims& out, bool heads_last);

// The index along one operand batch dim of size operand_dim that output index
// out_index (of out_dim) reads: 0 when broadcast, the group's head for GQA.
int64_t attention_batch_index(int64_t out_index, int64_t out_dim, int64_t operand_dim);

}  // namespace kiln
