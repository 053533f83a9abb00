// The msda command line end to end: small random problems written to .npy
// files in every layout, run through the built binary, and the files it
// writes compared with the double reference computed here, in float32 and
// in the half-precision storage dtypes. Bad inputs must give a non-zero exit
// status and a message naming the tensor or file.
#include <gtest/gtest.h>

#include <msda/half.hpp>
#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gka_reference.h"
#include "msda_reference.h"
#include "npy.h"
#include "test_util.h"

#ifndef MSDA_CLI_PATH
#error "MSDA_CLI_PATH must name the msda binary (tests/cli.cmake defines it)"
#endif

namespace {

namespace fs = std::filesystem;
using Shape = std::vector<std::int64_t>;

constexpr double kFloat32Tolerance = 1e-5;  // SPEC, relative to the largest magnitude
constexpr double kFloat16Tolerance = 5e-3;
constexpr double kBfloat16Tolerance = 2e-2;
constexpr int kExitBadInput = 1;
constexpr int kExitBadUsage = 2;

// ----------------------------------------------------------------------------
// Layouts as permutations of the canonical (reference) dimension order: the
// file's dimension i is canonical dimension order[i].

std::vector<int> value_order(msda::ValueLayout layout) {
    return layout == msda::ValueLayout::BLNC ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 2, 1, 3};
}

std::vector<int> locations_order(msda::LocationsLayout layout) {
    return layout == msda::LocationsLayout::BQHLP2 ? std::vector<int>{0, 1, 2, 3, 4, 5}
                                                   : std::vector<int>{0, 5, 1, 2, 3, 4};
}

std::vector<int> inverse(const std::vector<int> &order) {
    std::vector<int> result(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) result[order[i]] = static_cast<int>(i);
    return result;
}

Shape permuted_shape(const Shape &shape, const std::vector<int> &order) {
    Shape result;
    for (int d : order) result.push_back(shape[d]);
    return result;
}

