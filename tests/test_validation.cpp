// SPEC, Errors: "Every call validates ranks, shapes, dtypes, layouts,
// spatial_shapes against level_start_index and value's L, and null pointers
// before any work, and reports which tensor is wrong and what was expected,
// as an error the caller can catch; nothing aborts the process, nothing is
// written to outputs on error."
//
// Each test breaks one thing in an otherwise valid call and runs every entry
// point that reads the broken tensor: msda::forward, msda::backward,
// ProblemSize::of (both overloads), Plan::forward and Plan::backward (on a
// plan made for the valid sizes). Each must throw msda::Error of the
// expected kind (msda::TypeError for a dtype, msda::ValueError otherwise)
// whose message starts "msda: <tensor>: " and names the tensors and
// dimension involved, and
// every output buffer must still hold its sentinel afterwards. The assertions
// look only for names, never for whole sentences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

using msda::testing::bitwise_equal;
using msda::testing::kSentinel;
using msda::testing::LibraryTensors;
using msda::testing::Locations;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// What a rejection message must contain. `tensor`, when set, is the one the
// message must lead with ("msda: <tensor>: "; tensors that disagree with no
// majority among them are all named: "msda: a and b: "); `names` must all
// appear somewhere (the other tensor of a mismatch, the dimension).
struct Expected {
    std::string tensor;
    std::vector<std::string> names;
    msda::ErrorKind kind = msda::ErrorKind::value;
};

// Calls `call` and checks it throws msda::Error with the expected message.
void expect_error(const std::string &entry_point, const std::function<void()> &call,
                  const Expected &expected) {
    SCOPED_TRACE(entry_point);
    try {
        call();
    } catch (const msda::Error &error) {
        const std::string message = error.what();
        EXPECT_EQ(static_cast<int>(error.kind()), static_cast<int>(expected.kind)) << message;
        if (expected.kind == msda::ErrorKind::type) {
            EXPECT_NE(dynamic_cast<const msda::TypeError *>(&error), nullptr) << message;
        } else if (expected.kind == msda::ErrorKind::value) {
            EXPECT_NE(dynamic_cast<const msda::ValueError *>(&error), nullptr) << message;
        }
        EXPECT_THAT(message, ContainsRegex("^msda: [A-Za-z_:]+(, [A-Za-z_]+)*( and [A-Za-z_]+)?: "));
        if (!expected.tensor.empty()) {
            // The tensor alone, or first of the tensors named together.
            EXPECT_THAT(message, ContainsRegex("^msda: " + expected.tensor + "(: | and |, )"));
        }
        for (const std::string &name : expected.names) EXPECT_THAT(message, HasSubstr(name));
        return;
    } catch (const std::exception &error) {
        ADD_FAILURE() << "threw something other than msda::Error: " << error.what();
        return;
    } catch (...) {
        ADD_FAILURE() << "threw something other than a std::exception";
        return;
    }
    ADD_FAILURE() << "no error was thrown";
}

// The valid problem every test starts from. Its sizes differ from each other
// where they can, so a message naming the wrong number would be noticed.
ProblemSpec valid_spec(msda::ValueLayout value_layout, msda::LocationsLayout locations_layout) {
    ProblemSpec spec;
    spec.name = "valid";
    spec.batch = 2;
    spec.queries = 7;
    spec.heads = 3;
    spec.channels = 5;
    spec.points = 6;
    spec.levels = {{3, 4}, {2, 2}, {1, 3}, {2, 1}};  // N_l = 4, L = 21
    spec.options.value_layout = value_layout;
    spec.options.locations_layout = locations_layout;
    spec.locations = Locations::inside;
    spec.shapes_dtype = msda::DType::i64;
    spec.start_dtype = msda::DType::i32;
    spec.seed = 99;
    return spec;
}

// The index of a named dimension of a tensor in the given layouts.
int dim_index(const std::string &tensor, const std::string &dim, const msda::Options &options) {
    const bool blnc = options.value_layout == msda::ValueLayout::BLNC;
    const bool bqhlp2 = options.locations_layout == msda::LocationsLayout::BQHLP2;
    std::vector<std::string> dims;
    if (tensor == "value" || tensor == "grad_value") {
        dims = blnc ? std::vector<std::string>{"B", "L", "N_h", "C_h"}
                    : std::vector<std::string>{"B", "N_h", "L", "C_h"};
    } else if (tensor == "sampling_locations" || tensor == "grad_sampling_locations") {
        dims = bqhlp2 ? std::vector<std::string>{"B", "N_q", "N_h", "N_l", "N_p", "2"}
                      : std::vector<std::string>{"B", "2", "N_q", "N_h", "N_l", "N_p"};
    } else if (tensor == "attention_weights" || tensor == "grad_attention_weights") {
        dims = {"B", "N_q", "N_h", "N_l", "N_p"};
    } else if (tensor == "output" || tensor == "grad_output") {
        dims = {"B", "N_q", "N_h*C_h"};
    } else if (tensor == "spatial_shapes") {
        dims = {"N_l", "2"};
    } else if (tensor == "level_start_index") {
        dims = {"N_l"};
    }
    for (std::size_t i = 0; i < dims.size(); i++) {
        if (dims[i] == dim) return static_cast<int>(i);
    }
    ADD_FAILURE() << tensor << " has no dimension " << dim;
    return 0;
}

