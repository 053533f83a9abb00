// What the device-tensor suites share (test_opencl_tensors.cpp,
// test_cuda_tensors.cpp): a problem's float tensors mirrored on a device,
// their storage (padding gaps and guard bands included) copied into device
// memory with each first element at a chosen byte; the calls' arguments of
// the mirrors; the problems; and the checks, after copying the results
// back, against the reference and of every byte outside the outputs'
// elements.
#pragma once

#include <gtest/gtest.h>

#include <msda/msda.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core_grid.h"
#include "test_util.h"

namespace msda::testing {

// Every float tensor of a problem, mirrored on a device. Derived gives the
// level tables' views (spatial_shapes(), level_start_index(): the host
// tensors' or its own device copies'); each Mirror gives its view() and
// read_back(), which copies the device memory back into the host tensor.
template <class Derived, class Mirror>
struct MirroredTensors {
    LibraryTensors host;
    std::vector<std::unique_ptr<Mirror>> mirrors;

    explicit MirroredTensors(const ProblemData &data) : host(data) {}

    std::vector<StridedTensor *> tensors() {
        return {&host.value,       &host.sampling_locations,      &host.attention_weights,     &host.output,
                &host.grad_output, &host.grad_value,              &host.grad_sampling_locations,
                &host.grad_attention_weights};
    }
    msda::TensorView device(int i) const { return mirrors[i]->view(); }

    // The inputs both directions take, in a ForwardArgs or a BackwardArgs.
    template <class Args>
    Args inputs() const {
        const Derived &self = static_cast<const Derived &>(*this);
        Args args;
        args.value = device(0);
        args.spatial_shapes = self.spatial_shapes();
        args.level_start_index = self.level_start_index();
        args.sampling_locations = device(1);
        args.attention_weights = device(2);
        return args;
    }
    msda::ForwardArgs forward_args() const {
        msda::ForwardArgs args = inputs<msda::ForwardArgs>();
        args.output = device(3);
        return args;
    }
    msda::BackwardArgs backward_args() const {
        msda::BackwardArgs args = inputs<msda::BackwardArgs>();
        args.grad_output = device(4);
        args.grad_value = device(5);
        args.grad_sampling_locations = device(6);
        args.grad_attention_weights = device(7);
        return args;
    }
    void read_back() {
        for (auto &mirror : mirrors) mirror->read_back();
    }
};

// The device suites' problem: three levels (one of a single pixel), odd
// sizes, locations outside the levels too.
inline ProblemSpec device_spec(const std::string &name, std::uint64_t seed, msda::LocationsLayout locations,
                               msda::ValueLayout value, std::int64_t padding) {
    ProblemSpec spec;
    spec.name = name;
    spec.batch = 2;
    spec.queries = 37;
    spec.heads = 3;
    spec.channels = 5;
    spec.points = 3;
    spec.levels = {{4, 5}, {2, 3}, {1, 1}};
    spec.locations = Locations::outside;
    spec.padding = padding;
    spec.options.locations_layout = locations;
    spec.options.value_layout = value;
    spec.seed = seed + padding;
    return spec;
}

// Results and untouched bytes of one forward and backward.
template <class Tensors>
void expect_device_results_correct(Tensors &tensors, const ProblemData &data) {
    tensors.read_back();
    expect_matches_reference(data, canonical_results(tensors.host));
    expect_nothing_written_outside_views(tensors.host);
    expect_inputs_unchanged(tensors.host, data);
}

// Each problem's forward and backward three times, from a thread of its
// own, all at once; then each one's results checked.
template <class Tensors>
void expect_concurrent_calls_correct(const std::vector<std::unique_ptr<ProblemData>> &problems,
                                     const std::vector<std::unique_ptr<Tensors>> &tensors) {
    std::vector<std::string> failures(problems.size());
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < problems.size(); ++t) {
        threads.emplace_back([&, t] {
            try {
                for (int run = 0; run < 3; ++run) {
                    msda::forward(tensors[t]->forward_args(), problems[t]->spec.options);
                    msda::backward(tensors[t]->backward_args(), problems[t]->spec.options);
                }
            } catch (const std::exception &e) {
                failures[t] = e.what();
            }
        });
    }
    for (std::thread &thread : threads) thread.join();
    for (std::size_t t = 0; t < problems.size(); ++t) {
        SCOPED_TRACE("thread " + std::to_string(t));
        EXPECT_EQ(failures[t], "");
        expect_device_results_correct(*tensors[t], *problems[t]);
    }
}

// A plan made for `device` runs the device tensors call after call; one
// made for the CPU refuses them, saying `refusal`.
template <class Tensors>
void expect_plans_run_them_only_on(msda::Device device, Tensors &tensors, const ProblemData &data,
                                   const std::string &refusal) {
    const msda::ProblemSize size = msda::ProblemSize::of(tensors.forward_args(), data.spec.options);
    msda::Options options = data.spec.options;
    options.device = device;
    const msda::Plan plan(size, options);
    for (int run = 0; run < 2; ++run) {
        ASSERT_NO_THROW(plan.forward(tensors.forward_args()));
        ASSERT_NO_THROW(plan.backward(tensors.backward_args()));
    }
    expect_device_results_correct(tensors, data);
    const msda::Plan cpu_plan(size, data.spec.options);
    try {
        cpu_plan.forward(tensors.forward_args());
        ADD_FAILURE() << "a CPU plan ran device tensors";
    } catch (const msda::Error &e) {
        EXPECT_NE(std::string(e.what()).find(refusal), std::string::npos) << e.what();
    }
}

// With no queries a backward zeroes grad_value on the device, elements only.
template <class Tensors>
void expect_an_empty_query_set_zeroes_grad_value(Tensors &tensors, const ProblemData &data) {
    ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
    tensors.read_back();
    for (float v : tensors.host.grad_value.canonical()) ASSERT_EQ(v, 0.0f);
    EXPECT_TRUE(tensors.host.grad_value.outside_view_holds(kSentinel));
}

// A forward msda must refuse, with `text` in its message.
inline void expect_forward_refused(const msda::ForwardArgs &args, const msda::Options &options,
                                   const std::string &text) {
    try {
        msda::forward(args, options);
        ADD_FAILURE() << "accepted; expected: " << text;
    } catch (const msda::Error &e) {
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
}

}  // namespace msda::testing
