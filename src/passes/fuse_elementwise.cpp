// Elementwise fusion: groups connected elementwise ops (and casts) into nodes
// of op "fused" whose body graph holds the group (Note [Fused groups] in
// src/ops/fused_ops.cpp), so that a backend runs each group as one pass over
// memory instead of one pass per op.
//
// Rules:
//   - a group's ops all produce the same output dims (their inputs may
//     broadcast into them) and have single outputs;
//   - a group's dtypes are of one compute class: f16/bf16/f32, or f64, or
//     integers; bool mixes with any. So the fused kernel computes the whole
//     body in one compute type (float, double, int64) and, rounding every
//     intermediate to its dtype, gives exactly the ops' one-by-one results.
//     Casts between classes (f32 -> i64, f32 -> f64) are left unfused;
//   - groups grow along producer -> consumer edges, in topological order, and
//     a merge is refused when some node outside the merged group would both
//     depend on it and feed it (that would be a cycle once the group is one
//     node); this is checked on the graph with every group contracted;
//   - groups hold at most kMaxGroupOps ops; groups of one op are left alone;
//     members no group output needs are dead code and are dropped;
//   - scalar literals (one element) read by a group move into its body;
//   - the fused node's outputs are the group values used outside it (by other
//     nodes or as graph outputs), in topological order, keeping their names.
// Afterwards nodes are reordered (a stable topological order of the contracted
// graph), since a group's position may need to move past nodes between its
// members.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ops/op_def.h"
#include "passes/passes.h"
#include "support/error.h"

namespace kiln {

namespace {

constexpr size_t kMaxGroupOps = 64;

enum class ComputeClass : uint8_t { any, f32, f64, integer, mixed };

ComputeClass class_of(DType d) {
  if (d == DType::boolean) return ComputeClass::any;
  if (d == DType::f64) return ComputeClass::f64;
  if (is_floating(d)) return ComputeClass::f32;
  return ComputeClass::integer;
}

ComputeClass join(ComputeClass a, ComputeClass b) {
  if (a == ComputeClass::any) return b;
  if (b == ComputeClass::any || a == b) return a;
  return ComputeClass::mixed;
}

bool is_candidate_op(const Node& node) {
  if (node.body != nullptr || node.outputs.size() != 1) return false;
  const OpDef& op = *node.op;
  if (op.has(kElementwise) && op.elementwise.has_value())
    return node.inputs.size() == static_cast<size_t>(op.elementwise->arity);
  return op.name == "cast" && node.inputs.size() == 1;
}

class Fuser {
 public:
  explicit Fuser(Graph& graph) : graph_(graph), nodes_(graph.nodes()) {
    const size_t n = nodes_.size();
    parent_.resize(n);
    members_.resize(n);
    min_pos_.resize(n);
    class_.resize(n);
    candidate_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      index_[nodes_[i]] = static_cast<int>(i);
      parent_[i] = static_cast<int>(i);
      members_[i] = {static_cast<int>(i)};
      min_pos_[i] = static_cast<int>(i);
      const Node& node = *nodes_[i];
      ComputeClass c = ComputeClass::any;
      for (const Value* v : node.inputs) c = join(c, class_of(v->type.dtype));
      for (const Value* v : node.outputs) c = join(c, class_of(v->type.dtype));
      class_[i] = c;
      candidate_[i] = is_candidate_op(node) && c != ComputeClass::mixed;
    }
  }

  bool run() {
    form_groups();
    // Outputs are found before any group is emitted: emitting changes users.
    struct Group {
      int root;
      std::vector<Value*> outputs;
      std::vector<int> live;
    };
    std::vector<Group> groups;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      int root = static_cast<int>(i);
      if (find(root) != root || members_[i].size() < 2) continue;
      std::vector<Value*> outputs = group_outputs(root);
      std::vector<int> live = live_members(root, outputs);
      if (live.size() >= 2) groups.push_back(Group{root, std::move(outputs), std::move(live)});
    }
    if (groups.empty()) return false;
    std::vector<int> order = contracted_order();
    std::unordered_map<int, Node*> fused;
    for (const Group& group : groups) fused[group.root] = emit(group.root, group.outputs, group.live);
    std::vector<Node*> final_order;
    for (int root : order) {
      if (fused.count(root)) {
        final_order.push_back(fused[root]);
      } else {  // a lone node, or a dead group left unfused: its members in order
        for (int m : members_[static_cast<size_t>(root)]) final_order.push_back(nodes_[static_cast<size_t>(m)]);
      }
    }
    reorder(final_order);
    return true;
  }

