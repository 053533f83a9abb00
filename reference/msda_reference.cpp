// MSDA forward and backward in double precision, written from SPEC.md as
// plain loops. Deliberately simple rather than fast, so that it reads like the
// SPEC and shares nothing with the Halide pipelines it is used to check.
#include "msda_reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace msda::reference {

std::int64_t Problem::value_length() const {
    std::int64_t length = 0;
    for (const Level &level : levels)
        length += level.height * level.width;
    return length;
}

std::int64_t Problem::level_start(std::size_t level) const {
    std::int64_t start = 0;
    for (std::size_t l = 0; l < level; l++)
        start += levels[l].height * levels[l].width;
    return start;
}

double pixel_coordinate(double normalized, std::int64_t size, bool align_corners, bool float64) {
    if (float64) {
        // As float64 storage computes it: one double multiply, one subtract.
        return align_corners ? normalized * static_cast<double>(size - 1)
                             : normalized * static_cast<double>(size) - 0.5;
    }
    // Rounded through float32 exactly as the generated code computes it, so
    // that both agree on which pixel cell a location falls in (this file is
    // compiled with -ffp-contract=off, so the multiply and subtract stay two
    // roundings).
    const float location = static_cast<float>(normalized);
    const float coordinate = align_corners ? location * static_cast<float>(size - 1)
                                           : location * static_cast<float>(size) - 0.5f;
    return static_cast<double>(coordinate);
}

namespace {

// Where one sample falls along one axis of a level.
struct AxisSample {
    bool counts = false;          // finite, and inside the zeros-mode gate (or border mode)
    std::int64_t lower = 0;       // the lower corner's index, -1 to size - 1
    double fraction = 0.0;        // the upper corner's weight
    double gradient_scale = 0.0;  // d(pixel coordinate)/d(normalized), 0 where clamped
};

AxisSample sample_axis(double normalized, std::int64_t size, bool align_corners, bool border, bool float64) {
    AxisSample axis;
    if (!std::isfinite(normalized) || size < 1) return axis;
    const double coordinate = pixel_coordinate(normalized, size, align_corners, float64);
    const double last = static_cast<double>(size - 1);
    const double chain_rule_scale = align_corners ? last : static_cast<double>(size);

    double position = coordinate;
    if (border) {
        // A finite location can still give a NaN coordinate: float overflow to
        // Inf times the zero extent of align_corners on a size-1 axis. Every
        // finite location maps to 0 there, the only point of [0, 0].
        position = std::isnan(coordinate) ? 0.0 : std::clamp(coordinate, 0.0, last);
        // grid_sample's border rule: a clamped coordinate, borders included,
        // has no gradient.
        const bool clamped = !(coordinate > 0.0 && coordinate < last);
        axis.gradient_scale = clamped ? 0.0 : chain_rule_scale;
    } else {
        // The CUDA kernel's gate; a NaN or infinite coordinate fails it.
        if (!(coordinate > -1.0 && coordinate < static_cast<double>(size))) return axis;
        axis.gradient_scale = chain_rule_scale;
    }
    const double lower = std::floor(position);
    axis.counts = true;
    axis.lower = static_cast<std::int64_t>(lower);
    axis.fraction = position - lower;
    return axis;
}

// One bilinear sample: its four corners in the SPEC's order (y0,x0) (y0,x0+1)
// (y0+1,x0) (y0+1,x0+1), each with its bilinear weight and, when it lies
// inside the level, its value row.
struct BilinearSample {
    bool counts = false;
    AxisSample x, y;
    std::array<double, 4> corner_weight{};
    std::array<bool, 4> corner_inside{};
    std::array<std::int64_t, 4> corner_row{};
};

BilinearSample locate(const Problem &problem, std::size_t level, double u, double v) {
    const Level &shape = problem.levels[level];
    BilinearSample sample;
    sample.x = sample_axis(u, shape.width, problem.align_corners, problem.border, problem.float64);
    sample.y = sample_axis(v, shape.height, problem.align_corners, problem.border, problem.float64);
    // A non-finite u silences the sample even when v is fine, and vice versa.
    sample.counts = sample.x.counts && sample.y.counts;
    if (!sample.counts) return sample;

    const std::int64_t start = problem.level_start(level);
    const double fx = sample.x.fraction, fy = sample.y.fraction;
    for (int corner = 0; corner < 4; corner++) {
        const bool upper_x = (corner & 1) != 0, upper_y = (corner & 2) != 0;
        const std::int64_t cx = sample.x.lower + (upper_x ? 1 : 0);
        const std::int64_t cy = sample.y.lower + (upper_y ? 1 : 0);
        sample.corner_weight[corner] = (upper_y ? fy : 1.0 - fy) * (upper_x ? fx : 1.0 - fx);
        sample.corner_inside[corner] = cx >= 0 && cx < shape.width && cy >= 0 && cy < shape.height;
        sample.corner_row[corner] = start + cy * shape.width + cx;
    }
    return sample;
}

// Flat offsets into the canonical layouts of the header.
struct Indexing {
    const Problem &problem;
    std::int64_t rows = problem.value_length();
    std::int64_t level_count = static_cast<std::int64_t>(problem.levels.size());

