#include "cpu_dispatch.h"

#include <msda/diagnostics.hpp>

#include <HalideRuntime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_caches.h"
#include "registry.h"
#include "msda_variants.h"

// The CPU family this library was built for, and its decision module.
#if defined(__x86_64__)
#include "x86_cpu.h"
#elif defined(__aarch64__)
#include "arm_cpu.h"
#else
#error "msda's runtime decides for x86-64 and 64-bit ARM CPUs only"
#endif

// In the Halide runtime (sysconf(_SC_NPROCESSORS_ONLN) on Linux), not in
// its public header.
extern "C" int halide_host_cpu_count();

namespace msda {
namespace detail {

namespace {

#if defined(__x86_64__)
namespace isa = x86;
constexpr const char *kCapVariable = "MSDA_X86_TARGET";
#else
namespace isa = arm;
constexpr const char *kCapVariable = "MSDA_ARM_TARGET";
#endif
using isa::Target;

// A compiled target: its Halide target string and its tier
// (cmake/MsdaHalide.cmake maps each string of MSDA_CPU_TARGETS to one).
struct CompiledCpuTarget {
    const char *halide_target;
    Target tier;
};

const CompiledCpuTarget kCompiled[] = {
#define MSDA_CPU_TARGET_ENTRY(halide_target, tier) {halide_target, Target::tier},
    MSDA_FOR_EACH_CPU_TARGET(MSDA_CPU_TARGET_ENTRY)
#undef MSDA_CPU_TARGET_ENTRY
};

// The ISA features a Halide target of this family may carry in the bits the
// multi-target wrapper passes to halide_can_use_target_features, and which
// of them a tier's code may have (none but these tiers'):
// schedules/cpu_tiers.cmake.
#if defined(__x86_64__)
#define MSDA_FOR_EACH_ISA_FEATURE MSDA_FOR_EACH_X86_ISA_FEATURE
#define MSDA_FOR_EACH_TIER_FEATURE MSDA_FOR_EACH_X86_TIER_FEATURE
#else
#define MSDA_FOR_EACH_ISA_FEATURE MSDA_FOR_EACH_ARM_ISA_FEATURE
#define MSDA_FOR_EACH_TIER_FEATURE MSDA_FOR_EACH_ARM_TIER_FEATURE
#endif

constexpr halide_target_feature_t kIsaFeatures[] = {
#define MSDA_ISA_FEATURE(feature) halide_target_feature_##feature,
    MSDA_FOR_EACH_ISA_FEATURE(MSDA_ISA_FEATURE)
#undef MSDA_ISA_FEATURE
};

bool tier_allows(Target tier, halide_target_feature_t feature) {
#define MSDA_TIER_FEATURE(lowest_tier, allowed) \
    if (feature == halide_target_feature_##allowed) return tier >= Target::lowest_tier;
    MSDA_FOR_EACH_TIER_FEATURE(MSDA_TIER_FEATURE)
#undef MSDA_TIER_FEATURE
    return false;
}

// "a, b or c": the names of the tiers, best first.
std::string target_names() {
    std::string text;
    for (int i = isa::kTargetCount - 1; i >= 0; --i) {
        text += std::string(i == isa::kTargetCount - 1 ? "" : i == 0 ? " or " : ", ") +
                isa::target_name(static_cast<Target>(i));
    }
    return text;
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
    isa::CpuWords words;
    Target allowed{};  // the best tier this CPU can run
    std::string cap;                  // MSDA_X86_TARGET (MSDA_ARM_TARGET on ARM) as given
    const CompiledCpuTarget *selected = nullptr;
    std::string error;                // why nothing may run (selected is null)
};

Choice make_choice() {
    Choice choice;
    choice.words = isa::read_this_cpu();
    choice.allowed = isa::best_target(choice.words);
    Target ceiling = choice.allowed;
    if (const char *cap = std::getenv(kCapVariable); cap != nullptr && *cap != '\0') {
        choice.cap = cap;
        const std::optional<Target> asked = isa::parse_target(choice.cap);
        if (!asked) {
            choice.error = std::string("msda: ") + kCapVariable + ": expected " + target_names() + ", got \"" +
                           choice.cap + "\"";
            return choice;
        }
        if (*asked > choice.allowed) {
            choice.error = std::string("msda: ") + kCapVariable + "=" + choice.cap +
                           " asks for code this CPU cannot run: it lacks " +
                           joined(isa::missing_features(choice.words, *asked)) + " (this CPU runs " +
                           isa::target_name(choice.allowed) + "; " + isa::describe_cpu(choice.words) + ")";
            return choice;
        }
        ceiling = *asked;
    }
    // The multi-target wrapper tries the targets best first and calls the
    // last (its base) without asking: the base must be runnable too.
    const CompiledCpuTarget &base = kCompiled[std::size(kCompiled) - 1];
    if (base.tier > choice.allowed || !isa::missing_features(choice.words, base.tier).empty()) {
        choice.error = "msda: this CPU (" + isa::describe_cpu(choice.words) +
                       ") cannot run any target this build compiled: the least, " + isa::target_name(base.tier) +
                       ", needs " + joined(isa::missing_features(choice.words, base.tier));
        return choice;
    }
    for (const CompiledCpuTarget &target : kCompiled) {
        if (target.tier <= ceiling) {
            choice.selected = &target;
            break;
        }
    }
    if (choice.selected == nullptr) {
        choice.error = std::string("msda: ") + kCapVariable + "=" + choice.cap +
                       " is below the least target this build compiled, " +
                       isa::target_name(base.tier);
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
    const CompiledCpuTarget *selected = choice().selected;
    if (selected == nullptr) return 0;
    for (halide_target_feature_t feature : kIsaFeatures) {
        if (has_feature(count, features, feature) && !tier_allows(selected->tier, feature)) return 0;
    }
    return 1;
}

// Why the choice's target: the better compiled targets, what each needs
// that this CPU lacks, or the cap that ruled it out.
std::string reason(const Choice &choice) {
    std::string text;
    for (const CompiledCpuTarget &target : kCompiled) {
        if (&target == choice.selected) break;
        const std::vector<std::string> missing = isa::missing_features(choice.words, target.tier);
        text += text.empty() ? "" : "; ";
        text += std::string(isa::target_name(target.tier)) +
                (missing.empty() ? std::string(" is above ") + kCapVariable + "=" + choice.cap
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
        throw ValueError("msda: set_num_threads: expected 0 (one per core) or a positive count, got " +
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
    dispatch.cpu = detail::isa::describe_cpu(choice.words);
    dispatch.cpuid = detail::isa::format_words(choice.words);
    for (const detail::CompiledCpuTarget &target : detail::kCompiled) {
        dispatch.targets.push_back({detail::isa::target_name(target.tier), target.halide_target,
                                    detail::isa::required_features(target.tier),
                                    detail::isa::missing_features(choice.words, target.tier)});
    }
    if (choice.selected != nullptr) {
        dispatch.selected = detail::isa::target_name(choice.selected->tier);
        dispatch.reason = detail::reason(choice);
    }
    dispatch.family = detail::family_name(detail::kLibraryFamily);
    const detail::CpuCaches &caches = detail::cpu_caches();
    dispatch.l1_data_cache_bytes = caches.l1_data;
    dispatch.l2_cache_bytes = caches.l2;
    dispatch.caches = caches.source;
    dispatch.cap_variable = detail::kCapVariable;
    dispatch.cap = choice.cap;
    dispatch.error = choice.error;
    return dispatch;
}

int num_threads() { return detail::threads(); }

}  // namespace msda
