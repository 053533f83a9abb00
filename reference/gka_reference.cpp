// GKA forward and backward in double precision, as plain loops from SPEC.md.
#include "gka_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace msda::reference {

std::optional<std::int64_t> gka_index(double coordinate, std::int64_t size, GkaRounding rounding) {
    if (std::isnan(coordinate)) return std::nullopt;
    const double last = static_cast<double>(size - 1);
    const double clamped = std::min(std::max(coordinate, 0.0), last);
    // std::nearbyint rounds ties to even in the default rounding mode.
    const double rounded = rounding == GkaRounding::nearest ? std::nearbyint(clamped) : std::floor(clamped);
    return static_cast<std::int64_t>(rounded);
}

namespace {

// Visits every sample that counts: fn(b, q, h, sample index, value row).
template <typename Visit>
void for_each_sample(const Problem &p, GkaRounding rounding, Visit visit) {
    const std::int64_t levels = static_cast<std::int64_t>(p.levels.size());
    std::int64_t sample = 0;
    for (std::int64_t b = 0; b < p.batch; b++) {
        for (std::int64_t q = 0; q < p.queries; q++) {
            for (std::int64_t h = 0; h < p.heads; h++) {
                for (std::int64_t l = 0; l < levels; l++) {
                    const Level &level = p.levels[l];
                    for (std::int64_t point = 0; point < p.points; point++, sample++) {
                        const auto x = gka_index(p.sampling_locations[2 * sample], level.width, rounding);
                        const auto y = gka_index(p.sampling_locations[2 * sample + 1], level.height, rounding);
                        if (!x || !y) continue;
                        visit(b, q, h, sample, p.level_start(l) + *y * level.width + *x);
                    }
                }
            }
        }
    }
}

}  // namespace

std::vector<double> gka_forward(const Problem &p, GkaRounding rounding) {
    const std::int64_t rows = p.value_length();
    std::vector<double> output(p.batch * p.queries * p.heads * p.channels, 0.0);
    for_each_sample(p, rounding, [&](std::int64_t b, std::int64_t q, std::int64_t h, std::int64_t sample,
                                     std::int64_t row) {
        const double a = p.attention_weights[sample];
        for (std::int64_t c = 0; c < p.channels; c++) {
            output[((b * p.queries + q) * p.heads + h) * p.channels + c] +=
                a * p.value[((b * rows + row) * p.heads + h) * p.channels + c];
        }
    });
    return output;
}

GkaGradients gka_backward(const Problem &p, const std::vector<double> &grad_output, GkaRounding rounding) {
    if (grad_output.size() != static_cast<std::size_t>(p.batch * p.queries * p.heads * p.channels)) {
        throw std::invalid_argument("gka_backward: grad_output does not have the output's shape");
    }
    const std::int64_t rows = p.value_length();
    GkaGradients grads;
    grads.value.assign(p.value.size(), 0.0);
    grads.attention_weights.assign(p.attention_weights.size(), 0.0);
    for_each_sample(p, rounding, [&](std::int64_t b, std::int64_t q, std::int64_t h, std::int64_t sample,
                                     std::int64_t row) {
        const double a = p.attention_weights[sample];
        double dot = 0.0;
        for (std::int64_t c = 0; c < p.channels; c++) {
            const double g = grad_output[((b * p.queries + q) * p.heads + h) * p.channels + c];
            const std::int64_t at = ((b * rows + row) * p.heads + h) * p.channels + c;
            grads.value[at] += a * g;
            dot += g * p.value[at];
        }
        grads.attention_weights[sample] = dot;
    });
    return grads;
}

}  // namespace msda::reference