msda::TensorView *find(msda::ForwardArgs &args, const std::string &name) {
    if (name == "value") return &args.value;
    if (name == "spatial_shapes") return &args.spatial_shapes;
    if (name == "level_start_index") return &args.level_start_index;
    if (name == "sampling_locations") return &args.sampling_locations;
    if (name == "attention_weights") return &args.attention_weights;
    if (name == "output") return &args.output;
    return nullptr;
}

msda::TensorView *find(msda::BackwardArgs &args, const std::string &name) {
    if (name == "value") return &args.value;
    if (name == "spatial_shapes") return &args.spatial_shapes;
    if (name == "level_start_index") return &args.level_start_index;
    if (name == "sampling_locations") return &args.sampling_locations;
    if (name == "attention_weights") return &args.attention_weights;
    if (name == "grad_output") return &args.grad_output;
    if (name == "grad_value") return &args.grad_value;
    if (name == "grad_sampling_locations") return &args.grad_sampling_locations;
    if (name == "grad_attention_weights") return &args.grad_attention_weights;
    return nullptr;
}

const std::vector<std::string> kAllTensors = {
    "value",  "spatial_shapes", "level_start_index", "sampling_locations",      "attention_weights",
    "output", "grad_output",    "grad_value",        "grad_sampling_locations", "grad_attention_weights"};

// A valid call and a plan for it; tests break one thing at a time.
class ValidationBase {
protected:
    explicit ValidationBase(const ProblemSpec &spec) : data_(spec), tensors_(data_), options_(spec.options) {}

    void make_plan() {
        ASSERT_NO_THROW(plan_.emplace(msda::ProblemSize::of(tensors_.forward_args(), options_), options_));
    }

    msda::ForwardArgs forward_args() const { return tensors_.forward_args(); }
    msda::BackwardArgs backward_args() const { return tensors_.backward_args(); }

    // Runs the forward entry points on `args` and expects each to reject.
    // sizing_rejects = false: ProblemSize::of accepts the call (an absent
    // output, which sizing before allocation allows) and returns its sizes.
    void expect_forward_rejected(const msda::ForwardArgs &args, const Expected &expected,
                                 const msda::Options *options = nullptr, bool sizing_rejects = true) {
        const msda::Options &o = options ? *options : options_;
        expect_error(
            "msda::forward", [&] { msda::forward(args, o); }, expected);
        if (sizing_rejects) {
            expect_error(
                "ProblemSize::of(ForwardArgs)", [&] { (void)msda::ProblemSize::of(args, o); }, expected);
        } else {
            expect_sizes(msda::ProblemSize::of(args, o));
        }
        if (plan_ && !options) {
            expect_error(
                "Plan::forward", [&] { plan_->forward(args); }, expected);
        }
        expect_outputs_untouched();
    }

    void expect_backward_rejected(const msda::BackwardArgs &args, const Expected &expected,
                                  const msda::Options *options = nullptr, bool sizing_rejects = true) {
        const msda::Options &o = options ? *options : options_;
        expect_error(
            "msda::backward", [&] { msda::backward(args, o); }, expected);
        if (sizing_rejects) {
            expect_error(
                "ProblemSize::of(BackwardArgs)", [&] { (void)msda::ProblemSize::of(args, o); }, expected);
        } else {
            expect_sizes(msda::ProblemSize::of(args, o));
        }
        if (plan_ && !options) {
            expect_error(
                "Plan::backward", [&] { plan_->backward(args); }, expected);
        }
        expect_outputs_untouched();
    }

    // Breaks the named tensor in the forward and/or backward call (wherever
    // it takes part) and expects every entry point to reject.
    // The sizes of the valid problem.
    void expect_sizes(const msda::ProblemSize &size) const {
        const ProblemSpec &spec = data_.spec;
        EXPECT_EQ(size.batch, spec.batch);
        EXPECT_EQ(size.queries, spec.queries);
        EXPECT_EQ(size.heads, spec.heads);
        EXPECT_EQ(size.channels, spec.channels);
        EXPECT_EQ(size.points, spec.points);
        EXPECT_EQ(size.levels, static_cast<std::int64_t>(spec.levels.size()));
    }

    void expect_rejected(const std::string &tensor, const std::function<void(msda::TensorView &)> &mutate,
                         const Expected &expected, bool sizing_rejects = true) {
        SCOPED_TRACE("broken tensor: " + tensor);
        msda::ForwardArgs forward = forward_args();
        msda::BackwardArgs backward = backward_args();
        msda::TensorView *in_forward = find(forward, tensor);
        msda::TensorView *in_backward = find(backward, tensor);
        ASSERT_TRUE(in_forward || in_backward) << "no tensor named " << tensor;
        if (in_forward) {
            mutate(*in_forward);
            expect_forward_rejected(forward, expected, nullptr, sizing_rejects);
        }
        if (in_backward) {
            mutate(*in_backward);
            expect_backward_rejected(backward, expected, nullptr, sizing_rejects);
        }
    }

