// The machine probe: peak rates of this machine for `threads` threads
// running together (probe_machine), and the rate at which they fetch rows of
// a table in random order (random_row_rate). The inner loops
// (probe_kernels.cpp) use the widest vectors the CPU running this executes;
// a dependent chain of adds measures the clock they run at, so that each
// rate can be checked per core and cycle against the documented peak
// (peaks.h).
//
// Every kernel runs on all threads at once, started together; a rate is the
// work of all threads over the time from their common start to the last
// one's end (a thread the OS starts late counts), and the best of many runs
// (the peak, not the mean: noise only ever makes a run slower). The clock
// of a VM like this one wanders over seconds, so probe_machine takes its
// runs in rounds spread over the whole probe rather than back to back.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "floor.h"
#include "probe_kernels.h"

namespace msda_bench {
namespace {

using Clock = std::chrono::steady_clock;

// Keeps a result alive so that the loads and FMAs producing it are not
// optimised away.
volatile float g_sink;

// An uninitialised buffer, 2 MiB aligned and (on Linux) backed by
// transparent huge pages where the kernel allows it, so that the probes
// measure caches and memory, not page walks. first_touch() makes its pages.
class Buffer {
public:
    Buffer() = default;
    explicit Buffer(std::size_t bytes) : bytes_(round_up(std::max<std::size_t>(bytes, 1))) {
        data_ = static_cast<char *>(std::aligned_alloc(kHugePage, bytes_));
        if (!data_) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        madvise(data_, bytes_, MADV_HUGEPAGE);
#endif
    }
    Buffer(Buffer &&other) noexcept { swap(other); }
    Buffer &operator=(Buffer &&other) noexcept {
        swap(other);
        return *this;
    }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer() { std::free(data_); }

    char *data() const { return data_; }
    std::size_t size() const { return bytes_; }

private:
    static constexpr std::size_t kHugePage = std::size_t{2} << 20;
    static std::size_t round_up(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
    void swap(Buffer &other) noexcept {
        std::swap(data_, other.data_);
        std::swap(bytes_, other.bytes_);
    }
    char *data_ = nullptr;
    std::size_t bytes_ = 0;
};

// Pins the calling thread to a CPU (best effort), so that `threads` threads
// land on distinct cores where there are that many. Only the probe's own
// threads are pinned: threads inherit the mask of the thread that creates
// them, so pinning the caller would pin the bench's OpenMP pool too.
void pin_to_cpu(int index) {
#if defined(__linux__)
    const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(index % cpus, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#else
    (void)index;
#endif
}

// Runs body(t) on new threads t = 0..threads-1, all released together once
// every thread is running, and returns the seconds from that release to the
// end of the last one.
double run_together(int threads, const std::function<void(int)> &body) {
    Clock::time_point released;
    std::barrier start(threads, [&]() noexcept { released = Clock::now(); });
    std::vector<Clock::time_point> ends(threads);
    auto worker = [&](int t) {
        pin_to_cpu(t);
        start.arrive_and_wait();
        body(t);
        ends[t] = Clock::now();
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
    for (std::thread &thread : pool) thread.join();
    return std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) - released).count();
}

// The least of `repeats` timings of run_together(threads, body).
double best_of(int repeats, int threads, const std::function<void(int)> &body) {
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) best = std::min(best, run_together(threads, body));
    return best;
}

// A kernel whose peak rate is probed: each run of `body` on all threads does
// `work` units (FMAs, bytes) in all.
struct RateProbe {
    double work = 0;
    std::function<void(int)> body;
    double best_seconds = 1e30;

