// Python's operators on template values: arithmetic with int/float promotion and Python's division and
// modulo rules, comparison chains, `in`, and slicing. Type errors carry Python's own wording.
#pragma once

#include <cstdint>
#include <optional>

#include "chat/value.h"

namespace tessera::chat {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

Value binary_op(BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);      // -v
Value unary_plus(const Value& v);  // +v
bool compare(CompareOp op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // item in container

// obj[start:stop:step] for str, list and tuple (absent bounds are None); Python's TypeError for other values.
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace tessera::chat