    // Every output buffer, its gaps and its guard bands hold the sentinel;
    // the inputs hold what they held.
    void expect_outputs_untouched() {
        EXPECT_TRUE(tensors_.output.all_hold(kSentinel)) << "output was written";
        EXPECT_TRUE(tensors_.grad_value.all_hold(kSentinel)) << "grad_value was written";
        EXPECT_TRUE(tensors_.grad_sampling_locations.all_hold(kSentinel))
            << "grad_sampling_locations was written";
        EXPECT_TRUE(tensors_.grad_attention_weights.all_hold(kSentinel))
            << "grad_attention_weights was written";
        for (const std::vector<float> *extra : extra_outputs_) {
            for (float element : *extra) {
                if (std::memcmp(&element, &kSentinel, sizeof(float)) != 0) {
                    ADD_FAILURE() << "a replacement output buffer was written";
                    break;
                }
            }
        }
        for (const auto &[arena, expected] : arenas_) {
            EXPECT_TRUE(bitwise_equal("arena", *arena, expected))
                << "memory shared by an input and an output was written";
        }
        EXPECT_TRUE(bitwise_equal("value", tensors_.value.canonical(), data_.value));
        EXPECT_TRUE(bitwise_equal("sampling_locations", tensors_.sampling_locations.canonical(),
                                  data_.sampling_locations));
        EXPECT_TRUE(bitwise_equal("attention_weights", tensors_.attention_weights.canonical(),
                                  data_.attention_weights));
        EXPECT_TRUE(bitwise_equal("grad_output", tensors_.grad_output.canonical(), data_.grad_output));
    }

    // A sentinel-filled buffer for a replacement output view, checked by
    // expect_outputs_untouched.
    float *sentinel_buffer(std::size_t elements) {
        owned_.push_back(std::make_unique<std::vector<float>>(elements, kSentinel));
        extra_outputs_.push_back(owned_.back().get());
        return owned_.back()->data();
    }

    // A sentinel-filled arena of `elements` floats that starts with a copy of
    // `input`'s memory (a contiguous view), checked by
    // expect_outputs_untouched to be unchanged.
    float *arena_holding(const msda::TensorView &input, std::size_t elements) {
        auto arena = std::make_unique<std::vector<float>>(elements, kSentinel);
        const std::size_t bytes = static_cast<std::size_t>(input.numel()) * msda::dtype_size(input.dtype);
        EXPECT_LE(bytes, elements * sizeof(float));
        std::memcpy(arena->data(), input.data, bytes);
        arenas_.emplace_back(arena.get(), *arena);
        owned_.push_back(std::move(arena));
        return owned_.back()->data();
    }

    ProblemData data_;
    LibraryTensors tensors_;
    msda::Options options_;
    std::optional<msda::Plan> plan_;
    std::vector<std::unique_ptr<std::vector<float>>> owned_;
    std::vector<const std::vector<float> *> extra_outputs_;
    std::vector<std::pair<const std::vector<float> *, std::vector<float>>> arenas_;
};

// The layouts the validation tests run in: canonical, and both permuted.
struct Layouts {
    msda::ValueLayout value;
    msda::LocationsLayout locations;
};

void PrintTo(const Layouts &layouts, std::ostream *out) {
    *out << msda::testing::layout_name(layouts.value) << "/" << msda::testing::layout_name(layouts.locations);
}

class Validation : public ValidationBase, public ::testing::TestWithParam<Layouts> {
protected:
    Validation() : ValidationBase(valid_spec(GetParam().value, GetParam().locations)) {}
    void SetUp() override { make_plan(); }
};

INSTANTIATE_TEST_SUITE_P(Layouts, Validation,
                         ::testing::Values(Layouts{msda::ValueLayout::BLNC, msda::LocationsLayout::BQHLP2},
                                           Layouts{msda::ValueLayout::BNLC, msda::LocationsLayout::B2QHLP}),
                         [](const ::testing::TestParamInfo<Layouts> &info) {
                             return std::string(msda::testing::layout_name(info.param.value)) + "_" +
                                    msda::testing::layout_name(info.param.locations);
                         });

// The starting point is valid, and a valid call does write every output, so
// the sentinel checks of the other tests mean something.
TEST_P(Validation, TheValidCallIsAcceptedEverywhere) {
    ASSERT_TRUE(plan_.has_value());
    EXPECT_EQ(plan_->workspace_size(), 0u);
    EXPECT_NO_THROW(msda::forward(forward_args(), options_));
    EXPECT_NO_THROW(msda::backward(backward_args(), options_));
    EXPECT_NO_THROW((void)msda::ProblemSize::of(forward_args(), options_));
    EXPECT_NO_THROW((void)msda::ProblemSize::of(backward_args(), options_));
    EXPECT_FALSE(tensors_.output.all_hold(kSentinel));
    EXPECT_FALSE(tensors_.grad_value.all_hold(kSentinel));
    EXPECT_FALSE(tensors_.grad_sampling_locations.all_hold(kSentinel));
    EXPECT_FALSE(tensors_.grad_attention_weights.all_hold(kSentinel));
    // Workspace: 0 bytes are needed, so null with 0 bytes is fine, and so is
    // a real buffer.
    EXPECT_NO_THROW(plan_->forward(forward_args(), nullptr, 0));
    EXPECT_NO_THROW(plan_->backward(backward_args(), nullptr, 0));
    std::vector<std::byte> workspace(64);
    EXPECT_NO_THROW(plan_->forward(forward_args(), workspace.data(), workspace.size()));
    EXPECT_NO_THROW(plan_->backward(backward_args(), workspace.data(), workspace.size()));
}

