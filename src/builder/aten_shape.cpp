// ATen adapters for views, copies, indexing and creation ops.
#include <algorithm>
#include <limits>

#include "builder/aten_call.h"
#include "support/error.h"

namespace kiln::aten_internal {

namespace {

Value* slice(GraphBuilder& b, Value* x, int64_t dim, int64_t start, int64_t end, int64_t step = 1) {
  return b.op1("slice", {x}, attrs({{"dim", dim}, {"start", start}, {"end", end}, {"step", step}}));
}

// The dtype aten.full/arange use when none is given: bool, int64 or float32 by the Python values.
DType default_dtype(const std::vector<Operand>& values) {
  bool any_float = false, all_bool = !values.empty();
  for (const Operand& v : values) {
    any_float = any_float || std::holds_alternative<double>(v);
    all_bool = all_bool && std::holds_alternative<bool>(v);
  }
  return any_float ? DType::f32 : all_bool ? DType::boolean : DType::i64;
}

double as_double(const Operand& o) {
  if (const auto* d = std::get_if<double>(&o)) return *d;
  if (const auto* i = std::get_if<int64_t>(&o)) return static_cast<double>(*i);
  if (const auto* f = std::get_if<bool>(&o)) return *f ? 1.0 : 0.0;
  return 0.0;
}

std::vector<Value*> split(AtenCall& c, const std::vector<int64_t>& sizes, int64_t dim) {
  Value* x = c.tensor("self");
  int64_t rank = static_cast<int64_t>(x->type.rank());
  if (dim < 0) dim += rank;
  std::vector<Value*> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(c.b, x, dim, start, start + s));
    start += s;
  }
  return out;
}

}  // namespace

