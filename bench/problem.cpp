#include "problem.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <sys/mman.h>

namespace msda_bench {

namespace {
constexpr std::size_t kCacheLine = 64, kHugePage = std::size_t{2} << 20;
bool advise_huge_pages = false;
std::size_t alignment_for(std::size_t bytes) { return bytes >= kHugePage ? kHugePage : kCacheLine; }
}  // namespace

void set_huge_pages(bool on) { advise_huge_pages = on; }

void *allocate_tensor_bytes(std::size_t bytes) {
    void *memory = ::operator new(bytes, std::align_val_t{alignment_for(bytes)});
    // Advice only: where the kernel cannot give huge pages, 4 KiB ones back
    // the buffer as before.
    if (advise_huge_pages && bytes >= kHugePage) madvise(memory, bytes, MADV_HUGEPAGE);
    return memory;
}

void free_tensor_bytes(void *memory, std::size_t bytes) {
    ::operator delete(memory, std::align_val_t{alignment_for(bytes)});
}

std::int64_t Shape::value_length() const {
    std::int64_t length = 0;
    for (const Level &level : levels) length += level.height * level.width;
    return length;
}

bool Shape::queries_are_pixels() const {
    return queries == value_length() || (!levels.empty() && queries == levels[0].height * levels[0].width);
}

std::vector<Shape> canonical_shapes() {
    const std::vector<Level> detr = {{100, 167}, {50, 84}, {25, 42}, {13, 21}};
    std::vector<Shape> shapes;
    shapes.push_back({.id = "S0", .batch = 1, .queries = 300, .levels = detr});
    shapes.push_back({.id = "S1", .batch = 2, .queries = 900, .levels = detr});
    shapes.push_back({.id = "M0", .batch = 1, .queries = 22223, .levels = detr});
    shapes.push_back({.id = "M2", .batch = 1, .queries = 21504, .levels = {{128, 128}, {64, 64}, {32, 32}}});
    shapes.push_back({.id = "X", .batch = 1, .queries = 15200, .points = 8,
                      .levels = {{100, 152}, {50, 76}, {25, 38}, {13, 19}}});
    shapes.push_back({.id = "G", .batch = 6, .queries = 9680, .levels = {{60, 40}, {60, 40}, {60, 40}, {60, 40}}});
    shapes.push_back({.id = "L1", .batch = 6, .queries = 9680, .points = 8,
                      .levels = {{116, 200}, {58, 100}, {29, 50}, {15, 25}}});
    return shapes;
}

std::vector<Shape> gka_shapes() {
    std::vector<Shape> shapes;
    for (const Shape &shape : canonical_shapes()) {
        if (shape.id != "G" && shape.id != "L1") continue;
        Shape gka = shape;
        gka.id = shape.id == "G" ? "GKA_G" : "GKA_BEV";
        gka.attention = Attention::gka;
        shapes.push_back(gka);
    }
    return shapes;
}

const char *distribution_name(Distribution distribution) {
    return distribution == Distribution::local ? "local" : "uniform";
}

namespace {

// The normalized reference point of every query: its own pixel centre for
// an encoder, a random point otherwise.
std::vector<std::pair<float, float>> reference_points(const Shape &shape, std::mt19937_64 &random) {
    std::vector<std::pair<float, float>> points;
    points.reserve(shape.queries);
    if (shape.queries_are_pixels()) {
        for (const Level &level : shape.levels) {
            for (std::int64_t y = 0; y < level.height; ++y) {
                for (std::int64_t x = 0; x < level.width; ++x) {
                    if (static_cast<std::int64_t>(points.size()) == shape.queries) return points;
                    points.emplace_back((static_cast<float>(x) + 0.5f) / static_cast<float>(level.width),
                                        (static_cast<float>(y) + 0.5f) / static_cast<float>(level.height));
                }
            }
        }
        return points;
    }
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (std::int64_t q = 0; q < shape.queries; ++q) {
        const float x = unit(random);
        points.emplace_back(x, unit(random));
    }
    return points;
}

void fill_uniform(Floats &tensor, std::mt19937_64 &random, float low, float high) {
    std::uniform_real_distribution<float> distribution(low, high);
    for (float &x : tensor) x = distribution(random);
}

}  // namespace

Problem make_problem(const Shape &shape, Distribution distribution, std::uint64_t seed) {
    Problem problem;
    problem.shape = shape;
    problem.distribution = distribution;
    std::mt19937_64 random(seed);
    const std::int64_t levels = static_cast<std::int64_t>(shape.levels.size());

    std::int32_t start = 0;
    for (const Level &level : shape.levels) {
        problem.spatial_shapes.push_back(static_cast<std::int32_t>(level.height));
        problem.spatial_shapes.push_back(static_cast<std::int32_t>(level.width));
        problem.level_start_index.push_back(start);
        start += static_cast<std::int32_t>(level.height * level.width);
    }

    problem.value.resize(shape.batch * shape.value_length() * shape.heads * shape.channels);
    fill_uniform(problem.value, random, -1.0f, 1.0f);
    problem.grad_output.resize(shape.batch * shape.queries * shape.heads * shape.channels);
    fill_uniform(problem.grad_output, random, -1.0f, 1.0f);

    // Softmax over (l, p) of each (b, q, h), as the models compute it.
    const std::int64_t per_head = levels * shape.points;
    problem.attention_weights.resize(shape.batch * shape.queries * shape.heads * per_head);
    std::normal_distribution<float> logit(0.0f, 1.0f);
    for (std::size_t head = 0; head < problem.attention_weights.size(); head += per_head) {
        float sum = 0.0f;
        for (std::int64_t i = 0; i < per_head; ++i) {
            const float e = std::exp(logit(random));
            problem.attention_weights[head + i] = e;
            sum += e;
        }
        for (std::int64_t i = 0; i < per_head; ++i) problem.attention_weights[head + i] /= sum;
    }

    problem.sampling_locations.resize(problem.attention_weights.size() * 2);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::uniform_real_distribution<float> offset(-kLocalOffsetPixels, kLocalOffsetPixels);
    float *location = problem.sampling_locations.data();
    for (std::int64_t b = 0; b < shape.batch; ++b) {
        const std::vector<std::pair<float, float>> centres =
            distribution == Distribution::local ? reference_points(shape, random)
                                                : std::vector<std::pair<float, float>>{};
        for (std::int64_t q = 0; q < shape.queries; ++q) {
            for (std::int64_t h = 0; h < shape.heads; ++h) {
                for (std::int64_t l = 0; l < levels; ++l) {
                    const Level &level = shape.levels[l];
                    for (std::int64_t p = 0; p < shape.points; ++p, location += 2) {
                        if (distribution == Distribution::uniform) {
                            location[0] = unit(random);
                            location[1] = unit(random);
                        } else {
                            location[0] = centres[q].first + offset(random) / static_cast<float>(level.width);
                            location[1] = centres[q].second + offset(random) / static_cast<float>(level.height);
                        }
                        if (shape.attention == Attention::gka) {
                            // GKA: absolute pixel coordinates of level l.
                            location[0] *= static_cast<float>(level.width);
                            location[1] *= static_cast<float>(level.height);
                        }
                    }
                }
            }
        }
    }
    return problem;
}

// Locations (two coordinates a sample) and their gradient are float32.
constexpr double kLocationBytes = 4.0;

double forward_bytes(const Shape &shape, double element_bytes, double value_fraction) {
    const double samples = static_cast<double>(shape.samples());
    const double value = static_cast<double>(shape.batch * shape.value_length() * shape.heads * shape.channels);
    const double output = static_cast<double>(shape.batch * shape.queries * shape.heads * shape.channels);
    // value (the rows read), attention_weights and output in the storage
    // dtype; locations.
    return element_bytes * (value * value_fraction + samples + output) + kLocationBytes * 2.0 * samples;
}

double backward_bytes(const Shape &shape, double element_bytes, double value_fraction) {
    const double samples = static_cast<double>(shape.samples());
    const double value = static_cast<double>(shape.batch * shape.value_length() * shape.heads * shape.channels);
    const double output = static_cast<double>(shape.batch * shape.queries * shape.heads * shape.channels);
    // Inputs (value's rows read, attention_weights, grad_output; locations),
    // then the gradients (all of grad_value, grad_attention_weights;
    // grad_sampling_locations, which GKA does not have).
    const double location_gradient = shape.attention == Attention::gka ? 0.0 : kLocationBytes * 2.0 * samples;
    return element_bytes * (value * value_fraction + samples + output) + kLocationBytes * 2.0 * samples +
           element_bytes * (value + samples) + location_gradient;
}

double touched_value_fraction(const Problem &problem) {
    const Shape &shape = problem.shape;
    const std::int64_t length = shape.value_length(), heads = shape.heads, levels = shape.levels.size();
    std::vector<bool> touched(static_cast<std::size_t>(shape.batch * length * heads), false);
    std::int64_t count = 0;
    auto touch = [&](std::int64_t b, std::int64_t row, std::int64_t h) {
        const std::size_t index = static_cast<std::size_t>((b * length + row) * heads + h);
        if (!touched[index]) {
            touched[index] = true;
            count++;
        }
    };
    const float *location = problem.sampling_locations.data();
    for (std::int64_t b = 0; b < shape.batch; b++) {
        for (std::int64_t q = 0; q < shape.queries; q++) {
            for (std::int64_t h = 0; h < heads; h++) {
                for (std::int64_t l = 0; l < levels; l++) {
                    const std::int64_t height = shape.levels[l].height, width = shape.levels[l].width;
                    const std::int64_t start = problem.level_start_index[l];
                    for (std::int64_t p = 0; p < shape.points; p++, location += 2) {
                        if (shape.attention == Attention::gka) {
                            const auto clamp = [](double v, std::int64_t n) {
                                return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(v)), 0, n - 1);
                            };
                            touch(b, start + clamp(location[1], height) * width + clamp(location[0], width), h);
                            continue;
                        }
                        const double x = static_cast<double>(location[0]) * width - 0.5;
                        const double y = static_cast<double>(location[1]) * height - 0.5;
                        if (!(x > -1 && x < width && y > -1 && y < height)) continue;
                        // The far corner along an axis has weight 0 when
                        // the coordinate is a whole pixel.
                        const std::int64_t x0 = static_cast<std::int64_t>(std::floor(x));
                        const std::int64_t y0 = static_cast<std::int64_t>(std::floor(y));
                        const std::int64_t x1 = x > static_cast<double>(x0) ? x0 + 1 : x0;
                        const std::int64_t y1 = y > static_cast<double>(y0) ? y0 + 1 : y0;
                        for (std::int64_t cy = y0; cy <= y1; cy++) {
                            for (std::int64_t cx = x0; cx <= x1; cx++) {
                                const bool inside = cx >= 0 && cx < width && cy >= 0 && cy < height;
                                if (inside) touch(b, start + cy * width + cx, h);
                            }
                        }
                    }
                }
            }
        }
    }
    return touched.empty() ? 0.0 : static_cast<double>(count) / static_cast<double>(touched.size());
}

}  // namespace msda_bench
