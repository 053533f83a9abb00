// msda_gpu_bench: msda's CUDA code beside the classic CUDA kernels
// (cuda_device.h, built here with nvcc), on this machine's first CUDA
// device, on the canonical shapes (problem.h), all tensors on the device.
// For each shape, in one run:
//   - the median time of a forward and of a backward (all three gradients)
//     of msda (deterministic and atomic grad_value) and of the baseline,
//     each call between two events on one stream (msda's host work, its
//     validation and launches, inside);
//   - agreement: msda's output and gradients against the baseline's, run
//     with its pixel coordinates rounded as msda's (cuda_device.h), within
//     1e-4 of each tensor's largest magnitude (the baseline's atomics sum in
//     any order), and msda's deterministic backward bitwise equal to itself
//     run to run.
// msda gets the level tables as host tensors (the baseline reads its own
// int64 copies on the device).
// It prints a table and the targets (M0 forward at most 0.25 ms,
// backward at most 3x forward, faster than the baseline on every shape,
// deterministic at most 1.3x atomic), and writes the numbers as JSON. No
// test asserts a timing; the exit status says only whether the results
// agreed (0), a result disagreed (1) or there is no CUDA device (2, with
// the reason).
//
//   msda_gpu_bench [--shapes S0,M0,...] [--rounds N] [--json FILE] [--check-only]
#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_device.h"
#include "problem.h"

namespace {

using msda_bench::Problem;
using msda_bench::Shape;
namespace cuda = msda_bench::cuda;

struct Settings {
    std::vector<std::string> shapes = {"S0", "S1", "M0", "M2", "X", "G", "L1"};
    int rounds = 20;
    std::string json;
    bool check_only = false;
};

std::vector<std::string> split(const std::string &text) {
    std::vector<std::string> parts;
    std::stringstream stream(text);
    for (std::string part; std::getline(stream, part, ',');) parts.push_back(part);
    return parts;
}

// A problem's tensors on the device, msda's and the baseline's results.
struct DeviceProblem {
    const Problem &problem;
    std::int64_t B, L, H, C, N_l, Q, P;
    cuda::Buffer value, locations, weights, grad_output, shapes64, starts64;  // the tables: the baseline's
    cuda::Buffer output, grad_value, grad_locations, grad_weights;                          // msda's
    cuda::Buffer classic_output, classic_grad_value, classic_grad_locations, classic_grad_weights;

    static std::size_t floats(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); }

    explicit DeviceProblem(const Problem &p)
        : problem(p), B(p.shape.batch), L(p.shape.value_length()), H(p.shape.heads), C(p.shape.channels),
          N_l(static_cast<std::int64_t>(p.shape.levels.size())), Q(p.shape.queries), P(p.shape.points),
          value(floats(B * L * H * C)), locations(floats(B * Q * H * N_l * P * 2)), weights(floats(B * Q * H * N_l * P)),
          grad_output(floats(B * Q * H * C)), shapes64(16 * N_l), starts64(8 * N_l), output(floats(B * Q * H * C)), grad_value(floats(B * L * H * C)),
          grad_locations(floats(B * Q * H * N_l * P * 2)), grad_weights(floats(B * Q * H * N_l * P)),
          classic_output(floats(B * Q * H * C)), classic_grad_value(floats(B * L * H * C)),
          classic_grad_locations(floats(B * Q * H * N_l * P * 2)), classic_grad_weights(floats(B * Q * H * N_l * P)) {
        value.upload(p.value.data());
        locations.upload(p.sampling_locations.data());
        weights.upload(p.attention_weights.data());
        grad_output.upload(p.grad_output.data());
        const std::vector<std::int64_t> shapes(p.spatial_shapes.begin(), p.spatial_shapes.end());
        const std::vector<std::int64_t> starts(p.level_start_index.begin(), p.level_start_index.end());
        shapes64.upload(shapes.data());
        starts64.upload(starts.data());
    }

