#include "validate.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <sstream>

#include "backends/backends.h"

namespace msda::detail {

void fail(const std::string &tensor, const std::string &what) {
    throw ValueError("msda: " + tensor + ": " + what);
}

void fail_dtype(const std::string &tensor, const std::string &what) {
    throw TypeError("msda: " + tensor + ": " + what);
}

namespace {

constexpr std::int64_t kIndexLimit = std::numeric_limits<std::int32_t>::max();

// Dimension names of each tensor, in the order of its shape.
const char *const kValueDims[2][4] = {{"B", "L", "N_h", "C_h"}, {"B", "N_h", "L", "C_h"}};
const char *const kLocationDims[2][6] = {{"B", "N_q", "N_h", "N_l", "N_p", "2"},
                                         {"B", "2", "N_q", "N_h", "N_l", "N_p"}};
const char *const kWeightDims[5] = {"B", "N_q", "N_h", "N_l", "N_p"};
const char *const kOutputDims[3] = {"B", "N_q", "N_h*C_h"};

const char *value_layout_name(ValueLayout layout) {
    return layout == ValueLayout::BLNC ? "BLNC (B, L, N_h, C_h)" : "BNLC (B, N_h, L, C_h)";
}
const char *locations_layout_name(LocationsLayout layout) {
    return layout == LocationsLayout::BQHLP2 ? "BQHLP2 (B, N_q, N_h, N_l, N_p, 2)"
                                             : "B2QHLP (B, 2, N_q, N_h, N_l, N_p)";
}

std::string shape_string(const TensorView &t) {
    std::ostringstream out;
    out << "(";
    for (int d = 0; d < std::min(t.rank, kMaxRank); d++) out << (d ? ", " : "") << t.shape[d];
    out << (t.rank == 1 ? ",)" : ")");
    return out.str();
}

// What one dimension of a tensor must be, and where that number comes from.
struct Expected {
    std::int64_t size;
    const char *source;  // e.g. "N_h of value"
};

// What the tensor should be is described only when it is not: the checks
// of a call that passes allocate nothing (Plan's promise).
template <typename Describe>
void check_present(const TensorView &t, const char *name, int rank, const Describe &describe) {
    if (!t.present()) fail(name, "missing: expected a tensor of shape " + describe());
    if (t.rank < 0 || t.rank > kMaxRank || t.rank != rank) {
        const std::string shape_desc = describe();
        if (t.rank < 0 || t.rank > kMaxRank) {
            fail(name, "rank " + std::to_string(t.rank) + " is outside 0 to " + std::to_string(kMaxRank) +
                           "; expected rank " + std::to_string(rank) + " " + shape_desc);
        }
        fail(name, "expected rank " + std::to_string(rank) + " " + shape_desc + ", got rank " +
                       std::to_string(t.rank) + " with shape " + shape_string(t));
    }
    for (int d = 0; d < t.rank; d++) {
        if (t.shape[d] < 0) {
            fail(name, "dimension " + std::to_string(d) + " has negative extent " +
                           std::to_string(t.shape[d]));
        }
    }
}

void check_present(const TensorView &t, const char *name, int rank, const char *shape_desc) {
    check_present(t, name, rank, [&] { return std::string(shape_desc); });
}

// why: the reason, "the dtype of <of>".
void check_dtype(const TensorView &t, const char *name, DType expected, const char *of) {
    if (t.dtype != expected) {
        fail_dtype(name, std::string("expected dtype ") + dtype_name(expected) + " (the dtype of " + of + "), got " +
                       dtype_name(t.dtype));
    }
}

bool is_storage_dtype(DType dtype) {
    return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f64;
}

void check_storage_dtype(const TensorView &t, const char *name) {
    if (!is_storage_dtype(t.dtype)) {
        fail_dtype(name, std::string("expected dtype float32, float16, bfloat16 or float64, got ") +
                             dtype_name(t.dtype));
    }
}

// The locations' dtype that goes with a storage dtype: float32 or the
// storage dtype, and float64 with float64 (a float32 location would be
// rounded before the float64 arithmetic). What is wrong with a pair, or "".
std::string locations_mismatch(DType storage, DType locations) {
    if (storage == DType::f64 && locations != DType::f64) return "expected dtype float64 (the dtype of value)";
    if (locations != DType::f32 && locations != storage) {
        return std::string("expected dtype float32 or the dtype of value (") + dtype_name(storage) + ")";
    }
    return "";
}

void check_dims(const TensorView &t, const char *name, const char *const *dim_names,
                const Expected *expected) {
    for (int d = 0; d < t.rank; d++) {
        if (expected[d].source == nullptr) continue;
        if (t.shape[d] != expected[d].size) {
            fail(name, "dimension " + std::to_string(d) + " (" + dim_names[d] + ") is " +
                           std::to_string(t.shape[d]) + ", expected " +
                           std::to_string(expected[d].size) + " (" + expected[d].source +
                           "); shape is " + shape_string(t));
        }
    }
}

// One tensor's extent of a size several tensors share.
struct SizeSource {
    const char *tensor;
    int dim;
    std::int64_t extent;
};

// The tensors that share `size` (B, N_h, ...) must agree on it. Where they
// do not, the one that disagrees with the others' consensus is named (the
// extent most of them have); where no extent has a majority, every tensor
// is named with its extent, as no one of them is the odd one out.
void check_consensus(const char *size, std::initializer_list<SizeSource> sources) {
    const SizeSource *majority = nullptr;
    int majority_count = 0;
    bool tied = false;
    for (const SizeSource &candidate : sources) {
        int count = 0;
        for (const SizeSource &other : sources) count += other.extent == candidate.extent;
        if (count > majority_count) {
            majority = &candidate, majority_count = count, tied = false;
        } else if (count == majority_count && candidate.extent != majority->extent) {
            tied = true;
        }
    }
    if (majority_count == static_cast<int>(sources.size())) return;
    // "a", "a and b", "a, b and c".
    auto listed = [](const std::vector<std::string> &items) {
        std::string text;
        for (std::size_t i = 0; i < items.size(); ++i) {
            text += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
        }
        return text;
    };
    if (tied) {
        std::vector<std::string> names, extents;
        for (const SizeSource &s : sources) {
            names.push_back(s.tensor);
            extents.push_back(std::string(s.tensor) + "'s dimension " + std::to_string(s.dim) + " is " +
                              std::to_string(s.extent));
        }
        fail(listed(names), std::string("disagree on ") + size + ": " + listed(extents) + "; they must be equal");
    }
    std::vector<std::string> agreeing;
    for (const SizeSource &s : sources) {
        if (s.extent == majority->extent) agreeing.push_back(s.tensor);
    }
    for (const SizeSource &s : sources) {
        if (s.extent == majority->extent) continue;
        fail(s.tensor, "dimension " + std::to_string(s.dim) + " (" + size + ") is " + std::to_string(s.extent) +
                           ", expected " + std::to_string(majority->extent) + " (" + size + " of " + listed(agreeing) +
                           ")");
    }
}

// Data, extents and strides the generated code can address: data present
// when there are elements, extents and strides within 32-bit buffer fields.
// The batch stride is exempt where the tensor has a batch dimension: a call
// whose batch stride does not fit runs one batch element at a time.
void check_addressable(const TensorView &t, const char *name, bool has_batch = true) {
    // Element count and byte reach without overflow, so that an absurd shape
    // cannot wrap around to look empty or small.
    bool empty = false;
    for (int d = 0; d < t.rank; d++) empty = empty || t.shape[d] == 0;
    std::int64_t count = 1, reach = 0;
    for (int d = 0; d < t.rank && !empty; d++) {
        std::int64_t extent_reach = 0;
        if (__builtin_mul_overflow(count, t.shape[d], &count) ||
            __builtin_mul_overflow(t.shape[d] - 1, std::abs(t.strides[d]), &extent_reach) ||
            __builtin_add_overflow(reach, extent_reach, &reach) ||
            reach > std::numeric_limits<std::int64_t>::max() / 8) {
            fail(name, "shape " + shape_string(t) + " with its strides spans more memory than can "
                       "be addressed");
        }
    }
    if (t.numel() > 0 && t.data == nullptr) {
        fail(name, "data is null but the tensor has " + std::to_string(t.numel()) + " elements");
    }
    for (int d = 0; d < t.rank; d++) {
        const bool stride_unbounded = has_batch && d == 0;
        if (t.shape[d] > kIndexLimit ||
            (!stride_unbounded && (t.strides[d] > kIndexLimit || t.strides[d] < -kIndexLimit))) {
            fail(name, "dimension " + std::to_string(d) + " (extent " + std::to_string(t.shape[d]) +
                           ", stride " + std::to_string(t.strides[d]) +
                           ") exceeds what one call can address (2^31 - 1 elements per extent, "
                           "and per stride except the batch stride)");
        }
    }
}

// A tensor with no elements has no stride to respect (torch hands in empty
// gradients expanded from one element, stride 0, and calls them contiguous).
void check_dense_channels(const TensorView &t, const char *name, int dim) {
    if (t.numel() > 0 && t.shape[dim] > 1 && t.strides[dim] != 1) {
        fail(name, std::string("the channel dimension (") + (t.rank == 3 ? "N_h*C_h" : "C_h") +
                       ") must be contiguous (stride 1), got stride " + std::to_string(t.strides[dim]));
    }
}

// An output must not write one element through two indices.
void check_no_self_overlap(const TensorView &t, const char *name) {
    if (t.numel() <= 1) return;
    int order[kMaxRank];
    int count = 0;
    for (int d = 0; d < t.rank; d++) {
        if (t.shape[d] > 1) order[count++] = d;
    }
    std::sort(order, order + count, [&](int a, int b) {
        return std::abs(t.strides[a]) < std::abs(t.strides[b]);
    });
    std::int64_t reach = 1;  // elements spanned by the dimensions so far
    for (int i = 0; i < count; i++) {
        std::int64_t stride = std::abs(t.strides[order[i]]);
        if (stride < reach) {
            fail(name, "its strides make elements overlap (an output must give every element its "
                       "own memory); shape " + shape_string(t));
        }
        reach = stride * t.shape[order[i]];
    }
}

struct Named {
    const TensorView *tensor;
    const char *name;
};

// A call's tensors, a few at most: a fixed array, no heap.
struct NamedList {
    static constexpr int kCapacity = 8;
    Named items[kCapacity] = {};
    int count = 0;