    void run(int threads, int repeats) { best_seconds = std::min(best_seconds, best_of(repeats, threads, body)); }
    double rate() const { return work / best_seconds; }
};

// Writes every byte of [data, data + bytes) with `threads` threads, each its
// own contiguous share (so that the pages are touched where they are used).
// Bytes 0x01 make floats of 2.4e-38: normal, so sums of them never take the
// slow path of denormals.
void first_touch(char *data, std::size_t bytes, int threads) {
    run_together(threads, [&](int t) {
        const std::size_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
        std::memset(data + begin, 1, end - begin);
    });
}

// ---------------------------------------------------------------------------
// The clock: kAddsPerRound dependent adds of a register a round, one a
// cycle on every x86 and 64-bit ARM core of this century (each waits for
// the one before), while the loop's own counter runs beside them on other
// ports. Not adds of an immediate: Golden Cove folds chains of those at
// rename, several a cycle.

constexpr long long kAddsPerRound = 100;

__attribute__((noinline)) std::uint64_t add_chain(long long rounds, std::uint64_t step) {
    std::uint64_t x = 0;
    for (long long n = 0; n < rounds; ++n) {
#if defined(__x86_64__) || defined(__i386__)
        __asm__ volatile(".rept 100\n\tadd %1, %0\n\t.endr" : "+r"(x) : "r"(step));
#else
        __asm__ volatile(".rept 100\n\tadd %0, %0, %1\n\t.endr" : "+r"(x) : "r"(step));
#endif
    }
    return x;
}

// The clock: every thread times many short chains (about 1.6 ms each at
// 4 GHz) and keeps its fastest, so that a chain the OS did not interrupt
// sets it; the clock is the fastest thread's. Run beside the other probes,
// as they run, so it reads the clock they ran at.
double probe_clock(int threads) {
    constexpr long long kRounds = 1 << 16;
    constexpr int kChains = 30;
    std::vector<double> best(threads, 1e30);
    run_together(threads, [&](int t) {
        for (int chain = 0; chain < kChains; ++chain) {
            const Clock::time_point begin = Clock::now();
            g_sink = static_cast<float>(add_chain(kRounds, static_cast<std::uint64_t>(t) + 1) & 1);
            best[t] = std::min(best[t], std::chrono::duration<double>(Clock::now() - begin).count());
        }
    });
    return static_cast<double>(kRounds * kAddsPerRound) / *std::min_element(best.begin(), best.end());
}

// FMA throughput: the kernel's independent chains of vector multiply-adds.
RateProbe fma_probe(int threads) {
    // 1M rounds a thread: a few ms at two ports and 3 GHz.
    constexpr long long kIterations = 1 << 20;
    const ProbeKernels &kernels = probe_kernels();
    return {static_cast<double>(kIterations) * static_cast<double>(kernels.fmas_per_iteration) * threads,
            [&kernels](int t) { g_sink = kernels.fma(kIterations, static_cast<float>(t)); }};
}

// Load bandwidth: each of `threads` threads sums its own `bytes_per_thread`
// bytes of `buffer` (first-touched) `passes` times.
RateProbe load_probe(const Buffer &buffer, int threads, std::size_t bytes_per_thread, long long passes) {
    const std::size_t bytes = bytes_per_thread / 1024 * 1024;  // a multiple of 16 vectors of any ISA
    const char *data = buffer.data();
    const ProbeKernels &kernels = probe_kernels();
    return {static_cast<double>(bytes) * static_cast<double>(passes) * threads,
            [=, &kernels](int t) { g_sink = kernels.sum(data + bytes * t, bytes, passes); }};
}

// ---------------------------------------------------------------------------
// Latency: a chase through one line of each of 64K slots spread over a large
// buffer (16 KiB apart in 1 GiB), the slots in a random cyclic order (so no
// prefetcher can guess the next), the lines flushed from the caches before
// each lap; the best of 6 laps. One thread.

double probe_latency(Buffer &buffer) {
    constexpr std::size_t kLine = 64;
    const std::size_t slots = std::min<std::size_t>(buffer.size() / 4096, std::size_t{1} << 16);
    const std::size_t slot_bytes = buffer.size() / slots / kLine * kLine;
    std::mt19937_64 random(12345);
    // Sattolo's shuffle: one cycle through all slots.
    std::vector<std::uint32_t> next(slots);
    std::iota(next.begin(), next.end(), 0u);
    for (std::size_t i = slots - 1; i > 0; --i) {
        std::uniform_int_distribution<std::size_t> pick(0, i - 1);
        std::swap(next[i], next[pick(random)]);
    }
    // A random line within each slot, so that the chase does not always hit
    // the same cache sets.
    std::vector<char *> line(slots);
    std::uniform_int_distribution<std::size_t> offset(0, slot_bytes / kLine - 1);
    for (std::size_t s = 0; s < slots; ++s) line[s] = buffer.data() + s * slot_bytes + offset(random) * kLine;
    for (std::size_t s = 0; s < slots; ++s) *reinterpret_cast<char **>(line[s]) = line[next[s]];

    double best = 1e30;
    for (int repeat = 0; repeat < 6; ++repeat) {
#if defined(__x86_64__) || defined(__i386__)
        for (char *l : line) _mm_clflush(l);
        _mm_mfence();
#elif defined(__aarch64__)
        // Clean and invalidate to the point of coherency (Linux lets user
        // code run DC CIVAC), then wait for it.
        for (char *l : line) __asm__ volatile("dc civac, %0" : : "r"(l) : "memory");
        __asm__ volatile("dsb ish" : : : "memory");
#endif
        char *p = line[0];
        const Clock::time_point begin = Clock::now();
        for (std::size_t s = 0; s < slots; ++s) p = *reinterpret_cast<char **>(p);
        const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
        g_sink = static_cast<float>(reinterpret_cast<std::uintptr_t>(p) & 1);
        best = std::min(best, seconds / static_cast<double>(slots));
    }
    return best * 1e9;
}

// ---------------------------------------------------------------------------
// Random rows.

// The table random_row_rate reads, kept between calls (the bench asks for
// some 30 geometries at startup) and grown when a call needs more.
struct RowTable {
    std::mutex mutex;
    Buffer buffer;
    std::size_t touched = 0;  // bytes written so far (the pages exist)
};

RowTable &row_table() {
    static RowTable table;
    return table;
}

// ---------------------------------------------------------------------------
// A data cache's size in bytes as the system reports it (1: one core's L1d,
// 2: its L2, 3: the L3): sysconf where the C library knows it, else the
// first CPU's cache of that level in sysfs ("307200K"); 0 if neither says.
double cache_bytes(int level) {
#if defined(__linux__) && defined(_SC_LEVEL3_CACHE_SIZE)
    const int names[] = {_SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
    const long reported = sysconf(names[level - 1]);
    if (reported > 0) return static_cast<double>(reported);
#endif
    // sysfs: index0 is the L1d, index1 the L1i, then L2 and L3.
    const int index = level == 1 ? 0 : level;
    std::ifstream file("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    double size = 0;
    char unit = 0;
    if (!(file >> size) || size <= 0) return 0;
    if (file >> unit) {
        if (unit == 'K') size *= 1024;
        if (unit == 'M') size *= 1024 * 1024;
        if (unit == 'G') size *= 1024.0 * 1024 * 1024;
    }
    return size;
}

}  // namespace

const ProbeKernels &probe_kernels() {
    // GCC's checks read cpuid and, for AVX and AVX-512, that the OS saves
    // the registers (XCR0). MSDA_PROBE_ISA=avx2 or sse2 narrows the choice
    // (to see what narrower code reaches on one machine; the documented
    // peaks stay those of the widest vectors).
#if defined(__aarch64__)
    return kProbeKernelsNeon;
#else
    static const ProbeKernels &chosen = [] () -> const ProbeKernels & {
        const char *asked = std::getenv("MSDA_PROBE_ISA");
        const std::string cap = asked != nullptr ? asked : "avx512";
        if (cap == "avx512" && __builtin_cpu_supports("avx512f")) return kProbeKernelsAvx512;
        if (cap != "sse2" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kProbeKernelsAvx2;
        return kProbeKernelsSse2;
    }();
    return chosen;
#endif
}

MachineRates probe_machine(int threads) {
    threads = std::max(1, threads);
    // 16 KiB a thread, a third of a 48 KiB L1d: 0.4 GB a thread, 1-2 ms a run.
    constexpr std::size_t kL1Bytes = 16 << 10;
    // 1 MiB a thread, half a 2 MiB L2 and far beyond L1: 0.15 GB a thread.
    constexpr std::size_t kL2Bytes = 1 << 20;
    // 64 MiB in all for two threads: 16 times their two 2 MiB L2s, a fifth
    // of the 300 MB L3 this VM class reports (reads measured the same up to
    // 128 MB), so it streams from L3; 4 passes, about 5 ms a run. At least
    // 8 MiB a thread, so that many cores' L2s together never hold it (a
    // buffer too large for L3 would give the DRAM rate: a lower L3 rate,
    // which only lowers the floor).
    const std::size_t l3_buffer_bytes = std::max(std::size_t{64} << 20, (std::size_t{8} << 20) * threads);
    // 1 GiB in all, over three times the 300 MB L3 this VM class reports
    // (and far beyond its effective share of it): the streaming rate of
    // memory. Each pass evicts what the previous one left in the caches.
    constexpr std::size_t kDramBytes = std::size_t{1} << 30;

    Buffer l1(kL1Bytes * threads), l2(kL2Bytes * threads), l3(l3_buffer_bytes), dram(kDramBytes);
    first_touch(l1.data(), kL1Bytes * threads, threads);
    first_touch(l2.data(), kL2Bytes * threads, threads);
    first_touch(l3.data(), l3_buffer_bytes, threads);
    first_touch(dram.data(), kDramBytes, threads);

    RateProbe fma = fma_probe(threads);
    RateProbe l1_loads = load_probe(l1, threads, kL1Bytes, 25000);
    RateProbe l2_loads = load_probe(l2, threads, kL2Bytes, 150);
    RateProbe l3_stream = load_probe(l3, threads, l3_buffer_bytes / threads, 4);
    RateProbe stream = load_probe(dram, threads, kDramBytes / threads, 1);
    // Untimed: settles the clock at its AVX-512 level, brings the L1 and L2
    // buffers into their cores' caches.
    for (RateProbe *probe : {&fma, &l1_loads, &l2_loads}) run_together(threads, probe->body);
    double clock_hz = 0;
    for (int round = 0; round < 5; ++round) {
        clock_hz = std::max(clock_hz, probe_clock(threads));
        fma.run(threads, 2);
        l1_loads.run(threads, 3);
        l2_loads.run(threads, 3);
        // Each DRAM pass evicts the L3 buffer: the first run of a round
        // brings it back, the next two stream it from L3.
        l3_stream.run(threads, 3);
        stream.run(threads, 1);
        clock_hz = std::max(clock_hz, probe_clock(threads));
    }

    MachineRates rates;
    rates.threads = threads;
    rates.isa = probe_kernels().isa;
    rates.clock_hz = clock_hz;
    rates.fma_flops_per_s = fma.rate();
    rates.l1_bytes_per_s = l1_loads.rate();
    rates.l2_bytes_per_s = l2_loads.rate();
    rates.l3_bytes_per_s = l3_stream.rate();
    rates.dram_bytes_per_s = stream.rate();
    rates.latency_ns = probe_latency(dram);
    rates.l1_bytes = cache_bytes(1);
    rates.l2_bytes = cache_bytes(2);
    rates.l3_bytes = cache_bytes(3);
    return rates;
}

double random_row_rate(long long rows, long long row_stride_bytes, long long row_bytes, int threads) {
    threads = std::max(1, threads);
    rows = std::clamp(rows, 1LL, (1LL << 32) - 1);  // a row index is drawn from 32 random bits
    row_bytes = std::max<long long>(row_bytes, sizeof(float));
    row_stride_bytes = std::max(row_stride_bytes, row_bytes);
    const std::size_t table_bytes = static_cast<std::size_t>(rows) * row_stride_bytes + 64;

    RowTable &table = row_table();
    std::lock_guard<std::mutex> lock(table.mutex);
    if (table.buffer.size() < table_bytes) {
        table.buffer = Buffer(table_bytes);
        table.touched = 0;
    }
    if (table.touched < table_bytes) {
        // Writing the pages makes them real (reading untouched memory reads
        // the kernel's shared zero page, which is always in cache).
        first_touch(table.buffer.data(), table_bytes, threads);
        table.touched = table_bytes;
    }

    // Each thread's rows, as byte offsets drawn beforehand (so that the
    // timed loop is loads and adds only, every load independent of the
    // others). Enough of them to visit every row a couple of times; the
    // array (at most 8 MiB) is read in order, which the prefetchers hide.
    const std::size_t count = static_cast<std::size_t>(std::clamp(2 * rows, 1LL << 16, 1LL << 20));
    std::vector<std::vector<std::int64_t>> offsets(threads, std::vector<std::int64_t>(count));
    for (int t = 0; t < threads; ++t) {
        std::uint64_t state = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t + 1);
        for (std::int64_t &offset : offsets[t]) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;  // an LCG; its high bits are good
            offset =
                static_cast<std::int64_t>(((state >> 32) * static_cast<std::uint64_t>(rows)) >> 32) * row_stride_bytes;
        }
    }

    const char *base = table.buffer.data();
    long long passes = 1;
    auto body = [&](int t) {
        for (long long p = 0; p < passes; ++p)
            g_sink = probe_kernels().sum_rows(base, offsets[t].data(), count, static_cast<std::size_t>(row_bytes));
    };
    // The first run brings whatever fits into the caches (as the bench's
    // warm-up runs do for value) and sizes the timed runs to ~3 ms each.
    const double first = run_together(threads, body);
    passes = std::clamp(static_cast<long long>(3e-3 / std::max(first, 1e-7)), 1LL, 64LL);
    const double seconds = best_of(5, threads, body);
    return static_cast<double>(count) * static_cast<double>(passes) * threads / seconds;
}

}  // namespace msda_bench