    static msda::TensorView on_device(const cuda::Buffer &buffer, msda::DType dtype,
                                      std::initializer_list<std::int64_t> shape) {
        return msda::TensorView::contiguous(buffer.get(), dtype, shape).on_device(msda::DeviceType::cuda);
    }
    msda::ForwardArgs forward_args() const {
        msda::ForwardArgs a;
        a.value = on_device(value, msda::DType::f32, {B, L, H, C});
        // The level tables as host tensors: on the device msda would read
        // them back (a blocking read on the stream) in every call
        // (docs/cuda.md).
        a.spatial_shapes = msda::TensorView::contiguous(problem.spatial_shapes.data(), msda::DType::i32, {N_l, 2});
        a.level_start_index = msda::TensorView::contiguous(problem.level_start_index.data(), msda::DType::i32, {N_l});
        a.sampling_locations = on_device(locations, msda::DType::f32, {B, Q, H, N_l, P, 2});
        a.attention_weights = on_device(weights, msda::DType::f32, {B, Q, H, N_l, P});
        a.output = on_device(output, msda::DType::f32, {B, Q, H * C});
        return a;
    }
    msda::BackwardArgs backward_args() const {
        const msda::ForwardArgs f = forward_args();
        return {f.value,
                f.spatial_shapes,
                f.level_start_index,
                f.sampling_locations,
                f.attention_weights,
                on_device(grad_output, msda::DType::f32, {B, Q, H * C}),
                on_device(grad_value, msda::DType::f32, {B, L, H, C}),
                on_device(grad_locations, msda::DType::f32, {B, Q, H, N_l, P, 2}),
                on_device(grad_weights, msda::DType::f32, {B, Q, H, N_l, P})};
    }
    cuda::ClassicArgs classic_args() const {
        cuda::ClassicArgs a;
        a.value = static_cast<const float *>(value.get());
        a.spatial_shapes = static_cast<const std::int64_t *>(shapes64.get());
        a.level_start_index = static_cast<const std::int64_t *>(starts64.get());
        a.sampling_locations = static_cast<const float *>(locations.get());
        a.attention_weights = static_cast<const float *>(weights.get());
        a.output = static_cast<float *>(classic_output.get());
        a.grad_output = static_cast<const float *>(grad_output.get());
        a.grad_value = static_cast<float *>(classic_grad_value.get());
        a.grad_sampling_locations = static_cast<float *>(classic_grad_locations.get());
        a.grad_attention_weights = static_cast<float *>(classic_grad_weights.get());
        a.batch = B, a.value_length = L, a.heads = H, a.channels = C, a.levels = N_l, a.queries = Q, a.points = P;
        return a;
    }
};

std::vector<float> download(const cuda::Buffer &buffer) {
    std::vector<float> host(buffer.bytes() / sizeof(float));
    buffer.download(host.data());
    return host;
}

// max |a - b| over max |b| (NaN counts as a mismatch).
double relative_difference(const std::vector<float> &a, const std::vector<float> &b) {
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        largest = std::max(largest, std::abs(static_cast<double>(b[i])));
        const double d = std::abs(static_cast<double>(a[i]) - b[i]);
        worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
    return largest > 0 ? worst / largest : worst;
}

struct Row {
    std::string shape;
    double forward = 0, classic_forward = 0, backward = 0, backward_atomic = 0, classic_backward = 0;
    double worst_difference = 0;
    bool agrees = true, reproducible = true;
};

Row measure(const Shape &shape, const Settings &settings, const cuda::Stream &stream) {
    const Problem problem = msda_bench::make_problem(shape, msda_bench::Distribution::local);
    DeviceProblem d(problem);
    msda::Options options;
    options.device_context.queue = stream.get();
    msda::Options atomic = options;
    atomic.deterministic = false;
    const cuda::ClassicArgs classic = d.classic_args();
    cuda::ClassicArgs classic_rounded = classic;  // the agreement check's (cuda_device.h)
    classic_rounded.rounded_coordinates = true;
    auto forward = [&] { msda::forward(d.forward_args(), options); };
    auto backward = [&] { msda::backward(d.backward_args(), options); };
    auto backward_atomic = [&] { msda::backward(d.backward_args(), atomic); };
    auto classic_forward = [&] { cuda::classic_forward(classic, stream); };
    auto classic_backward = [&] { cuda::classic_backward(classic, stream); };

    Row row;
    row.shape = shape.id;
    // Agreement first (also the warm-up of every path).
    forward();
    cuda::classic_forward(classic_rounded, stream);
    backward_atomic();
    const std::vector<float> atomic_grad_value = download(d.grad_value);
    backward();
    const std::vector<float> first[3] = {download(d.grad_value), download(d.grad_locations), download(d.grad_weights)};
    backward();
    const std::vector<float> again[3] = {download(d.grad_value), download(d.grad_locations), download(d.grad_weights)};
    cuda::classic_backward(classic_rounded, stream);
    const std::vector<float> classic_results[3] = {download(d.classic_grad_value), download(d.classic_grad_locations),
                                                   download(d.classic_grad_weights)};
    for (int i = 0; i < 3; ++i) {
        row.reproducible = row.reproducible && first[i].size() == again[i].size() &&
                           std::memcmp(first[i].data(), again[i].data(), first[i].size() * sizeof(float)) == 0;
        row.worst_difference = std::max(row.worst_difference, relative_difference(first[i], classic_results[i]));
    }
    row.worst_difference = std::max(row.worst_difference, relative_difference(atomic_grad_value, classic_results[0]));
    row.worst_difference = std::max(row.worst_difference, relative_difference(download(d.output), download(d.classic_output)));
    row.agrees = row.worst_difference <= 1e-4;
    if (settings.check_only) return row;

    row.forward = cuda::median_ms(stream, 3, settings.rounds, forward);
    row.classic_forward = cuda::median_ms(stream, 3, settings.rounds, classic_forward);
    row.backward = cuda::median_ms(stream, 3, settings.rounds, backward);
    row.backward_atomic = cuda::median_ms(stream, 3, settings.rounds, backward_atomic);
    row.classic_backward = cuda::median_ms(stream, 3, settings.rounds, classic_backward);
    return row;
}