TEST_P(Validation, NullDataWithElements) {
    for (const std::string &tensor : kAllTensors) {
        expect_rejected(tensor, [](msda::TensorView &t) { t.data = nullptr; }, {tensor, {}});
    }
}

TEST_P(Validation, AbsentTensors) {
    // An absent view (rank 0, no data) where a tensor is required, including
    // a gradient that was asked for.
    // ProblemSize::of accepts absent outputs, so a caller can size them.
    for (const std::string &tensor : kAllTensors) {
        const bool is_output = tensor == "output" || tensor == "grad_value" ||
                               tensor == "grad_sampling_locations" || tensor == "grad_attention_weights";
        expect_rejected(tensor, [](msda::TensorView &t) { t = msda::TensorView{}; }, {tensor, {}}, !is_output);
    }
}

TEST_P(Validation, WrongRank) {
    for (const std::string &tensor : kAllTensors) {
        // One dimension too few (the view then addresses less memory).
        expect_rejected(tensor, [](msda::TensorView &t) { t.rank -= 1; }, {tensor, {}});
        // One too many: a trailing dimension of extent 1.
        expect_rejected(tensor,
                        [](msda::TensorView &t) {
                            if (t.rank < msda::kMaxRank) {
                                t.shape[t.rank] = 1;
                                t.strides[t.rank] = 1;
                                t.rank += 1;
                            } else {
                                t.rank = 1;
                            }
                        },
                        {tensor, {}});
    }
}

TEST_P(Validation, NegativeExtent) {
    for (const std::string &tensor : kAllTensors) {
        expect_rejected(tensor, [](msda::TensorView &t) { t.shape[0] = -1; }, {tensor, {}});
    }
}

TEST_P(Validation, WrongDtype) {
    struct Case {
        std::string tensor;
        msda::DType dtype;
    };
    const Case cases[] = {
        {"value", msda::DType::i64},
        {"value", msda::DType::i32},
        {"attention_weights", msda::DType::f64},
        {"attention_weights", msda::DType::i32},
        {"sampling_locations", msda::DType::i32},
        {"sampling_locations", msda::DType::f64},
        // f16 locations go with f16 storage only; value here is float32.
        {"sampling_locations", msda::DType::f16},
        {"spatial_shapes", msda::DType::f32},
        {"spatial_shapes", msda::DType::f64},
        {"level_start_index", msda::DType::f32},
        {"level_start_index", msda::DType::f64},
        {"output", msda::DType::f64},
        {"output", msda::DType::i32},
        {"grad_output", msda::DType::f64},
        {"grad_value", msda::DType::f64},
        {"grad_sampling_locations", msda::DType::f64},
        {"grad_attention_weights", msda::DType::f16},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(std::string("dtype ") + msda::dtype_name(c.dtype));
        expect_rejected(c.tensor, [&](msda::TensorView &t) { t.dtype = c.dtype; },
                        {c.tensor, {}, msda::ErrorKind::type});
    }
}