    NamedList() = default;
    NamedList(std::initializer_list<Named> named) {
        for (const Named &n : named) push_back(n);
    }
    void push_back(const Named &n) { items[count++] = n; }
    const Named *begin() const { return items; }
    const Named *end() const { return items + count; }
    std::size_t size() const { return static_cast<std::size_t>(count); }
    const Named &operator[](std::size_t i) const { return items[i]; }
};

// Where a tensor's elements lie: bytes [begin, end) of host or CUDA
// memory (root null: one address space) or of an OpenCL buffer that is no
// sub-buffer (root).
struct Span {
    const void *root = nullptr;
    std::uint64_t begin = 0, end = 0;
};

Span span_of(const Named &named, const CheckedCall &call) {
    const TensorView &t = *named.tensor;
    if (!t.present() || t.numel() == 0) return {};
    const Reach reach = reach_of(t);
    const std::int64_t size = static_cast<std::int64_t>(dtype_size(t.dtype));
    Span span;
    std::uint64_t base = reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset;
    if (t.device_type != DeviceType::cpu) {
        const MemorySpan memory = call.backend->span(t, named.name);
        span.root = memory.root;
        base = memory.base;
    }
    span.begin = base + reach.low * size;
    span.end = base + (reach.high + 1) * size;
    return span;
}

void check_disjoint(const NamedList &outputs, const NamedList &inputs, const CheckedCall &call) {
    // Each span once (a device tensor's asks its backend, which may ask the
    // device for its parent buffer).
    Span output_spans[NamedList::kCapacity], input_spans[NamedList::kCapacity];
    for (std::size_t i = 0; i < outputs.size(); i++) output_spans[i] = span_of(outputs[i], call);
    for (std::size_t i = 0; i < inputs.size(); i++) input_spans[i] = span_of(inputs[i], call);
    for (std::size_t i = 0; i < outputs.size(); i++) {
        const Span &out = output_spans[i];
        if (out.begin == out.end) continue;
        auto overlaps = [&](const Span &s) {
            return s.root == out.root && s.begin < s.end && s.begin < out.end && out.begin < s.end;
        };
        for (std::size_t j = 0; j < inputs.size(); j++) {
            if (overlaps(input_spans[j])) {
                fail(outputs[i].name, std::string("its memory overlaps ") + inputs[j].name +
                                          "; outputs must not alias inputs");
            }
        }
        for (std::size_t j = i + 1; j < outputs.size(); j++) {
            if (overlaps(output_spans[j])) {
                fail(outputs[i].name, std::string("its memory overlaps ") + outputs[j].name +
                                          "; outputs must not alias each other");
            }
        }
    }
}

std::int64_t read_integer(const TensorView &t, std::int64_t offset) {
    const char *first = host_address(t);
    if (t.dtype == DType::i32) return reinterpret_cast<const std::int32_t *>(first)[offset];
    return reinterpret_cast<const std::int64_t *>(first)[offset];
}

// Where a tensor is, for messages.
std::string where(const TensorView &t) {
    const Backend *backend = backend_of(t.device_type);
    if (t.device_type == DeviceType::cpu || backend == nullptr) return "a host tensor";
    return std::string("on ") + backend->name() + " device " + std::to_string(t.device_id);
}

bool is_device(const TensorView &t) { return t.device_type != DeviceType::cpu; }

void check_device_code(const TensorView &t, const char *name) {
    const Backend *backend = backend_of(t.device_type);
    if (backend == nullptr) {
        fail(name, "has device type " + std::to_string(static_cast<int>(t.device_type)) +
                       ", which msda does not know (DLPack's codes it takes: 1 CPU, 2 CUDA, 4 OpenCL)");
    }
    if (t.byte_offset < 0) fail(name, "byte_offset is negative (" + std::to_string(t.byte_offset) + ")");
    if (is_device(t) && t.device_id < 0) {
        fail(name, std::string("is on ") + backend->name() + " device " + std::to_string(t.device_id) +
                       "; a device ordinal is 0 or more");
    }
}

// The call's device: every tensor but the level tables on the one value
// is on; the level tables there or on the host. Outputs may be absent.
void resolve_device(CheckedCall &call, const NamedList &tensors, const NamedList &tables,
                    const Options &options) {
    const Named *first = nullptr;
    for (const Named &named : tensors) {
        const TensorView &t = *named.tensor;
        if (!t.present()) continue;
        check_device_code(t, named.name);
        if (first == nullptr) {
            first = &named;
        } else if (t.device_type != first->tensor->device_type || t.device_id != first->tensor->device_id) {
            fail(named.name, "is " + where(t) + " but " + first->name + " is " + where(*first->tensor) +
                                 "; the tensors of a call are on one device (spatial_shapes and "
                                 "level_start_index may also be host tensors)");
        }
    }
    const bool on_device = first != nullptr && is_device(*first->tensor);
    for (const Named &named : tables) {
        const TensorView &t = *named.tensor;
        if (!t.present()) continue;
        check_device_code(t, named.name);
        if (is_device(t) && (!on_device || t.device_type != first->tensor->device_type ||
                             t.device_id != first->tensor->device_id)) {
            fail(named.name, "is " + where(t) + " but " + (first ? first->name : "value") + " is " +
                                 (first ? where(*first->tensor) : "absent") +
                                 "; the level tables are host tensors or on the call's device");
        }
    }
    call.device_tensors = on_device;
    call.backend = on_device ? backend_of(first->tensor->device_type) : &backend_for(options.device);
    call.device = call.backend->device();
    call.ordinal = on_device ? first->tensor->device_id : -1;
}

// Each level table's name, rank and shape, for messages.
struct TableShape {
    const char *name;
    int rank;
    const char *shape;
};
constexpr TableShape kTables[] = {{"spatial_shapes", 2, "(N_l, 2) of rows (H, W)"},
                                  {"level_start_index", 1, "(N_l,)"}};

void check_table_present(const TensorView &t, LevelTableKind kind) {
    const TableShape &table = kTables[static_cast<int>(kind)];
    check_present(t, table.name, table.rank, table.shape);
}

void check_integer_dtype(const TensorView &t, const char *name) {
    if (t.dtype != DType::i32 && t.dtype != DType::i64) {
        fail_dtype(name, std::string("expected dtype int32 or int64, got ") + dtype_name(t.dtype));
    }
}

void check_options(const Options &options) {
    const int op = static_cast<int>(options.op), rounding = static_cast<int>(options.rounding);
    if (op < 0 || op > 1) fail("options", "op must be msda or gka");
    if (rounding < 0 || rounding > 1) fail("options", "rounding must be floor or nearest");
    const int value_layout = static_cast<int>(options.value_layout);
    const int locations_layout = static_cast<int>(options.locations_layout);
    if (value_layout < 0 || value_layout > 1) fail("options", "value_layout must be BLNC or BNLC");
    if (locations_layout < 0 || locations_layout > 1) {
        fail("options", "locations_layout must be BQHLP2 or B2QHLP");
    }
    if (options.padding_mode != PaddingMode::zeros && options.padding_mode != PaddingMode::border) {
        fail("options", "padding_mode must be zeros or border");
    }
    const int relayout = static_cast<int>(options.relayout);
    if (relayout < 0 || relayout > 2) fail("options", "relayout must be automatic, always or never");
    const int sample_order = static_cast<int>(options.sample_order);
    if (sample_order < 0 || sample_order > 2) {
        fail("options", "sample_order must be automatic, by_level or by_query");
    }
    const int device = static_cast<int>(options.device);
    if (device < 0 || device > 2) fail("options", "device must be cpu, opencl or cuda");
}

// value, spatial_shapes, level_start_index, attention_weights and
// sampling_locations: the inputs both operators read.
ProblemSize check_inputs(const TensorView &value, const TensorView &spatial_shapes_view,
                   const TensorView &level_start_index_view, const TensorView &sampling_locations,
                   const TensorView &attention_weights, const Options &options, const HostTables &tables,
                   CheckedCall &call) {
    LevelTable &levels = call.levels;
    check_present(value, "value", 4, value_layout_name(options.value_layout));
    check_storage_dtype(value, "value");
    check_addressable(value, "value");
    ProblemSize s;
    s.dtype = value.dtype;
    const bool blnc = options.value_layout == ValueLayout::BLNC;
    s.batch = value.shape[0];
    s.value_length = value.shape[blnc ? 1 : 2];
    s.heads = value.shape[blnc ? 2 : 1];
    s.channels = value.shape[3];
    if (s.heads < 1) fail("value", "N_h must be at least 1, got " + std::to_string(s.heads));
    if (s.channels < 1) fail("value", "C_h must be at least 1, got " + std::to_string(s.channels));
    check_dense_channels(value, "value", 3);

    check_table_present(spatial_shapes_view, LevelTableKind::spatial_shapes);
    check_table_present(level_start_index_view, LevelTableKind::level_start_index);
    check_present(attention_weights, "attention_weights", 5, "(B, N_q, N_h, N_l, N_p)");
    check_present(sampling_locations, "sampling_locations", 6, locations_layout_name(options.locations_layout));
    // The sizes the inputs share, each named after the tensors that agree.
    const bool bqhlp2 = options.locations_layout == LocationsLayout::BQHLP2;
    const int q = bqhlp2 ? 1 : 2;  // sampling_locations' N_q; N_h, N_l and N_p follow it
    const TensorView &w = attention_weights, &x = sampling_locations;
    check_consensus("B", {{"value", 0, value.shape[0]}, {"attention_weights", 0, w.shape[0]},
                          {"sampling_locations", 0, x.shape[0]}});
    check_consensus("N_h", {{"value", blnc ? 2 : 1, s.heads}, {"attention_weights", 2, w.shape[2]},
                            {"sampling_locations", q + 1, x.shape[q + 1]}});
    check_consensus("N_q", {{"attention_weights", 1, w.shape[1]}, {"sampling_locations", q, x.shape[q]}});
    check_consensus("N_l", {{"spatial_shapes", 0, spatial_shapes_view.shape[0]},
                            {"level_start_index", 0, level_start_index_view.shape[0]},
                            {"attention_weights", 3, w.shape[3]},
                            {"sampling_locations", q + 2, x.shape[q + 2]}});
    check_consensus("N_p", {{"attention_weights", 4, w.shape[4]}, {"sampling_locations", q + 3, x.shape[q + 3]}});
    check_integer_dtype(spatial_shapes_view, "spatial_shapes");
    check_addressable(spatial_shapes_view, "spatial_shapes", false);
    const TensorView &spatial_shapes = tables.spatial_shapes;
    s.levels = spatial_shapes.shape[0];
    if (s.levels < 1) fail("spatial_shapes", "needs at least one level (N_l >= 1), got 0 rows");
    if (spatial_shapes.shape[1] != 2) {
        fail("spatial_shapes", "dimension 1 is " + std::to_string(spatial_shapes.shape[1]) +
                                   ", expected 2 (H, W)");
    }
    check_integer_dtype(level_start_index_view, "level_start_index");
    check_addressable(level_start_index_view, "level_start_index", false);
    const TensorView &level_start_index = tables.level_start_index;
    const Expected start_dims[1] = {{s.levels, "N_l, the rows of spatial_shapes"}};
    const char *const start_names[1] = {"N_l"};
    check_dims(level_start_index, "level_start_index", start_names, start_dims);

    // The level table: each level at least 1 x 1, level_start_index the
    // exclusive prefix sum, and the total equal to value's L.
    levels.shapes.resize(2 * s.levels);
    levels.starts.resize(s.levels);
    std::int64_t total = 0, widest = 0;
    for (std::int64_t l = 0; l < s.levels; l++) {
        std::int64_t height = read_integer(spatial_shapes, l * spatial_shapes.strides[0]);
        std::int64_t width = read_integer(spatial_shapes, l * spatial_shapes.strides[0] +
                                                              spatial_shapes.strides[1]);
        if (height < 1 || width < 1 || height > kIndexLimit || width > kIndexLimit) {
            fail("spatial_shapes", "level " + std::to_string(l) + " is " + std::to_string(height) +
                                       " x " + std::to_string(width) +
                                       "; every level needs 1 <= H, W <= 2^31 - 1");
        }
        std::int64_t start = read_integer(level_start_index, l * level_start_index.strides[0]);
        if (start != total) {
            fail("level_start_index", "entry " + std::to_string(l) + " is " + std::to_string(start) +
                                          ", expected " + std::to_string(total) +
                                          " (the exclusive prefix sum of H*W over spatial_shapes)");
        }
        total += height * width;
        widest = std::max(widest, width);
        if (total > kIndexLimit) {
            fail("spatial_shapes", "the levels hold more than 2^31 - 1 rows in all");
        }
        levels.shapes[2 * l] = static_cast<std::int32_t>(height);
        levels.shapes[2 * l + 1] = static_cast<std::int32_t>(width);
        levels.starts[l] = static_cast<std::int32_t>(start);
    }
    if (total != s.value_length) {
        fail("value", "dimension " + std::to_string(blnc ? 1 : 2) + " (L) is " +
                          std::to_string(s.value_length) + ", expected " + std::to_string(total) +
                          " (the sum of H*W over spatial_shapes)");
    }
    // Corner rows are computed in 32 bits: row0 + W + 1 must not overflow.
    if (total + widest + 2 > kIndexLimit) {
        fail("value", "L = " + std::to_string(total) + " is too large for one call");
    }

    check_dtype(attention_weights, "attention_weights", value.dtype, "value");
    check_addressable(attention_weights, "attention_weights");
    s.queries = attention_weights.shape[1];
    s.points = attention_weights.shape[4];
    if (s.points < 1) fail("attention_weights", "N_p must be at least 1, got 0");
    const Expected weight_dims[5] = {{s.batch, "B of value"},
                                     {0, nullptr},
                                     {s.heads, "N_h of value"},
                                     {s.levels, "N_l, the rows of spatial_shapes"},
                                     {0, nullptr}};
    check_dims(attention_weights, "attention_weights", kWeightDims, weight_dims);

    if (const std::string wrong = locations_mismatch(value.dtype, sampling_locations.dtype); !wrong.empty()) {
        fail_dtype("sampling_locations", wrong + ", got " + dtype_name(sampling_locations.dtype));
    }
    check_addressable(sampling_locations, "sampling_locations");
    const Expected xy = {2, "the (x, y) pair"};
    const Expected batch = {s.batch, "B of value"}, queries = {s.queries, "N_q of attention_weights"},
                   heads = {s.heads, "N_h of value"},
                   level_count = {s.levels, "N_l, the rows of spatial_shapes"},
                   points = {s.points, "N_p of attention_weights"};
    if (options.locations_layout == LocationsLayout::BQHLP2) {
        const Expected dims[6] = {batch, queries, heads, level_count, points, xy};
        check_dims(sampling_locations, "sampling_locations", kLocationDims[0], dims);
    } else {
        const Expected dims[6] = {batch, xy, queries, heads, level_count, points};
        check_dims(sampling_locations, "sampling_locations", kLocationDims[1], dims);
    }
    s.locations_dtype = sampling_locations.dtype;
    return s;
}

// output and grad_output: (B, N_q, N_h*C_h), head-major, channels dense.
void check_head_major(const TensorView &t, const char *name, const ProblemSize &s, DType dtype) {
    check_present(t, name, 3, "(B, N_q, N_h*C_h)");
    // C_h is value's alone, so neither side of a mismatch is the odd one
    // out: both are named.
    if (t.shape[2] != s.heads * s.channels) {
        fail(std::string("value and ") + name,
             "disagree on N_h*C_h: value's N_h x C_h is " + std::to_string(s.heads) + " x " +
                 std::to_string(s.channels) + " = " + std::to_string(s.heads * s.channels) + " and " + name +
                 "'s dimension 2 is " + std::to_string(t.shape[2]) + "; they must be equal");
    }
    check_dtype(t, name, dtype, "value");
    check_addressable(t, name);
    const Expected dims[3] = {{s.batch, "B of value"},
                              {s.queries, "N_q of attention_weights"},
                              {s.heads * s.channels, "N_h*C_h of value"}};
    check_dims(t, name, kOutputDims, dims);
    check_dense_channels(t, name, 2);
}

// A gradient has the shape, layout and dtype of the tensor it belongs to.
void check_gradient(const TensorView &grad, const char *name, const TensorView &of,
                    const char *of_name, const char *const *dim_names) {
    check_present(grad, name, of.rank, [&] { return std::string("the shape of ") + of_name + " " + shape_string(of); });
    check_dtype(grad, name, of.dtype, of_name);
    check_addressable(grad, name);
    Expected dims[kMaxRank];
    for (int d = 0; d < of.rank; d++) dims[d] = {of.shape[d], of_name};
    check_dims(grad, name, dim_names, dims);
    check_no_self_overlap(grad, name);
}

// The inputs both operators read, as outputs must not overlap them.
template <typename Args>
NamedList shared_inputs(const Args &args) {
    return {{&args.value, "value"},
            {&args.spatial_shapes, "spatial_shapes"},
            {&args.level_start_index, "level_start_index"},
            {&args.sampling_locations, "sampling_locations"},
            {&args.attention_weights, "attention_weights"}};
}

template <typename Args>
ProblemSize check_shared_inputs(const Args &args, const Options &options, const HostTables &tables,
                                CheckedCall &call) {
    return check_inputs(args.value, args.spatial_shapes, args.level_start_index, args.sampling_locations,
                        args.attention_weights, options, tables, call);
}

// Every tensor of a call but the level tables, value first.
NamedList call_tensors(const ForwardArgs &args) {
    return {{&args.value, "value"},
            {&args.sampling_locations, "sampling_locations"},
            {&args.attention_weights, "attention_weights"},
            {&args.output, "output"}};
}
NamedList call_tensors(const BackwardArgs &args) {
    return {{&args.value, "value"},
            {&args.sampling_locations, "sampling_locations"},
            {&args.attention_weights, "attention_weights"},
            {&args.grad_output, "grad_output"},
            {&args.grad_value, "grad_value"},
            {&args.grad_sampling_locations, "grad_sampling_locations"},
            {&args.grad_attention_weights, "grad_attention_weights"}};
}

// The call's device, before anything else is read.
template <typename Args>
CheckedCall start_check(const Args &args, const Options &options) {
    check_options(options);
    CheckedCall call;
    resolve_device(call, call_tensors(args),
                   {{&args.spatial_shapes, "spatial_shapes"}, {&args.level_start_index, "level_start_index"}},
                   options);
    return call;
}

// The device tensors' memory, once their shapes are checked; on a GPU
// family, host tensors or not, non-negative strides (Halide's device
// buffers address memory upwards from their first element).
template <typename Args>
void check_device_tensors(const Args &args, const CheckedCall &call) {
    if (!is_gpu(call.backend->family())) return;
    const std::string gpu = call.backend->name();
    const ProblemSize &size = call.size;
    std::int64_t samples = 1;
    bool overflow = false;
    for (std::int64_t factor : {size.batch, size.queries, size.heads, size.levels, size.points}) {
        overflow = overflow || __builtin_mul_overflow(samples, factor, &samples);
    }
    if (overflow || samples > kIndexLimit) {
        fail("sampling_locations", "holds " + (overflow ? std::string("more than 2^63") : std::to_string(samples)) +
                                       " samples (B * N_q * N_h * N_l * N_p); the " +
                                       gpu + " code counts samples with 32-bit integers (at most 2^31 - 1); "
                                       "compute on the CPU, whose code counts with 64-bit integers");
    }
    for (const Named &named : call_tensors(args)) {
        const TensorView &t = *named.tensor;
        if (!t.present()) continue;
        for (int d = 0; d < t.rank; d++) {
            if (t.shape[d] > 1 && t.strides[d] < 0) {
                fail(named.name, "dimension " + std::to_string(d) + " has stride " + std::to_string(t.strides[d]) +
                                     "; the OpenCL and CUDA code needs non-negative strides (pass a copy, or "
                                     "compute on the CPU)");
            }
        }
        // The GPU kernels index a tensor with 32-bit integers from its
        // first element (a batch stride too wide for one call is split off
        // by the runtime, one batch element per call).
        const bool split_batches = t.rank > 0 && (t.strides[0] > kIndexLimit || t.strides[0] < -kIndexLimit);
        std::int64_t span = 1;
        for (int d = split_batches ? 1 : 0; d < t.rank; d++) {
            if (t.shape[d] == 0) span = 0;
            if (span > 0) span += (t.shape[d] - 1) * std::abs(t.strides[d]);
        }
        if (span > kIndexLimit) {
            fail(named.name, "spans " + std::to_string(span) + " elements" +
                                 (split_batches ? " in one batch element" : "") + "; the " + gpu +
                                 " code indexes a tensor with 32-bit integers (at most 2^31 - 1 elements from its "
                                 "first); compute on the CPU, whose code indexes with 64-bit integers");
        }
        if (call.device_tensors) call.backend->check_memory(t, named.name, call.queue);
    }
}

}  // namespace

CheckedCall locate_call(const ForwardArgs &args, const Options &options) { return start_check(args, options); }
CheckedCall locate_call(const BackwardArgs &args, const Options &options) { return start_check(args, options); }

const char *table_name(LevelTableKind kind) { return kTables[static_cast<int>(kind)].name; }

void check_table_view(const TensorView &t, LevelTableKind kind, const CheckedCall &call) {
    const char *name = table_name(kind);
    check_table_present(t, kind);
    check_integer_dtype(t, name);
    check_addressable(t, name, false);
    call.backend->check_memory(t, name, call.queue);
}

Reach reach_of(const TensorView &t) {
    Reach reach;
    for (int d = 0; d < t.rank && d < kMaxRank; d++) {
        const std::int64_t extent_reach = (t.shape[d] - 1) * t.strides[d];
        (extent_reach < 0 ? reach.low : reach.high) += extent_reach;
    }
    return reach;
}

void check_call(const ForwardArgs &args, const Options &options, const HostTables &tables, CheckedCall &call,
                Outputs outputs) {
    call.size = check_shared_inputs(args, options, tables, call);
    const ProblemSize &s = call.size;
    if (outputs == Outputs::required || args.output.present()) {
        check_head_major(args.output, "output", s, args.value.dtype);
        check_no_self_overlap(args.output, "output");
    }
    check_device_tensors(args, call);
    if (outputs == Outputs::required || args.output.present()) {
        check_disjoint({{&args.output, "output"}}, shared_inputs(args), call);
    }
}

void check_call(const BackwardArgs &args, const Options &options, const HostTables &tables, CheckedCall &call,
                Outputs outputs) {
    call.size = check_shared_inputs(args, options, tables, call);
    const ProblemSize &s = call.size;
    check_head_major(args.grad_output, "grad_output", s, args.value.dtype);

    NamedList gradients;
    auto wanted = [&](bool asked, const TensorView &gradient) {
        return asked && (outputs == Outputs::required || gradient.present());
    };
    const int value_layout = static_cast<int>(options.value_layout);
    const int locations_layout = static_cast<int>(options.locations_layout);
    if (wanted(options.grad_value, args.grad_value)) {
        check_gradient(args.grad_value, "grad_value", args.value, "value", kValueDims[value_layout]);
        check_dense_channels(args.grad_value, "grad_value", 3);
        gradients.push_back({&args.grad_value, "grad_value"});
    }
    if (options.op == Operator::gka && args.grad_sampling_locations.present()) {
        fail("grad_sampling_locations", "GKA gives sampling_locations no gradient; leave this view absent");
    }
    if (options.op == Operator::msda && wanted(options.grad_sampling_locations, args.grad_sampling_locations)) {
        check_gradient(args.grad_sampling_locations, "grad_sampling_locations",
                       args.sampling_locations, "sampling_locations",
                       kLocationDims[locations_layout]);
        gradients.push_back({&args.grad_sampling_locations, "grad_sampling_locations"});
    }
    if (wanted(options.grad_attention_weights, args.grad_attention_weights)) {
        check_gradient(args.grad_attention_weights, "grad_attention_weights",
                       args.attention_weights, "attention_weights", kWeightDims);
        gradients.push_back({&args.grad_attention_weights, "grad_attention_weights"});
    }
    check_device_tensors(args, call);
    NamedList inputs = shared_inputs(args);
    inputs.push_back({&args.grad_output, "grad_output"});
    check_disjoint(gradients, inputs, call);
}

void check_plan(const ProblemSize &size, const Options &options) {
    struct Field {
        const char *name;
        std::int64_t value, minimum;
    };
    const Field fields[] = {{"batch", size.batch, 0},        {"value_length", size.value_length, 1},
                            {"heads", size.heads, 1},        {"channels", size.channels, 1},
                            {"levels", size.levels, 1},      {"queries", size.queries, 0},
                            {"points", size.points, 1}};
    for (const Field &f : fields) {
        if (f.value < f.minimum || f.value > kIndexLimit) {
            fail("plan", std::string(f.name) + " is " + std::to_string(f.value) + ", expected " +
                             std::to_string(f.minimum) + " to 2^31 - 1");
        }
    }
    if (!is_storage_dtype(size.dtype)) {
        fail_dtype("plan", std::string("dtype ") + dtype_name(size.dtype) +
                         " is not a storage dtype: expected float32, float16, bfloat16 or float64");
    }
    if (!locations_mismatch(size.dtype, size.locations_dtype).empty()) {
        fail_dtype("plan", std::string("locations_dtype ") + dtype_name(size.locations_dtype) +
                         " does not go with dtype " + dtype_name(size.dtype) + ": expected " +
                         (size.dtype == DType::f64 ? "float64" : "float32 or the storage dtype"));
    }
    check_options(options);
}

void check_matches_plan(const ProblemSize &plan, const ProblemSize &call) {
    struct Field {
        const char *tensor, *name;
        std::int64_t planned, actual;
    };
    const Field fields[] = {
        {"value", "B", plan.batch, call.batch},
        {"value", "L", plan.value_length, call.value_length},
        {"value", "N_h", plan.heads, call.heads},
        {"value", "C_h", plan.channels, call.channels},
        {"spatial_shapes", "N_l", plan.levels, call.levels},
        {"attention_weights", "N_q", plan.queries, call.queries},
        {"attention_weights", "N_p", plan.points, call.points},
    };
    for (const Field &f : fields) {
        if (f.planned != f.actual) {
            fail(f.tensor, std::string(f.name) + " is " + std::to_string(f.actual) +
                               " but the plan was made for " + std::to_string(f.planned));
        }
    }
    const struct {
        const char *tensor;
        DType planned, actual;
    } dtypes[] = {{"value", plan.dtype, call.dtype},
                  {"sampling_locations", plan.locations_dtype, call.locations_dtype}};
    for (const auto &d : dtypes) {
        if (d.planned != d.actual) {
            fail_dtype(d.tensor, std::string("dtype is ") + dtype_name(d.actual) +
                               " but the plan was made for " + dtype_name(d.planned));
        }
    }
}

}  // namespace msda::detail