void write_json(const std::string &path, const std::string &device, const std::vector<Row> &rows) {
    std::ofstream out(path);
    out << "{\n  \"device\": \"" << device << "\",\n  \"msda_version\": \"" << msda::version() << "\",\n  \"rows\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row &r = rows[i];
        out << "    {\"shape\": \"" << r.shape << "\", \"forward_ms\": " << r.forward
            << ", \"classic_forward_ms\": " << r.classic_forward << ", \"backward_ms\": " << r.backward
            << ", \"backward_atomic_ms\": " << r.backward_atomic << ", \"classic_backward_ms\": " << r.classic_backward
            << ", \"worst_relative_difference\": " << r.worst_difference
            << ", \"agrees\": " << (r.agrees ? "true" : "false")
            << ", \"deterministic_bits_reproducible\": " << (r.reproducible ? "true" : "false") << "}"
            << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
}

}  // namespace

int main(int argc, char **argv) {
    Settings settings;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "msda_gpu_bench: %s needs a value\n", arg.c_str());
                std::exit(64);
            }
            return argv[++i];
        };
        if (arg == "--shapes") {
            settings.shapes = split(next());
        } else if (arg == "--rounds") {
            settings.rounds = std::max(1, std::atoi(next().c_str()));
        } else if (arg == "--json") {
            settings.json = next();
        } else if (arg == "--check-only") {
            settings.check_only = true;
        } else {
            std::fprintf(stderr, "usage: msda_gpu_bench [--shapes S0,M0,...] [--rounds N] [--json FILE] [--check-only]\n");
            return 64;
        }
    }
    // msda's reading of the driver says why first (the CUDA runtime's own
    // message without a driver is about versions).
    const msda::CudaReport report = msda::cuda_devices();
    const std::string why = report.devices.empty() ? report.error : cuda::unavailable();
    if (!why.empty()) {
        std::printf("msda_gpu_bench: SKIPPED: no CUDA device to run on (%s)\n", why.c_str());
        return 2;
    }
    const std::string device = cuda::device_name();
    std::printf("msda_gpu_bench: %s, msda %s, %d rounds, local locations, float32\n", device.c_str(), msda::version(),
                settings.rounds);
    cuda::Stream stream;
    std::vector<Row> rows;
    bool ok = true;
    for (const std::string &id : settings.shapes) {
        const std::vector<Shape> shapes = msda_bench::canonical_shapes();
        const auto shape = std::find_if(shapes.begin(), shapes.end(), [&](const Shape &s) { return s.id == id; });
        if (shape == shapes.end()) {
            std::fprintf(stderr, "msda_gpu_bench: unknown shape %s\n", id.c_str());
            return 64;
        }
        try {
            rows.push_back(measure(*shape, settings, stream));
        } catch (const std::exception &e) {
            std::printf("%s: FAILED: %s\n", id.c_str(), e.what());
            ok = false;
            continue;
        }
        const Row &r = rows.back();
        ok = ok && r.agrees && r.reproducible;
        std::printf("%-3s agreement with the baseline: worst %.2e of the largest magnitude %s; deterministic bits %s\n",
                    r.shape.c_str(), r.worst_difference, r.agrees ? "PASS" : "FAIL",
                    r.reproducible ? "reproduced" : "DIFFER");
        std::fflush(stdout);
    }
    if (!settings.check_only) {
        std::printf("\n| shape | forward (ms) | classic forward (ms) | forward speedup | backward (ms) | backward atomic (ms) "
                    "| classic backward (ms) | backward speedup | deterministic / atomic | backward / forward |\n"
                    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
        for (const Row &r : rows) {
            std::printf("| %s | %.4f | %.4f | %.2fx | %.4f | %.4f | %.4f | %.2fx | %.2f | %.2f |\n", r.shape.c_str(),
                        r.forward, r.classic_forward, r.classic_forward / r.forward, r.backward, r.backward_atomic,
                        r.classic_backward, r.classic_backward / r.backward, r.backward / r.backward_atomic,
                        r.backward / r.forward);
        }
        std::printf("\ntargets (timings are reported, never asserted):\n");
        for (const Row &r : rows) {
            if (r.shape == "M0") {
                std::printf("  M0 forward <= 0.25 ms: %.4f ms %s\n", r.forward, r.forward <= 0.25 ? "MET" : "NOT MET");
            }
            std::printf("  %s: backward <= 3x forward %s (%.2f), faster than the baseline %s (forward %.2fx, backward "
                        "%.2fx), deterministic <= 1.3x atomic %s (%.2f)\n",
                        r.shape.c_str(), r.backward <= 3 * r.forward ? "MET" : "NOT MET", r.backward / r.forward,
                        r.forward < r.classic_forward && r.backward < r.classic_backward ? "MET" : "NOT MET",
                        r.classic_forward / r.forward, r.classic_backward / r.backward,
                        r.backward <= 1.3 * r.backward_atomic ? "MET" : "NOT MET", r.backward / r.backward_atomic);
        }
    }
    if (!settings.json.empty()) write_json(settings.json, device, rows);
    return ok ? 0 : 1;
}
