// Tensors that live on a CUDA device (TensorView::device_type = cuda, data a
// device pointer), as an engine holding its tensors on the GPU passes them:
// the same problems as the host suites, each tensor's storage (padding gaps
// and guard bands included) mirrored into a device allocation with its first
// element at a chosen byte, the results copied back and held to the
// reference, and every byte of every allocation outside the outputs'
// elements checked unchanged. In the device's primary context with msda's
// own stream, on a caller's stream, in a caller's context; from four threads
// at once; through a plan, DLPack and the C API; and what cannot run refused
// naming what is wrong. The driver API is opened at run time (libcuda.so.1),
// so this suite builds everywhere and reports SKIPPED where there is no CUDA
// device.
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <msda/dlpack.hpp>
#include <msda/msda.h>
#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "c_api_views.h"
#include "core_grid.h"
#include "device_tensors.h"
#include "test_util.h"

namespace {

using msda::testing::LibraryTensors;
using msda::testing::Locations;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;
using msda::testing::StridedTensor;

constexpr std::uint8_t kFiller = 0x7B;

// The driver API entry points the suite uses, from libcuda.so.1.
struct Driver {
    using Context = void *;
    using Stream = void *;
    using Pointer = std::uint64_t;
    int (*init)(unsigned) = nullptr;
    int (*device_get)(int *, int) = nullptr;
    int (*primary_retain)(Context *, int) = nullptr;
    int (*push)(Context) = nullptr;
    int (*pop)(Context *) = nullptr;
    int (*create_context)(Context *, unsigned, int) = nullptr;
    int (*destroy_context)(Context) = nullptr;
    int (*allocate)(Pointer *, std::size_t) = nullptr;
    int (*free)(Pointer) = nullptr;
    int (*to_device)(Pointer, const void *, std::size_t) = nullptr;
    int (*to_host)(void *, Pointer, std::size_t) = nullptr;
    int (*create_stream)(Stream *, unsigned) = nullptr;
    int (*destroy_stream)(Stream) = nullptr;
    int (*synchronize_stream)(Stream) = nullptr;
    int (*synchronize_context)() = nullptr;
    Context primary = nullptr;  // device 0's

    static const Driver &get() {
        static const Driver loaded = [] {
            Driver d;
            void *library = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
            if (library == nullptr) return d;
            auto load = [&](const char *name, auto &function) {
                function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
            };
            load("cuInit", d.init);
            load("cuDeviceGet", d.device_get);
            load("cuDevicePrimaryCtxRetain", d.primary_retain);
            load("cuCtxPushCurrent_v2", d.push);
            load("cuCtxPopCurrent_v2", d.pop);
            load("cuCtxCreate_v2", d.create_context);
            load("cuCtxDestroy_v2", d.destroy_context);
            load("cuMemAlloc_v2", d.allocate);
            load("cuMemFree_v2", d.free);
            load("cuMemcpyHtoD_v2", d.to_device);
            load("cuMemcpyDtoH_v2", d.to_host);
            load("cuStreamCreate", d.create_stream);
            load("cuStreamDestroy_v2", d.destroy_stream);
            load("cuStreamSynchronize", d.synchronize_stream);
            load("cuCtxSynchronize", d.synchronize_context);
            int device = 0;
            if (d.init != nullptr && d.init(0) == 0 && d.device_get(&device, 0) == 0) {
                d.primary_retain(&d.primary, device);
            }
            return d;
        }();
        return loaded;
    }
};

#define MSDA_REQUIRE_CUDA()                                                                               \
    do {                                                                                                  \
        if (const std::string why = msda::testing::cuda_unavailable(); !why.empty()) GTEST_SKIP() << why; \
        ASSERT_NE(Driver::get().primary, nullptr) << "the CUDA driver's primary context could not be had";  \
    } while (0)

// `context` current on this thread while it lives.
class Current {
public:
    explicit Current(void *context) { EXPECT_EQ(Driver::get().push(context), 0); }
    ~Current() {
        void *popped = nullptr;
        Driver::get().pop(&popped);
    }
};

// One tensor's storage in a device allocation of `context`: device byte b
// holds storage byte b + guard_bytes - first, so the view's first element is
// at byte `first`; bytes with no storage counterpart hold kFiller.
class DeviceMirror {
public:
    DeviceMirror(void *context, StridedTensor &tensor, std::size_t first)
        : context_(context), tensor_(&tensor), first_(first) {
        const std::size_t guard = tensor.guard_bytes();
        skip_ = first < guard ? guard - first : 0;
        lead_ = first > guard ? first - guard : 0;
        size_ = lead_ + tensor.storage_size() - skip_;
        const Current current(context_);
        EXPECT_EQ(Driver::get().allocate(&memory_, size_), 0);
        std::vector<std::uint8_t> content(size_, kFiller);
        std::memcpy(content.data() + lead_, tensor.storage_bytes() + skip_, tensor.storage_size() - skip_);
        EXPECT_EQ(Driver::get().to_device(memory_, content.data(), size_), 0);
    }
    DeviceMirror(const DeviceMirror &) = delete;
    DeviceMirror &operator=(const DeviceMirror &) = delete;
    ~DeviceMirror() {
        const Current current(context_);
        Driver::get().free(memory_);
    }

