// The cast op: converts any dtype to any dtype, keeping dims. Float to integer
// truncates toward zero like torch; to bool is x != 0. The graph builder uses
// it for type promotion, and the frontend for .to(dtype) conversions.
#include "ops/op_registry.h"

namespace kiln::ops_internal {

void register_cast_ops(OpList& ops) {
  OpDef op;
  op.name = "cast";
  op.inputs = {"x"};
  op.attrs = {{"dtype", AttrKind::dtype, std::nullopt}};
  op.aten = {"prims.convert_element_type.default", "aten._to_copy.default"};
  op.infer = [](std::span<const TensorType> in, const Attrs& attrs) {
    return std::vector<TensorType>{TensorType(attrs.get_dtype("dtype"), in[0].dims)};
  };
  ops.push_back(std::move(op));
}

}  // namespace kiln::ops_internal
