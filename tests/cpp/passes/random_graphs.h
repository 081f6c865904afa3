// Test helper: random graphs of elementwise ops (with broadcasting, strided
// inputs, scalar literals, casts and compares) and, optionally, matmuls and
// keepdim reductions mixed in, so fusion meets nodes it must not swallow.
// Deterministic for a seed.
#pragma once

#include <random>

#include "interpret.h"
#include "ir/literal.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::test {

struct RandomGraph {
  std::unique_ptr<Graph> graph;
  std::vector<Bytes> inputs;
};

struct RandomGraphOptions {
  DType base = DType::f32;    // f32, f64 or i32
  DType narrow = DType::f16;  // a second dtype reached by casts
  Dims dims = {3, 5, 7};
  int num_ops = 12;
  bool mix_in_matmuls = false;  // needs dims [n, n]
  // Also add what the other passes rewrite: ops on literals only, duplicated
  // nodes, x*1 and x+0, reshape round trips, views of a slice of a literal, and
  // views of computed values (a slice broadcast back, a permute round trip).
  bool with_rewrite_bait = false;
};

inline RandomGraph random_elementwise_graph(uint32_t seed, const RandomGraphOptions& opt) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  RandomGraph r;
  r.graph = std::make_unique<Graph>();
  Graph& g = *r.graph;
  const bool floating = is_floating(opt.base);
  const Dims& D = opt.dims;

  // Input layouts: full, broadcast suffixes, scalar, and a transposed layout.
  auto add_input = [&](DType dtype, int kind) {
    TensorType type;
    switch (kind) {
      case 0: type = TensorType(dtype, D); break;
      case 1: {
        Dims d(D.begin() + 1, D.end());
        if (!d.empty()) d[0] = 1;
        type = TensorType(dtype, d);
        break;
      }
      case 2: type = TensorType(dtype, {D.back()}); break;
      case 3: type = TensorType(dtype, {}); break;
      default: {
        Dims reversed(D.rbegin(), D.rend());
        Dims st = contiguous_strides(reversed);
        type = TensorType(dtype, D, Dims(st.rbegin(), st.rend()));
      }
    }
    Value* v = g.add_input("in" + std::to_string(g.inputs().size()), type);
    Bytes data(static_cast<size_t>(type.storage_bytes()));
    for (size_t off = 0; off < data.size(); off += dtype_size(dtype)) {
      double x = floating ? std::uniform_real_distribution<double>(-2.0, 2.0)(rng)
                          : static_cast<double>(pick(41) - 20);
      store_scalar(data.data() + off, dtype, x);
    }
    r.inputs.push_back(std::move(data));
    return v;
  };

  std::vector<Value*> pool[2];  // [0]: base dtype, [1]: narrow dtype
  for (int i = 0; i < 3; ++i) pool[0].push_back(add_input(opt.base, i == 0 ? 0 : pick(5)));
  pool[1].push_back(add_input(opt.narrow, pick(5)));

  const std::vector<std::string> unary_float = {"neg", "abs", "tanh", "sigmoid", "relu", "sin", "silu", "gelu", "exp", "sqrt"};
  const std::vector<std::string> unary_int = {"neg", "abs", "relu"};
  const std::vector<std::string> binary_float = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};
  const std::vector<std::string> binary_int = {"add", "sub", "mul", "maximum", "minimum"};
  std::vector<Value*> produced;

  auto any_of = [&](int p) { return pool[p][static_cast<size_t>(pick(static_cast<int>(pool[p].size())))]; };
  for (int k = 0; k < opt.num_ops; ++k) {
    int p = pick(4) == 0 ? 1 : 0;
    DType dt = p == 0 ? opt.base : opt.narrow;
    // Narrow-dtype elementwise ops need floating types when the op is floating.
    const bool narrow_floating = is_floating(dt);
    const auto& un = narrow_floating ? unary_float : unary_int;
    const auto& bin = narrow_floating ? binary_float : binary_int;
    Value* out = nullptr;
    int choice = pick(opt.mix_in_matmuls ? 8 : 6);
    if (choice == 0) {
      out = g.add_node(get_op(un[static_cast<size_t>(pick(static_cast<int>(un.size())))]), {any_of(p)})->outputs[0];
    } else if (choice <= 2) {
      Value* b = pick(5) == 0 ? g.add_scalar(floating ? 0.5 + pick(3) : 1 + pick(3), dt) : any_of(p);
      out = g.add_node(get_op(bin[static_cast<size_t>(pick(static_cast<int>(bin.size())))]), {any_of(p), b})->outputs[0];
    } else if (choice == 3) {
      Value* a = any_of(p);
      Value* b = any_of(p);
      Value* c = g.add_node(get_op(pick(2) ? "gt" : "le"), {a, b})->outputs[0];
      out = g.add_node(get_op("where"), {c, a, b})->outputs[0];
    } else if (choice == 4) {  // cast to the other pool
      Attrs attrs;
      attrs.set("dtype", p == 0 ? opt.narrow : opt.base);
      out = g.add_node(get_op("cast"), {any_of(p)}, attrs)->outputs[0];
      p = 1 - p;
    } else if (choice == 5) {
      out = g.add_node(get_op(bin[0]), {any_of(p), any_of(p)})->outputs[0];
    } else {
      // Inference rejects ranks these ops cannot take; such picks are skipped.
      try {
        if (choice == 6) {
          Value* a = any_of(p);
          Value* b = any_of(p);
          if (a->type.dims == D && b->type.dims == D) out = g.add_node(get_op("matmul"), {a, b})->outputs[0];
        } else {
          Attrs attrs;
          attrs.set("dims", std::vector<int64_t>{1});
          attrs.set("keepdim", true);
          out = g.add_node(get_op("sum"), {any_of(p)}, attrs)->outputs[0];
        }
      } catch (const Error&) {
        out = nullptr;
      }
    }
    if (opt.with_rewrite_bait && floating && pick(3) == 0) {
      Value* base = out != nullptr ? out : any_of(p);
      const DType bd = base->type.dtype;
      switch (pick(6)) {
        case 0: {  // a literal-only expression
          TensorType t(bd, {D.back()});
          Bytes bytes(static_cast<size_t>(t.numel()) * dtype_size(bd));
          for (size_t off = 0; off < bytes.size(); off += dtype_size(bd)) store_scalar(bytes.data() + off, bd, 0.25 * pick(9));
          Value* lit = g.add_literal("", t, std::move(bytes));
          Value* e = g.add_node(get_op("exp"), {lit})->outputs[0];
          out = g.add_node(get_op("mul"), {base, e})->outputs[0];
          break;
        }
        case 1:  // a duplicate of the node just made
          if (base->producer != nullptr) {
            const Node& n = *base->producer;
            Value* twin = g.add_node(*n.op, n.inputs, n.attrs)->outputs[0];
            out = g.add_node(get_op("add"), {base, twin})->outputs[0];
          }
          break;
        case 2:  // identities
          out = g.add_node(get_op(pick(2) ? "mul" : "add"), {base, g.add_scalar(0, bd)})->outputs[0];
          if (out->producer->op->name == "mul") out = g.add_node(get_op("mul"), {base, g.add_scalar(1, bd)})->outputs[0];
          break;
        case 3: {  // a row of the transposed middle of a wider literal: slice, permute, select
          const int64_t k = D.back();
          TensorType t(bd, {k, k + 3});
          Bytes bytes(static_cast<size_t>(t.numel()) * dtype_size(bd));
          for (size_t off = 0; off < bytes.size(); off += dtype_size(bd)) store_scalar(bytes.data() + off, bd, 0.25 * pick(9));
          Value* lit = g.add_literal("", t, std::move(bytes));
          Attrs slice, perm, row;
          slice.set("dim", int64_t{1});
          slice.set("start", int64_t{1});
          slice.set("end", k + 1);
          slice.set("step", int64_t{1});
          perm.set("dims", std::vector<int64_t>{1, 0});
          row.set("dim", int64_t{0});
          row.set("index", static_cast<int64_t>(pick(static_cast<int>(k))));
          Value* v = g.add_node(get_op("slice"), {lit}, slice)->outputs[0];
          v = g.add_node(get_op("permute"), {v}, perm)->outputs[0];
          v = g.add_node(get_op("select"), {v}, row)->outputs[0];
          out = g.add_node(get_op("mul"), {base, v})->outputs[0];
          break;
        }
        case 4:  // one slice of the first dim broadcast back over it, or a permute there and back
          if (base->type.dims == D && D.size() >= 2) {
            Value* v = nullptr;
            if (pick(2) == 0) {
              Attrs slice, shape;
              const int64_t at = pick(static_cast<int>(D[0]));
              slice.set("dim", int64_t{0});
              slice.set("start", at);
              slice.set("end", at + 1);
              slice.set("step", int64_t{1});
              shape.set("shape", D);
              v = g.add_node(get_op("slice"), {base}, slice)->outputs[0];
              v = g.add_node(get_op("expand"), {v}, shape)->outputs[0];
            } else {
              std::vector<int64_t> swap(D.size());
              for (size_t i = 0; i < swap.size(); ++i) swap[i] = static_cast<int64_t>(i);
              std::swap(swap[0], swap.back());
              Attrs perm;
              perm.set("dims", swap);
              v = g.add_node(get_op("permute"), {base}, perm)->outputs[0];
              v = g.add_node(get_op(un[0]), {v})->outputs[0];
              v = g.add_node(get_op("permute"), {v}, perm)->outputs[0];
            }
            out = g.add_node(get_op("add"), {v, any_of(p)})->outputs[0];
          }
          break;
        default: {  // reshape there and back
          Attrs flat, back;
          flat.set("shape", std::vector<int64_t>{-1});
          back.set("shape", base->type.dims);
          if (base->type.is_contiguous()) {
            Value* f = g.add_node(get_op("reshape"), {base}, flat)->outputs[0];
            out = g.add_node(get_op("reshape"), {f}, back)->outputs[0];
          }
        }
      }
    }
    if (out != nullptr) {
      pool[p].push_back(out);
      produced.push_back(out);
    }
  }
  // Outputs: the last value and a few others.
  std::vector<Value*> outs;
  if (!produced.empty()) outs.push_back(produced.back());
  for (Value* v : produced)
    if (pick(4) == 0 && v != produced.back()) outs.push_back(v);
  if (outs.empty()) outs.push_back(pool[0].front());
  g.set_outputs(outs);
  return r;
}

}  // namespace kiln::test
