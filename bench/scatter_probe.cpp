// msda_scatter_probe: how fast grad_value could be summed by sorting its
// contributions by row and gathering each row once, against the
// read-modify-write scatter msda's CPU schedules use, on the bench's own
// problems. A measurement for the design of the backward, not a peer: both
// sums here are plain C++ (scatter_kernels.cpp), fed the same precomputed
// contributions (the corner tables' work is left out of both), and their
// results must be equal bit for bit (the same additions in the same order).
//
//   msda_scatter_probe [--shapes M0,G,X] [--distributions local,uniform]
//                      [--rounds N] [--threads N]
//
// Per (shape, distribution) it prints each sum's median time over the
// rounds (the two alternate, their order swapped every round), in ns per
// sample, and the median of the rounds' ratios sort_and_gather /
// read_modify_write. Work is split into (batch, head) slices, as msda's
// scatter splits it, over OpenMP threads.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "problem.h"
#include "scatter_kernels.h"

namespace msda_bench {

#if defined(__aarch64__)
const ScatterKernels &scatter_kernels() { return kScatterKernelsNeon; }
#else
const ScatterKernels &scatter_kernels() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return kScatterKernelsAvx2;
    return kScatterKernelsSse2;
}
#endif

namespace {

struct Settings {
    std::vector<std::string> shapes = {"M0", "G", "X"};
    std::vector<Distribution> distributions = {Distribution::local, Distribution::uniform};
    int rounds = 7, threads = 2;
};

std::vector<std::string> split(const std::string &text) {
    std::vector<std::string> out;
    std::stringstream stream(text);
    for (std::string item; std::getline(stream, item, ',');) {
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

[[noreturn]] void usage(const char *program, const std::string &problem) {
    if (!problem.empty()) std::fprintf(stderr, "%s: %s\n", program, problem.c_str());
    std::fprintf(stderr,
                 "usage: %s [--shapes M0,G,X] [--distributions local,uniform] [--rounds N] [--threads N]\n",
                 program);
    std::exit(problem.empty() ? 0 : 2);
}

Settings parse(int argc, char **argv) {
    Settings settings;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") usage(argv[0], "");
        if (i + 1 >= argc) usage(argv[0], arg + " needs a value");
        const std::string value = argv[++i];
        if (arg == "--shapes") {
            settings.shapes = split(value);
        } else if (arg == "--distributions") {
            settings.distributions.clear();
            for (const std::string &name : split(value)) {
                if (name == "local") {
                    settings.distributions.push_back(Distribution::local);
                } else if (name == "uniform") {
                    settings.distributions.push_back(Distribution::uniform);
                } else {
                    usage(argv[0], "unknown distribution " + name);
                }
            }
        } else if (arg == "--rounds") {
            settings.rounds = std::atoi(value.c_str());
            if (settings.rounds < 1) usage(argv[0], "--rounds must be at least 1");
        } else if (arg == "--threads") {
            settings.threads = std::atoi(value.c_str());
            if (settings.threads < 1) usage(argv[0], "--threads must be at least 1");
        } else {
            usage(argv[0], "unknown option " + arg);
        }
    }
    return settings;
}

// Every slice's contributions, slice after slice, each slice's in the order
// msda's by-query scatter adds them: query, level, point, corner. The
// samples are MSDA's with align_corners off and zeros padding: a sample
// outside the gate -1 < x < W, -1 < y < H adds nothing, and of one inside it
// only the corners inside the level add, each a * w_y * w_x times g.
struct Contributions {
    std::vector<std::int32_t> row, query;
    std::vector<float> weight;
    std::vector<std::size_t> slice_start;  // batch * heads + 1
};

Contributions contributions_of(const Problem &problem) {
    const Shape &shape = problem.shape;
    const std::int64_t levels = static_cast<std::int64_t>(shape.levels.size());
    Contributions out;
    out.slice_start.push_back(0);
    for (std::int64_t b = 0; b < shape.batch; ++b) {
        for (std::int64_t h = 0; h < shape.heads; ++h) {
            for (std::int64_t q = 0; q < shape.queries; ++q) {
                const std::int64_t sample = ((b * shape.queries + q) * shape.heads + h) * levels * shape.points;
                for (std::int64_t l = 0; l < levels; ++l) {
                    const std::int64_t height = shape.levels[l].height, width = shape.levels[l].width;
                    for (std::int64_t p = 0; p < shape.points; ++p) {
                        const std::int64_t s = sample + l * shape.points + p;
                        const float x = problem.sampling_locations[2 * s] * static_cast<float>(width) - 0.5f;
                        const float y = problem.sampling_locations[2 * s + 1] * static_cast<float>(height) - 0.5f;
                        if (!(x > -1.0f && y > -1.0f && x < static_cast<float>(width) &&
                              y < static_cast<float>(height))) {
                            continue;
                        }
                        const float x0 = std::floor(x), y0 = std::floor(y);
                        const float fx = x - x0, fy = y - y0;
                        const float a = problem.attention_weights[s];
                        for (int corner = 0; corner < 4; ++corner) {
                            const std::int64_t cx = static_cast<std::int64_t>(x0) + (corner & 1);
                            const std::int64_t cy = static_cast<std::int64_t>(y0) + (corner >> 1);
                            if (cx < 0 || cy < 0 || cx >= width || cy >= height) continue;
                            const float wx = (corner & 1) ? fx : 1.0f - fx;
                            const float wy = (corner & 2) ? fy : 1.0f - fy;
                            out.row.push_back(static_cast<std::int32_t>(problem.level_start_index[l] + cy * width + cx));
                            out.query.push_back(static_cast<std::int32_t>(q));
                            out.weight.push_back(a * (wy * wx));
                        }
                    }
                }
            }
            out.slice_start.push_back(out.row.size());
        }
    }
    return out;
}

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Prints one row; false when the two sums' results differ.
bool probe(const Shape &shape, Distribution distribution, const Settings &settings, const ScatterKernels &kernels) {
    const Problem problem = make_problem(shape, distribution);
    const Contributions contributions = contributions_of(problem);
    const std::int64_t rows = shape.value_length(), heads = shape.heads, channels = shape.channels;
    const std::int64_t slices = shape.batch * heads;
    std::size_t largest_slice = 0;
    for (std::int64_t s = 0; s < slices; ++s) {
        largest_slice = std::max(largest_slice, contributions.slice_start[s + 1] - contributions.slice_start[s]);
    }
    Floats rmw(problem.value.size()), gathered(problem.value.size(), -1.0f);
    std::vector<std::vector<char>> work(settings.threads, std::vector<char>(scatter_work_bytes(rows, largest_slice)));

    // Slice (b, h): its rows of grad_value start at b * L * N_h * C_h + h * C_h
    // (a row's stride N_h * C_h), its rows of grad_output at b * N_q * N_h * C_h + h * C_h.
    const auto run = [&](bool gather, float *grad_value) {
        const auto begin = Clock::now();
#pragma omp parallel for schedule(static) num_threads(settings.threads)
        for (std::int64_t s = 0; s < slices; ++s) {
            const std::int64_t b = s / heads, h = s % heads;
            const std::size_t first = contributions.slice_start[s];
            const SliceContributions slice{contributions.row.data() + first, contributions.query.data() + first,
                                           contributions.weight.data() + first,
                                           contributions.slice_start[s + 1] - first, rows};
            const float *g = problem.grad_output.data() + (b * shape.queries * heads + h) * channels;
            float *out = grad_value + (b * rows * heads + h) * channels;
            if (gather) {
                kernels.sort_and_gather(slice, g, heads * channels, out, heads * channels,
                                        work[omp_get_thread_num()].data());
            } else {
                kernels.read_modify_write(slice, g, heads * channels, out, heads * channels);
            }
        }
        return std::chrono::duration<double>(Clock::now() - begin).count();
    };

    run(false, rmw.data());  // warm-up, and the results compared below
    run(true, gathered.data());
    const bool equal = std::memcmp(rmw.data(), gathered.data(), rmw.size() * sizeof(float)) == 0;
    std::vector<double> rmw_times, gather_times, ratios;
    for (int round = 0; round < settings.rounds; ++round) {
        double t_rmw, t_gather;
        if (round % 2) {
            t_gather = run(true, gathered.data());
            t_rmw = run(false, rmw.data());
        } else {
            t_rmw = run(false, rmw.data());
            t_gather = run(true, gathered.data());
        }
        rmw_times.push_back(t_rmw);
        gather_times.push_back(t_gather);
        ratios.push_back(t_gather / t_rmw);
    }
    const double samples = static_cast<double>(shape.samples());
    std::printf("%-4s %-8s %10.2f %12.2f %17.2f %9.3f %6.2f %s\n", shape.id.c_str(), distribution_name(distribution),
                1e9 * median(rmw_times) / samples, 1e9 * median(gather_times) / samples,
                static_cast<double>(contributions.row.size()) / samples, median(ratios),
                static_cast<double>(contributions.row.size()) / static_cast<double>(slices * rows),
                equal ? "equal" : "DIFFERENT");
    return equal;
}

}  // namespace

}  // namespace msda_bench