    std::size_t size() const { return size_; }

    msda::TensorView view() const {
        msda::TensorView view = tensor_->view();
        view.data = reinterpret_cast<void *>(memory_ + first_);
        view.device_type = msda::DeviceType::cuda;
        view.device_id = 0;
        view.byte_offset = 0;
        return view;
    }

    // The allocation back into the tensor's storage; the filler must be
    // intact. The context's work is waited for first.
    void read_back() {
        const Current current(context_);
        ASSERT_EQ(Driver::get().synchronize_context(), 0);
        std::vector<std::uint8_t> content(size_);
        ASSERT_EQ(Driver::get().to_host(content.data(), memory_, size_), 0);
        for (std::size_t b = 0; b < lead_; ++b) ASSERT_EQ(content[b], kFiller) << "byte " << b << " was written";
        std::memcpy(tensor_->storage_bytes() + skip_, content.data() + lead_, tensor_->storage_size() - skip_);
    }

private:
    void *context_;
    StridedTensor *tensor_;
    std::size_t first_, skip_ = 0, lead_ = 0, size_ = 0;
    std::uint64_t memory_ = 0;
};

// Every float tensor of a problem mirrored on the device, with the level
// tables on the host or (tables_on_device) on the device too.
struct DeviceTensors : msda::testing::MirroredTensors<DeviceTensors, DeviceMirror> {
    void *context;
    std::uint64_t shapes = 0, starts = 0;

    DeviceTensors(const ProblemData &data, void *context_, std::size_t first, bool tables_on_device = false)
        : MirroredTensors(data), context(context_) {
        for (StridedTensor *t : tensors()) mirrors.push_back(std::make_unique<DeviceMirror>(context, *t, first));
        if (tables_on_device) {
            const Current current(context);
            const Driver &d = Driver::get();
            const std::size_t shape_bytes = host.shapes32.size() * sizeof(std::int32_t);
            const std::size_t start_bytes = host.starts32.size() * sizeof(std::int32_t);
            EXPECT_EQ(d.allocate(&shapes, shape_bytes), 0);
            EXPECT_EQ(d.allocate(&starts, start_bytes), 0);
            EXPECT_EQ(d.to_device(shapes, host.shapes32.data(), shape_bytes), 0);
            EXPECT_EQ(d.to_device(starts, host.starts32.data(), start_bytes), 0);
        }
    }
    ~DeviceTensors() {
        const Current current(context);
        if (shapes != 0) Driver::get().free(shapes);
        if (starts != 0) Driver::get().free(starts);
    }

