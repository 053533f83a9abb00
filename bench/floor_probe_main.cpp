// msda_floor_probe: measures this machine (floor_probe.cpp) and prints its
// rates and the floor of every canonical benchmark (floor.cpp), in ms with
// the limit that sets it. See bench/README.md, "The floor".
//
//   msda_floor_probe [--threads N]     (default 2, the bench's default)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include "floor.h"
#include "peaks.h"
#include "problem.h"

namespace {

int parse_threads(int argc, char **argv) {
    int threads = 2;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--threads" && i + 1 < argc) {
            threads = std::atoi(argv[++i]);
        } else if (arg.rfind("--threads=", 0) == 0) {
            threads = std::atoi(arg.c_str() + std::strlen("--threads="));
        } else {
            std::fprintf(stderr, "usage: %s [--threads N]\n", argv[0]);
            std::exit(arg == "--help" || arg == "-h" ? 0 : 2);
        }
    }
    if (threads < 1) {
        std::fprintf(stderr, "--threads must be at least 1\n");
        std::exit(2);
    }
    return threads;
}

}  // namespace

int main(int argc, char **argv) {
    using namespace msda_bench;
    const int threads = parse_threads(argc, argv);

    const auto begin = std::chrono::steady_clock::now();
    FloorModel model(threads);
    const auto probed = std::chrono::steady_clock::now();
    const MachineRates &rates = model.rates();
    const ProbeVerdict &verdict = model.verdict();
    std::printf("Machine rates, %d thread%s together (sums over threads), %s vectors, clock %.2f GHz (dependent adds, "
                "the fastest uninterrupted chain):\n",
                rates.threads, rates.threads == 1 ? "" : "s", rates.isa, rates.clock_hz * 1e-9);
    std::printf("  FMA          %8.1f GFMA/s (float32 lane multiply-adds)\n", rates.fma_flops_per_s * 1e-9);
    std::printf("  L1 loads     %8.1f GB/s\n", rates.l1_bytes_per_s * 1e-9);
    std::printf("  L2 loads     %8.1f GB/s\n", rates.l2_bytes_per_s * 1e-9);
    if (rates.l3_bytes > 0) {
        std::printf("  L3 stream    %8.1f GB/s (the floor's memory rate for calls within the %.0f MB L3)\n",
                    rates.l3_bytes_per_s * 1e-9, rates.l3_bytes * 1e-6);
    } else {
        std::printf("  L3 stream    %8.1f GB/s (L3 size unknown: unused, every call priced at DRAM)\n",
                    rates.l3_bytes_per_s * 1e-9);
    }
    std::printf("  DRAM stream  %8.1f GB/s\n", rates.dram_bytes_per_s * 1e-9);
    std::printf("  latency      %8.1f ns (one thread, dependent loads)\n", rates.latency_ns);
    std::printf("  (probe took %.2f s)\n", std::chrono::duration<double>(probed - begin).count());
    std::printf("Per core and cycle, against the documented peak of %s (%s):\n",
                verdict.peaks.microarchitecture.c_str(), verdict.peaks.source.c_str());
    for (const RateCheck &check : verdict.checks) {
        if (check.unit.empty() || check.unit == "GHz") continue;
        std::printf("  %-12s %8.2f %-9s peak %6.3g  %s\n", check.name.c_str(), check.per_core_cycle,
                    check.unit.c_str(), check.peak, check.problem.empty() ? "ok" : check.problem.c_str());
    }
    if (!verdict.refusal.empty()) {
        std::printf("No floor: the probe's rates fail its check (%s)\n", verdict.refusal.c_str());
        return 1;
    }
    std::printf("\n");

    const Operator ops[] = {Operator::forward, Operator::backward, Operator::forward_backward};
    const Distribution distributions[] = {Distribution::local, Distribution::uniform};
    std::printf("Floor in ms (bound), %d thread%s, value read whole (msda_bench counts the rows each problem's "
                "samples read):\n",
                threads, threads == 1 ? "" : "s");
    std::printf("%-6s %-8s", "shape", "dist");
    for (Operator op : ops) std::printf(" %22s", operator_name(op));
    std::printf("\n");
    for (const Shape &shape : canonical_shapes()) {
        for (Distribution distribution : distributions) {
            std::printf("%-6s %-8s", shape.id.c_str(), distribution_name(distribution));
            for (Operator op : ops) {
                const Floor f = model.floor(shape, distribution, op);
                std::printf(" %12.3f %-9s", f.seconds * 1e3, ("(" + f.bound + ")").c_str());
            }
            std::printf("\n");
        }
    }
    const auto done = std::chrono::steady_clock::now();
    std::printf("(floors took %.2f s, random-row probes included)\n\n",
                std::chrono::duration<double>(done - probed).count());

    // The random-row rates behind the uniform floors, one per level
    // geometry (measured again here: the model keeps its own). Rows are
    // packed, one head's side by side, as the floor model prices them.
    std::set<std::tuple<long long, long long, long long>> geometries;
    for (const Shape &shape : canonical_shapes()) {
        const long long row_bytes = shape.channels * static_cast<long long>(sizeof(float));
        for (const Level &level : shape.levels) geometries.emplace(level.height * level.width, row_bytes, row_bytes);
    }
    std::printf("Random rows, %d thread%s (one head's slice of a level):\n", threads, threads == 1 ? "" : "s");
    std::printf("%8s %8s %6s %10s %10s\n", "rows", "stride", "bytes", "footprint", "Mrows/s");
    for (const auto &[rows, stride, bytes] : geometries) {
        std::printf("%8lld %8lld %6lld %7.2f MB %10.0f\n", rows, stride, bytes, rows * bytes * 1e-6,
                    random_row_rate(rows, stride, bytes, threads) * 1e-6);
    }
    return 0;
}