int main(int argc, char **argv) {
    using namespace msda_bench;
    const Settings settings = parse(argc, argv);
    const ScatterKernels &kernels = scatter_kernels();
    std::vector<Shape> chosen;
    for (const std::string &id : settings.shapes) {
        bool found = false;
        for (const Shape &shape : canonical_shapes()) {
            if (shape.id == id) chosen.push_back(shape), found = true;
        }
        if (!found) usage(argv[0], "unknown shape " + id + " (the canonical MSDA shapes: S0, S1, M0, M2, X, G, L1)");
    }
    std::printf("msda_scatter_probe: %s loops, %d threads, median of %d rounds; ns a sample; "
                "contributions a sample and a row; results of both compared bit for bit\n",
                kernels.isa, settings.threads, settings.rounds);
    std::printf("%-4s %-8s %10s %12s %17s %9s %6s %s\n", "shape", "dist", "rmw", "sort+gather",
                "contribs/sample", "ratio", "/row", "bits");
    int status = 0;
    for (const Shape &shape : chosen) {
        if (shape.channels != 32) {
            std::printf("%-4s skipped: the probe's loops are for C_h = 32 (this shape has %lld)\n", shape.id.c_str(),
                        static_cast<long long>(shape.channels));
            continue;
        }
        for (Distribution distribution : settings.distributions) {
            if (!probe(shape, distribution, settings, kernels)) status = 1;
        }
    }
    return status;
}
