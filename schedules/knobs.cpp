// The knob table: names, ranges and meanings (docs/knobs.md is written from
// the same list), and the `knobs` generator parameter's encoding.
#include "knobs.h"

#include <charconv>
#include <stdexcept>

#include "schedules.h"

namespace msda::schedules {

using Halide::Target;

namespace {

// The caches of one core that the CPU family's blocks are sized against
// when no budget is given: on x86-64 those of the cores the schedule was
// first measured on (48 KiB L1d, 2 MiB L2), on ARM those of the Neoverse
// cores of ARM servers (Graviton 2 to 4, Ampere Altra: 64 KiB L1d, 1 MiB L2).
int default_l1(const Target &target) { return target.arch == Target::ARM ? 64 << 10 : 48 << 10; }
int default_l2(const Target &target) { return target.arch == Target::ARM ? 1 << 20 : 2 << 20; }

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    while (!text.empty()) {
        const std::size_t at = text.find(separator);
        parts.push_back(text.substr(0, at));
        if (at == std::string_view::npos) break;
        text.remove_prefix(at + 1);
    }
    return parts;
}

}  // namespace

int Knobs::l1_budget(const Target &target) const { return l1_bytes > 0 ? l1_bytes : default_l1(target); }
int Knobs::l2_budget(const Target &target) const { return l2_bytes > 0 ? l2_bytes : default_l2(target); }

const std::vector<KnobSpec> &knob_specs() {
    static const std::vector<KnobSpec> specs = {
        {"vector_width", Family::cpu, &Knobs::vector_width, 4, 64, true, true,
         "floats a vector (0: the target's natural width)"},
        {"query_tile", Family::cpu, &Knobs::query_tile, 1, 256, false, false,
         "queries a tile of the by-level per-sample tables; a task holds whole tiles"},
        {"tasks_per_batch", Family::cpu, &Knobs::tasks_per_batch, 1, 1024, false, false,
         "parallel tasks a batch element's queries are split into (forward, per-sample gradients)"},
        {"l1_bytes", Family::cpu, &Knobs::l1_bytes, 4096, 1 << 22, false, true,
         "L1d budget: the relayout's block of rows is a third of it (0: 48 KiB x86-64, 64 KiB ARM)"},
        {"l2_bytes", Family::cpu, &Knobs::l2_bytes, 65536, 1 << 28, false, true,
         "L2 budget: the by-level scatter keeps a sixteenth of it of grad_output rows (0: 2 MiB x86-64, 1 MiB "
         "ARM)"},
        {"fill_rows", Family::cpu, &Knobs::fill_rows, 1, 1 << 16, false, false,
         "rows a task of grad_value's zero fill and of the half-precision rounding"},
        {"dot_lanes", Family::cpu, &Knobs::dot_lanes, 1, 64, true, true,
         "lanes of the per-sample gradients' corner-dot partial sums (0: the vector width; GKA at most 8)"},
        {"point_sums", Family::cpu, &Knobs::point_sums, 1, 64, true, true,
         "by-query forward: running sums the points take turns adding into, added at the end (0, or a count that "
         "does not divide N_p: one per point; 1: one sum for every sample)"},
        {"specialize_usual", Family::cpu, &Knobs::specialize_usual, 0, 1, false, false,
         "forward: a second copy of the loops for align_corners and border both off (1)"},
        {"flat_rows", Family::cpu, &Knobs::flat_rows, 0, 1, false, false,
         "forward and per-sample gradients: value's rows addressed by int32 element offsets from the corner "
         "table (1), or each row times the stride in the channel loop (0)"},
        {"unroll_channels", Family::cpu, &Knobs::unroll_channels, 0, 1, false, false,
         "unroll a channel loop of whole vectors (compile-time C_h a multiple of the width)"},
        {"table_stages", Family::cpu, &Knobs::table_stages, 0, 1, false, false,
         "by-query walks (forward, scatter, per-sample gradients): the geometry's stages stored once per (query, "
         "head) (1), or inlined into the corner table's fields (0)"},
        {"table_lanes", Family::cpu, &Knobs::table_lanes, 4, 64, true, true,
         "by-query walks (forward, scatter, per-sample gradients): lanes of the corner table's vectors, whole "
         "levels of points (0: the target's natural width)"},
        {"scatter_levels", Family::cpu, &Knobs::scatter_levels, 0, 1, false, false,
         "by-query scatter: each level of a (batch, head) slice a parallel task of its own, walked level by level "
         "(1), or the slice one task, its levels inside each query (0)"},
        {"points_inner", Family::cpu, &Knobs::points_inner, 0, 1, false, false,
         "by-level forward: a tile's loop order, points innermost (1) or queries innermost (0)"},
        {"channel_threads", Family::gpu, &Knobs::channel_threads, 1, 1024, true, false,
         "threads of a block along channels"},
        {"query_threads", Family::gpu, &Knobs::query_threads, 1, 1024, true, false,
         "queries of a forward (and atomic scatter) block"},
        {"sample_threads", Family::gpu, &Knobs::sample_threads, 1, 1024, true, false,
         "threads (one query each) of a per-sample gradients block"},
        {"row_threads", Family::gpu, &Knobs::row_threads, 1, 1024, true, false,
         "rows of a block of grad_value's zero fill and of the rounding"},
        {"channels_per_thread", Family::gpu, &Knobs::channels_per_thread, 1, 16, true, false,
         "CUDA: channels one thread of the forward and of the atomic scatters computes"},
        {"bound_threads", Family::gpu, &Knobs::bound_threads, 1, 1024, true, false,
         "fixed-point grad_value: threads (one (head, query) each) of a block of the bounds"},
        {"chunk", Family::gpu, &Knobs::chunk, 32, 1 << 16, true, false,
         "fixed-point grad_value: bounds one block takes the largest of"},
        {"reduction_lanes", Family::gpu, &Knobs::reduction_lanes, 1, 32, true, false,
         "fixed-point grad_value: threads that share each level of that maximum (a warp's lanes on CUDA)"},
    };
    return specs;
}

