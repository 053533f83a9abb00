#include "cpu_caches.h"

#include <cctype>
#include <cstdlib>
#include <fstream>

namespace msda::detail {

namespace {

constexpr std::int64_t kDefaultL1Data = std::int64_t{48} << 10;
constexpr std::int64_t kDefaultL2 = std::int64_t{2} << 20;
constexpr int kMaxIndices = 16;  // sysfs lists a core's caches as index0, index1, ...

std::optional<std::string> first_line(const std::string &path) {
    std::ifstream file(path);
    std::string line;
    if (!file || !std::getline(file, line)) return std::nullopt;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    return line;
}

}  // namespace

std::optional<std::int64_t> parse_cache_size(std::string_view text) {
    if (text.empty()) return std::nullopt;
    std::int64_t number = 0;
    std::size_t i = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
        number = number * 10 + (text[i] - '0');
        if (number > (std::int64_t{1} << 40)) return std::nullopt;  // no core has a terabyte of cache
    }
    if (i == 0) return std::nullopt;
    int shift = 0;
    if (i < text.size()) {
        switch (text[i]) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        default: return std::nullopt;
        }
        ++i;
    }
    if (i != text.size() || number == 0) return std::nullopt;
    return number << shift;
}

CpuCaches read_cpu_caches(const std::string &directory) {
    CpuCaches caches;
    for (int index = 0; index < kMaxIndices; ++index) {
        const std::string entry = directory + "/index" + std::to_string(index) + "/";
        const std::optional<std::string> level = first_line(entry + "level");
        if (!level) break;
        const std::optional<std::string> type = first_line(entry + "type");
        const std::optional<std::string> size_text = first_line(entry + "size");
        const std::optional<std::int64_t> size = size_text ? parse_cache_size(*size_text) : std::nullopt;
        if (!type || !size) continue;
        if (*level == "1" && (*type == "Data" || *type == "Unified")) caches.l1_data = *size;
        if (*level == "2" && (*type == "Unified" || *type == "Data")) caches.l2 = *size;
    }
    // Each size sysfs did not give takes its default, and the source says so.
    std::string missing, defaults;
    auto fall_back = [&](std::int64_t &size, std::int64_t fallback, const char *name, const char *text) {
        if (size != 0) return;
        size = fallback;
        missing += (missing.empty() ? "" : " and ") + std::string(name);
        defaults += (defaults.empty() ? "" : ", ") + std::string(text);
    };
    fall_back(caches.l1_data, kDefaultL1Data, "L1d", "48 KiB L1d");
    fall_back(caches.l2, kDefaultL2, "L2", "2 MiB L2");
    caches.source =
        missing.empty() ? directory : missing + " not described under " + directory + ": msda's default " + defaults;
    return caches;
}

std::string cpu_caches_directory() {
    const char *emulated = std::getenv("MSDA_CPU_CACHES");
    return emulated != nullptr && *emulated != '\0' ? emulated : "/sys/devices/system/cpu/cpu0/cache";
}

const CpuCaches &cpu_caches() {
    static const CpuCaches caches = read_cpu_caches(cpu_caches_directory());
    return caches;
}

}  // namespace msda::detail