// Row-major data of `data` (row-major in `shape`) with its dimensions
// rearranged so that dimension i of the result is dimension order[i].
std::vector<double> permute(const std::vector<double> &data, const Shape &shape, const std::vector<int> &order) {
    const int rank = static_cast<int>(shape.size());
    std::vector<std::int64_t> strides(rank, 1);
    for (int d = rank - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
    const Shape out_shape = permuted_shape(shape, order);
    std::vector<double> result;
    result.reserve(data.size());
    std::vector<std::int64_t> index(rank, 0);  // into out_shape
    for (std::size_t n = 0; n < data.size(); ++n) {
        std::int64_t offset = 0;
        for (int i = 0; i < rank; ++i) offset += index[i] * strides[order[i]];
        result.push_back(data[static_cast<std::size_t>(offset)]);
        for (int i = rank - 1; i >= 0 && ++index[i] == out_shape[i]; --i) index[i] = 0;
    }
    return result;
}

// ----------------------------------------------------------------------------
// A small random problem in canonical layouts. Every value is a float32, so
// float32 files and the double reference hold the same inputs.

struct SmallProblem {
    msda::reference::Problem reference;
    std::vector<double> grad_output;

    std::int64_t levels() const { return static_cast<std::int64_t>(reference.levels.size()); }
    Shape value_shape() const {
        return {reference.batch, reference.value_length(), reference.heads, reference.channels};
    }
    Shape locations_shape() const {
        return {reference.batch, reference.queries, reference.heads, levels(), reference.points, 2};
    }
    Shape weights_shape() const {
        return {reference.batch, reference.queries, reference.heads, levels(), reference.points};
    }
    Shape output_shape() const {
        return {reference.batch, reference.queries, reference.heads * reference.channels};
    }
};

std::vector<double> random_floats(std::mt19937_64 &engine, std::int64_t count, double low, double high) {
    std::uniform_real_distribution<double> distribution(low, high);
    std::vector<double> values(static_cast<std::size_t>(count));
    for (double &v : values) v = static_cast<float>(distribution(engine));
    return values;
}

std::int64_t count(const Shape &shape) {
    return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

SmallProblem make_problem(std::uint64_t seed) {
    std::mt19937_64 engine(seed);
    std::uniform_int_distribution<std::int64_t> side(1, 5);
    SmallProblem problem;
    msda::reference::Problem &p = problem.reference;
    p.batch = 2;
    p.queries = 4;
    p.heads = 2;
    p.channels = 3;
    p.points = 2;
    p.levels = {{side(engine), side(engine)}, {side(engine), side(engine)}};
    p.value = random_floats(engine, count(problem.value_shape()), -1.0, 1.0);
    // Beyond [0, 1] too, so padding and the zeros-mode gate matter.
    p.sampling_locations = random_floats(engine, count(problem.locations_shape()), -0.2, 1.2);
    p.attention_weights = random_floats(engine, count(problem.weights_shape()), 0.0, 1.0);
    problem.grad_output = random_floats(engine, count(problem.output_shape()), -1.0, 1.0);
    return problem;
}

// ----------------------------------------------------------------------------
// .npy files in and out.

npy::Array float_array(const std::vector<double> &values, const Shape &shape, npy::DType dtype) {
    npy::Array array(dtype, shape);
    if (dtype == npy::DType::float64)
        std::ranges::copy(values, array.elements<double>().begin());
    else
        std::ranges::transform(values, array.elements<float>().begin(), [](double v) { return static_cast<float>(v); });
    return array;
}

npy::Array index_array(const std::vector<std::int64_t> &values, const Shape &shape, npy::DType dtype) {
    npy::Array array(dtype, shape);
    if (dtype == npy::DType::int64)
        std::ranges::copy(values, array.elements<std::int64_t>().begin());
    else
        std::ranges::transform(values, array.elements<std::int32_t>().begin(),
                               [](std::int64_t v) { return static_cast<std::int32_t>(v); });
    return array;
}

// What the command line writes is always float32.
std::vector<double> read_result(const std::string &path, const Shape &expected_shape) {
    const npy::Array array = npy::read(path);
    EXPECT_EQ(array.dtype(), npy::DType::float32) << path;
    EXPECT_EQ(array.shape(), expected_shape) << path;
    if (array.dtype() != npy::DType::float32) return {};
    const auto values = array.elements<float>();
    return {values.begin(), values.end()};
}

// max |actual - expected| / max |expected|, infinite on a size mismatch.
double max_relative_error(const std::vector<double> &actual, const std::vector<double> &expected) {
    if (actual.size() != expected.size()) return INFINITY;
    double largest = 0.0, worst = 0.0;
    for (std::size_t i = 0; i < actual.size(); ++i) {
        largest = std::max(largest, std::abs(expected[i]));
        const double difference = std::abs(actual[i] - expected[i]);
        worst = std::isnan(difference) ? INFINITY : std::max(worst, difference);
    }
    return largest > 0.0 ? worst / largest : worst;
}

struct Layouts {
    msda::ValueLayout value = msda::ValueLayout::BLNC;
    msda::LocationsLayout locations = msda::LocationsLayout::BQHLP2;
    bool align_corners = false;
    msda::PaddingMode padding = msda::PaddingMode::zeros;
};

struct FileDtypes {
    npy::DType floats = npy::DType::float32;
    npy::DType indices = npy::DType::int64;
};

std::string quoted(const std::string &text) {
    std::string result = "'";
    for (char c : text) result += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return result + "'";
}

struct RunResult {
    int exit_code = -1;  // -1: killed by a signal
    std::string output, errors;
};

// ----------------------------------------------------------------------------

class Cli : public ::testing::Test {
protected:
    void SetUp() override {
        std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
        std::ranges::replace(name, '/', '_');
        directory_ = fs::temp_directory_path() / ("msda_test_cli_" + std::to_string(::getpid()) + "_" + name);
        fs::remove_all(directory_);
        fs::create_directories(directory_);
    }
    void TearDown() override { fs::remove_all(directory_); }

    std::string path(const std::string &name) const { return (directory_ / name).string(); }

    // MSDA_CLI_EMULATOR (the emulated suite's "qemu-x86_64 -cpu MODEL")
    // runs the binary on another CPU; this harness and its reference stay on
    // this one. MSDA_CLI names the binary where it is not where this build
    // put it (bench/device_check.sh, on another machine).
    RunResult run(const std::vector<std::string> &arguments) const {
        std::string command;
        if (const char *emulator = std::getenv("MSDA_CLI_EMULATOR")) {
            std::istringstream words(emulator);
            for (std::string word; words >> word;) command += ::quoted(word) + " ";
        }
        const char *moved = std::getenv("MSDA_CLI");
        command += quoted(moved != nullptr ? moved : MSDA_CLI_PATH);
        for (const std::string &argument : arguments) command += " " + quoted(argument);
        command += " >" + quoted(path("stdout.txt")) + " 2>" + quoted(path("stderr.txt"));
        const int status = std::system(command.c_str());
        RunResult result;
        if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
        result.output = slurp(path("stdout.txt"));
        result.errors = slurp(path("stderr.txt"));
        return result;
    }

    // Writes the inputs (and grad_output) in the given layouts and dtypes;
    // returns the arguments that name them and choose the layouts.
    std::vector<std::string> write_inputs(const SmallProblem &problem, const Layouts &layouts,
                                          const FileDtypes &dtypes = {}) const {
        const msda::reference::Problem &p = problem.reference;
        const std::vector<int> value = value_order(layouts.value), locations = locations_order(layouts.locations);
        npy::write(path("value.npy"), float_array(permute(p.value, problem.value_shape(), value),
                                                  permuted_shape(problem.value_shape(), value), dtypes.floats));
        npy::write(path("locations.npy"),
                   float_array(permute(p.sampling_locations, problem.locations_shape(), locations),
                               permuted_shape(problem.locations_shape(), locations), dtypes.floats));
        npy::write(path("weights.npy"), float_array(p.attention_weights, problem.weights_shape(), dtypes.floats));
        npy::write(path("grad_output.npy"), float_array(problem.grad_output, problem.output_shape(), dtypes.floats));
        std::vector<std::int64_t> shapes, starts;
        for (std::size_t l = 0; l < p.levels.size(); ++l) {
            shapes.push_back(p.levels[l].height);
            shapes.push_back(p.levels[l].width);
            starts.push_back(p.level_start(l));
        }
        npy::write(path("shapes.npy"), index_array(shapes, {problem.levels(), 2}, dtypes.indices));
        npy::write(path("starts.npy"), index_array(starts, {problem.levels()}, dtypes.indices));

        std::vector<std::string> arguments = {
            "--value", path("value.npy"), "--spatial-shapes", path("shapes.npy"), "--level-start-index",
            path("starts.npy"), "--sampling-locations", path("locations.npy"), "--attention-weights",
            path("weights.npy"),
            "--value-layout", layouts.value == msda::ValueLayout::BLNC ? "BLNC" : "BNLC",
            "--locations-layout", layouts.locations == msda::LocationsLayout::BQHLP2 ? "BQHLP2" : "B2QHLP",
            "--padding-mode", layouts.padding == msda::PaddingMode::zeros ? "zeros" : "border"};
        if (layouts.align_corners) arguments.push_back("--align-corners");
        return arguments;
    }

    std::vector<std::string> forward_command(const std::vector<std::string> &inputs) const {
        std::vector<std::string> arguments = {"forward"};
        arguments.insert(arguments.end(), inputs.begin(), inputs.end());
        arguments.insert(arguments.end(), {"--output", path("output.npy")});
        return arguments;
    }

    std::vector<std::string> backward_command(const std::vector<std::string> &inputs,
                                              const std::vector<std::string> &gradients) const {
        std::vector<std::string> arguments = {"backward"};
        arguments.insert(arguments.end(), inputs.begin(), inputs.end());
        arguments.insert(arguments.end(), {"--grad-output", path("grad_output.npy")});
        for (const std::string &gradient : gradients) {
            arguments.push_back("--" + gradient);
            arguments.push_back(path(gradient + ".npy"));
        }
        return arguments;
    }

    // Forward through the binary, compared with the reference.
    void expect_forward_matches(const SmallProblem &problem, const Layouts &layouts, const FileDtypes &dtypes) {
        msda::reference::Problem reference = problem.reference;
        reference.align_corners = layouts.align_corners;
        reference.border = layouts.padding == msda::PaddingMode::border;
        const RunResult result = run(forward_command(write_inputs(problem, layouts, dtypes)));
        ASSERT_EQ(result.exit_code, 0) << result.errors;
        EXPECT_LE(max_relative_error(read_result(path("output.npy"), problem.output_shape()),
                                     msda::reference::forward(reference)),
                  kFloat32Tolerance);
    }

    // The three gradient files a backward run wrote (in the inputs' layouts),
    // in canonical order.
    msda::reference::Gradients read_gradients(const SmallProblem &problem, const Layouts &layouts) const {
        const std::vector<int> value = value_order(layouts.value), locations = locations_order(layouts.locations);
        const Shape value_file_shape = permuted_shape(problem.value_shape(), value);
        const Shape locations_file_shape = permuted_shape(problem.locations_shape(), locations);
        return {permute(read_result(path("grad-value.npy"), value_file_shape), value_file_shape, inverse(value)),
                permute(read_result(path("grad-sampling-locations.npy"), locations_file_shape),
                        locations_file_shape, inverse(locations)),
                read_result(path("grad-attention-weights.npy"), problem.weights_shape())};
    }

private:
    static std::string slurp(const std::string &file) {
        std::ifstream in(file);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    }

    fs::path directory_;
};

// ----------------------------------------------------------------------------
// Round trips in every layout and option combination.

std::string layout_name(const Layouts &l) {
    return std::string(l.value == msda::ValueLayout::BLNC ? "BLNC" : "BNLC") + "_" +
           (l.locations == msda::LocationsLayout::BQHLP2 ? "BQHLP2" : "B2QHLP") + "_" +
           (l.align_corners ? "AlignCorners" : "HalfPixel") + "_" +
           (l.padding == msda::PaddingMode::zeros ? "Zeros" : "Border");
}

// How GoogleTest shows a parameter (found by argument-dependent lookup).
void PrintTo(const Layouts &l, std::ostream *out) { *out << layout_name(l); }

std::vector<Layouts> every_layout_combination() {
    std::vector<Layouts> all;
    for (auto value : {msda::ValueLayout::BLNC, msda::ValueLayout::BNLC})
        for (auto locations : {msda::LocationsLayout::BQHLP2, msda::LocationsLayout::B2QHLP})
            for (bool align_corners : {false, true})
                for (auto padding : {msda::PaddingMode::zeros, msda::PaddingMode::border})
                    all.push_back({value, locations, align_corners, padding});
    return all;
}

class CliLayouts : public Cli, public ::testing::WithParamInterface<Layouts> {
protected:
    std::uint64_t seed() const {
        const Layouts l = GetParam();
        return 1 + static_cast<std::uint64_t>(l.value) * 8 + static_cast<std::uint64_t>(l.locations) * 4 +
               (l.align_corners ? 2 : 0) + static_cast<std::uint64_t>(l.padding);
    }
};

TEST_P(CliLayouts, ForwardMatchesTheReference) {
    expect_forward_matches(make_problem(seed()), GetParam(), {});
}

TEST_P(CliLayouts, BackwardMatchesTheReferenceWithGradientsInTheInputsLayouts) {
    const SmallProblem problem = make_problem(seed());
    const Layouts l = GetParam();
    msda::reference::Problem reference = problem.reference;
    reference.align_corners = l.align_corners;
    reference.border = l.padding == msda::PaddingMode::border;
    const msda::reference::Gradients expected = msda::reference::backward(reference, problem.grad_output);

    const RunResult result = run(backward_command(
        write_inputs(problem, l), {"grad-value", "grad-sampling-locations", "grad-attention-weights"}));
    ASSERT_EQ(result.exit_code, 0) << result.errors;

    const msda::reference::Gradients written = read_gradients(problem, l);
    EXPECT_LE(max_relative_error(written.value, expected.value), kFloat32Tolerance);
    EXPECT_LE(max_relative_error(written.sampling_locations, expected.sampling_locations), kFloat32Tolerance);
    EXPECT_LE(max_relative_error(written.attention_weights, expected.attention_weights), kFloat32Tolerance);
}

INSTANTIATE_TEST_SUITE_P(EveryLayout, CliLayouts, ::testing::ValuesIn(every_layout_combination()),
                         [](const ::testing::TestParamInfo<Layouts> &parameter) { return layout_name(parameter.param); });

// --target opencl|cuda: the same round trips on the GPU family's device
// (PoCL in CI for OpenCL); half storage is refused there.
class CliGpu : public Cli {
protected:
    void expect_round_trips(const char *target, const char *family) {
        const SmallProblem problem = make_problem(77);
        const Layouts l{msda::ValueLayout::BNLC, msda::LocationsLayout::B2QHLP, true, msda::PaddingMode::border};
        msda::reference::Problem reference = problem.reference;
        reference.align_corners = l.align_corners;
        reference.border = true;
        std::vector<std::string> inputs = write_inputs(problem, l);
        inputs.insert(inputs.end(), {"--target", target});

        const RunResult forward = run(forward_command(inputs));
        ASSERT_EQ(forward.exit_code, 0) << forward.errors;
        EXPECT_LE(max_relative_error(read_result(path("output.npy"), problem.output_shape()),
                                     msda::reference::forward(reference)),
                  kFloat32Tolerance);
        const RunResult backward =
            run(backward_command(inputs, {"grad-value", "grad-sampling-locations", "grad-attention-weights"}));
        ASSERT_EQ(backward.exit_code, 0) << backward.errors;
        const msda::reference::Gradients expected = msda::reference::backward(reference, problem.grad_output);
        const msda::reference::Gradients written = read_gradients(problem, l);
        EXPECT_LE(max_relative_error(written.value, expected.value), kFloat32Tolerance);
        EXPECT_LE(max_relative_error(written.sampling_locations, expected.sampling_locations), kFloat32Tolerance);
        EXPECT_LE(max_relative_error(written.attention_weights, expected.attention_weights), kFloat32Tolerance);

        inputs.insert(inputs.end(), {"--dtype", "f16"});
        const RunResult half = run(forward_command(inputs));
        EXPECT_EQ(half.exit_code, kExitBadInput);
        EXPECT_NE(half.errors.find(std::string("the ") + family + " code computes float32 storage"),
                  std::string::npos)
            << half.errors;
    }
};

TEST_F(CliGpu, TargetOpenClMatchesTheReference) {
    if (const std::string why = msda::testing::opencl_unavailable(); !why.empty()) GTEST_SKIP() << why;
    expect_round_trips("opencl", "OpenCL");
}

TEST_F(CliGpu, TargetCudaMatchesTheReference) {
    if (const std::string why = msda::testing::cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
    expect_round_trips("cuda", "CUDA");
}

// Without a CUDA device, --target cuda fails saying so and writes nothing.
TEST_F(CliGpu, TargetCudaWithoutADeviceSaysSo) {
    if (!msda::testing::cuda_built()) GTEST_SKIP() << "this build has no CUDA code (MSDA_CUDA=OFF)";
    const msda::CudaReport report = msda::cuda_devices();
    if (!report.devices.empty()) GTEST_SKIP() << "this machine has a CUDA device";
    std::vector<std::string> inputs = write_inputs(make_problem(78), {});
    inputs.insert(inputs.end(), {"--target", "cuda"});
    const RunResult forward = run(forward_command(inputs));
    EXPECT_EQ(forward.exit_code, kExitBadInput);
    EXPECT_NE(forward.errors.find("msda: CUDA: no CUDA device to run on"), std::string::npos) << forward.errors;
    EXPECT_FALSE(std::filesystem::exists(path("output.npy")));
}

TEST_F(Cli, Float64InputsAndInt32IndicesAreAccepted) {
    expect_forward_matches(make_problem(101), {}, {npy::DType::float64, npy::DType::int32});
    expect_forward_matches(make_problem(102), {msda::ValueLayout::BNLC, msda::LocationsLayout::B2QHLP},
                           {npy::DType::float64, npy::DType::int64});
}

TEST_F(Cli, WritesOnlyTheGradientsAskedFor) {
    const SmallProblem problem = make_problem(7);
    const std::vector<std::string> inputs = write_inputs(problem, {});
    const msda::reference::Gradients expected = msda::reference::backward(problem.reference, problem.grad_output);
    const std::vector<std::string> all = {"grad-value", "grad-sampling-locations", "grad-attention-weights"};
    for (unsigned subset = 1; subset < 8; ++subset) {
        std::vector<std::string> asked;
        for (unsigned i = 0; i < 3; ++i)
            if (subset & (1u << i)) asked.push_back(all[i]);
        SCOPED_TRACE("asked for subset " + std::to_string(subset));
        for (const std::string &gradient : all) fs::remove(path(gradient + ".npy"));

        const RunResult result = run(backward_command(inputs, asked));
        ASSERT_EQ(result.exit_code, 0) << result.errors;
        for (unsigned i = 0; i < 3; ++i)
            EXPECT_EQ(fs::exists(path(all[i] + ".npy")), (subset & (1u << i)) != 0) << all[i];
        if (subset & 1u) {
            EXPECT_LE(max_relative_error(read_result(path("grad-value.npy"), problem.value_shape()), expected.value),
                      kFloat32Tolerance);
        }
        if (subset & 2u) {
            EXPECT_LE(max_relative_error(read_result(path("grad-sampling-locations.npy"), problem.locations_shape()),
                                         expected.sampling_locations),
                      kFloat32Tolerance);
        }
        if (subset & 4u) {
            EXPECT_LE(max_relative_error(read_result(path("grad-attention-weights.npy"), problem.weights_shape()),
                                         expected.attention_weights),
                      kFloat32Tolerance);
        }
    }
}

TEST_F(Cli, NoQueriesIsAValidProblem) {
    SmallProblem problem = make_problem(11);
    problem.reference.queries = 0;
    problem.reference.sampling_locations.clear();
    problem.reference.attention_weights.clear();
    problem.grad_output.clear();
    const std::vector<std::string> inputs = write_inputs(problem, {});
    RunResult result = run(forward_command(inputs));
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    EXPECT_EQ(read_result(path("output.npy"), problem.output_shape()).size(), 0u);
    result = run(backward_command(inputs, {"grad-value"}));
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    const std::vector<double> grad_value = read_result(path("grad-value.npy"), problem.value_shape());
    EXPECT_TRUE(std::ranges::all_of(grad_value, [](double g) { return g == 0.0; })) << "no query, no gradient";
}

// ----------------------------------------------------------------------------
// Half-precision storage: --dtype f16|bf16 [--locations-dtype f32|same]. The
// files hold float32; the binary rounds them to the storage dtype, and its
// float32 results are held to the reference computed on the rounded inputs.

struct HalfCase {
    msda::DType dtype;
    bool locations_in_dtype;  // --locations-dtype same
    Layouts layouts;          // varied so the conversions meet both layouts of each tensor
};

const char *dtype_option(msda::DType dtype) { return dtype == msda::DType::f16 ? "f16" : "bf16"; }

std::string half_case_name(const HalfCase &c) {
    return std::string(c.dtype == msda::DType::f16 ? "F16" : "Bf16") +
           (c.locations_in_dtype ? "_LocationsSame" : "_LocationsF32") + "_" + layout_name(c.layouts);
}

void PrintTo(const HalfCase &c, std::ostream *out) { *out << half_case_name(c); }

// x (a float32) as the storage dtype holds it.
double stored(double x, msda::DType dtype) {
    const float single = static_cast<float>(x);
    switch (dtype) {
    case msda::DType::f16: return msda::f16_to_float(msda::float_to_f16(single));
    case msda::DType::bf16: return msda::bf16_to_float(msda::float_to_bf16(single));
    default: return single;
    }
}

std::vector<double> stored(std::vector<double> values, msda::DType dtype) {
    for (double &x : values) x = stored(x, dtype);
    return values;
}

// SPEC's tolerance for the storage dtype, relative to the tensor's largest
// magnitude. A float16 tensor is also allowed 2^-25, float16's rounding
// error at its smallest spacing (the rule of tests/core_grid.h): a tensor of
// tiny values cannot be held to 5e-3 of them in float16.
::testing::AssertionResult agrees(const std::string &name, const std::vector<double> &actual,
                                  const std::vector<double> &expected, msda::DType storage,
                                  msda::DType tensor_dtype) {
    if (actual.size() != expected.size())
        return ::testing::AssertionFailure() << name << ": " << actual.size() << " elements, reference has "
                                             << expected.size();
    double largest = 0.0;
    for (double e : expected) largest = std::max(largest, std::abs(e));
    const double relative = storage == msda::DType::f16 ? kFloat16Tolerance : kBfloat16Tolerance;
    const double floor = tensor_dtype == msda::DType::f16 ? std::ldexp(1.0, -25) : 0.0;
    const double tolerance = std::max(relative * largest, floor);
    for (std::size_t i = 0; i < actual.size(); ++i) {
        if (!(std::abs(actual[i] - expected[i]) <= tolerance))  // NaN fails too
            return ::testing::AssertionFailure() << name << "[" << i << "] is " << actual[i] << ", reference "
                                                 << expected[i] << " (tolerance " << tolerance << ")";
    }
    return ::testing::AssertionSuccess();
}

class CliHalfPrecision : public Cli, public ::testing::WithParamInterface<HalfCase> {
protected:
    msda::DType locations_dtype() const {
        return GetParam().locations_in_dtype ? GetParam().dtype : msda::DType::f32;
    }

    // The inputs as the binary stores them, with the case's options.
    msda::reference::Problem stored_problem(const SmallProblem &problem) const {
        const HalfCase c = GetParam();
        msda::reference::Problem reference = problem.reference;
        reference.value = stored(reference.value, c.dtype);
        reference.sampling_locations = stored(reference.sampling_locations, locations_dtype());
        reference.attention_weights = stored(reference.attention_weights, c.dtype);
        reference.align_corners = c.layouts.align_corners;
        reference.border = c.layouts.padding == msda::PaddingMode::border;
        return reference;
    }

    std::vector<std::string> dtype_arguments() const {
        return {"--dtype", dtype_option(GetParam().dtype), "--locations-dtype",
                GetParam().locations_in_dtype ? "same" : "f32"};
    }

    std::uint64_t seed() const {
        return 300 + (GetParam().dtype == msda::DType::f16 ? 0 : 2) + (GetParam().locations_in_dtype ? 1 : 0);
    }
};

TEST_P(CliHalfPrecision, ForwardMatchesTheReferenceOnTheRoundedInputs) {
    const SmallProblem problem = make_problem(seed());
    std::vector<std::string> arguments = forward_command(write_inputs(problem, GetParam().layouts));
    const std::vector<std::string> dtypes = dtype_arguments();
    arguments.insert(arguments.end(), dtypes.begin(), dtypes.end());
    const RunResult result = run(arguments);
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    EXPECT_TRUE(agrees("output", read_result(path("output.npy"), problem.output_shape()),
                       msda::reference::forward(stored_problem(problem)), GetParam().dtype, GetParam().dtype));
}

TEST_P(CliHalfPrecision, BackwardMatchesTheReferenceOnTheRoundedInputs) {
    const SmallProblem problem = make_problem(seed());
    const msda::DType dtype = GetParam().dtype;
    std::vector<std::string> arguments =
        backward_command(write_inputs(problem, GetParam().layouts),
                         {"grad-value", "grad-sampling-locations", "grad-attention-weights"});
    const std::vector<std::string> dtypes = dtype_arguments();
    arguments.insert(arguments.end(), dtypes.begin(), dtypes.end());
    const RunResult result = run(arguments);
    ASSERT_EQ(result.exit_code, 0) << result.errors;

    const msda::reference::Gradients expected =
        msda::reference::backward(stored_problem(problem), stored(problem.grad_output, dtype));
    const msda::reference::Gradients written = read_gradients(problem, GetParam().layouts);
    EXPECT_TRUE(agrees("grad_value", written.value, expected.value, dtype, dtype));
    EXPECT_TRUE(agrees("grad_sampling_locations", written.sampling_locations, expected.sampling_locations, dtype,
                       locations_dtype()));
    EXPECT_TRUE(agrees("grad_attention_weights", written.attention_weights, expected.attention_weights, dtype, dtype));
}

INSTANTIATE_TEST_SUITE_P(
    EveryStorage, CliHalfPrecision,
    ::testing::Values(HalfCase{msda::DType::f16, false, {}},
                      HalfCase{msda::DType::f16, true,
                               {msda::ValueLayout::BNLC, msda::LocationsLayout::B2QHLP, true,
                                msda::PaddingMode::zeros}},
                      HalfCase{msda::DType::bf16, false,
                               {msda::ValueLayout::BNLC, msda::LocationsLayout::BQHLP2, false,
                                msda::PaddingMode::border}},
                      HalfCase{msda::DType::bf16, true,
                               {msda::ValueLayout::BLNC, msda::LocationsLayout::B2QHLP, true,
                                msda::PaddingMode::border}}),
    [](const ::testing::TestParamInfo<HalfCase> &parameter) { return half_case_name(parameter.param); });

// Every result file is float32 .npy in the shape of its tensor, holding the
// half results exactly: each value is one the storage dtype can hold.
TEST_F(Cli, HalfResultsAreWrittenAsFloat32Files) {
    const SmallProblem problem = make_problem(311);
    const std::vector<std::string> inputs = write_inputs(problem, {});
    for (msda::DType dtype : {msda::DType::f16, msda::DType::bf16}) {
        SCOPED_TRACE(dtype_option(dtype));
        std::vector<std::string> forward = forward_command(inputs), backward = backward_command(
            inputs, {"grad-value", "grad-sampling-locations", "grad-attention-weights"});
        for (std::vector<std::string> *arguments : {&forward, &backward}) {
            arguments->insert(arguments->end(), {"--dtype", dtype_option(dtype), "--locations-dtype", "same"});
            const RunResult result = run(*arguments);
            ASSERT_EQ(result.exit_code, 0) << result.errors;
        }
        const std::vector<std::pair<std::string, Shape>> results = {
            {"output.npy", problem.output_shape()},
            {"grad-value.npy", problem.value_shape()},
            {"grad-sampling-locations.npy", problem.locations_shape()},
            {"grad-attention-weights.npy", problem.weights_shape()}};
        for (const auto &[file, shape] : results) {
            const npy::Array array = npy::read(path(file));
            ASSERT_EQ(array.dtype(), npy::DType::float32) << file;
            EXPECT_EQ(array.shape(), shape) << file;
            const auto values = array.elements<float>();
            EXPECT_TRUE(std::ranges::any_of(values, [](float x) { return x != 0.0f; })) << file << " is all zeros";
            for (float x : values) ASSERT_EQ(stored(x, dtype), x) << file << " holds a value " << dtype_option(dtype)
                                                                  << " cannot";
        }
    }
}

// float64 files are rounded once, straight to the storage dtype: rounding
// to float32 first would turn 1 + 2^-11 + 2^-40 into float16's tie
// 1 + 2^-11 and then round it down to 1. One pixel, one point of weight 1 at
// its centre: the output is the stored value itself.
TEST_F(Cli, Float64InputsAreRoundedOnceToTheStorageDtype) {
    for (msda::DType dtype : {msda::DType::f16, msda::DType::bf16}) {
        SCOPED_TRACE(dtype_option(dtype));
        const double spacing = dtype == msda::DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
        SmallProblem problem;
        msda::reference::Problem &p = problem.reference;
        p.batch = p.queries = p.heads = p.points = 1;
        p.channels = 4;
        p.levels = {{1, 1}};
        const double above_tie = 1 + spacing / 2 + std::ldexp(1.0, -40);
        p.value = {above_tie, -above_tie, 1 + spacing / 2, 3.0};
        p.sampling_locations = {0.5, 0.5};
        p.attention_weights = {1.0};
        problem.grad_output = std::vector<double>(4, 1.0);
        std::vector<std::string> arguments = forward_command(write_inputs(problem, {}, {npy::DType::float64}));
        arguments.insert(arguments.end(), {"--dtype", dtype_option(dtype)});
        const RunResult result = run(arguments);
        ASSERT_EQ(result.exit_code, 0) << result.errors;
        const std::vector<double> expected = {1 + spacing, -(1 + spacing), 1.0 /* the tie, to even */, 3.0};
        EXPECT_EQ(read_result(path("output.npy"), problem.output_shape()), expected);
    }
}

// --dtype f64: float64 storage and locations, computed in float64, results
// written as float64 files, within 1e-9 of the reference with the pixel
// transform in double (float32 arithmetic is about 1e-7 off) on inputs no
// float32 holds; in the default layouts and in BNLC and B2QHLP.
TEST_F(Cli, Float64StorageComputesInFloat64AndWritesFloat64Files) {
    SmallProblem problem = make_problem(313);
    std::mt19937_64 engine(313);
    std::uniform_real_distribution<double> jitter(0.0, 1e-6);
    for (std::vector<double> *values : {&problem.reference.value, &problem.reference.sampling_locations,
                                        &problem.reference.attention_weights, &problem.grad_output}) {
        for (double &v : *values) v += jitter(engine);
    }
    problem.reference.float64 = true;
    for (const Layouts &layouts : {Layouts{}, Layouts{msda::ValueLayout::BNLC, msda::LocationsLayout::B2QHLP}}) {
        SCOPED_TRACE(layouts.value == msda::ValueLayout::BLNC ? "BLNC" : "BNLC");
        const std::vector<std::string> inputs = write_inputs(problem, layouts, {npy::DType::float64});
        std::vector<std::string> forward = forward_command(inputs), backward = backward_command(
            inputs, {"grad-value", "grad-sampling-locations", "grad-attention-weights"});
        for (std::vector<std::string> *arguments : {&forward, &backward}) {
            arguments->insert(arguments->end(), {"--dtype", "f64"});
            const RunResult result = run(*arguments);
            ASSERT_EQ(result.exit_code, 0) << result.errors;
        }
        const msda::reference::Gradients g = msda::reference::backward(problem.reference, problem.grad_output);
        const std::vector<int> value = value_order(layouts.value), locations = locations_order(layouts.locations);
        const std::vector<std::tuple<std::string, Shape, std::vector<double>>> results = {
            {"output.npy", problem.output_shape(), msda::reference::forward(problem.reference)},
            {"grad-value.npy", permuted_shape(problem.value_shape(), value),
             permute(g.value, problem.value_shape(), value)},
            {"grad-sampling-locations.npy", permuted_shape(problem.locations_shape(), locations),
             permute(g.sampling_locations, problem.locations_shape(), locations)},
            {"grad-attention-weights.npy", problem.weights_shape(), g.attention_weights}};
        for (const auto &[file, shape, expected] : results) {
            const npy::Array array = npy::read(path(file));
            ASSERT_EQ(array.dtype(), npy::DType::float64) << file;
            EXPECT_EQ(array.shape(), shape) << file;
            const auto values = array.elements<double>();
            EXPECT_LE(max_relative_error({values.begin(), values.end()}, expected), 1e-9) << file;
        }
    }
}

TEST_F(Cli, ExplicitFloat32StorageIsTheDefault) {
    const SmallProblem problem = make_problem(312);
    const std::vector<std::string> inputs = write_inputs(problem, {});
    ASSERT_EQ(run(forward_command(inputs)).exit_code, 0);
    const std::vector<double> by_default = read_result(path("output.npy"), problem.output_shape());
    std::vector<std::string> arguments = forward_command(inputs);
    arguments.insert(arguments.end(), {"--dtype", "f32", "--locations-dtype", "same"});
    const RunResult result = run(arguments);
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    EXPECT_EQ(read_result(path("output.npy"), problem.output_shape()), by_default);
}

// ----------------------------------------------------------------------------
// GKA: --op gka [--rounding floor|nearest]. The locations are absolute pixel
// coordinates: integers, exact ties (k + 0.5, where floor and nearest part),
// fractions, out of range on both sides, NaN and +-Inf. Results are held to
// the GKA double reference on the inputs as stored.

// A small problem whose locations are pixel coordinates of every kind, in
// turn (so each kind is present whatever the seed), with random magnitudes.
SmallProblem make_gka_problem(std::uint64_t seed) {
    SmallProblem problem = make_problem(seed);
    msda::reference::Problem &p = problem.reference;
    p.queries = 5;
    p.levels = {{3, 4}, {1, 6}, {5, 2}};
    std::mt19937_64 engine(seed);
    p.value = random_floats(engine, count(problem.value_shape()), -1.0, 1.0);
    p.attention_weights = random_floats(engine, count(problem.weights_shape()), 0.0, 1.0);
    problem.grad_output = random_floats(engine, count(problem.output_shape()), -1.0, 1.0);

    p.sampling_locations.assign(static_cast<std::size_t>(count(problem.locations_shape())), 0.0);
    constexpr int kKinds = 8;  // integer, tie, tie, fraction, below, above, NaN, +-Inf
    for (std::size_t i = 0; i < p.sampling_locations.size(); ++i) {
        const std::size_t level = (i / 2 / static_cast<std::size_t>(p.points)) % p.levels.size();
        const std::int64_t size = i % 2 == 0 ? p.levels[level].width : p.levels[level].height;
        std::uniform_int_distribution<std::int64_t> pixel(-1, size);
        std::uniform_real_distribution<double> unit(0.0, 1.0);
        double &x = p.sampling_locations[i];
        switch ((i + seed) % kKinds) {
            case 0: x = static_cast<double>(pixel(engine)); break;
            case 1:
            case 2: x = static_cast<double>(pixel(engine)) + 0.5; break;  // -0.5 .. size + 0.5
            case 3: x = static_cast<float>(unit(engine) * static_cast<double>(size)); break;
            case 4: x = static_cast<float>(-1.0 - 5.0 * unit(engine)); break;
            case 5: x = static_cast<float>(static_cast<double>(size) + 5.0 * unit(engine)); break;
            case 6: x = NAN; break;
            default: x = unit(engine) < 0.5 ? INFINITY : -INFINITY; break;
        }
    }
    return problem;
}

// The arguments of write_inputs for GKA: its MSDA-only options dropped,
// --op gka and the rounding (if given) added.
std::vector<std::string> gka_arguments(const std::vector<std::string> &inputs, const char *rounding) {
    std::vector<std::string> arguments;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i] == "--padding-mode") {
            ++i;
        } else if (inputs[i] != "--align-corners") {
            arguments.push_back(inputs[i]);
        }
    }
    arguments.insert(arguments.end(), {"--op", "gka"});
    if (rounding != nullptr) arguments.insert(arguments.end(), {"--rounding", rounding});
    return arguments;
}