// A dimension of one tensor disagrees with the tensor it is measured
// against. The extent shrinks by one, so the view stays inside its memory
// whatever happens. The message must name both tensors and the dimension.
// A size the inputs share (B, N_h, N_q, N_l, N_p) is what most of them
// say: the message leads with the one tensor that disagrees, measured
// against those that agree; where two disagree with no majority (N_q and
// N_p, which only attention_weights and sampling_locations hold), it names
// both. The outputs and gradients are measured against the inputs.
TEST_P(Validation, ShapeMismatchBetweenTensors) {
    const std::string both = "attention_weights and sampling_locations";
    struct Case {
        std::string tensor, dim;
        std::vector<std::string> names;  // besides the dimension
        std::string leading = "";        // the tensor(s) the message leads with; default `tensor`
    };
    const Case cases[] = {
        // B: value, attention_weights and sampling_locations; the outputs
        // against value.
        {"value", "B", {"value", "attention_weights", "sampling_locations"}},
        {"attention_weights", "B", {"attention_weights", "value"}},
        {"sampling_locations", "B", {"sampling_locations", "value"}},
        {"output", "B", {"output", "value"}},
        {"grad_output", "B", {"grad_output", "value"}},
        {"grad_value", "B", {"grad_value"}},
        {"grad_sampling_locations", "B", {"grad_sampling_locations", "sampling_locations"}},
        {"grad_attention_weights", "B", {"grad_attention_weights", "attention_weights"}},
        // N_q: attention_weights and sampling_locations (both named), then
        // output and grad_output against them.
        {"attention_weights", "N_q", {"attention_weights", "sampling_locations"}, both},
        {"sampling_locations", "N_q", {"sampling_locations", "attention_weights"}, both},
        {"output", "N_q", {"output", "attention_weights"}},
        {"grad_output", "N_q", {"grad_output", "attention_weights"}},
        {"grad_sampling_locations", "N_q", {"grad_sampling_locations", "sampling_locations"}},
        {"grad_attention_weights", "N_q", {"grad_attention_weights", "attention_weights"}},
        // N_h: value and the per-sample tensors (a wrong one in value is
        // value's, not attention_weights').
        {"value", "N_h", {"value", "attention_weights", "sampling_locations"}},
        {"attention_weights", "N_h", {"attention_weights", "value"}},
        {"sampling_locations", "N_h", {"sampling_locations", "value"}},
        {"grad_value", "N_h", {"grad_value"}},
        {"grad_sampling_locations", "N_h", {"grad_sampling_locations", "sampling_locations"}},
        {"grad_attention_weights", "N_h", {"grad_attention_weights", "attention_weights"}},
        // N_l: spatial_shapes, level_start_index and the per-sample tensors.
        {"attention_weights", "N_l", {"attention_weights", "spatial_shapes"}},
        {"sampling_locations", "N_l", {"sampling_locations", "spatial_shapes"}},
        {"level_start_index", "N_l", {"level_start_index", "spatial_shapes"}},
        {"spatial_shapes", "N_l", {"level_start_index", "spatial_shapes"}},
        {"grad_sampling_locations", "N_l", {"grad_sampling_locations", "sampling_locations"}},
        {"grad_attention_weights", "N_l", {"grad_attention_weights", "attention_weights"}},
        // N_p: sampling_locations and attention_weights, both named.
        {"sampling_locations", "N_p", {"sampling_locations", "attention_weights"}, both},
        {"attention_weights", "N_p", {"sampling_locations", "attention_weights"}, both},
        {"grad_sampling_locations", "N_p", {"grad_sampling_locations", "sampling_locations"}},
        {"grad_attention_weights", "N_p", {"grad_attention_weights", "attention_weights"}},
        // C_h: value's N_h*C_h and output's or grad_output's, both named
        // (value and output in a forward, value and grad_output in a
        // backward).
        {"value", "C_h", {"value and", "N_h*C_h"}, "value"},
        {"output", "N_h*C_h", {"output", "value"}, "value and output"},
        {"grad_output", "N_h*C_h", {"grad_output", "value"}, "value and grad_output"},
        {"grad_value", "C_h", {"grad_value"}},
        // L: value against spatial_shapes.
        {"value", "L", {"value", "spatial_shapes"}},
        {"grad_value", "L", {"grad_value"}},
        // The (x, y) pair.
        {"sampling_locations", "2", {"sampling_locations"}},
        {"grad_sampling_locations", "2", {"grad_sampling_locations"}},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE("dimension " + c.dim);
        const int d = dim_index(c.tensor, c.dim, options_);
        std::vector<std::string> names = c.names;
        names.push_back(c.dim);
        expect_rejected(c.tensor, [&](msda::TensorView &t) { t.shape[d] -= 1; },
                        {c.leading.empty() ? c.tensor : c.leading, names});
    }
}

TEST_P(Validation, SpatialShapesNotNlBy2) {
    // (N_l, 3): H, W and something else.
    std::vector<std::int64_t> wide(3 * tensors_.levels, 1);
    expect_rejected("spatial_shapes",
                    [&](msda::TensorView &t) {
                        t = msda::TensorView::contiguous(wide.data(), msda::DType::i64, {tensors_.levels, 3});
                    },
                    {"spatial_shapes", {}});
    // (N_l,): no W.
    expect_rejected("spatial_shapes",
                    [&](msda::TensorView &t) {
                        t = msda::TensorView::contiguous(wide.data(), msda::DType::i64, {tensors_.levels});
                    },
                    {"spatial_shapes", {}});
    // (0, 2) with an empty level_start_index: no levels at all.
    for (bool backward : {false, true}) {
        msda::ForwardArgs forward = forward_args();
        msda::BackwardArgs backward_call = backward_args();
        msda::TensorView no_levels = msda::TensorView::contiguous(wide.data(), msda::DType::i64, {0, 2});
        msda::TensorView no_starts = msda::TensorView::contiguous(wide.data(), msda::DType::i32, {0});
        if (backward) {
            backward_call.spatial_shapes = no_levels;
            backward_call.level_start_index = no_starts;
            expect_backward_rejected(backward_call, {"", {"spatial_shapes", "N_l"}});
        } else {
            forward.spatial_shapes = no_levels;
            forward.level_start_index = no_starts;
            expect_forward_rejected(forward, {"", {"spatial_shapes", "N_l"}});
        }
    }
}

