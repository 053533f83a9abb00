#include "arm_cpu.h"

#include <cinttypes>
#include <cstdio>
#include <stdexcept>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace msda::detail::arm {

namespace {

// AT_HWCAP bits (Linux, arch/arm64/include/uapi/asm/hwcap.h), each with the
// lowest tier whose code may use it (schedules/cpu_tiers.cmake).
struct Capability {
    const char *name;
    Target tier;
    int bit;
};
constexpr Capability kCapabilities[] = {
#define MSDA_HWCAP(name, tier, bit) {name, Target::tier, bit},
    MSDA_FOR_EACH_ARM_HWCAP(MSDA_HWCAP)
#undef MSDA_HWCAP
};

bool has(const CpuWords &words, const Capability &capability) { return (words.hwcap >> capability.bit) & 1; }

template <class Each>
void for_each_required(Target target, Each &&each) {
    for (const Capability &capability : kCapabilities) {
        if (capability.tier <= target) each(capability);
    }
}

}  // namespace

const char *target_name(Target target) {
    switch (target) {
#define MSDA_TIER(id, name) \
    case Target::id: return name;
        MSDA_FOR_EACH_ARM_TIER(MSDA_TIER)
#undef MSDA_TIER
    }
    return "unknown";
}

std::optional<Target> parse_target(std::string_view name) {
    for (int tier = 0; tier < kTargetCount; tier++) {
        if (name == target_name(static_cast<Target>(tier))) return static_cast<Target>(tier);
    }
    return std::nullopt;
}

std::vector<std::string> required_features(Target target) {
    std::vector<std::string> names;
    for_each_required(target, [&](const Capability &capability) { names.push_back(capability.name); });
    return names;
}

std::vector<std::string> missing_features(const CpuWords &words, Target target) {
    std::vector<std::string> names;
    for_each_required(target, [&](const Capability &capability) {
        if (!has(words, capability)) names.push_back(capability.name);
    });
    return names;
}

Target best_target(const CpuWords &words) {
    Target best = static_cast<Target>(0);
    for (int tier = 1; tier < kTargetCount; tier++) {
        if (missing_features(words, static_cast<Target>(tier)).empty()) best = static_cast<Target>(tier);
    }
    return best;
}

std::string describe_cpu(const CpuWords &words) {
    if (!words.read) return "not a 64-bit ARM Linux CPU (no AT_HWCAP)";
    std::string names;  // those of the capabilities msda checks that the CPU has
    for_each_required(static_cast<Target>(kTargetCount - 1), [&](const Capability &capability) {
        if (has(words, capability)) names += std::string(" ") + capability.name;
    });
    char text[64];
    std::snprintf(text, sizeof text, "aarch64, hwcap 0x%" PRIx64, words.hwcap);
    return text + (names.empty() ? std::string() : " (" + names.substr(1) + ")");
}

CpuWords read_this_cpu() {
    CpuWords words;
#if defined(__aarch64__) && defined(__linux__)
    words.read = true;
    words.hwcap = getauxval(AT_HWCAP);
    words.hwcap2 = getauxval(AT_HWCAP2);
#endif
    return words;
}

std::string format_words(const CpuWords &words) {
    if (!words.read) return "";
    char text[80];
    std::snprintf(text, sizeof text, "hwcap 0x%016" PRIx64 "\nhwcap2 0x%016" PRIx64 "\n", words.hwcap, words.hwcap2);
    return text;
}

CpuWords parse_words(std::string_view text) {
    CpuWords words;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        const std::string line(text.substr(start, end - start));
        start = end + 1;
        if (line.empty() || line[0] == '#') continue;
        char name[8] = {};
        std::uint64_t value = 0;
        int used = 0;
        if (std::sscanf(line.c_str(), "%7s 0x%" SCNx64 "%n", name, &value, &used) != 2 ||
            used != static_cast<int>(line.size()) || (std::string(name) != "hwcap" && std::string(name) != "hwcap2")) {
            throw std::invalid_argument("not an AT_HWCAP line (\"hwcap 0x...\" or \"hwcap2 0x...\"): " + line);
        }
        (std::string(name) == "hwcap" ? words.hwcap : words.hwcap2) = value;
        words.read = true;
    }
    return words;
}

}  // namespace msda::detail::arm
