// Validation of a call's tensors, before any work. Every failure throws
// msda::Error("msda: <tensor>: <what was expected>").
#pragma once

#include <msda/msda.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace msda::detail {

[[noreturn]] void fail(const std::string &tensor, const std::string &what);

// spatial_shapes and level_start_index as the generated code reads them:
// int32, shapes as (H, W) pairs.
struct LevelTable {
    std::vector<std::int32_t> shapes;  // 2 * N_l: H_0, W_0, H_1, W_1, ...
    std::vector<std::int32_t> starts;  // N_l
};

struct CheckedCall {
    ProblemSize size;
    LevelTable levels;
};

// Outputs::required for a call; Outputs::if_present to size a call before
// its outputs exist (ProblemSize::of), checking only the outputs given.
enum class Outputs { required, if_present };
CheckedCall check_forward(const ForwardArgs &args, const Options &options,
                          Outputs outputs = Outputs::required);
CheckedCall check_backward(const BackwardArgs &args, const Options &options,
                           Outputs outputs = Outputs::required);

// Sizes and options a plan can be made for (dtype support, ranges).
void check_plan(const ProblemSize &size, const Options &options);
// The call's sizes against the plan's; names the first tensor that differs.
void check_matches_plan(const ProblemSize &plan, const ProblemSize &call);

}  // namespace msda::detail
