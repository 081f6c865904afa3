// The IR verifier (see verifier.h for the list of checks). One pass over the
// nodes in order keeps a set of defined values; use lists are compared as
// multisets; fused bodies are verified recursively with a prefix naming the
// node that holds them.
#include "ir/verifier.h"

#include <exception>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/printer.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln {

namespace {

constexpr int kMaxBodyDepth = 64;

std::string ref(const Value* v) { return v ? value_ref(v->name) : std::string("%<null>"); }

std::string node_label(const Node* n) {
  return str_cat("node '", n->name, "' (", n->op ? n->op->name : std::string("<no op>"), ")");
}

class Verifier {
 public:
  Verifier(const Graph& g, std::string where, int depth) : g_(g), where_(std::move(where)), depth_(depth) {}

  void run() {
    check_declared(g_.inputs(), ValueKind::input, "input");
    check_declared(g_.weights(), ValueKind::weight, "weight");
    check_declared(g_.literals(), ValueKind::literal, "literal");
    std::vector<Node*> nodes = g_.nodes();
    std::set<std::string, std::less<>> node_names;
    for (const Node* n : nodes) {
      if (!node_names.insert(n->name).second) fail_here("two nodes are named '", n->name, "'");
      for (size_t i = 0; i < n->outputs.size(); ++i) {
        const Value* v = n->outputs[i];
        if (v == nullptr) fail_here(node_label(n), ": output ", i, " is null");
        all_.insert(v);
        order_.push_back(v);
      }
      node_set_.insert(n);
    }
    for (const Node* n : nodes) check_node(n);
    check_use_lists(nodes);
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const Value* v = g_.outputs()[i];
      if (v == nullptr || all_.count(v) == 0)
        fail_here("graph output ", i, " (", ref(v), ") is not a value of this graph");
    }
  }

 private:
  template <typename... Parts>
  [[noreturn]] void fail_here(Parts&&... parts) {
    fail(ErrorKind::invalid_argument, "verify: ", where_, std::forward<Parts>(parts)...);
  }

  // `what()` describes the value for an error message; it is only called on failure.
  template <typename Describe>
  void check_type(const TensorType& t, const Describe& what) {
    if (t.strides.size() != t.dims.size())
      fail_here(what(), " has ", t.dims.size(), " dims but ", t.strides.size(), " strides");
    int64_t n = 1;
    for (size_t i = 0; i < t.dims.size(); ++i) {
      if (t.dims[i] < 0) fail_here(what(), " has a negative dim ", t.dims[i]);
      if (t.strides[i] < 0) fail_here(what(), " has a negative stride ", t.strides[i]);
      if (__builtin_mul_overflow(n, t.dims[i], &n)) fail_here(what(), " has too many elements (overflow)");
    }
  }

  template <typename Describe>
  void define_name(const Value* v, const Describe& what) {
    if (v->name.empty()) fail_here(what(), " has an empty name");
    auto [it, fresh] = names_.emplace(v->name, v);
    if (!fresh) fail_here(what(), ": value name ", value_ref(v->name), " is defined twice");
  }

  void check_declared(const std::vector<Value*>& list, ValueKind kind, const char* kind_name) {
    for (size_t i = 0; i < list.size(); ++i) {
      const Value* v = list[i];
      if (v == nullptr) fail_here(kind_name, " ", i, " is null");
      std::string what = str_cat(kind_name, " ", value_ref(v->name));
      auto describe = [&] { return what; };
      if (v->kind != kind) fail_here(what, " is listed as a ", kind_name, " but has another kind");
      if (v->producer != nullptr) fail_here(what, " has a producer node");
      define_name(v, describe);
      check_type(v->type, describe);
      if (kind == ValueKind::weight && v->weight_key.empty()) fail_here(what, " has an empty weight key");
      if (kind == ValueKind::literal) {
        if (v->type.strides != contiguous_strides(v->type.dims))
          fail_here(what, " must be contiguous, got ", to_string(v->type));
        int64_t want = v->type.numel() * static_cast<int64_t>(dtype_size(v->type.dtype));
        if (static_cast<int64_t>(v->literal_data.size()) != want)
          fail_here(what, " of type ", to_string(v->type), " needs ", want, " bytes but holds ",
                    v->literal_data.size());
        if (v->type.dtype == DType::boolean)
          for (size_t b = 0; b < v->literal_data.size(); ++b)
            if (v->literal_data[b] > 1)
              fail_here(what, " holds ", int{v->literal_data[b]}, " at element ", b, " (bool must be 0 or 1)");
      }
      all_.insert(v);
      order_.push_back(v);
      defined_.insert(v);
    }
  }

