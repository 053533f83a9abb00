// The one way the runtime reports a bad call: msda::ValueError("msda:
// <tensor>: <what was expected>"), or msda::TypeError for a dtype.
#pragma once

#include <msda/msda.hpp>

#include <string>

namespace msda::detail {

[[noreturn]] void fail(const std::string &tensor, const std::string &what);
[[noreturn]] void fail_dtype(const std::string &tensor, const std::string &what);

}  // namespace msda::detail
