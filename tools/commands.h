// The msda subcommands, separated from argument parsing (main.cpp) so each
// reads as what it does. Failures are thrown (msda::Error for what the API
// rejects, npy::Error for file problems); main turns them into messages.
#pragma once

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <string>

namespace msda_cli {

// The files of the inputs both operators read.
struct InputFiles {
    std::string value;
    std::string spatial_shapes;
    std::string level_start_index;
    std::string sampling_locations;
    std::string attention_weights;
};

// The storage dtypes the tensors are converted to for the call. The files
// are float32 or float64 whatever these are, and results are written as
// float32.
struct Storage {
    msda::DType dtype = msda::DType::f32;  // value, attention_weights, grad_output and the results
    // --locations-dtype same: sampling_locations and its gradient in `dtype`
    // too; otherwise float32 (the recommended pairing with half storage).
    // float64 storage always has float64 locations.
    bool locations_in_dtype = false;

    msda::DType locations_dtype() const {
        return locations_in_dtype || dtype == msda::DType::f64 ? dtype : msda::DType::f32;
    }
};

struct ForwardCommand {
    InputFiles inputs;
    msda::Options options;
    Storage storage;
    std::string output;
};

// An empty path means that gradient is not asked for.
struct BackwardCommand {
    InputFiles inputs;
    msda::Options options;
    Storage storage;
    std::string grad_output;
    std::string grad_value;
    std::string grad_sampling_locations;
    std::string grad_attention_weights;
};

struct DemoCommand {
    int repeats = 5;
    int threads = 0;  // as given to msda::set_num_threads (0 = one per core), for the report
};

struct InfoCommand {
    bool features = false;  // also every target's feature list
    bool cpuid = false;     // print the CPU's words instead (tests/cpuid's format)
    bool variants = false;  // list the generated functions instead
};

void run_forward(const ForwardCommand &command);
void run_backward(const BackwardCommand &command);
// Returns whether the spot checks against the reference passed.
bool run_demo(const DemoCommand &command);
// Returns whether calls can run on this CPU (MSDA_X86_TARGET may forbid it).
bool run_info(const InfoCommand &command);

}  // namespace msda_cli