  void check_node(const Node* n) {
    std::string label = node_label(n);
    if (n->op == nullptr) fail_here(label, " has no op");
    const OpDef& op = *n->op;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      if (v == nullptr) fail_here(label, ": input ", i, " is null");
      if (all_.count(v) == 0)
        fail_here(label, ": input ", i, " (", ref(v), ") is not a value of this graph");
      if (defined_.count(v) == 0)
        fail_here(label, ": input ", i, " (", ref(v), ") is used before its definition (cycle or bad order)");
    }
    std::vector<TensorType> in_types;
    for (const Value* v : n->inputs) in_types.push_back(v->type);
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      const Value* v = n->outputs[i];
      auto what = [&] { return str_cat(label, ": output ", i, " (", ref(v), ")"); };
      if (v->kind != ValueKind::output || v->producer != n || v->output_index != static_cast<int>(i))
        fail_here(what(), " does not point back to its node (kind, producer or index)");
      define_name(v, what);
      check_type(v->type, what);
    }
    Attrs full;
    try {
      full = complete_attrs(op, n->attrs);
    } catch (const Error& e) {
      fail_here(label, ": ", e.what());
    }
    if (!(full == n->attrs)) {
      for (const auto& [name, value] : full.items()) {
        const AttrValue* given = n->attrs.find(name);
        if (given == nullptr) fail_here(label, ": attribute '", name, "' is missing (defaults must be filled in)");
        if (given->index() != value.index())
          fail_here(label, ": attribute '", name, "' is ", attr_kind_name(attr_kind(*given)), ", expected ",
                    attr_kind_name(attr_kind(value)));
      }
      fail_here(label, ": attributes are not complete");
    }
    if (op.has(kFusedGroup)) {
      check_body(n, label, in_types);
    } else {
      if (n->body) fail_here(label, " has a body but its op is not a fused group");
      std::vector<TensorType> want;
      try {
        want = infer_types(op, in_types, full, n->name);
      } catch (const Error& e) {
        fail_here(e.what());
      } catch (const std::exception& e) {
        fail_here(label, ": type inference failed: ", e.what());
      }
      compare_outputs(n, label, want, str_cat(op.name, " infers"));
    }
    for (const Value* v : n->outputs) defined_.insert(v);
  }

  void compare_outputs(const Node* n, const std::string& label, const std::vector<TensorType>& want,
                       const std::string& source) {
    if (want.size() != n->outputs.size())
      fail_here(label, " has ", n->outputs.size(), " outputs but ", source, " ", want.size());
    for (size_t i = 0; i < want.size(); ++i)
      if (!(n->outputs[i]->type == want[i]))
        fail_here(label, ": output ", i, " (", ref(n->outputs[i]), ") has type ", to_string(n->outputs[i]->type),
                  " but ", source, " ", to_string(want[i]));
  }

  void check_body(const Node* n, const std::string& label, const std::vector<TensorType>& in_types) {
    if (!n->body) fail_here(label, " is a fused group without a body");
    if (n->op->variadic && in_types.empty()) fail_here(label, ": needs at least one input");
    const Graph& body = *n->body;
    if (depth_ + 1 > kMaxBodyDepth) fail_here(label, ": bodies nested deeper than ", kMaxBodyDepth);
    Verifier(body, str_cat(where_, "in the body of ", label, ": "), depth_ + 1).run();
    if (body.inputs().size() != in_types.size())
      fail_here(label, " has ", in_types.size(), " inputs but its body has ", body.inputs().size());
    for (size_t i = 0; i < in_types.size(); ++i)
      if (!(body.inputs()[i]->type == in_types[i]))
        fail_here(label, ": input ", i, " (", ref(n->inputs[i]), ") has type ", to_string(in_types[i]),
                  " but body input ", ref(body.inputs()[i]), " has type ", to_string(body.inputs()[i]->type));
    std::vector<TensorType> body_out;
    for (const Value* v : body.outputs()) body_out.push_back(v->type);
    compare_outputs(n, label, body_out, "its body returns");
  }

  void check_use_lists(const std::vector<Node*>& nodes) {
    std::unordered_map<const Value*, std::map<const Node*, int>> expected;
    for (const Node* n : nodes)
      for (const Value* v : n->inputs) ++expected[v][n];
    for (const Value* v : order_) {  // definition order: the first error is deterministic
      std::map<const Node*, int> actual;
      for (const Node* user : v->users) {
        if (user == nullptr) fail_here("value ", ref(v), " has a null user");
        if (node_set_.count(user) == 0)
          fail_here("value ", ref(v), " lists user node '", user->name, "' that is not in this graph");
        ++actual[user];
      }
      const auto& want = expected[v];
      if (actual == want) continue;
      for (const Node* node : nodes) {  // graph order: the first error is deterministic
        auto w = want.find(node);
        auto a = actual.find(node);
        int count = w == want.end() ? 0 : w->second;
        int have = a == actual.end() ? 0 : a->second;
        if (count == have) continue;
        if (count == 0)
          fail_here("use list of ", ref(v), " names ", node_label(node), " ", have,
                    " time(s) but the node does not use it");
        fail_here(node_label(node), " uses ", ref(v), " ", count, " time(s) but the use list of ", ref(v), " has it ",
                  have, " time(s)");
      }
    }
  }

  const Graph& g_;
  std::string where_;
  int depth_;
  std::unordered_set<const Value*> all_, defined_;
  std::vector<const Value*> order_;
  std::unordered_set<const Node*> node_set_;
  std::unordered_map<std::string, const Value*> names_;
};

}  // namespace

void verify_graph(const Graph& graph) { Verifier(graph, "", 0).run(); }

}  // namespace kiln
