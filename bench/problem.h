// The canonical benchmark problems: shapes, location distributions, and the
// tensors of one problem in the default layouts (value BLNC, locations
// BQHLP2), float32, options align_corners = false and zeros padding (the
// setting of Deformable DETR's grid_sample path, so every peer computes the
// same thing). The GKA shapes (gka_shapes()) hold the same tensors with the
// locations in absolute pixel coordinates, for msda's GKA operator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace msda_bench {

struct Level {
    std::int64_t height = 0, width = 0;
};

// 64-byte aligned storage for the bench's tensors, as the frameworks msda
// serves allocate theirs (PyTorch's CPU allocator aligns to 64 bytes). A
// std::vector's own data is 16-byte aligned: rows of a head (128 bytes for
// 32 float32 channels) then straddle three cache lines instead of two, a
// cost no framework caller pays (msda's S1 forward measured 1.3x slower).
// A buffer of 2 MiB or more starts on a 2 MiB boundary.
//
// With set_huge_pages(true) (msda_bench --huge-pages) such a buffer is also
// advised onto transparent huge pages (madvise MADV_HUGEPAGE) before it is
// first written, as PyTorch >= 2.2 does with THP_MEM_ALLOC_ENABLE=1 and
// NumPy does by default; this machine's kernel backs a region with 2 MiB
// pages only when so advised. It applies to buffers allocated after it.
void set_huge_pages(bool on);
void *allocate_tensor_bytes(std::size_t bytes);
void free_tensor_bytes(void *memory, std::size_t bytes);

template <typename T>
struct CacheAligned {
    using value_type = T;
    CacheAligned() = default;
    template <typename U>
    CacheAligned(const CacheAligned<U> &) {}
    T *allocate(std::size_t n) { return static_cast<T *>(allocate_tensor_bytes(n * sizeof(T))); }
    void deallocate(T *p, std::size_t n) { free_tensor_bytes(p, n * sizeof(T)); }
    template <typename U>
    bool operator==(const CacheAligned<U> &) const { return true; }
    template <typename U>
    bool operator!=(const CacheAligned<U> &) const { return false; }
};
template <typename T>
using AlignedVector = std::vector<T, CacheAligned<T>>;
using Floats = AlignedVector<float>;

// The operator a shape is measured with: MSDA (bilinear samples at
// normalized locations) or GKA (geometric kernel attention: one value row a
// sample at absolute pixel coordinates, floor rounding, no location
// gradient).
enum class Attention { msda, gka };

struct Shape {
    std::string id;  // S0, S1, M0, M2, X, G, L1; GKA_G, GKA_BEV
    Attention attention = Attention::msda;
    std::int64_t batch = 1, queries = 0, heads = 8, channels = 32, points = 4;
    std::vector<Level> levels;

    std::int64_t value_length() const;  // L = sum of H_l * W_l
    // Samples per call: one per (b, q, h, l, p).
    std::int64_t samples() const { return batch * queries * heads * points * static_cast<std::int64_t>(levels.size()); }
    // Queries are the pixels of the value map (all levels, or the first):
    // an encoder. Otherwise a decoder: queries at random reference points.
    bool queries_are_pixels() const;
};

// The shapes of the issue, in order: S0, S1, M0, M2, X, G, L1.
std::vector<Shape> canonical_shapes();

// The GKA shapes, in order: GKA_G (the vendor's example, G's sizes) and
// GKA_BEV (L1's sizes: BEVFormer-sized levels, 8 points).
std::vector<Shape> gka_shapes();

enum class Distribution { local, uniform };
const char *distribution_name(Distribution);

// How far (in pixels of the sampled level) a local location lies from its
// query's reference point, at most, along each axis.
constexpr float kLocalOffsetPixels = 2.0f;

// One problem's tensors, row-major:
//   value               (B, L, N_h, C_h)
//   spatial_shapes      (N_l, 2) int32, level_start_index (N_l) int32
//   sampling_locations  (B, N_q, N_h, N_l, N_p, 2)   normalized, x then y
//                       (GKA shapes: absolute pixel coordinates of the
//                       sampled level, x in [0, W_l], y in [0, H_l])
//   attention_weights   (B, N_q, N_h, N_l, N_p)      softmax over (l, p)
//   grad_output         (B, N_q, N_h * C_h)
struct Problem {
    Shape shape;
    Distribution distribution = Distribution::local;
    std::vector<std::int32_t> spatial_shapes, level_start_index;
    Floats value, sampling_locations, attention_weights, grad_output;
};

// Deterministic for (shape, distribution, seed).
//   local:   encoder shapes: each query's own pixel centre (normalized)
//            plus, per (h, l, p), an offset of up to kLocalOffsetPixels
//            pixels of level l along each axis; decoder shapes: a random
//            centre per query in [0, 1]^2 plus the same offsets.
//   uniform: every location uniform in [0, 1]^2.
// For a GKA shape the same normalized locations are then converted to
// absolute pixel coordinates: x * W_l, y * H_l of the sampled level l.
Problem make_problem(const Shape &shape, Distribution distribution, std::uint64_t seed = 1);

// Compulsory traffic: every tensor read or written once, in bytes.
//   forward:  value + locations + attention_weights + output
//   backward: value + locations + attention_weights + grad_output
//             + grad_value + grad_sampling_locations + grad_attention_weights
//             (GKA: no grad_sampling_locations)
// `element_bytes` is the size of one element of the tensors in the storage
// dtype: value, attention_weights, output / grad_output, grad_value and
// grad_attention_weights (4 for float32, 2 for float16 and bfloat16). The
// locations and their gradient are float32 (4 bytes) in every case.
// `value_fraction`: the share of value's rows (one head's C_h elements of
// one pixel) the call must read at the least (touched_value_fraction); 1
// counts all of value. grad_value is written whole either way (its rows no
// sample reaches are zeros).
double forward_bytes(const Shape &shape, double element_bytes = 4.0, double value_fraction = 1.0);
double backward_bytes(const Shape &shape, double element_bytes = 4.0, double value_fraction = 1.0);

// The share of value's (b, pixel, head) rows that some sample of the
// problem reads with a weight that can be non-zero: the bilinear corners
// inside the level of every sample inside the gate (MSDA, align_corners
// off, zeros padding), or the one row of each sample (GKA, floor). No
// implementation can compute the output without reading them, so they bound
// value's compulsory bytes; a decoder's few queries read a small share.
double touched_value_fraction(const Problem &problem);

}  // namespace msda_bench