struct GkaCase {
    const char *rounding;  // as given on the command line; nullptr: not given (floor)
    msda::reference::GkaRounding expected_rounding;
    msda::DType dtype;
    bool locations_in_dtype;  // --locations-dtype same
    Layouts layouts;
    std::vector<std::string> extra;  // further options
    std::string name;
    std::uint64_t seed;
};

void PrintTo(const GkaCase &c, std::ostream *out) { *out << c.name; }

class CliGka : public Cli, public ::testing::WithParamInterface<GkaCase> {
protected:
    msda::DType locations_dtype() const {
        return GetParam().locations_in_dtype ? GetParam().dtype : msda::DType::f32;
    }

    // The inputs as the binary stores them.
    msda::reference::Problem stored_problem(const SmallProblem &problem) const {
        msda::reference::Problem reference = problem.reference;
        reference.value = stored(reference.value, GetParam().dtype);
        reference.sampling_locations = stored(reference.sampling_locations, locations_dtype());
        reference.attention_weights = stored(reference.attention_weights, GetParam().dtype);
        return reference;
    }

    std::vector<std::string> arguments(std::vector<std::string> command) const {
        const GkaCase &c = GetParam();
        if (c.dtype != msda::DType::f32) {
            command.insert(command.end(), {"--dtype", dtype_option(c.dtype), "--locations-dtype",
                                           c.locations_in_dtype ? "same" : "f32"});
        }
        command.insert(command.end(), c.extra.begin(), c.extra.end());
        return command;
    }