    msda::TensorView spatial_shapes() const {
        if (shapes == 0) return host.spatial_shapes();
        return msda::TensorView::contiguous(reinterpret_cast<void *>(shapes), msda::DType::i32, {host.levels, 2})
            .on_device(msda::DeviceType::cuda);
    }
    msda::TensorView level_start_index() const {
        if (starts == 0) return host.level_start_index();
        return msda::TensorView::contiguous(reinterpret_cast<void *>(starts), msda::DType::i32, {host.levels})
            .on_device(msda::DeviceType::cuda);
    }
};

ProblemSpec spec_for(msda::LocationsLayout locations, msda::ValueLayout value, std::int64_t padding) {
    return msda::testing::device_spec("cuda_tensors", 91, locations, value, padding);
}

void expect_correct(DeviceTensors &tensors, const ProblemData &data) {
    msda::testing::expect_device_results_correct(tensors, data);
}

// The primary context and msda's own stream: results are complete when the
// calls return (read_back waits anyway). First elements at bytes 0, 4 and
// 68 of their allocations; the level tables on the device for one case;
// both backward modes.
TEST(CudaTensors, InThePrimaryContextMatchTheReference) {
    MSDA_REQUIRE_CUDA();
    for (const auto locations : {msda::LocationsLayout::BQHLP2, msda::LocationsLayout::B2QHLP}) {
        for (const std::size_t first : {std::size_t{0}, std::size_t{4}, std::size_t{68}}) {
            for (const bool deterministic : {true, false}) {
                const auto value = first % 8 ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
                ProblemSpec spec = spec_for(locations, value, first == 68 ? 3 : 0);
                spec.options.deterministic = deterministic;
                const ProblemData data(spec);
                SCOPED_TRACE(data.spec.describe() + " first element at byte " + std::to_string(first) +
                             (deterministic ? "" : " atomic"));
                DeviceTensors tensors(data, Driver::get().primary, first, first == 4);
                ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
                ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
                expect_correct(tensors, data);
            }
        }
    }
}

// A caller's stream (Options::device_context.queue): the work is enqueued there and
// is complete once the stream is; CUDA's per-thread default stream handle
// too.
TEST(CudaTensors, OnTheCallersStreamMatchTheReference) {
    MSDA_REQUIRE_CUDA();
    const Driver &d = Driver::get();
    void *stream = nullptr;
    {
        const Current current(d.primary);
        ASSERT_EQ(d.create_stream(&stream, 1 /* CU_STREAM_NON_BLOCKING */), 0);
    }
    for (void *given : {stream, reinterpret_cast<void *>(std::uintptr_t{2}) /* CU_STREAM_PER_THREAD */}) {
        const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 2));
        DeviceTensors tensors(data, d.primary, 0, true);
        msda::Options options = data.spec.options;
        options.device_context.queue = given;
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), options));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), options));
        {
            const Current current(d.primary);
            ASSERT_EQ(d.synchronize_stream(given), 0);
        }
        expect_correct(tensors, data);
    }
    const Current current(d.primary);
    d.destroy_stream(stream);
}

// A context of the caller's own (Options::device_context.context), then forgotten by
// msda (release_cuda_context) before it is destroyed.
TEST(CudaTensors, InTheCallersContextMatchTheReference) {
    MSDA_REQUIRE_CUDA();
    const Driver &d = Driver::get();
    int device = 0;
    ASSERT_EQ(d.device_get(&device, 0), 0);
    void *context = nullptr;
    ASSERT_EQ(d.create_context(&context, 0, device), 0);
    void *popped = nullptr;
    d.pop(&popped);  // cuCtxCreate makes it current
    {
        const ProblemData data(spec_for(msda::LocationsLayout::B2QHLP, msda::ValueLayout::BNLC, 1));
        DeviceTensors tensors(data, context, 8);
        msda::Options options = data.spec.options;
        options.device_context.context = context;
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), options));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), options));
        expect_correct(tensors, data);
    }
    EXPECT_NO_THROW(msda::release_cuda_context(context));
    EXPECT_EQ(d.destroy_context(context), 0);
}

// Calls from four threads at once, each on tensors of its own.
TEST(CudaTensors, ConcurrentCallsMatchTheReference) {
    MSDA_REQUIRE_CUDA();
    std::vector<std::unique_ptr<ProblemData>> problems;
    std::vector<std::unique_ptr<DeviceTensors>> tensors;
    for (int t = 0; t < 4; ++t) {
        ProblemSpec spec = spec_for(t % 2 ? msda::LocationsLayout::B2QHLP : msda::LocationsLayout::BQHLP2,
                                    msda::ValueLayout::BLNC, t);
        spec.seed = 500 + t;
        problems.push_back(std::make_unique<ProblemData>(spec));
        tensors.push_back(std::make_unique<DeviceTensors>(*problems.back(), Driver::get().primary, 4 * t));
    }
    msda::testing::expect_concurrent_calls_correct(problems, tensors);
}

