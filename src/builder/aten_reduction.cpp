// ATen adapters for reductions.
#include "builder/aten_call.h"

namespace kiln::aten_internal {

namespace {

// sum/mean/amax/amin/var over `dim` (None or [] = every axis) with keepdim and an optional dtype.
AtenAdapter reduce(const char* op) {
  return [op](AtenCall& c) {
    Value* x = c.tensor("self");
    if (auto t = c.dtype("dtype")) x = c.b.cast(x, *t);
    std::string name = op;
    if ((name == "mean" || name == "var") && !is_floating(x->type.dtype)) c.unsupported(name + " of an integer tensor");
    Attrs a;
    a.set("dims", c.ints_or("dim", {}));
    a.set("keepdim", c.flag_or("keepdim", false));
    if (name == "var") a.set("correction", c.number_or("correction", 1.0));
    return one(c.b.op1(op, {x}, std::move(a)));
  };
}

// argmax/argmin(self, dim=None, keepdim).
AtenAdapter arg_reduce(const char* op) {
  return [op](AtenCall& c) {
    Attrs a;
    a.set("flatten", !c.has("dim"));
    a.set("dim", c.int_or("dim", 0));
    a.set("keepdim", c.flag_or("keepdim", false));
    return one(c.b.op1(op, {c.tensor("self")}, std::move(a)));
  };
}

// max.dim/min.dim: (values, indices).
AtenAdapter value_and_index(const char* value_op, const char* index_op) {
  return [value_op, index_op](AtenCall& c) {
    Value* x = c.tensor("self");
    int64_t dim = c.int_("dim");
    bool keepdim = c.flag_or("keepdim", false);
    Attrs v;
    v.set("dims", std::vector<int64_t>{dim});
    v.set("keepdim", keepdim);
    Attrs i;
    i.set("dim", dim);
    i.set("keepdim", keepdim);
    return std::vector<Value*>{c.b.op1(value_op, {x}, std::move(v)), c.b.op1(index_op, {x}, std::move(i))};
  };
}

// any/all over `dim` (absent: every axis): amax/amin of the values read as bool.
AtenAdapter logical_reduce(const char* op) {
  return [op](AtenCall& c) {
    Value* x = c.b.cast(c.b.cast(c.tensor("self"), DType::boolean), DType::u8);
    Attrs a;
    a.set("dims", c.ints_or("dim", {}));
    a.set("keepdim", c.flag_or("keepdim", false));
    return one(c.b.cast(c.b.op1(op, {x}, std::move(a)), DType::boolean));
  };
}

}  // namespace

void register_reduction_adapters(AdapterMap& m) {
  for (const char* t : {"aten.any.dim", "aten.any.dims", "aten.any.default"}) m[t] = logical_reduce("amax");
  for (const char* t : {"aten.all.dim", "aten.all.dims", "aten.all.default"}) m[t] = logical_reduce("amin");
  m["aten.sum.dim_IntList"] = reduce("sum");
  m["aten.sum.default"] = reduce("sum");
  m["aten.mean.dim"] = reduce("mean");
  m["aten.mean.default"] = reduce("mean");
  m["aten.amax.default"] = reduce("amax");
  m["aten.amin.default"] = reduce("amin");
  m["aten.var.correction"] = reduce("var");
  m["aten.argmax.default"] = arg_reduce("argmax");
  m["aten.argmin.default"] = arg_reduce("argmin");
  m["aten.cumsum.default"] = [](AtenCall& c) {
    Value* x = c.tensor("self");
    // torch sums integers and bool as i64 unless a dtype is given.
    DType t = c.dtype("dtype").value_or(is_floating(x->type.dtype) ? x->type.dtype : DType::i64);
    return one(c.b.op1("cumsum", {c.b.cast(x, t)}, attrs({{"dim", c.int_("dim")}})));
  };
  m["aten.max.dim"] = value_and_index("amax", "argmax");
  m["aten.min.dim"] = value_and_index("amin", "argmin");
}

}  // namespace kiln::aten_internal