    std::vector<std::string> inputs(const SmallProblem &problem) const {
        return gka_arguments(write_inputs(problem, GetParam().layouts), GetParam().rounding);
    }

    // SPEC tolerance for the case's dtype, relative to the tensor's largest
    // magnitude.
    ::testing::AssertionResult matches(const std::string &name, const std::vector<double> &actual,
                                       const std::vector<double> &expected) const {
        const msda::DType dtype = GetParam().dtype;
        if (dtype != msda::DType::f32) return agrees(name, actual, expected, dtype, dtype);
        const double error = max_relative_error(actual, expected);
        if (error <= kFloat32Tolerance) return ::testing::AssertionSuccess();
        return ::testing::AssertionFailure() << name << ": max relative error " << error;
    }

};

TEST_P(CliGka, ForwardMatchesTheGkaReference) {
    const SmallProblem problem = make_gka_problem(GetParam().seed);
    const RunResult result = run(arguments(forward_command(inputs(problem))));
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    EXPECT_TRUE(matches("output", read_result(path("output.npy"), problem.output_shape()),
                        msda::reference::gka_forward(stored_problem(problem), GetParam().expected_rounding)));
}

TEST_P(CliGka, BackwardMatchesTheGkaReferenceWithGradientsInTheInputsLayouts) {
    const SmallProblem problem = make_gka_problem(GetParam().seed);
    const RunResult result =
        run(arguments(backward_command(inputs(problem), {"grad-value", "grad-attention-weights"})));
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    EXPECT_FALSE(fs::exists(path("grad-sampling-locations.npy")));

    const msda::reference::GkaGradients expected = msda::reference::gka_backward(
        stored_problem(problem), stored(problem.grad_output, GetParam().dtype), GetParam().expected_rounding);
    const std::vector<int> value = value_order(GetParam().layouts.value);
    const Shape value_file_shape = permuted_shape(problem.value_shape(), value);
    EXPECT_TRUE(matches("grad_value",
                        permute(read_result(path("grad-value.npy"), value_file_shape), value_file_shape,
                                inverse(value)),
                        expected.value));
    EXPECT_TRUE(matches("grad_attention_weights",
                        read_result(path("grad-attention-weights.npy"), problem.weights_shape()),
                        expected.attention_weights));
}

