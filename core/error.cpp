// Out-of-line error helpers (keeps the macro expansion small).
#include "core/error.h"

namespace braid::detail {

void throw_error(const char* file, int line, const std::string& msg) {
  throw Error(fmt::format("{}:{}: {}", file, line, msg));
}

}  // namespace braid::detail