void register_shape_adapters(AdapterMap& m) {
  for (const char* t : {"aten.view.default", "aten._unsafe_view.default"})
    m[t] = [](AtenCall& c) { return one(c.b.reshape(c.tensor("self"), c.ints("size"))); };
  m["aten.reshape.default"] = [](AtenCall& c) { return one(c.b.reshape(c.tensor("self"), c.ints("shape"))); };
  m["aten.permute.default"] = [](AtenCall& c) { return one(c.b.permute(c.tensor("self"), c.ints("dims"))); };
  m["aten.t.default"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    return one(x->type.rank() < 2 ? x : c.b.permute(x, {1, 0}));
  };
  m["aten.transpose.int"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    int64_t rank = static_cast<int64_t>(x->type.rank());
    std::vector<int64_t> dims;
    for (int64_t i = 0; i < rank; ++i) dims.push_back(i);
    if (rank == 0) return one(x);
    int64_t a = c.int_("dim0"), b = c.int_("dim1");
    if (a < 0) a += rank;
    if (b < 0) b += rank;
    if (a < 0 || b < 0 || a >= rank || b >= rank) c.unsupported("transpose dims out of range");
    std::swap(dims[a], dims[b]);
    return one(c.b.permute(x, dims));
  };
  m["aten.expand.default"] = [](AtenCall& c) {
    return one(c.b.op1("expand", {c.tensor("self")}, attrs({{"shape", c.ints("size")}})));
  };
  // repeat: each dim i of self (leading 1s added up to the repeats' count) becomes repeats[i] copies
  // of it: viewed as [1, s0, 1, s1, ...], broadcast to [r0, s0, r1, s1, ...], then merged pairwise
  // (GPT-J's rotary sin/cos).
  m["aten.repeat.default"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    const std::vector<int64_t> repeats = c.ints("repeats");
    if (repeats.size() < x->type.rank())
      c.unsupported("repeat needs at least as many repeats as the tensor has dims");
    const size_t lead = repeats.size() - x->type.rank();
    Dims spread, broadcast, merged;
    for (size_t i = 0; i < repeats.size(); ++i) {
      const int64_t size = i < lead ? 1 : x->type.dims[i - lead];
      if (repeats[i] < 0) c.unsupported("repeat counts must not be negative");
      spread.insert(spread.end(), {1, size});
      broadcast.insert(broadcast.end(), {repeats[i], size});
      merged.push_back(repeats[i] * size);
    }
    Value* wide = c.b.op1("expand", {c.b.reshape(x, spread)}, attrs({{"shape", broadcast}}));
    return one(c.b.reshape(wide, merged));
  };
  m["aten.slice.Tensor"] = [](AtenCall& c) {
    return one(slice(c.b, c.tensor("self"), c.int_or("dim", 0), c.int_or("start", 0),
                     c.int_or("end", std::numeric_limits<int64_t>::max()), c.int_or("step", 1)));
  };
  m["aten.select.int"] = [](AtenCall& c) {
    return one(c.b.op1("select", {c.tensor("self")}, attrs({{"dim", c.int_("dim")}, {"index", c.int_("index")}})));
  };
  m["aten.squeeze.dim"] = [](AtenCall& c) {
    return one(c.b.op1("squeeze", {c.tensor("self")}, attrs({{"dims", c.ints("dim")}})));
  };
  m["aten.squeeze.dims"] = m["aten.squeeze.dim"];
  m["aten.squeeze.default"] = [](AtenCall& c) { return one(c.b.op1("squeeze", {c.tensor("self")})); };
  m["aten.unsqueeze.default"] = [](AtenCall& c) {
    return one(c.b.op1("unsqueeze", {c.tensor("self")}, attrs({{"dim", c.int_("dim")}})));
  };
  m["aten.contiguous.default"] = [](AtenCall& c) { return one(c.b.op1("contiguous", {c.tensor("self")})); };
  m["aten.cat.default"] = [](AtenCall& c) {
    std::vector<Value*> xs = c.tensors("tensors");
    std::vector<Operand> ops(xs.begin(), xs.end());
    DType t = c.b.result_type(ops);
    std::vector<Value*> cast;
    for (Value* x : xs)
      if (!(x->type.rank() == 1 && x->type.dims[0] == 0)) cast.push_back(c.b.cast(x, t));  // torch skips empty 1-D
    if (cast.empty()) c.unsupported("cat of only empty tensors");
    return one(cast.size() == 1 ? c.b.op1("contiguous", cast) : c.b.op1("concat", cast, attrs({{"dim", c.int_or("dim", 0)}})));
  };
  // slice_scatter: self with src written over one slice along dim (functionalized `x[..., a:b] = src`,
  // Swin's window masks): the parts of self before and after the slice concatenated around src. Step 1 only.
  m["aten.slice_scatter.default"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    const int64_t rank = static_cast<int64_t>(x->type.rank());
    int64_t d = c.int_or("dim", 0);
    if (d < 0) d += rank;
    if (d < 0 || d >= rank) c.unsupported("slice_scatter dim out of range");
    if (c.int_or("step", 1) != 1) c.unsupported("slice_scatter with a step other than 1");
    const int64_t size = x->type.dims[d];
    auto bound = [size](int64_t i) { return std::clamp(i < 0 ? i + size : i, int64_t{0}, size); };
    const int64_t start = bound(c.int_or("start", 0)), end = std::max(start, bound(c.int_or("end", size)));
    Value* src = c.b.cast(c.tensor("src"), x->type.dtype);
    std::vector<Value*> parts;
    if (start > 0) parts.push_back(slice(c.b, x, d, 0, start));
    if (end > start) parts.push_back(src);
    if (end < size) parts.push_back(slice(c.b, x, d, end, size));
    if (parts.empty()) return one(c.b.op1("contiguous", {x}));
    return one(parts.size() == 1 ? c.b.op1("contiguous", parts) : c.b.op1("concat", parts, attrs({{"dim", d}})));
  };
  // copy (functionalized `self.copy_(src)`): src broadcast to self's shape in self's dtype; self's values
  // are not read.
  m["aten.copy.default"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    Value* src = c.b.cast(c.tensor("src"), x->type.dtype);
    if (src->type.dims != x->type.dims) src = c.b.op1("expand", {src}, attrs({{"shape", x->type.dims}}));
    return one(c.b.op1("contiguous", {src}));
  };
  m["aten.split_with_sizes.default"] = [](AtenCall& c) { return split(c, c.ints("split_sizes"), c.int_or("dim", 0)); };
  m["aten.split.Tensor"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    int64_t dim = c.int_or("dim", 0), rank = static_cast<int64_t>(x->type.rank());
    int64_t d = dim < 0 ? dim + rank : dim;
    if (d < 0 || d >= rank) c.unsupported("split dim out of range");
    int64_t size = c.int_("split_size"), total = x->type.dims[d];
    if (size <= 0) c.unsupported("split_size must be positive");
    std::vector<int64_t> sizes;
    for (int64_t s = 0; s < total; s += size) sizes.push_back(std::min(size, total - s));
    return split(c, sizes, d);
  };
  m["aten.unbind.int"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    int64_t dim = c.int_or("dim", 0), rank = static_cast<int64_t>(x->type.rank());
    int64_t d = dim < 0 ? dim + rank : dim;
    if (d < 0 || d >= rank) c.unsupported("unbind dim out of range");
    std::vector<Value*> out;
    for (int64_t i = 0; i < x->type.dims[d]; ++i)
      out.push_back(c.b.op1("select", {x}, attrs({{"dim", d}, {"index", i}})));
    return out;
  };
  m["aten.constant_pad_nd.default"] = [](AtenCall& c) {
    return one(c.b.op1("constant_pad", {c.tensor("self")},
                       attrs({{"pad", c.ints("pad")}, {"value", c.number_or("value", 0.0)}})));
  };
  m["aten.gather.default"] = [](AtenCall& c) {
    if (c.flag_or("sparse_grad", false)) c.unsupported("sparse_grad");
    return one(c.b.op1("gather", {c.tensor("self"), c.tensor("index")}, attrs({{"dim", c.int_("dim")}})));
  };
  m["aten.index_select.default"] = [](AtenCall& c) {
    return one(c.b.op1("index_select", {c.tensor("self"), c.tensor("index")}, attrs({{"dim", c.int_("dim")}})));
  };
  // x[:, ..., :, i0, ..., ik-1]: k integer index tensors (broadcast together) for k adjacent dims of x after
  // any number of leading full slices (None); no bool masks. The indexed dims are moved first, one flat row
  // index picks rows of x viewed as [rows, rest...] (index_select), and the result's index dims are moved
  // back behind the leading ones, where ATen puts them.
  m["aten.index.Tensor"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    std::vector<Value*> indices = c.opt_tensors("indices");
    size_t lead = 0;
    while (lead < indices.size() && indices[lead] == nullptr) ++lead;
    indices.erase(indices.begin(), indices.begin() + static_cast<std::ptrdiff_t>(lead));
    const size_t rank = x->type.rank();
    if (indices.empty() || lead + indices.size() > rank)
      c.unsupported(str_cat("index with ", indices.size(), " index tensors after ", lead, " full slices for a rank-",
                            rank, " tensor"));
    for (const Value* i : indices)
      if (i == nullptr) c.unsupported("index with a full slice (None) between index tensors");
    if (lead > 0) {  // the indexed dims first
      std::vector<int64_t> order;
      for (size_t d = 0; d < indices.size(); ++d) order.push_back(static_cast<int64_t>(lead + d));
      for (size_t d = 0; d < rank; ++d)
        if (d < lead || d >= lead + indices.size()) order.push_back(static_cast<int64_t>(d));
      x = c.b.permute(x, order);
    }
    Value* flat = nullptr;
    int64_t rows = 1;
    for (size_t d = 0; d < indices.size(); ++d) {
      DType t = indices[d]->type.dtype;
      if (!is_integral(t) || t == DType::boolean)
        c.unsupported(str_cat("index tensor ", d, " is ", dtype_name(t), " (integer indices only)"));
      Value* i = c.b.cast(indices[d], DType::i64);
      const int64_t size = x->type.dims[d];
      Value* wrapped = c.b.elementwise("where", {c.b.elementwise("lt", {i, int64_t{0}}), c.b.elementwise("add", {i, size}), i});
      flat = flat == nullptr ? wrapped : c.b.elementwise("add", {c.b.elementwise("mul", {flat, size}), wrapped});
      rows *= size;
    }
    Dims rest(x->type.dims.begin() + static_cast<std::ptrdiff_t>(indices.size()), x->type.dims.end());
    Dims table{rows};
    table.insert(table.end(), rest.begin(), rest.end());
    Dims out_dims = flat->type.dims;
    out_dims.insert(out_dims.end(), rest.begin(), rest.end());
    Value* picked = c.b.op1("index_select", {c.b.reshape(x, table), c.b.reshape(flat, {flat->type.numel()})},
                            attrs({{"dim", int64_t{0}}}));
    Value* out = c.b.reshape(picked, out_dims);
    if (lead == 0) return one(out);
    const size_t index_rank = flat->type.rank();  // the leading dims back in front of the index dims
    std::vector<int64_t> back;
    for (size_t d = 0; d < lead; ++d) back.push_back(static_cast<int64_t>(index_rank + d));
    for (size_t d = 0; d < index_rank; ++d) back.push_back(static_cast<int64_t>(d));
    for (size_t d = index_rank + lead; d < out_dims.size(); ++d) back.push_back(static_cast<int64_t>(d));
    return one(c.b.permute(out, back));
  };
  m["aten.embedding.default"] = [](AtenCall& c) {
    return one(c.b.op1("embedding", {c.tensor("weight"), c.tensor("indices")},
                       attrs({{"padding_idx", c.int_or("padding_idx", -1)}})));
  };
  m["aten.full.default"] = [](AtenCall& c) {
    Operand v = c.operand("fill_value");
    DType t = c.dtype("dtype").value_or(default_dtype({v}));
    return one(c.b.op1("full", {}, attrs({{"shape", c.ints("size")}, {"value", as_double(v)}, {"dtype", t}})));
  };
  m["aten.full_like.default"] = [](AtenCall& c) {
    Value* self = c.tensor("self");
    DType t = c.dtype("dtype").value_or(self->type.dtype);
    return one(c.b.op1("full", {}, attrs({{"shape", self->type.dims}, {"value", as_double(c.operand("fill_value"))}, {"dtype", t}})));
  };
  m["aten.scalar_tensor.default"] = [](AtenCall& c) {
    Operand v = c.operand("s");
    DType t = c.dtype("dtype").value_or(DType::f32);
    return one(c.b.op1("full", {}, attrs({{"shape", std::vector<int64_t>{}}, {"value", as_double(v)}, {"dtype", t}})));
  };
  auto arange = [](AtenCall& c) {
    Operand start = c.has("start") ? c.operand("start") : Operand(int64_t{0});
    Operand end = c.operand("end");
    Operand step = c.has("step") ? c.operand("step") : Operand(int64_t{1});
    DType t = c.dtype("dtype").value_or(default_dtype({start, end, step}));
    if (t == DType::boolean) t = DType::i64;
    return one(c.b.op1("arange", {}, attrs({{"start", as_double(start)}, {"end", as_double(end)},
                                             {"step", as_double(step)}, {"dtype", t}})));
  };
  for (const char* t : {"aten.arange.default", "aten.arange.start", "aten.arange.start_step"}) m[t] = arange;
}

}  // namespace kiln::aten_internal
