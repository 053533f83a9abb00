#include "x86_cpu.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace msda::detail::x86 {

namespace {

enum class Register { eax, ebx, ecx, edx };

// A feature cpuid reports as one bit, or (xcr0_mask != 0) a register state
// the OS must enable in XCR0 before the instructions that use it can run.
struct Feature {
    const char *name;
    Target tier;  // the lowest tier whose code may use it
    std::uint32_t leaf, subleaf;
    Register reg;
    int bit;
    std::uint64_t xcr0_mask = 0;
};

constexpr std::uint32_t kExtended = 0x80000000u;

// What each tier's code may contain (schedules/cpu_tiers.cmake says why each
// feature is in its tier's list).
constexpr Feature kFeatures[] = {
#define MSDA_CPUID(name, tier, leaf, subleaf, reg, bit, xcr0_mask) \
    {name, Target::tier, leaf, subleaf, Register::reg, bit, xcr0_mask},
    MSDA_FOR_EACH_X86_CPUID(MSDA_CPUID)
#undef MSDA_CPUID
};

std::uint32_t read_register(const CpuidLeaf &leaf, Register reg) {
    switch (reg) {
    case Register::eax: return leaf.eax;
    case Register::ebx: return leaf.ebx;
    case Register::ecx: return leaf.ecx;
    case Register::edx: return leaf.edx;
    }
    return 0;
}

bool has(const CpuWords &words, const Feature &feature) {
    if (feature.xcr0_mask != 0) return words.xcr0 && (*words.xcr0 & feature.xcr0_mask) == feature.xcr0_mask;
    return (read_register(words.get(feature.leaf, feature.subleaf), feature.reg) >> feature.bit) & 1;
}

std::string vendor(const CpuWords &words) {
    const CpuidLeaf leaf0 = words.get(0);
    char name[13] = {};
    std::memcpy(name, &leaf0.ebx, 4);
    std::memcpy(name + 4, &leaf0.edx, 4);
    std::memcpy(name + 8, &leaf0.ecx, 4);
    return name;
}

std::string brand(const CpuWords &words) {
    std::string text;
    for (std::uint32_t leaf = kExtended + 2; leaf <= kExtended + 4; leaf++) {
        const CpuidLeaf l = words.get(leaf);
        for (std::uint32_t reg : {l.eax, l.ebx, l.ecx, l.edx}) {
            for (int byte = 0; byte < 4; byte++) text += static_cast<char>((reg >> (8 * byte)) & 0xff);
        }
    }
    text.resize(std::strlen(text.c_str()));
    const auto first = text.find_first_not_of(' ');
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

}  // namespace

CpuidLeaf CpuWords::get(std::uint32_t leaf, std::uint32_t subleaf) const {
    // Above the highest leaf a CPU returns other data (Intel: its highest
    // basic leaf's), never the features asked for.
    const std::uint32_t base = leaf & kExtended;
    if (leaf != base) {
        const CpuidLeaf highest = get(base);
        if (leaf > highest.eax) return {leaf, subleaf};
    }
    for (const CpuidLeaf &l : leaves) {
        if (l.leaf == leaf && l.subleaf == subleaf) return l;
    }
    return {leaf, subleaf};
}

const char *target_name(Target target) {
    switch (target) {
#define MSDA_TIER(id, name) \
    case Target::id: return name;
        MSDA_FOR_EACH_X86_TIER(MSDA_TIER)
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
    for (const Feature &feature : kFeatures) {
        if (feature.tier <= target) names.emplace_back(feature.name);
    }
    return names;
}

std::vector<std::string> missing_features(const CpuWords &words, Target target) {
    std::vector<std::string> names;
    for (const Feature &feature : kFeatures) {
        if (feature.tier <= target && !has(words, feature)) names.emplace_back(feature.name);
    }
    return names;
}

Target best_target(const CpuWords &words) {
    Target best = static_cast<Target>(0);
    for (int tier = 1; tier < kTargetCount; tier++) {
        if (missing_features(words, static_cast<Target>(tier)).empty()) best = static_cast<Target>(tier);
    }
    return best;
}

Signature signature(const CpuWords &words) {
    const std::uint32_t eax = words.get(1).eax;
    Signature result;
    result.vendor = vendor(words);
    result.family = (eax >> 8) & 0xf;
    result.model = (eax >> 4) & 0xf;
    result.stepping = eax & 0xf;
    if (result.family == 0xf) result.family += (eax >> 20) & 0xff;
    if (result.family == 0x6 || result.family >= 0xf) result.model += ((eax >> 16) & 0xf) << 4;
    return result;
}

std::string describe_cpu(const CpuWords &words) {
    if (words.leaves.empty()) return "not an x86-64 CPU (no cpuid)";
    const Signature cpu = signature(words);
    char text[96];
    std::snprintf(text, sizeof text, "%s family 0x%x model 0x%x stepping %u", cpu.vendor.c_str(), cpu.family,
                  cpu.model, cpu.stepping);
    const std::string name = brand(words);
    return name.empty() ? text : text + (": " + name);
}

CpuWords read_this_cpu() {
    CpuWords words;
#if defined(__x86_64__)
    auto read = [&](std::uint32_t leaf, std::uint32_t subleaf) {
        CpuidLeaf l{leaf, subleaf};
        __cpuid_count(leaf, subleaf, l.eax, l.ebx, l.ecx, l.edx);
        words.leaves.push_back(l);
    };
    read(0, 0);
    const std::uint32_t highest = words.leaves[0].eax;
    if (highest >= 1) read(1, 0);
    if (highest >= 7) {
        read(7, 0);
        read(7, 1);
    }
    if (highest >= 0xd) read(0xd, 0);
    read(kExtended, 0);
    const std::uint32_t highest_extended = words.leaves.back().eax;
    for (std::uint32_t leaf = kExtended + 1; leaf <= std::min(highest_extended, kExtended + 4); leaf++) {
        read(leaf, 0);
    }
    // xgetbv raises #UD unless the OS has set CR4.OSXSAVE (cpuid 1 ecx 27).
    if ((words.get(1).ecx >> 27) & 1) {
        std::uint32_t low = 0, high = 0;
        __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
        words.xcr0 = (std::uint64_t{high} << 32) | low;
    }
#endif
    return words;
}

std::string format_words(const CpuWords &words) {
    std::string text;
    char line[128];
    for (const CpuidLeaf &l : words.leaves) {
        std::snprintf(line, sizeof line, "leaf 0x%08x sub %u: eax=%08x ebx=%08x ecx=%08x edx=%08x\n", l.leaf,
                      l.subleaf, l.eax, l.ebx, l.ecx, l.edx);
        text += line;
    }
    if (words.xcr0) {
        std::snprintf(line, sizeof line, "xgetbv 0: eax=%08x edx=%08x\n", static_cast<unsigned>(*words.xcr0),
                      static_cast<unsigned>(*words.xcr0 >> 32));
        text += line;
    }
    return text;
}

CpuWords parse_words(std::string_view text) {
    CpuWords words;
    int number = 0;
    while (!text.empty()) {
        const std::size_t end = std::min(text.find('\n'), text.size());
        const std::string line(text.substr(0, end));
        text.remove_prefix(std::min(end + 1, text.size()));
        number++;
        if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') {
            continue;
        }
        CpuidLeaf l;
        unsigned low = 0, high = 0;
        char rest = 0;
        if (std::sscanf(line.c_str(), "leaf %x sub %u: eax=%x ebx=%x ecx=%x edx=%x %c", &l.leaf, &l.subleaf, &l.eax,
                        &l.ebx, &l.ecx, &l.edx, &rest) == 6) {
            words.leaves.push_back(l);
        } else if (std::sscanf(line.c_str(), "xgetbv 0: eax=%x edx=%x %c", &low, &high, &rest) == 2) {
            words.xcr0 = (std::uint64_t{high} << 32) | low;
        } else {
            throw std::invalid_argument("line " + std::to_string(number) +
                                        ": expected \"leaf 0x... sub N: eax=... ebx=... ecx=... edx=...\" or "
                                        "\"xgetbv 0: eax=... edx=...\", got \"" + line + "\"");
        }
    }
    return words;
}

}  // namespace msda::detail::x86