// The level table is data: level_start_index must be the exclusive prefix
// sum of H*W, the sum must equal value's L, and every level is at least 1x1.
// Checked for both index dtypes.
TEST_P(Validation, LevelTableContents) {
    for (msda::DType dtype : {msda::DType::i32, msda::DType::i64}) {
        SCOPED_TRACE(std::string("index dtype ") + msda::dtype_name(dtype));
        tensors_.shapes_dtype = dtype;
        tensors_.start_dtype = dtype;
        const auto shapes = tensors_.shapes64;  // H0, W0, H1, W1, ...
        const auto starts = tensors_.starts64;  // 0, 12, 16, 19
        auto set_table = [&](const std::vector<std::int64_t> &new_shapes,
                             const std::vector<std::int64_t> &new_starts) {
            tensors_.shapes64 = new_shapes;
            tensors_.starts64 = new_starts;
            tensors_.shapes32.assign(new_shapes.begin(), new_shapes.end());
            tensors_.starts32.assign(new_starts.begin(), new_starts.end());
        };
        auto expect_table_rejected = [&](const std::vector<std::int64_t> &new_shapes,
                                         const std::vector<std::int64_t> &new_starts,
                                         const Expected &expected) {
            set_table(new_shapes, new_starts);
            expect_forward_rejected(forward_args(), expected);
            expect_backward_rejected(backward_args(), expected);
            set_table(shapes, starts);
        };

        {
            SCOPED_TRACE("level_start_index off by one in the middle");
            auto bad = starts;
            bad[2] += 1;
            expect_table_rejected(shapes, bad, {"level_start_index", {}});
        }
        {
            SCOPED_TRACE("level_start_index not starting at 0");
            auto bad = starts;
            for (auto &start : bad) start += 1;
            expect_table_rejected(shapes, bad, {"level_start_index", {}});
        }
        {
            SCOPED_TRACE("level_start_index the inclusive prefix sum");
            std::vector<std::int64_t> inclusive;
            std::int64_t total = 0;
            for (std::size_t l = 0; l < starts.size(); l++) {
                total += shapes[2 * l] * shapes[2 * l + 1];
                inclusive.push_back(total);
            }
            expect_table_rejected(shapes, inclusive, {"level_start_index", {}});
        }
        {
            SCOPED_TRACE("sum of H*W below value's L");
            auto bad = shapes;
            bad[bad.size() - 2] = 1;  // the last level 2x1 becomes 1x1; starts stay consistent
            expect_table_rejected(bad, starts, {"", {"value", "L", "spatial_shapes"}});
        }
        {
            SCOPED_TRACE("sum of H*W above value's L");
            auto bad = shapes;
            bad[bad.size() - 1] = 2;  // the last level 2x1 becomes 2x2
            expect_table_rejected(bad, starts, {"", {"value", "L", "spatial_shapes"}});
        }
        for (int which : {0, 1}) {
            for (std::int64_t extent : {0, -1}) {
                SCOPED_TRACE(::testing::Message() << (which ? "W" : "H") << " = " << extent);
                auto bad = shapes;
                bad[which] = extent;  // level 0
                expect_table_rejected(bad, starts, {"spatial_shapes", {}});
            }
        }
        {
            SCOPED_TRACE("H*W of 0 in a middle level (starts consistent with it)");
            auto bad = shapes;
            bad[2] = 0;  // level 1 0x2
            auto bad_starts = starts;
            bad_starts[2] -= 4;
            bad_starts[3] -= 4;
            expect_table_rejected(bad, bad_starts, {"spatial_shapes", {}});
        }
    }
}

// The channel dimension (C_h of value and grad_value, N_h*C_h of output and
// grad_output) must be dense. The broken view is a spread copy over a buffer
// twice as large, every stride doubled.
TEST_P(Validation, NonUnitChannelStride) {
    for (const std::string tensor : {"value", "output", "grad_output", "grad_value"}) {
        const std::string dim = tensor == "value" || tensor == "grad_value" ? "C_h" : "N_h*C_h";
        expect_rejected(tensor,
                        [&](msda::TensorView &t) {
                            float *spread = sentinel_buffer(static_cast<std::size_t>(2 * t.numel() + 2));
                            t.data = spread;
                            for (int d = 0; d < t.rank; d++) t.strides[d] *= 2;
                        },
                        {tensor, {dim}});
    }
}

// An output must not share memory with an input, with another output, or
// with itself (two indices, one element). Both views are placed in one arena
// larger than any tensor here (the input's values copied to its start), so
// even a missed check writes nowhere else; nothing may be written, so the
// arena must come back unchanged.
constexpr std::size_t kArenaElements = 8192;

TEST_P(Validation, OutputsOverlappingInputs) {
    struct Case {
        std::string output, aliased;
        std::int64_t offset;  // elements from the input's first element to the output's
    };
    const Case cases[] = {
        {"output", "value", 0},
        {"output", "value", 100},  // a partial overlap
        {"output", "sampling_locations", 0},
        {"output", "attention_weights", 7},
        {"output", "spatial_shapes", 0},
        {"grad_value", "value", 0},
        {"grad_value", "grad_output", 0},
        {"grad_value", "attention_weights", 11},
        {"grad_value", "level_start_index", 0},
        {"grad_sampling_locations", "sampling_locations", 0},
        {"grad_sampling_locations", "value", 0},
        {"grad_attention_weights", "attention_weights", 0},
        {"grad_attention_weights", "grad_output", 3},
        {"grad_attention_weights", "sampling_locations", 0},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.output + " over " + c.aliased + " + " + std::to_string(c.offset));
        msda::ForwardArgs forward = forward_args();
        msda::BackwardArgs backward = backward_args();
        float *arena = arena_holding(*find(backward, c.aliased), kArenaElements);
        if (msda::TensorView *out = find(forward, c.output)) {
            find(forward, c.aliased)->data = arena;
            out->data = arena + c.offset;
            expect_forward_rejected(forward, {c.output, {c.aliased}});
        }
        if (msda::TensorView *out = find(backward, c.output)) {
            find(backward, c.aliased)->data = arena;
            out->data = arena + c.offset;
            expect_backward_rejected(backward, {"", {c.output, c.aliased}});
        }
    }
}