using msda::reference::GkaRounding;
const msda::LocationsLayout kBQHLP2 = msda::LocationsLayout::BQHLP2, kB2QHLP = msda::LocationsLayout::B2QHLP;
const msda::ValueLayout kBLNC = msda::ValueLayout::BLNC, kBNLC = msda::ValueLayout::BNLC;

INSTANTIATE_TEST_SUITE_P(
    BothRoundings, CliGka,
    ::testing::Values(
        GkaCase{"floor", GkaRounding::floor, msda::DType::f32, false, {kBLNC, kBQHLP2}, {}, "Floor_F32_BLNC_BQHLP2",
                501},
        GkaCase{"nearest", GkaRounding::nearest, msda::DType::f32, false, {kBNLC, kB2QHLP}, {"--threads", "3"},
                "Nearest_F32_BNLC_B2QHLP_Threads3", 502},
        GkaCase{nullptr, GkaRounding::floor, msda::DType::f32, false, {kBNLC, kBQHLP2}, {},
                "DefaultFloor_F32_BNLC_BQHLP2", 503},
        GkaCase{"NEAREST", GkaRounding::nearest, msda::DType::bf16, true, {kBLNC, kB2QHLP}, {},
                "Nearest_Bf16_LocationsSame_BLNC_B2QHLP", 504},
        GkaCase{"floor", GkaRounding::floor, msda::DType::bf16, false, {kBNLC, kBQHLP2}, {},
                "Floor_Bf16_LocationsF32_BNLC_BQHLP2", 505},
        GkaCase{"nearest", GkaRounding::nearest, msda::DType::f16, false, {kBLNC, kBQHLP2}, {},
                "Nearest_F16_LocationsF32_BLNC_BQHLP2", 506}),
    [](const ::testing::TestParamInfo<GkaCase> &parameter) { return parameter.param.name; });

// The ties make the two roundings read different rows, so --rounding must
// reach the library: nearest differs from floor, and no --rounding is floor.
TEST_F(Cli, GkaRoundingChoosesTheRow) {
    const SmallProblem problem = make_gka_problem(601);
    const std::vector<std::string> inputs = write_inputs(problem, {});
    std::vector<std::vector<double>> outputs;
    for (const char *rounding : {"floor", "nearest", static_cast<const char *>(nullptr)}) {
        const RunResult result = run(forward_command(gka_arguments(inputs, rounding)));
        ASSERT_EQ(result.exit_code, 0) << result.errors;
        outputs.push_back(read_result(path("output.npy"), problem.output_shape()));
    }
    EXPECT_NE(outputs[0], outputs[1]);
    EXPECT_EQ(outputs[0], outputs[2]);
    EXPECT_LE(max_relative_error(outputs[1], msda::reference::gka_forward(problem.reference, GkaRounding::nearest)),
              kFloat32Tolerance);
}

TEST_F(Cli, GkaBackwardWritesOnlyTheGradientAskedFor) {
    const SmallProblem problem = make_gka_problem(602);
    const RunResult result =
        run(backward_command(gka_arguments(write_inputs(problem, {}), "nearest"), {"grad-attention-weights"}));
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    EXPECT_FALSE(fs::exists(path("grad-value.npy")));
    EXPECT_FALSE(fs::exists(path("grad-sampling-locations.npy")));
    EXPECT_LE(max_relative_error(read_result(path("grad-attention-weights.npy"), problem.weights_shape()),
                                 msda::reference::gka_backward(problem.reference, problem.grad_output,
                                                               GkaRounding::nearest)
                                     .attention_weights),
              kFloat32Tolerance);
}