 private:
  int find(int i) {
    while (parent_[static_cast<size_t>(i)] != i) {
      parent_[static_cast<size_t>(i)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(i)])];
      i = parent_[static_cast<size_t>(i)];
    }
    return i;
  }

  int root_of(const Value* v) {
    if (v->producer == nullptr) return -1;
    return find(index_.at(v->producer));
  }

  void form_groups() {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!candidate_[i]) continue;
      const Node& node = *nodes_[i];
      const Dims& dims = node.outputs[0]->type.dims;
      for (const Value* v : node.inputs) {
        int g = root_of(v);
        int self = find(static_cast<int>(i));
        if (g < 0 || g == self || !candidate_[static_cast<size_t>(g)]) continue;
        if (nodes_[static_cast<size_t>(g)]->outputs[0]->type.dims != dims) continue;
        if (join(class_[static_cast<size_t>(g)], class_[static_cast<size_t>(self)]) == ComputeClass::mixed) continue;
        if (members_[static_cast<size_t>(g)].size() + members_[static_cast<size_t>(self)].size() > kMaxGroupOps) continue;
        if (would_cycle(g, self)) continue;
        merge(g, self);
      }
    }
  }

  // Whether contracting groups a and b into one node closes a cycle: some
  // group outside both is an ancestor of one of them (in the graph with every
  // group contracted) and reads from one of them. The search walks all
  // ancestors: positions do not bound it, since a group may join an early
  // node and a late one. Only nodes up to the one being placed are grouped,
  // so it stays within the part of the graph seen so far.
  bool would_cycle(int a, int b) {
    std::unordered_set<int> seen;
    std::vector<int> stack;
    auto visit_inputs_of = [&](int group) -> bool {
      for (int m : members_[static_cast<size_t>(group)]) {
        for (const Value* v : nodes_[static_cast<size_t>(m)]->inputs) {
          int r = root_of(v);
          if (r < 0 || r == group) continue;
          if (r == a || r == b) {
            if (group != a && group != b) return true;
            continue;
          }
          if (!seen.insert(r).second) continue;
          stack.push_back(r);
        }
      }
      return false;
    };
    if (visit_inputs_of(a) || visit_inputs_of(b)) return true;
    while (!stack.empty()) {
      int g = stack.back();
      stack.pop_back();
      if (visit_inputs_of(g)) return true;
    }
    return false;
  }

  void merge(int a, int b) {
    auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    parent_[ub] = a;
    members_[ua].insert(members_[ua].end(), members_[ub].begin(), members_[ub].end());
    std::sort(members_[ua].begin(), members_[ua].end());
    members_[ub].clear();
    min_pos_[ua] = std::min(min_pos_[ua], min_pos_[ub]);
    class_[ua] = join(class_[ua], class_[ub]);
    candidate_[ua] = candidate_[ua] && candidate_[ub];
  }

  // A topological order of the contracted graph (group roots and lone
  // nodes), preferring original positions: Kahn's algorithm with a min-heap
  // on each entry's first member's position.
  std::vector<int> contracted_order() {
    std::unordered_map<int, std::vector<int>> succ;
    std::unordered_map<int, int> pending;
    std::vector<int> roots;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      int r = find(static_cast<int>(i));
      if (r == static_cast<int>(i)) roots.push_back(r);
    }
    for (int r : roots) {
      std::unordered_set<int> preds;
      for (int m : members_[static_cast<size_t>(r)])
        for (const Value* v : nodes_[static_cast<size_t>(m)]->inputs) {
          int p = root_of(v);
          if (p >= 0 && p != r) preds.insert(p);
        }
      pending[r] = static_cast<int>(preds.size());
      for (int p : preds) succ[p].push_back(r);
    }
    using Item = std::pair<int, int>;  // (first member position, root)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
    for (int r : roots)
      if (pending[r] == 0) ready.push({min_pos_[static_cast<size_t>(r)], r});
    std::vector<int> order;
    while (!ready.empty()) {
      int r = ready.top().second;
      ready.pop();
      order.push_back(r);
      for (int s : succ[r])
        if (--pending[s] == 0) ready.push({min_pos_[static_cast<size_t>(s)], s});
    }
    if (order.size() != roots.size())
      fail(ErrorKind::runtime, "fuse_elementwise: grouping left a cycle (", roots.size() - order.size(),
           " groups unplaced); this is a bug in the pass");
    return order;
  }

  // The group's values used outside it (by other nodes or as graph outputs),
  // in topological order. A group none of whose values is used is dead code:
  // it is left for dce.
  std::vector<Value*> group_outputs(int root) {
    std::vector<Value*> outputs;
    for (int m : members_[static_cast<size_t>(root)]) {
      Value* out = nodes_[static_cast<size_t>(m)]->outputs[0];
      bool used_outside = graph_.is_graph_output(out);
      for (const Node* user : out->users) used_outside = used_outside || find(index_.at(user)) != root;
      if (used_outside) outputs.push_back(out);
    }
    return outputs;
  }

  // The members the outputs need (the others are dead code), ascending.
  std::vector<int> live_members(int root, const std::vector<Value*>& outputs) {
    std::unordered_set<int> live;
    std::vector<int> stack;
    for (const Value* v : outputs) stack.push_back(index_.at(v->producer));
    while (!stack.empty()) {
      int m = stack.back();
      stack.pop_back();
      if (!live.insert(m).second) continue;
      for (const Value* v : nodes_[static_cast<size_t>(m)]->inputs)
        if (v->producer && find(index_.at(v->producer)) == root) stack.push_back(index_.at(v->producer));
    }
    std::vector<int> out(live.begin(), live.end());
    std::sort(out.begin(), out.end());
    return out;
  }

  // Builds the fused node for group `root`, moves uses to it and erases the
  // members. The node is appended; reorder() puts it in place.
  Node* emit(int root, const std::vector<Value*>& outputs, const std::vector<int>& live) {
    std::vector<Node*> members;
    std::unordered_set<const Node*> in_group;
    for (int m : live) {
      members.push_back(nodes_[static_cast<size_t>(m)]);
      in_group.insert(nodes_[static_cast<size_t>(m)]);
    }
    // External inputs in first-use order; scalar literals go into the body.
    std::vector<Value*> inputs, literals;
    std::unordered_set<const Value*> seen;
    for (Node* m : members)
      for (Value* v : m->inputs) {
        if ((v->producer && in_group.count(v->producer)) || !seen.insert(v).second) continue;
        (v->kind == ValueKind::literal && v->type.numel() == 1 ? literals : inputs).push_back(v);
      }
    if (inputs.empty()) {  // a fused node needs an input: keep the first literal outside
      inputs.push_back(literals.front());
      literals.erase(literals.begin());
    }
    auto body = std::make_shared<Graph>();
    std::unordered_map<const Value*, Value*> map;
    for (Value* v : inputs) map[v] = body->add_input(v->name, v->type);
    for (Value* v : literals) map[v] = body->add_literal(v->name, v->type, v->literal_data);
    for (Node* m : members) {
      std::vector<Value*> ins;
      for (Value* v : m->inputs) ins.push_back(map.at(v));
      Node* copy = body->add_node_typed(*m->op, std::move(ins), m->attrs, {m->outputs[0]->type},
                                        {m->outputs[0]->name}, m->name);
      map[m->outputs[0]] = copy->outputs[0];
    }
    std::vector<Value*> body_outputs;
    std::vector<TensorType> types;
    std::vector<std::string> names, final_names;
    for (Value* v : outputs) {
      body_outputs.push_back(map.at(v));
      types.push_back(v->type);
      names.push_back(graph_.fresh_name("fused"));
      final_names.push_back(v->name);
    }
    body->set_outputs(std::move(body_outputs));
    Node* node = graph_.add_node_typed(get_op("fused"), inputs, Attrs(), std::move(types), std::move(names), "");
    node->body = std::move(body);
    for (size_t i = 0; i < outputs.size(); ++i) graph_.replace_all_uses(outputs[i], node->outputs[i]);
    // All members go, the dead ones too (only dead members read them).
    const std::vector<int>& all = members_[static_cast<size_t>(root)];
    for (auto it = all.rbegin(); it != all.rend(); ++it) graph_.erase_node(nodes_[static_cast<size_t>(*it)]);
    for (size_t i = 0; i < outputs.size(); ++i) graph_.rename(node->outputs[i], final_names[i]);
    node->name = node->outputs[0]->name;
    return node;
  }

  // Puts the graph's nodes in `order` (which lists every node once).
  void reorder(const std::vector<Node*>& order) {
    if (graph_.nodes() == order) return;
    for (size_t i = order.size() - 1; i-- > 0;) graph_.move_before(order[i], order[i + 1]);
  }

  Graph& graph_;
  std::vector<Node*> nodes_;  // original topological order
  std::unordered_map<const Node*, int> index_;
  std::vector<int> parent_;
  std::vector<std::vector<int>> members_;  // for roots: member indices, ascending
  std::vector<int> min_pos_;  // for roots: the first member's position
  std::vector<ComputeClass> class_;
  std::vector<bool> candidate_;
};

}  // namespace

bool fuse_elementwise(Graph& graph) { return Fuser(graph).run(); }

}  // namespace kiln
