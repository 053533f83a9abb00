#include "cpu_dispatch.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "msda_variants.h"
#include "x86_cpu.h"

// In the Halide runtime (sysconf(_SC_NPROCESSORS_ONLN) on Linux), not in
// its public header.
extern "C" int halide_host_cpu_count();

namespace msda {
namespace detail {

namespace {

using x86::Target;

// A compiled x86 target: its Halide target string and its tier
// (cmake/MsdaHalide.cmake maps each string of MSDA_X86_TARGETS to one).
struct CompiledX86Target {
    const char *halide_target;
    Target tier;
};

const CompiledX86Target kCompiled[] = {
#define MSDA_X86_TARGET_ENTRY(halide_target, tier) {halide_target, Target::tier},
    MSDA_FOR_EACH_X86_TARGET(MSDA_X86_TARGET_ENTRY)
#undef MSDA_X86_TARGET_ENTRY
};

// The x86 ISA features a Halide target may carry in the bits the
// multi-target wrapper passes to halide_can_use_target_features;
// tier_allows says which a tier's code may have (none but these tiers').
constexpr halide_target_feature_t kX86IsaFeatures[] = {
    halide_target_feature_sse41,           halide_target_feature_avx,
    halide_target_feature_avx2,            halide_target_feature_avxvnni,
    halide_target_feature_fma,             halide_target_feature_fma4,
    halide_target_feature_f16c,            halide_target_feature_avx512,
    halide_target_feature_avx512_knl,      halide_target_feature_avx512_skylake,
    halide_target_feature_avx512_cannonlake, halide_target_feature_avx512_zen4,
    halide_target_feature_avx512_zen5,     halide_target_feature_avx512_sapphirerapids,
    halide_target_feature_avx10_1,         halide_target_feature_x86_apx,
};

bool tier_allows(Target tier, halide_target_feature_t feature) {
    switch (feature) {
    case halide_target_feature_sse41:
    case halide_target_feature_avx:
    case halide_target_feature_avx2:
    case halide_target_feature_fma:
    case halide_target_feature_f16c: return tier >= Target::avx2;
    case halide_target_feature_avx512:
    case halide_target_feature_avx512_skylake:
    case halide_target_feature_avx512_cannonlake:
    case halide_target_feature_avx512_zen4: return tier >= Target::avx512_zen4;
    default: return false;
    }
}

std::string joined(const std::vector<std::string> &names) {
    std::string text;
    for (const std::string &name : names) text += (text.empty() ? "" : " ") + name;
    return text;
}

bool has_feature(int count, const std::uint64_t *features, halide_target_feature_t feature) {
    const int word = feature / 64;
    return word < count && (features[word] >> (feature % 64)) & 1;
}

// The decision, made once per process: the CPU's words, the tier they
// allow, MSDA_X86_TARGET, and the compiled target calls run.
struct Choice {
    x86::CpuWords words;
    Target allowed = Target::x86_64;  // the best tier this CPU can run
    std::string cap;                  // MSDA_X86_TARGET as given
    const CompiledX86Target *selected = nullptr;
    std::string error;                // why nothing may run (selected is null)
};

Choice make_choice() {
    Choice choice;
    choice.words = x86::read_this_cpu();
    choice.allowed = x86::best_target(choice.words);
    Target ceiling = choice.allowed;
    if (const char *cap = std::getenv("MSDA_X86_TARGET"); cap != nullptr && *cap != '\0') {
        choice.cap = cap;
        const std::optional<Target> asked = x86::parse_target(choice.cap);
        if (!asked) {
            choice.error = "msda: MSDA_X86_TARGET: expected avx512_zen4, avx2 or x86-64, got \"" + choice.cap + "\"";
            return choice;
        }
        if (*asked > choice.allowed) {
            choice.error = "msda: MSDA_X86_TARGET=" + choice.cap + " asks for code this CPU cannot run: it lacks " +
                           joined(x86::missing_features(choice.words, *asked)) + " (this CPU runs " +
                           x86::target_name(choice.allowed) + "; " + x86::describe_cpu(choice.words) + ")";
            return choice;
        }
        ceiling = *asked;
    }
    // The multi-target wrapper tries the targets best first and calls the
    // last (its base) without asking: the base must be runnable too.
    const CompiledX86Target &base = kCompiled[std::size(kCompiled) - 1];
    if (base.tier > choice.allowed) {
        choice.error = "msda: this CPU (" + x86::describe_cpu(choice.words) +
                       ") cannot run any target this build compiled: the least, " + x86::target_name(base.tier) +
                       ", needs " + joined(x86::missing_features(choice.words, base.tier));
        return choice;
    }
    for (const CompiledX86Target &target : kCompiled) {
        if (target.tier <= ceiling) {
            choice.selected = &target;
            break;
        }
    }
    if (choice.selected == nullptr) {
        choice.error = "msda: MSDA_X86_TARGET=" + choice.cap + " is below the least target this build compiled, " +
                       x86::target_name(base.tier);
    }
    return choice;
}

const Choice &choice() {
    static const Choice made = make_choice();
    return made;
}

// Runs before any generated code (require_runnable_target), so every
// wrapper's cached pick comes from here.
int can_use_target_features(int count, const std::uint64_t *features) {
    const CompiledX86Target *selected = choice().selected;
    if (selected == nullptr) return 0;
    for (halide_target_feature_t feature : kX86IsaFeatures) {
        if (has_feature(count, features, feature) && !tier_allows(selected->tier, feature)) return 0;
    }
    return 1;
}

// Why the choice's target: the better compiled targets, what each needs
// that this CPU lacks, or the cap that ruled it out.
std::string reason(const Choice &choice) {
    std::string text;
    for (const CompiledX86Target &target : kCompiled) {
        if (&target == choice.selected) break;
        const std::vector<std::string> missing = x86::missing_features(choice.words, target.tier);
        text += text.empty() ? "" : "; ";
        text += std::string(x86::target_name(target.tier)) +
                (missing.empty() ? " is above MSDA_X86_TARGET=" + choice.cap
                                 : " needs " + joined(missing) + ", which this CPU lacks");
    }
    return text.empty() ? "the best target this build compiled, and this CPU has every feature its code may use"
                        : text;
}

std::atomic<int> requested_threads{0};

}  // namespace

void require_runnable_target() {
    static std::once_flag once;
    std::call_once(once, [] { halide_set_custom_can_use_target_features(&can_use_target_features); });
    if (!choice().error.empty()) throw Error(choice().error);
}

void set_threads(int threads) {
    if (threads < 0) {
        throw Error("msda: set_num_threads: expected 0 (one per core) or a positive count, got " +
                    std::to_string(threads));
    }
    halide_set_num_threads(threads);
    requested_threads = threads;
}

int threads() {
    // Halide's rule: the count asked for, else HL_NUM_THREADS (or its older
    // name HL_NUMTHREADS), else the CPUs online; clamped to 1..256.
    int count = requested_threads;
    if (count == 0) {
        const char *from_environment = std::getenv("HL_NUM_THREADS");
        if (from_environment == nullptr) from_environment = std::getenv("HL_NUMTHREADS");
        count = from_environment != nullptr ? std::atoi(from_environment) : halide_host_cpu_count();
    }
    return std::clamp(count, 1, 256);
}

}  // namespace detail

const char *version() { return MSDA_VERSION; }

CpuDispatch cpu_dispatch() {
    const detail::Choice &choice = detail::choice();
    CpuDispatch dispatch;
    dispatch.cpu = detail::x86::describe_cpu(choice.words);
    dispatch.cpuid = detail::x86::format_words(choice.words);
    for (const detail::CompiledX86Target &target : detail::kCompiled) {
        dispatch.targets.push_back({detail::x86::target_name(target.tier), target.halide_target,
                                    detail::x86::required_features(target.tier),
                                    detail::x86::missing_features(choice.words, target.tier)});
    }
    if (choice.selected != nullptr) {
        dispatch.selected = detail::x86::target_name(choice.selected->tier);
        dispatch.reason = detail::reason(choice);
    }
    dispatch.cap = choice.cap;
    dispatch.error = choice.error;
    return dispatch;
}

int num_threads() { return detail::threads(); }

}  // namespace msda