// --op msda spelled out is the default operator.
TEST_F(Cli, ExplicitOpMsdaIsTheDefault) {
    const SmallProblem problem = make_problem(603);
    const std::vector<std::string> inputs = write_inputs(problem, {});
    ASSERT_EQ(run(forward_command(inputs)).exit_code, 0);
    const std::vector<double> by_default = read_result(path("output.npy"), problem.output_shape());
    std::vector<std::string> arguments = forward_command(inputs);
    arguments.insert(arguments.end(), {"--op", "msda"});
    const RunResult result = run(arguments);
    ASSERT_EQ(result.exit_code, 0) << result.errors;
    EXPECT_EQ(read_result(path("output.npy"), problem.output_shape()), by_default);
}

// ----------------------------------------------------------------------------
// Bad inputs: a message naming the tensor or file, a non-zero status, no
// crash, and no output file.

class CliRejects : public Cli {
protected:
    void SetUp() override {
        Cli::SetUp();
        problem_ = make_problem(21);
        inputs_ = write_inputs(problem_, {});
    }

    // Runs forward with `inputs` and expects a bad-input failure whose
    // message contains every one of `expected`.
    void expect_forward_rejected(const std::vector<std::string> &inputs, const std::vector<std::string> &expected,
                                 int exit_code = kExitBadInput) {
        const RunResult result = run(forward_command(inputs));
        EXPECT_EQ(result.exit_code, exit_code) << result.errors;
        EXPECT_TRUE(result.errors.starts_with("msda: ")) << result.errors;
        for (const std::string &text : expected) EXPECT_NE(result.errors.find(text), std::string::npos) << result.errors;
        EXPECT_FALSE(fs::exists(path("output.npy"))) << "nothing is written on error";
    }

    // Runs backward with `inputs` asking for `gradients` and expects a
    // failure whose message contains every one of `expected`, with no
    // gradient file written.
    void expect_backward_rejected(const std::vector<std::string> &inputs, const std::vector<std::string> &gradients,
                                  const std::vector<std::string> &expected, int exit_code = kExitBadUsage) {
        const RunResult result = run(backward_command(inputs, gradients));
        EXPECT_EQ(result.exit_code, exit_code) << result.errors;
        EXPECT_TRUE(result.errors.starts_with("msda: ")) << result.errors;
        for (const std::string &text : expected)
            EXPECT_NE(result.errors.find(text), std::string::npos) << result.errors;
        for (const char *gradient : {"grad-value", "grad-sampling-locations", "grad-attention-weights"}) {
            EXPECT_FALSE(fs::exists(path(std::string(gradient) + ".npy")))
                << gradient << ": nothing is written on error";
        }
    }

    // The inputs for --op gka (without the MSDA-only options), plus `extra`.
    std::vector<std::string> gka_inputs(const std::vector<std::string> &extra = {}) const {
        std::vector<std::string> arguments = gka_arguments(inputs_, nullptr);
        arguments.insert(arguments.end(), extra.begin(), extra.end());
        return arguments;
    }

    // The MSDA inputs plus `extra`.
    std::vector<std::string> msda_inputs(const std::vector<std::string> &extra) const {
        std::vector<std::string> arguments = inputs_;
        arguments.insert(arguments.end(), extra.begin(), extra.end());
        return arguments;
    }

    // The inputs with the file after `option` replaced by `file`.
    std::vector<std::string> replacing(const std::string &option, const std::string &file) const {
        std::vector<std::string> arguments = inputs_;
        const auto found = std::ranges::find(arguments, option);
        EXPECT_NE(found, arguments.end());
        *(found + 1) = file;
        return arguments;
    }

    SmallProblem problem_;
    std::vector<std::string> inputs_;
};

TEST_F(CliRejects, AWrongShapeNamingTheTensorAndFile) {
    Shape shape = problem_.weights_shape();
    shape[2] += 1;  // N_h
    npy::write(path("bad_weights.npy"), float_array(std::vector<double>(count(shape), 0.5), shape, npy::DType::float32));
    expect_forward_rejected(replacing("--attention-weights", path("bad_weights.npy")),
                            {"attention_weights", "N_h", path("bad_weights.npy")});
}

// A size the tensors disagree on is blamed on the one that disagrees with
// the others (value's N_h, which attention_weights and sampling_locations
// agree on), or on both where two disagree with no majority (N_p, which
// only attention_weights and sampling_locations hold), with their files.
TEST_F(CliRejects, TheTensorThatDisagreesWithTheOthersIsNamed) {
    Shape shape = problem_.value_shape();
    shape[2] += 1;  // N_h
    npy::write(path("wide_value.npy"), float_array(std::vector<double>(count(shape), 0.5), shape, npy::DType::float32));
    const RunResult value = run(forward_command(replacing("--value", path("wide_value.npy"))));
    EXPECT_EQ(value.exit_code, kExitBadInput);
    EXPECT_TRUE(value.errors.starts_with("msda: value: dimension 2 (N_h) is 3, expected 2 (N_h of attention_weights "
                                         "and sampling_locations)"))
        << value.errors;
    EXPECT_NE(value.errors.find("[" + path("wide_value.npy") + "]"), std::string::npos) << value.errors;
    shape = problem_.weights_shape();
    shape[4] += 1;  // N_p
    npy::write(path("more_points.npy"), float_array(std::vector<double>(count(shape), 0.5), shape, npy::DType::float32));
    const RunResult points = run(forward_command(replacing("--attention-weights", path("more_points.npy"))));
    EXPECT_EQ(points.exit_code, kExitBadInput);
    EXPECT_TRUE(points.errors.starts_with("msda: attention_weights and sampling_locations: disagree on N_p: "
                                          "attention_weights's dimension 4 is 3 and sampling_locations's dimension "
                                          "4 is 2; they must be equal"))
        << points.errors;
    EXPECT_NE(points.errors.find("[" + path("locations.npy") + ", " + path("more_points.npy") + "]"),
              std::string::npos)
        << points.errors;
    EXPECT_FALSE(fs::exists(path("output.npy")));
}

TEST_F(CliRejects, InputsClaimingAHugeOutputBeforeAnythingIsAllocated) {
    // 2^31 - 1 queries with N_p = 0: the files hold no elements, but an
    // output sized from their claims would be 100 GB. The inputs are
    // checked first, so this is an error naming N_p, not an allocation.
    const std::int64_t b = problem_.reference.batch, h = problem_.reference.heads, l = problem_.levels();
    const Shape locations = {b, 2147483647, h, l, 0, 2}, weights = {b, 2147483647, h, l, 0};
    npy::write(path("empty_locations.npy"), float_array({}, locations, npy::DType::float32));
    npy::write(path("empty_weights.npy"), float_array({}, weights, npy::DType::float32));
    std::vector<std::string> arguments = replacing("--sampling-locations", path("empty_locations.npy"));
    *(std::ranges::find(arguments, "--attention-weights") + 1) = path("empty_weights.npy");
    expect_forward_rejected(arguments, {"N_p", "empty_weights.npy"});
}

TEST_F(CliRejects, AWrongRank) {
    const Shape shape = {2, 3, 4};
    npy::write(path("flat_value.npy"), float_array(std::vector<double>(24, 1.0), shape, npy::DType::float32));
    expect_forward_rejected(replacing("--value", path("flat_value.npy")), {"value", "rank 4", path("flat_value.npy")});
}

TEST_F(CliRejects, IntegerValuesAndFloatSpatialShapes) {
    npy::write(path("int_value.npy"), index_array(std::vector<std::int64_t>(count(problem_.value_shape()), 1),
                                                  problem_.value_shape(), npy::DType::int32));
    expect_forward_rejected(replacing("--value", path("int_value.npy")),
                            {"value", "float32 or float64", path("int_value.npy")});
    npy::write(path("float_shapes.npy"), float_array({2, 2, 2, 2}, {2, 2}, npy::DType::float32));
    expect_forward_rejected(replacing("--spatial-shapes", path("float_shapes.npy")),
                            {"spatial_shapes", "int32 or int64", path("float_shapes.npy")});
}

TEST_F(CliRejects, LevelStartIndexThatIsNotThePrefixSum) {
    npy::write(path("bad_starts.npy"), index_array({0, 1}, {2}, npy::DType::int64));
    expect_forward_rejected(replacing("--level-start-index", path("bad_starts.npy")),
                            {"level_start_index", path("bad_starts.npy")});
}

TEST_F(CliRejects, AMissingFile) {
    expect_forward_rejected(replacing("--sampling-locations", path("nowhere.npy")),
                            {"sampling_locations", path("nowhere.npy")});
}

TEST_F(CliRejects, ACorruptFile) {
    const std::string bytes = npy::serialize(npy::read(path("value.npy")));
    std::ofstream(path("cut.npy"), std::ios::binary) << bytes.substr(0, bytes.size() - 4);
    expect_forward_rejected(replacing("--value", path("cut.npy")), {"value", path("cut.npy"), "truncated"});
}