TEST_P(Validation, OutputsOverlappingEachOther) {
    struct Case {
        std::string first, second;
    };
    const Case cases[] = {
        {"grad_value", "grad_sampling_locations"},
        {"grad_value", "grad_attention_weights"},
        {"grad_sampling_locations", "grad_attention_weights"},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE(c.first + " and " + c.second);
        msda::BackwardArgs backward = backward_args();
        float *arena = sentinel_buffer(kArenaElements);
        find(backward, c.first)->data = arena;
        find(backward, c.second)->data = arena + 1;
        expect_backward_rejected(backward, {"", {c.first, c.second}});
    }
}

TEST_P(Validation, OutputsOverlappingThemselves) {
    // output: every query written to the same row.
    expect_rejected("output", [](msda::TensorView &t) { t.strides[1] = 0; }, {"output", {}});
    // grad_sampling_locations: x and y planes on the same memory.
    const int xy = dim_index("grad_sampling_locations", "2", options_);
    expect_rejected("grad_sampling_locations", [&](msda::TensorView &t) { t.strides[xy] = 0; },
                    {"grad_sampling_locations", {}});
    // grad_value: two heads on the same channels.
    const int heads = dim_index("grad_value", "N_h", options_);
    expect_rejected("grad_value", [&](msda::TensorView &t) { t.strides[heads] = 1; }, {"grad_value", {}});
    // grad_attention_weights: points interleaved with levels.
    expect_rejected("grad_attention_weights", [](msda::TensorView &t) { t.strides[3] = 1; },
                    {"grad_attention_weights", {}});
}

// Options outside their enums are caught, not dispatched on.
TEST_P(Validation, OptionsOutOfRange) {
    msda::Options bad_value_layout = options_;
    bad_value_layout.value_layout = static_cast<msda::ValueLayout>(2);
    msda::Options bad_locations_layout = options_;
    bad_locations_layout.locations_layout = static_cast<msda::LocationsLayout>(-1);
    msda::Options bad_padding = options_;
    bad_padding.padding_mode = static_cast<msda::PaddingMode>(7);
    for (const msda::Options *options : {&bad_value_layout, &bad_locations_layout, &bad_padding}) {
        expect_forward_rejected(forward_args(), {"options", {}}, options);
        expect_backward_rejected(backward_args(), {"options", {}}, options);
        const msda::ProblemSize size = msda::ProblemSize::of(forward_args(), options_);
        expect_error("Plan::Plan", [&] { msda::Plan plan(size, *options); }, {"options", {}});
    }
}

// Plan::forward and Plan::backward with valid tensors of other sizes than
// the plan's: the message names the tensor the size is read from and the
// dimension.
TEST_P(Validation, TensorsOfOtherSizesThanThePlan) {
    struct Case {
        std::string dim, tensor;
        std::function<void(ProblemSpec &)> change;
    };
    const Case cases[] = {
        {"B", "value", [](ProblemSpec &s) { s.batch += 1; }},
        {"L", "value", [](ProblemSpec &s) { s.levels[0].width += 1; }},
        {"N_h", "value", [](ProblemSpec &s) { s.heads += 1; }},
        {"C_h", "value", [](ProblemSpec &s) { s.channels += 1; }},
        // The last level, 2x1, split in two 1x1 levels: L stays 21.
        {"N_l", "spatial_shapes",
         [](ProblemSpec &s) {
             s.levels.back() = {1, 1};
             s.levels.push_back({1, 1});
         }},
        {"N_q", "attention_weights", [](ProblemSpec &s) { s.queries += 1; }},
        {"N_p", "attention_weights", [](ProblemSpec &s) { s.points += 1; }},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE("the call's " + c.dim + " differs from the plan's");
        ProblemSpec other = data_.spec;
        c.change(other);
        const ProblemData other_data(other);
        LibraryTensors other_tensors(other_data);
        expect_error("Plan::forward", [&] { plan_->forward(other_tensors.forward_args()); },
                     {c.tensor, {c.dim, "plan"}});
        expect_error("Plan::backward", [&] { plan_->backward(other_tensors.backward_args()); },
                     {c.tensor, {c.dim, "plan"}});
        EXPECT_TRUE(other_tensors.output.all_hold(kSentinel)) << "output was written";
        EXPECT_TRUE(other_tensors.grad_value.all_hold(kSentinel)) << "grad_value was written";
        EXPECT_TRUE(other_tensors.grad_sampling_locations.all_hold(kSentinel))
            << "grad_sampling_locations was written";
        EXPECT_TRUE(other_tensors.grad_attention_weights.all_hold(kSentinel))
            << "grad_attention_weights was written";
    }
}