const KnobSpec *find_knob(std::string_view name) {
    for (const KnobSpec &spec : knob_specs()) {
        if (name == spec.name) return &spec;
    }
    return nullptr;
}

void set_knob(Knobs &knobs, std::string_view name, int value) {
    const KnobSpec *spec = find_knob(name);
    if (!spec) throw std::invalid_argument("msda schedules: no knob named \"" + std::string(name) + "\"");
    const bool power_of_two = value > 0 && (value & (value - 1)) == 0;
    const bool in_range = value >= spec->low && value <= spec->high && (!spec->power_of_two || power_of_two);
    if (!in_range && !(spec->zero_means_target && value == 0)) {
        throw std::invalid_argument("msda schedules: knob " + std::string(name) + " = " + std::to_string(value) +
                                    " is out of range: expected " + (spec->zero_means_target ? "0 or " : "") +
                                    (spec->power_of_two ? "a power of two in " : "") + "[" +
                                    std::to_string(spec->low) + ", " + std::to_string(spec->high) + "]");
    }
    knobs.*(spec->field) = value;
}

namespace {

// Applies `knob:value,knob:value` to knobs.
void apply_entry(Knobs &knobs, std::string_view settings, std::string_view whole) {
    for (std::string_view setting : split(settings, ',')) {
        const std::size_t colon = setting.find(':');
        int value = 0;
        const char *end = setting.data() + setting.size();
        if (colon == std::string_view::npos ||
            std::from_chars(setting.data() + colon + 1, end, value).ptr != end || colon + 1 == setting.size()) {
            throw std::invalid_argument("msda schedules: knobs \"" + std::string(whole) + "\": \"" +
                                        std::string(setting) + "\" is not knob:value");
        }
        set_knob(knobs, setting.substr(0, colon), value);
    }
}

bool target_has_class(const Target &target, std::string_view klass, std::string_view whole) {
    if (klass == "base") return true;
    const std::string name(klass);
    // feature_from_name reports an unknown name as an error of its own;
    // check first, so the message names the knobs parameter.
    if (!Target::validate_target_string("host-" + name)) {
        throw std::invalid_argument("msda schedules: knobs \"" + std::string(whole) + "\": \"" + name +
                                    "\" is neither base, all nor a Halide target feature");
    }
    return target.has_feature(Target::feature_from_name(name));
}

}  // namespace

Knobs knobs_for_target(const Target &target, std::string_view encoded) {
    Knobs knobs;
    bool matched = false;
    std::string_view everywhere;
    for (std::string_view entry : split(encoded, '/')) {
        const std::size_t at = entry.find('@');
        if (at == std::string_view::npos) {
            throw std::invalid_argument("msda schedules: knobs \"" + std::string(encoded) + "\": entry \"" +
                                        std::string(entry) + "\" is not CLASS@knob:value,...");
        }
        const std::string_view klass = entry.substr(0, at), settings = entry.substr(at + 1);
        if (klass == "all") {
            everywhere = settings;
            continue;
        }
        // Every class is checked, matched or not, so a typo fails the build.
        const bool has = target_has_class(target, klass, encoded);
        if (has && !matched) {
            apply_entry(knobs, settings, encoded);
            matched = true;
        }
    }
    if (!everywhere.empty()) apply_entry(knobs, everywhere, encoded);
    // A knob of the other family would be ignored: refuse it.
    const Family own = family(target);
    const Knobs defaults;
    for (const KnobSpec &spec : knob_specs()) {
        if (spec.family != own && knobs.*(spec.field) != defaults.*(spec.field)) {
            throw std::invalid_argument("msda schedules: knob " + std::string(spec.name) + " is a " +
                                        (spec.family == Family::cpu ? "CPU" : "GPU") +
                                        " family knob; target " + target.to_string() + " is not of that family");
        }
    }
    return knobs;
}

namespace {
std::string list_knobs(const Knobs &knobs, char assign, const char *separator) {
    const Knobs defaults;
    std::string text;
    for (const KnobSpec &spec : knob_specs()) {
        if (knobs.*(spec.field) == defaults.*(spec.field)) continue;
        if (!text.empty()) text += separator;
        text += std::string(spec.name) + assign + std::to_string(knobs.*(spec.field));
    }
    return text;
}
}  // namespace

std::string encode_knobs(const Knobs &knobs) { return list_knobs(knobs, ':', ","); }
std::string describe_knobs(const Knobs &knobs) { return list_knobs(knobs, '=', " "); }

}  // namespace msda::schedules