TEST_F(CliRejects, AnOutputThatCannotBeWritten) {
    std::vector<std::string> arguments = forward_command(inputs_);
    arguments.back() = path("no/such/folder/output.npy");
    const RunResult result = run(arguments);
    EXPECT_EQ(result.exit_code, kExitBadInput);
    EXPECT_NE(result.errors.find(path("no/such/folder/output.npy")), std::string::npos) << result.errors;
}

// What stands at an output path stays as it was when a write fails; no
// temporary is left beside it. `ulimit -f 4` (blocks of 1 KiB) lets the
// process write 4 KiB, and a C_h of 256 makes each result larger than that.
std::vector<std::string> folder_listing(const std::string &folder) {
    std::vector<std::string> names;
    for (const auto &entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename().string());
    std::ranges::sort(names);
    return names;
}

TEST_F(CliRejects, AWriteThatFailsLeavesNoBrokenFile) {
    SmallProblem problem = make_problem(31);
    problem.reference.channels = 256;
    std::mt19937_64 engine(32);
    problem.reference.value = random_floats(engine, count(problem.value_shape()), -1.0, 1.0);
    problem.grad_output = random_floats(engine, count(problem.output_shape()), -1.0, 1.0);
    const std::vector<std::string> inputs = write_inputs(problem, {});
    std::ofstream(path("grad-value.npy")) << "what was there before";
    std::ofstream(path("errors.txt")).flush();
    const std::vector<std::string> before = folder_listing(path(""));
    const std::string cli = ::quoted(std::getenv("MSDA_CLI") != nullptr ? std::getenv("MSDA_CLI") : MSDA_CLI_PATH);
    for (const bool backward : {false, true}) {
        std::vector<std::string> arguments =
            backward ? backward_command(inputs, {"grad-value", "grad-attention-weights"}) : forward_command(inputs);
        std::string command = "ulimit -f 4; " + cli;
        for (const std::string &argument : arguments) command += " " + ::quoted(argument);
        command += " 2>" + ::quoted(path("errors.txt"));
        const int status = std::system(("sh -c " + ::quoted(command)).c_str());
        SCOPED_TRACE(backward ? "backward" : "forward");
        ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal";
        EXPECT_EQ(WEXITSTATUS(status), kExitBadInput);
        std::ifstream errors(path("errors.txt"));
        const std::string text((std::istreambuf_iterator<char>(errors)), std::istreambuf_iterator<char>());
        EXPECT_NE(text.find("cannot write"), std::string::npos) << text;
        EXPECT_EQ(folder_listing(path("")), before) << "a file was left behind";
    }
    std::ifstream kept(path("grad-value.npy"));
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>()),
              "what was there before");
}

// A result over an input, or two results to one file, is refused before
// anything is read or written: through another spelling of the path and
// through a link too.
TEST_F(CliRejects, AnOutputThatIsAnInputOrAnotherOutput) {
    const std::string value_bytes = npy::serialize(npy::read(path("value.npy")));
    std::vector<std::string> arguments = forward_command(inputs_);
    arguments.back() = path("value.npy");
    RunResult result = run(arguments);
    EXPECT_EQ(result.exit_code, kExitBadUsage);
    EXPECT_NE(result.errors.find("forward: --output names the same file as --value"), std::string::npos)
        << result.errors;
    fs::create_symlink(path("weights.npy"), path("weights_link.npy"));
    arguments.back() = path("weights_link.npy");
    result = run(arguments);
    EXPECT_NE(result.errors.find("--output names the same file as --attention-weights"), std::string::npos)
        << result.errors;
    arguments = backward_command(inputs_, {"grad-value"});
    arguments.insert(arguments.end(), {"--grad-attention-weights", path("./sub/../grad-value.npy")});
    fs::create_directories(path("sub"));
    result = run(arguments);
    EXPECT_EQ(result.exit_code, kExitBadUsage);
    EXPECT_NE(result.errors.find("--grad-value and --grad-attention-weights name the same file"), std::string::npos)
        << result.errors;
    EXPECT_FALSE(fs::exists(path("grad-value.npy")));
    arguments = backward_command(inputs_, {"grad-value"});
    *(std::ranges::find(arguments, "--grad-value") + 1) = path("grad_output.npy");
    result = run(arguments);
    EXPECT_NE(result.errors.find("--grad-value names the same file as --grad-output"), std::string::npos)
        << result.errors;
    EXPECT_EQ(npy::serialize(npy::read(path("value.npy"))), value_bytes);
}

// Counts that are not whole numbers in range say what was expected and
// what was given.
TEST_F(CliRejects, CountsThatAreNoWholeNumbersInRange) {
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"--threads", "-1"}, "--threads: expected a whole number of threads from 0 (one per core) to 2147483647, got -1"},
        {{"--threads", "abc"}, "--threads: expected a whole number of threads from 0 (one per core) to 2147483647, got \"abc\" (not a whole number)"},
        {{"--threads", "1.5"}, "got \"1.5\" (not a whole number)"},
        {{"--threads", "4294967296"}, "got 4294967296"},
    };
    for (const auto &[extra, expected] : cases) {
        std::vector<std::string> arguments = forward_command(inputs_);
        arguments.insert(arguments.end(), extra.begin(), extra.end());
        const RunResult result = run(arguments);
        EXPECT_EQ(result.exit_code, kExitBadUsage) << result.errors;
        EXPECT_NE(result.errors.find(expected), std::string::npos) << result.errors;
        EXPECT_EQ(result.errors.find("not in range"), std::string::npos) << result.errors;
    }
    const RunResult repeats = run({"demo", "--repeats", "0"});
    EXPECT_EQ(repeats.exit_code, kExitBadUsage);
    EXPECT_NE(repeats.errors.find("--repeats: expected a whole number of calls from 1 to 2147483647, got 0"),
              std::string::npos)
        << repeats.errors;
}

// A float64 element beyond the storage dtype's range would become
// infinite: an error naming the tensor, the file and the element.
TEST_F(CliRejects, Float64BeyondTheStorageRange) {
    std::vector<double> weights(count(problem_.weights_shape()), 0.5);
    weights[3] = 1e40;
    npy::write(path("huge_weights.npy"), float_array(weights, problem_.weights_shape(), npy::DType::float64));
    expect_forward_rejected(replacing("--attention-weights", path("huge_weights.npy")),
                            {"attention_weights", path("huge_weights.npy"), "element 3 is 1e+40",
                             "beyond float32's range"});
    weights[3] = 70000;  // float16's largest is 65504
    npy::write(path("big_weights.npy"), float_array(weights, problem_.weights_shape(), npy::DType::float32));
    std::vector<std::string> arguments = replacing("--attention-weights", path("big_weights.npy"));
    arguments.insert(arguments.end(), {"--dtype", "f16"});
    expect_forward_rejected(arguments, {"element 3 is 70000", "beyond float16's range"});
    // Infinities and NaN are values of every dtype, and pass.
    weights[3] = std::numeric_limits<double>::infinity();
    npy::write(path("inf_weights.npy"), float_array(weights, problem_.weights_shape(), npy::DType::float64));
    EXPECT_EQ(run(forward_command(replacing("--attention-weights", path("inf_weights.npy")))).exit_code, 0);
}

TEST_F(CliRejects, BackwardWithNoGradientAskedFor) {
    const RunResult result = run(backward_command(inputs_, {}));
    EXPECT_EQ(result.exit_code, kExitBadUsage);
    EXPECT_NE(result.errors.find("no gradient"), std::string::npos) << result.errors;
    EXPECT_NE(result.errors.find("--grad-value"), std::string::npos) << result.errors;
}

TEST_F(CliRejects, AGradOutputOfTheWrongShape) {
    npy::write(path("short_grad.npy"), float_array({1, 2, 3}, {1, 1, 3}, npy::DType::float32));
    std::vector<std::string> arguments = backward_command(inputs_, {"grad-value"});
    *(std::ranges::find(arguments, "--grad-output") + 1) = path("short_grad.npy");
    const RunResult result = run(arguments);
    EXPECT_EQ(result.exit_code, kExitBadInput);
    EXPECT_NE(result.errors.find("grad_output"), std::string::npos) << result.errors;
    EXPECT_FALSE(fs::exists(path("grad-value.npy")));
}

TEST_F(CliRejects, AnUnknownDtypeNamingTheAllowedValues) {
    for (const char *dtype : {"f128", "float16", "i32"}) {
        std::vector<std::string> arguments = inputs_;
        arguments.insert(arguments.end(), {"--dtype", dtype});
        expect_forward_rejected(arguments, {"--dtype", dtype, "f32", "f16", "bf16", "f64"}, kExitBadUsage);
    }
    // The locations take float32 or the storage dtype, not a dtype by name.
    for (const char *dtype : {"f16", "bf16", "different"}) {
        std::vector<std::string> arguments = inputs_;
        arguments.insert(arguments.end(), {"--dtype", "f16", "--locations-dtype", dtype});
        expect_forward_rejected(arguments, {"--locations-dtype", dtype, "f32", "same"}, kExitBadUsage);
    }
    std::vector<std::string> arguments = backward_command(inputs_, {"grad-value"});
    arguments.insert(arguments.end(), {"--dtype", "f8"});
    const RunResult result = run(arguments);
    EXPECT_EQ(result.exit_code, kExitBadUsage);
    EXPECT_NE(result.errors.find("--dtype"), std::string::npos) << result.errors;
    EXPECT_FALSE(fs::exists(path("grad-value.npy")));
}