    std::size_t value(std::int64_t b, std::int64_t row, std::int64_t h, std::int64_t c) const {
        const std::int64_t pixel = b * rows + row;
        return static_cast<std::size_t>((pixel * problem.heads + h) * problem.channels + c);
    }
    std::size_t weight(std::int64_t b, std::int64_t q, std::int64_t h, std::int64_t l,
                       std::int64_t p) const {
        const std::int64_t head = (b * problem.queries + q) * problem.heads + h;
        return static_cast<std::size_t>((head * level_count + l) * problem.points + p);
    }
    std::size_t location(std::int64_t b, std::int64_t q, std::int64_t h, std::int64_t l,
                         std::int64_t p, int axis) const {
        return 2 * weight(b, q, h, l, p) + static_cast<std::size_t>(axis);
    }
    std::size_t output(std::int64_t b, std::int64_t q, std::int64_t h, std::int64_t c) const {
        const std::int64_t query = b * problem.queries + q;
        return static_cast<std::size_t>((query * problem.heads + h) * problem.channels + c);
    }
};

// A sample that counts, with where its contribution goes.
struct SampleSite {
    std::int64_t b, q, h, l, p;
    BilinearSample sample;
    double attention;
};

// Calls visit(site) for every sample that counts, in loop order; the others
// contribute nothing anywhere, neither to the output nor to any gradient.
template <typename Visit>
void for_each_counting_sample(const Problem &problem, const Indexing &index, Visit visit) {
    for (std::int64_t b = 0; b < problem.batch; b++)
        for (std::int64_t q = 0; q < problem.queries; q++)
            for (std::int64_t h = 0; h < problem.heads; h++)
                for (std::int64_t l = 0; l < index.level_count; l++)
                    for (std::int64_t p = 0; p < problem.points; p++) {
                        const double u =
                            problem.sampling_locations[index.location(b, q, h, l, p, 0)];
                        const double v =
                            problem.sampling_locations[index.location(b, q, h, l, p, 1)];
                        const BilinearSample sample =
                            locate(problem, static_cast<std::size_t>(l), u, v);
                        if (!sample.counts) continue;
                        visit(SampleSite{b, q, h, l, p, sample,
                                         problem.attention_weights[index.weight(b, q, h, l, p)]});
                    }
}

}  // namespace

std::vector<double> forward(const Problem &problem) {
    const Indexing index{problem};
    const auto output_size = static_cast<std::size_t>(problem.batch * problem.queries *
                                                      problem.heads * problem.channels);
    std::vector<double> output(output_size, 0.0);
    for_each_counting_sample(problem, index, [&](const SampleSite &site) {
        const BilinearSample &sample = site.sample;
        for (std::int64_t c = 0; c < problem.channels; c++) {
            double interpolated = 0.0;
            for (int corner = 0; corner < 4; corner++) {
                // A corner outside the level is skipped, never read as 0 * V:
                // the row it would address may hold another pixel's Inf or NaN.
                if (!sample.corner_inside[corner]) continue;
                const double corner_value =
                    problem.value[index.value(site.b, sample.corner_row[corner], site.h, c)];
                interpolated += sample.corner_weight[corner] * corner_value;
            }
            output[index.output(site.b, site.q, site.h, c)] += site.attention * interpolated;
        }
    });
    return output;
}

Gradients backward(const Problem &problem, const std::vector<double> &grad_output) {
    const Indexing index{problem};
    const auto output_size = static_cast<std::size_t>(problem.batch * problem.queries *
                                                      problem.heads * problem.channels);
    if (grad_output.size() != output_size)
        throw std::invalid_argument("msda::reference::backward: grad_output has " +
                                    std::to_string(grad_output.size()) + " elements, expected " +
                                    std::to_string(output_size));
    Gradients gradients;
    gradients.value.assign(problem.value.size(), 0.0);
    gradients.sampling_locations.assign(problem.sampling_locations.size(), 0.0);
    gradients.attention_weights.assign(problem.attention_weights.size(), 0.0);

    for_each_counting_sample(problem, index, [&](const SampleSite &site) {
        const BilinearSample &sample = site.sample;
        // <g, V_corner> per corner; a corner outside the level counts as 0.
        std::array<double, 4> corner_dot{};
        for (std::int64_t c = 0; c < problem.channels; c++) {
            const double g = grad_output[index.output(site.b, site.q, site.h, c)];
            for (int corner = 0; corner < 4; corner++) {
                if (!sample.corner_inside[corner]) continue;
                const std::size_t element =
                    index.value(site.b, sample.corner_row[corner], site.h, c);
                corner_dot[corner] += g * problem.value[element];
                gradients.value[element] += site.attention * sample.corner_weight[corner] * g;
            }
        }

        double grad_attention = 0.0;  // <g, S>
        for (int corner = 0; corner < 4; corner++)
            grad_attention += sample.corner_weight[corner] * corner_dot[corner];
        gradients.attention_weights[index.weight(site.b, site.q, site.h, site.l, site.p)] =
            grad_attention;

        const double fx = sample.x.fraction, fy = sample.y.fraction;
        const double d_sample_dx =
            (1.0 - fy) * (corner_dot[1] - corner_dot[0]) + fy * (corner_dot[3] - corner_dot[2]);
        const double d_sample_dy =
            (1.0 - fx) * (corner_dot[2] - corner_dot[0]) + fx * (corner_dot[3] - corner_dot[1]);
        const std::size_t u_element = index.location(site.b, site.q, site.h, site.l, site.p, 0);
        gradients.sampling_locations[u_element] =
            site.attention * d_sample_dx * sample.x.gradient_scale;
        gradients.sampling_locations[u_element + 1] =
            site.attention * d_sample_dy * sample.y.gradient_scale;
    });
    return gradients;
}

double max_relative_error(const std::vector<float> &actual, const std::vector<double> &expected) {
    if (actual.size() != expected.size()) return INFINITY;
    double largest = 0.0, worst = 0.0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
        largest = std::max(largest, std::abs(expected[i]));
        const double difference = std::abs(static_cast<double>(actual[i]) - expected[i]);
        // NaN must fail, and std::max would drop it.
        worst = std::isnan(difference) ? INFINITY : std::max(worst, difference);
    }
    return largest > 0.0 ? worst / largest : worst;
}

}  // namespace msda::reference
