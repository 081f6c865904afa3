// Graph surgery shared by the fusing passes (see rewrite.h).
#include "passes/rewrite.h"

#include <string>
#include <utility>

namespace kiln {

void replace_output(Graph& graph, Node* tail, Value* replacement, std::initializer_list<Node*> dead) {
  Value* out = tail->outputs[0];
  const std::string name = out->name;
  graph.replace_all_uses(out, replacement);
  graph.erase_node(tail);
  for (Node* n : dead) graph.erase_node(n);
  graph.rename(replacement, name);  // free now that its value is gone
}

Attrs reshape_attrs(std::vector<int64_t> shape) {
  Attrs a;
  a.set("shape", std::move(shape));
  return a;
}

Attrs permute_attrs(std::vector<int64_t> dims) {
  Attrs a;
  a.set("dims", std::move(dims));
  return a;
}

}  // namespace kiln