TEST_F(CliRejects, UsageErrors) {
    expect_forward_rejected(replacing("--value-layout", "NLBC"), {"--value-layout"}, kExitBadUsage);
    const RunResult no_command = run({});
    EXPECT_EQ(no_command.exit_code, kExitBadUsage);
    const RunResult missing_option = run({"forward", "--value", path("value.npy")});
    EXPECT_EQ(missing_option.exit_code, kExitBadUsage);
    EXPECT_NE(missing_option.errors.find("required"), std::string::npos) << missing_option.errors;
    const RunResult help = run({"backward", "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.output.find("--grad-sampling-locations"), std::string::npos);
}

// GKA's locations are absolute pixel coordinates clamped to the level, so
// the MSDA-only options are usage errors with --op gka, default values too.
TEST_F(CliRejects, MsdaOnlyOptionsWithGka) {
    expect_forward_rejected(gka_inputs({"--align-corners"}), {"--align-corners", "MSDA only", "gka"}, kExitBadUsage);
    for (const char *mode : {"zeros", "border"})
        expect_forward_rejected(gka_inputs({"--padding-mode", mode}), {"--padding-mode", "MSDA only", "gka"},
                                kExitBadUsage);
    expect_backward_rejected(gka_inputs({"--rounding", "nearest", "--align-corners"}), {"grad-value"},
                             {"--align-corners", "MSDA only"});
    expect_backward_rejected(gka_inputs({"--padding-mode", "border"}), {"grad-attention-weights"},
                             {"--padding-mode", "MSDA only"});
}

TEST_F(CliRejects, RoundingWithMsda) {
    for (const char *rounding : {"floor", "nearest"}) {
        expect_forward_rejected(msda_inputs({"--rounding", rounding}), {"--rounding", "GKA only", "--op gka"},
                                kExitBadUsage);
        expect_forward_rejected(msda_inputs({"--op", "msda", "--rounding", rounding}), {"--rounding", "GKA only"},
                                kExitBadUsage);
    }
    expect_backward_rejected(msda_inputs({"--rounding", "nearest"}), {"grad-value"}, {"--rounding", "GKA only"});
}

TEST_F(CliRejects, AnUnknownOpOrRoundingNamingTheAllowedValues) {
    for (const char *op : {"deformable", "gkt", "bilinear"})
        expect_forward_rejected(msda_inputs({"--op", op}), {"--op", op, "msda", "gka"}, kExitBadUsage);
    for (const char *rounding : {"ceil", "round", "even"})
        expect_forward_rejected(gka_inputs({"--rounding", rounding}), {"--rounding", rounding, "floor", "nearest"},
                                kExitBadUsage);
    expect_backward_rejected(gka_inputs({"--rounding", "up"}), {"grad-value"}, {"--rounding", "floor", "nearest"});
}

// GKA has no location gradient: asking for one is a usage error, alone or
// with the others, and nothing is written.
TEST_F(CliRejects, GkaLocationGradient) {
    const std::vector<std::string> expected = {"--grad-sampling-locations", "GKA", "no gradient"};
    expect_backward_rejected(gka_inputs(), {"grad-value", "grad-sampling-locations", "grad-attention-weights"},
                             expected);
    expect_backward_rejected(gka_inputs({"--rounding", "nearest"}), {"grad-sampling-locations"}, expected);
}

TEST_F(CliRejects, GkaBackwardWithNoGradientAskedFor) {
    const RunResult result = run(backward_command(gka_inputs(), {}));
    EXPECT_EQ(result.exit_code, kExitBadUsage);
    EXPECT_NE(result.errors.find("no gradient"), std::string::npos) << result.errors;
    EXPECT_NE(result.errors.find("--grad-value"), std::string::npos) << result.errors;
    EXPECT_NE(result.errors.find("--grad-attention-weights"), std::string::npos) << result.errors;
    EXPECT_EQ(result.errors.find("--grad-sampling-locations"), std::string::npos) << "GKA has no location gradient";
}

// The target the binary must run: this process's, or under the emulated
// suite the one MSDA_CLI_EXPECT_X86_TARGET names for its CPU model.
std::string expected_cli_target() {
    const char *expected = std::getenv("MSDA_CLI_EXPECT_X86_TARGET");
    return expected != nullptr ? expected : msda::cpu_dispatch().selected;
}

// The CPU that runs the binary decides its code, and msda info says which.
TEST_F(Cli, InfoNamesTheTargetThisCpuRuns) {
    const std::string target = expected_cli_target();
    const RunResult info = run({"info"});
    EXPECT_EQ(info.exit_code, 0) << info.errors;
    EXPECT_NE(info.output.find("\nruns: " + target + " ("), std::string::npos) << info.output;
    EXPECT_NE(info.output.find(std::string("msda ") + msda::version() + "\n"), std::string::npos) << info.output;
    const RunResult version = run({"--version"});
    EXPECT_EQ(version.exit_code, 0);
    EXPECT_EQ(version.output, std::string("msda ") + msda::version() + "\n");
}

// msda info --variants lists the library's generated functions, one line
// each, with the target family they were compiled for.
TEST_F(Cli, InfoListsTheGeneratedFunctions) {
    const RunResult listed = run({"info", "--variants"});
    EXPECT_EQ(listed.exit_code, 0) << listed.errors;
    const std::vector<msda::CompiledVariant> variants = msda::compiled_variants();
    std::size_t lines = 0;
    for (const char c : listed.output) lines += c == '\n';
    EXPECT_EQ(lines, variants.size() + 1) << listed.output;  // a header, then one per function
    for (const msda::CompiledVariant &variant : variants) {
        const std::size_t at = listed.output.find("\n" + variant.name + " ");
        ASSERT_NE(at, std::string::npos) << variant.name << " missing from\n" << listed.output;
        const std::string line = listed.output.substr(at + 1, listed.output.find('\n', at + 1) - at - 1);
        EXPECT_NE(line.find(" " + variant.family + " "), std::string::npos) << line;
        EXPECT_NE(line.find(" " + variant.kind + " "), std::string::npos) << line;
    }
    EXPECT_EQ(run({"info", "--variants", "--cpuid"}).exit_code, kExitBadUsage);
}

TEST_F(CliRejects, AnUnknownCommandIsNamed) {
    const RunResult result = run({"fowrard", "--value", "v.npy"});
    EXPECT_EQ(result.exit_code, kExitBadUsage);
    EXPECT_NE(result.errors.find("unknown command \"fowrard\""), std::string::npos) << result.errors;
    EXPECT_NE(result.errors.find("forward backward demo info"), std::string::npos) << result.errors;
}

// A cap above what the CPU can run fails every call with what it lacks;
// msda info says so and exits 1. Only where such a cap exists: a CPU
// without AVX-512 Zen 4's subsets (or AVX-512, or AVX2).
TEST_F(CliRejects, ACapAboveTheCpuNamesWhatItLacks) {
    const std::string target = expected_cli_target();
    const std::vector<msda::CompiledTarget> targets = msda::cpu_dispatch().targets;  // best first
    if (targets.size() < 4) {
        GTEST_SKIP() << "this tree has code for fewer targets than the CPU runs (a sanitizer tree's baseline alone)";
    }
    if (target == targets.front().name) GTEST_SKIP() << "this CPU runs every compiled target";
    std::string above;  // the tier just above the one this CPU runs
    for (std::size_t i = 1; i < targets.size(); i++) {
        if (targets[i].name == target) above = targets[i - 1].name;
    }
    ASSERT_FALSE(above.empty()) << target;
    // What every CPU below that tier lacks: AVX2; AVX-512 F; one of Zen 4's
    // later AVX-512 subsets (IFMA, VBMI, VNNI, BF16, ...).
    const std::string lacked = above == "avx2" ? " AVX2 " : above == "avx512_skylake" ? " AVX512F " : " AVX512_";
    ASSERT_EQ(setenv("MSDA_X86_TARGET", above.c_str(), 1), 0);
    const RunResult info = run({"info"});
    const RunResult demo = run({"demo", "--repeats", "1"});
    unsetenv("MSDA_X86_TARGET");
    EXPECT_EQ(info.exit_code, kExitBadInput);
    EXPECT_NE(info.output.find("runs: nothing"), std::string::npos) << info.output;
    const std::size_t lacks = info.output.find("asks for code this CPU cannot run: it lacks ");
    EXPECT_NE(lacks, std::string::npos) << info.output;
    EXPECT_NE(info.output.find(lacked, lacks), std::string::npos) << info.output;
    EXPECT_EQ(demo.exit_code, kExitBadInput);
    EXPECT_NE(demo.errors.find("MSDA_X86_TARGET=" + above + " asks for code this CPU cannot run: it lacks"),
              std::string::npos)
        << demo.errors;
}

TEST_F(CliRejects, HelpDescribesGka) {
    for (const char *command : {"forward", "backward"}) {
        const RunResult help = run({command, "--help"});
        EXPECT_EQ(help.exit_code, 0);
        for (const char *text : {"--op", "msda|gka", "--rounding", "floor|nearest", "MSDA only", "GKA only"})
            EXPECT_NE(help.output.find(text), std::string::npos) << command << " --help lacks " << text << "\n"
                                                                 << help.output;
    }
}

}  // namespace
