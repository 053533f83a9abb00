// The one way the runtime reports a bad call: msda::Error("msda: <tensor>:
// <what was expected>").
#pragma once

#include <msda/msda.hpp>

#include <string>

namespace msda::detail {

[[noreturn]] void fail(const std::string &tensor, const std::string &what);

}  // namespace msda::detail