// The default backward on device tensors gives the same bits run after run.
TEST(CudaTensors, TheDefaultBackwardIsBitwiseReproducible) {
    MSDA_REQUIRE_CUDA();
    const ProblemData data(msda::testing::colliding_on(msda::Device::cuda, "colliding_cuda_tensors"));
    DeviceTensors first(data, Driver::get().primary, 0);
    ASSERT_NO_THROW(msda::backward(first.backward_args(), data.spec.options));
    first.read_back();
    for (int run = 1; run < 4; ++run) {
        SCOPED_TRACE("run " + std::to_string(run));
        DeviceTensors again(data, Driver::get().primary, 0);
        ASSERT_NO_THROW(msda::backward(again.backward_args(), data.spec.options));
        again.read_back();
        msda::testing::expect_same_bits(again.host, first.host);
    }
}

// A plan made for CUDA runs device tensors call after call; one made for
// the CPU refuses them.
TEST(CudaTensors, PlansRunThemOnCudaOnly) {
    MSDA_REQUIRE_CUDA();
    const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 1));
    DeviceTensors tensors(data, Driver::get().primary, 0);
    msda::testing::expect_plans_run_them_only_on(
        msda::Device::cuda, tensors, data,
        "msda: value: is on a CUDA device, but the plan was made for Device::cpu (make it with Device::cuda)");
}

// With no queries grad_value is zeroed on the device, elements only.
TEST(CudaTensors, AnEmptyQuerySetZeroesGradValue) {
    MSDA_REQUIRE_CUDA();
    ProblemSpec spec = spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BNLC, 2);
    spec.queries = 0;
    const ProblemData data(spec);
    DeviceTensors tensors(data, Driver::get().primary, 4);
    msda::testing::expect_an_empty_query_set_zeroes_grad_value(tensors, data);
}

// What cannot run is refused before anything is written, naming the tensor.
TEST(CudaTensors, BadDeviceTensorsAreRefusedByName) {
    MSDA_REQUIRE_CUDA();
    const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 0));
    DeviceTensors tensors(data, Driver::get().primary, 0);
    const auto expect_refused = msda::testing::expect_forward_refused;
    const msda::Options &options = data.spec.options;
    msda::ForwardArgs mixed = tensors.forward_args();
    mixed.attention_weights = tensors.host.attention_weights.view();
    expect_refused(mixed, options,
                   "msda: attention_weights: is a host tensor but value is on CUDA device 0; the tensors of a call "
                   "are on one device");
    msda::ForwardArgs host_memory = tensors.forward_args();
    host_memory.output.data = tensors.host.output.view().data;
    expect_refused(host_memory, options, "msda: output: its data is no CUDA memory");
    msda::ForwardArgs past_the_end = tensors.forward_args();
    // The first element is the allocation's last 4 bytes; the rest lie past it.
    past_the_end.output.byte_offset = static_cast<std::int64_t>(tensors.mirrors[3]->size()) - 4;
    expect_refused(past_the_end, options, "msda: output: its elements lie at bytes [");
    msda::ForwardArgs misaligned = tensors.forward_args();
    misaligned.output.byte_offset = 2;
    expect_refused(misaligned, options, "msda: output: its first element is at device address ");
    msda::ForwardArgs other_device = tensors.forward_args();
    for (msda::TensorView *t : {&other_device.value, &other_device.sampling_locations, &other_device.attention_weights,
                                &other_device.output}) {
        t->device_id = 1 << 10;
    }
    expect_refused(other_device, options, "msda: CUDA: no CUDA device 1024 to run on");
    msda::ForwardArgs flipped = tensors.forward_args();
    flipped.value.byte_offset += (flipped.value.shape[1] - 1) * flipped.value.strides[1] * 4;
    flipped.value.strides[1] = -flipped.value.strides[1];
    expect_refused(flipped, options, "msda: value: dimension 1 has stride -");
    msda::ForwardArgs aliased = tensors.forward_args();
    aliased.output.data = tensors.forward_args().sampling_locations.data;
    expect_refused(aliased, options, "msda: output: its memory overlaps sampling_locations");
    msda::Options with_stream = options;
    with_stream.device_context.queue = reinterpret_cast<void *>(std::uintptr_t{2});
    expect_refused(tensors.host.forward_args(), with_stream, "msda: options.device_context: is set, but the call runs on the CPU");
    tensors.read_back();
    msda::testing::expect_inputs_unchanged(tensors.host, data);
    EXPECT_TRUE(tensors.host.output.all_hold(msda::testing::kSentinel));
}