// Sizes a plan cannot be made for.
TEST_P(Validation, PlanForImpossibleSizes) {
    const msda::ProblemSize valid = msda::ProblemSize::of(forward_args(), options_);
    struct Case {
        std::string field;
        std::function<void(msda::ProblemSize &)> change;
    };
    const Case cases[] = {
        {"batch", [](msda::ProblemSize &s) { s.batch = -1; }},
        {"value_length", [](msda::ProblemSize &s) { s.value_length = 0; }},
        {"heads", [](msda::ProblemSize &s) { s.heads = 0; }},
        {"channels", [](msda::ProblemSize &s) { s.channels = 0; }},
        {"levels", [](msda::ProblemSize &s) { s.levels = 0; }},
        {"queries", [](msda::ProblemSize &s) { s.queries = -1; }},
        {"points", [](msda::ProblemSize &s) { s.points = 0; }},
        {"dtype", [](msda::ProblemSize &s) { s.dtype = msda::DType::i32; }},
        {"locations_dtype", [](msda::ProblemSize &s) { s.locations_dtype = msda::DType::f64; }},
    };
    for (const Case &c : cases) {
        msda::ProblemSize size = valid;
        c.change(size);
        const bool dtype = c.field.ends_with("dtype");
        expect_error("Plan::Plan (" + c.field + ")", [&] { msda::Plan plan(size, options_); },
                     {"plan", {c.field}, dtype ? msda::ErrorKind::type : msda::ErrorKind::value});
    }
}

// Empty tensors may have null data: B = 0 or N_q = 0 calls succeed with null
// pointers wherever a tensor has no elements (and grad_value, which has
// elements when only N_q is 0, comes back zero).
TEST(ValidationOfEmptyTensors, NullDataIsFineWithoutElements) {
    for (bool no_batch : {true, false}) {
        ProblemSpec spec = valid_spec(msda::ValueLayout::BLNC, msda::LocationsLayout::BQHLP2);
        (no_batch ? spec.batch : spec.queries) = 0;
        SCOPED_TRACE(spec.describe());
        const ProblemData data(spec);
        LibraryTensors tensors(data);
        msda::ForwardArgs forward = tensors.forward_args();
        msda::BackwardArgs backward = tensors.backward_args();
        for (msda::TensorView *view :
             {&forward.sampling_locations, &forward.attention_weights, &forward.output,
              &backward.sampling_locations, &backward.attention_weights, &backward.grad_output,
              &backward.grad_sampling_locations, &backward.grad_attention_weights}) {
            view->data = nullptr;
        }
        if (no_batch) {
            forward.value.data = nullptr;
            backward.value.data = nullptr;
            backward.grad_value.data = nullptr;
        }
        EXPECT_NO_THROW(msda::forward(forward, spec.options));
        EXPECT_NO_THROW(msda::backward(backward, spec.options));
        if (!no_batch) {
            const std::vector<float> grad_value = tensors.grad_value.canonical();
            EXPECT_TRUE(bitwise_equal("grad_value", grad_value, std::vector<float>(grad_value.size(), 0.0f)));
        }
    }
}

// Null data with elements, where the element count does not fit in 64 bits:
// B = N_q = 2^30, N_h = 16, C_h = 1 gives attention_weights, sampling_locations
// and output 2^64 * k elements. Every extent and stride is within the 32-bit
// limits, so only the count can tell that these null tensors are not empty.
TEST(ValidationOfHugeShapes, NullDataWhoseElementCountOverflows) {
    const std::int64_t batch = std::int64_t{1} << 30, queries = std::int64_t{1} << 30, heads = 16;
    std::vector<float> value(64, 1.0f);
    const std::int32_t shapes[2] = {2, 2}, starts[1] = {0};
    msda::ForwardArgs args;
    args.value = msda::TensorView::strided(value.data(), msda::DType::f32, {batch, 4, heads, 1}, {0, 0, 1, 1});
    args.spatial_shapes = msda::TensorView::contiguous(shapes, msda::DType::i32, {1, 2});
    args.level_start_index = msda::TensorView::contiguous(starts, msda::DType::i32, {1});
    args.sampling_locations = msda::TensorView::strided(nullptr, msda::DType::f32, {batch, queries, heads, 1, 1, 2},
                                                        {1, 1, 1, 1, 1, 1});
    args.attention_weights =
        msda::TensorView::strided(nullptr, msda::DType::f32, {batch, queries, heads, 1, 1}, {1, 1, 1, 1, 1});
    args.output = msda::TensorView::strided(nullptr, msda::DType::f32, {batch, queries, heads}, {1, 1, 1});
    expect_error("msda::forward", [&] { msda::forward(args); }, {"", {}});
    expect_error("ProblemSize::of(ForwardArgs)", [&] { (void)msda::ProblemSize::of(args); }, {"", {}});
}

TEST(ValidationOfThreads, NegativeThreadCount) {
    expect_error("set_num_threads", [] { msda::set_num_threads(-1); }, {"set_num_threads", {}});
    msda::set_num_threads(0);
}

TEST(ValidationOfViews, TensorViewConstructors) {
    float memory[8] = {};
    expect_error("TensorView::contiguous",
                 [&] {
                     (void)msda::TensorView::contiguous(memory, msda::DType::f32, {1, 1, 1, 1, 1, 1, 1});
                 },
                 {"", {"TensorView::contiguous"}});
    expect_error("TensorView::strided",
                 [&] {
                     (void)msda::TensorView::strided(memory, msda::DType::f32, {2, 4}, {4});
                 },
                 {"", {"TensorView::strided"}});
}

}  // namespace