// DLPack's CUDA tensors through msda::from_dlpack, and the C API's device
// fields and stream, reach the same results.
TEST(CudaTensors, DlpackAndTheCApiCarryTheDevice) {
    MSDA_REQUIRE_CUDA();
    const ProblemData data(spec_for(msda::LocationsLayout::B2QHLP, msda::ValueLayout::BLNC, 1));
    DeviceTensors tensors(data, Driver::get().primary, 8);
    msda::ForwardArgs args = tensors.forward_args();
    std::vector<std::vector<std::int64_t>> shapes, strides;
    for (msda::TensorView *view : {&args.value, &args.sampling_locations, &args.attention_weights, &args.output}) {
        shapes.emplace_back(view->shape, view->shape + view->rank);
        strides.emplace_back(view->strides, view->strides + view->rank);
        DLTensor dl{};
        dl.data = static_cast<char *>(view->data) - 8;
        dl.byte_offset = 8;
        dl.device = {kDLCUDA, 0};
        dl.ndim = view->rank;
        dl.dtype = {kDLFloat, 32, 1};
        dl.shape = shapes.back().data();
        dl.strides = strides.back().data();
        *view = msda::from_dlpack(dl, "tensor");
    }
    ASSERT_NO_THROW(msda::forward(args, data.spec.options));
    const msda::BackwardArgs backward = tensors.backward_args();
    msda_backward_args c_args = msda::testing::to_c(backward);
    c_args.spatial_shapes.device_type = 0;  // a zeroed field: the host
    msda_options c_options = msda_default_options();
    c_options.locations_layout = MSDA_B2QHLP;
    c_options.align_corners = data.spec.options.align_corners;
    c_options.padding_mode = static_cast<msda_padding_mode>(data.spec.options.padding_mode);
    c_options.device_context.queue = reinterpret_cast<void *>(std::uintptr_t{1});  // CU_STREAM_LEGACY
    ASSERT_EQ(msda_backward(&c_args, &c_options), MSDA_OK) << msda_last_error();
    expect_correct(tensors, data);
}

// Without a driver or device, a call on CUDA tensors fails saying so, and
// nothing is touched (the pointers are never read).
TEST(CudaTensorsMissing, ACallFailsClearly) {
    if (!msda::testing::cuda_built()) GTEST_SKIP() << "this build has no CUDA code (MSDA_CUDA=OFF)";
    const msda::CudaReport report = msda::cuda_devices();
    if (!report.devices.empty()) GTEST_SKIP() << "this machine has a CUDA device (" << report.devices[0].name << ")";
    const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 0));
    LibraryTensors tensors(data);
    msda::ForwardArgs args = tensors.forward_args();
    for (msda::TensorView *t : {&args.value, &args.sampling_locations, &args.attention_weights, &args.output}) {
        t->device_type = msda::DeviceType::cuda;
    }
    try {
        msda::forward(args, data.spec.options);
        ADD_FAILURE() << "a forward on CUDA tensors ran without a device";
    } catch (const msda::Error &error) {
        EXPECT_EQ(std::string(error.what()), "msda: CUDA: no CUDA device to run on: " + report.error);
    }
    EXPECT_TRUE(tensors.output.all_hold(msda::testing::kSentinel));
}

}  // namespace
