// Tensors that live on an OpenCL device (TensorView::device_type = opencl,
// data a cl_mem), as an engine holding its tensors on the device passes
// them: the same problems as the host suites, each tensor's storage (padding
// gaps and guard bands included) mirrored into a cl_mem at a chosen offset,
// the results read back and held to the reference, and every byte of every
// cl_mem outside the outputs' elements checked unchanged. The offsets cover
// each way msda hands a cl_mem to the generated code (docs/opencl.md):
// element 0 at offset 0, at an offset a sub-buffer can start at, at one it
// cannot (brought through host memory). On msda's own queue and on a
// caller's context and queue; the level tables on the host and on the
// device; mixed devices, foreign contexts, short buffers and out-of-order
// queues refused naming what is wrong.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlpack/dlpack.h>
#include <gtest/gtest.h>

#include <msda/dlpack.hpp>
#include <msda/msda.h>
#include <msda/msda.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
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

// One tensor's storage in a cl_mem: device byte b holds storage byte
// b + guard_bytes - first, so the view's first element is at byte `first`;
// bytes with no storage counterpart (first > guard_bytes) hold kFiller.
class DeviceMirror {
public:
    DeviceMirror(cl_context context, cl_command_queue queue, StridedTensor &tensor, std::size_t first)
        : queue_(queue), tensor_(&tensor), first_(first) {
        const std::size_t guard = tensor.guard_bytes();
        skip_ = first < guard ? guard - first : 0;  // storage bytes dropped before device byte 0
        lead_ = first > guard ? first - guard : 0;  // filler bytes before the storage
        size_ = lead_ + tensor.storage_size() - skip_;
        cl_int error = 0;
        memory_ = clCreateBuffer(context, CL_MEM_READ_WRITE, size_, nullptr, &error);
        EXPECT_EQ(error, CL_SUCCESS);
        std::vector<std::uint8_t> content(size_, kFiller);
        std::memcpy(content.data() + lead_, tensor.storage_bytes() + skip_, tensor.storage_size() - skip_);
        EXPECT_EQ(clEnqueueWriteBuffer(queue, memory_, CL_TRUE, 0, size_, content.data(), 0, nullptr, nullptr),
                  CL_SUCCESS);
    }
    DeviceMirror(const DeviceMirror &) = delete;
    DeviceMirror &operator=(const DeviceMirror &) = delete;
    ~DeviceMirror() {
        if (memory_ != nullptr) clReleaseMemObject(memory_);
    }

    cl_mem memory() const { return memory_; }
    std::size_t size() const { return size_; }

    msda::TensorView view() const {
        msda::TensorView view = tensor_->view().on_device(msda::DeviceType::opencl, 0, static_cast<std::int64_t>(first_));
        view.data = memory_;
        return view;
    }

    // The cl_mem back into the tensor's storage; the filler must be intact.
    void read_back() {
        std::vector<std::uint8_t> content(size_);
        ASSERT_EQ(clEnqueueReadBuffer(queue_, memory_, CL_TRUE, 0, size_, content.data(), 0, nullptr, nullptr),
                  CL_SUCCESS);
        for (std::size_t b = 0; b < lead_; ++b) ASSERT_EQ(content[b], kFiller) << "byte " << b << " was written";
        std::memcpy(tensor_->storage_bytes() + skip_, content.data() + lead_, tensor_->storage_size() - skip_);
    }

private:
    cl_command_queue queue_;
    StridedTensor *tensor_;
    std::size_t first_, skip_ = 0, lead_ = 0, size_ = 0;
    cl_mem memory_ = nullptr;
};

// Every float tensor of a problem mirrored on the device, with the level
// tables on the host or (tables_on_device) mirrored too.
struct DeviceTensors : msda::testing::MirroredTensors<DeviceTensors, DeviceMirror> {
    cl_mem shapes = nullptr, starts = nullptr;

    DeviceTensors(const ProblemData &data, cl_context context, cl_command_queue queue, std::size_t first,
                  bool tables_on_device = false)
        : MirroredTensors(data) {
        for (StridedTensor *t : tensors()) mirrors.push_back(std::make_unique<DeviceMirror>(context, queue, *t, first));
        if (tables_on_device) {
            cl_int error = 0;
            shapes = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                    host.shapes32.size() * sizeof(std::int32_t), host.shapes32.data(), &error);
            EXPECT_EQ(error, CL_SUCCESS);
            starts = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                    host.starts32.size() * sizeof(std::int32_t), host.starts32.data(), &error);
            EXPECT_EQ(error, CL_SUCCESS);
        }
    }
    // On msda's own queue.
    DeviceTensors(const ProblemData &data, const msda::OpenClQueue &own, std::size_t first,
                  bool tables_on_device = false)
        : DeviceTensors(data, static_cast<cl_context>(own.context), static_cast<cl_command_queue>(own.queue), first,
                        tables_on_device) {}
    ~DeviceTensors() {
        if (shapes != nullptr) clReleaseMemObject(shapes);
        if (starts != nullptr) clReleaseMemObject(starts);
    }

    msda::TensorView spatial_shapes() const {
        if (shapes == nullptr) return host.spatial_shapes();
        msda::TensorView view = msda::TensorView::contiguous(shapes, msda::DType::i32, {host.levels, 2});
        return view.on_device(msda::DeviceType::opencl);
    }
    msda::TensorView level_start_index() const {
        if (starts == nullptr) return host.level_start_index();
        return msda::TensorView::contiguous(starts, msda::DType::i32, {host.levels}).on_device(msda::DeviceType::opencl);
    }
};

ProblemSpec spec_for(msda::LocationsLayout locations, msda::ValueLayout value, std::int64_t padding) {
    return msda::testing::device_spec("device_tensors", 77, locations, value, padding);
}

void expect_correct(DeviceTensors &tensors, const ProblemData &data) {
    msda::testing::expect_device_results_correct(tensors, data);
}

// msda's own queue: results are complete when the calls return. first: 0
// (the cl_mem as it is), 128 (a multiple of every device's sub-buffer
// alignment; PoCL's is 128), 4 and 68 (no sub-buffer can start there).
TEST(OpenClTensors, OnMsdasQueueMatchTheReference) {
    MSDA_REQUIRE_OPENCL();
    const msda::OpenClQueue own = msda::opencl_queue();
    for (const auto locations : {msda::LocationsLayout::BQHLP2, msda::LocationsLayout::B2QHLP}) {
        for (const std::size_t first : {std::size_t{0}, std::size_t{128}, std::size_t{4}, std::size_t{68}}) {
            const auto value = first % 8 ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
            const ProblemData data(spec_for(locations, value, first == 68 ? 3 : 0));
            SCOPED_TRACE(data.spec.describe() + " first element at byte " + std::to_string(first));
            DeviceTensors tensors(data, own, first, first == 128);
            ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
            ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
            expect_correct(tensors, data);
        }
    }
}

// Location planes a sub-buffer can start at (B2QHLP with N_q N_h N_l N_p
// a multiple of 32 floats, 128 bytes), both written by one kernel as
// sub-buffers of one cl_mem, never beside the whole buffer.
TEST(OpenClTensors, AlignedPlanesOfOneBufferMatchTheReference) {
    MSDA_REQUIRE_OPENCL();
    const msda::OpenClQueue own = msda::opencl_queue();
    ProblemSpec spec = spec_for(msda::LocationsLayout::B2QHLP, msda::ValueLayout::BLNC, 0);
    spec.queries = 32;
    const ProblemData data(spec);
    DeviceTensors tensors(data, own, 0);
    ASSERT_EQ(tensors.backward_args().grad_sampling_locations.strides[1] * 4 % 128, 0);
    ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
    ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
    expect_correct(tensors, data);
}

// A caller's own context and in-order queue (Options::device_context): the
// work is enqueued there; the results are there once the caller's queue
// has finished. Then msda forgets the context before it is destroyed.
TEST(OpenClTensors, OnTheCallersQueueMatchTheReference) {
    MSDA_REQUIRE_OPENCL();
    cl_platform_id platform = nullptr;
    ASSERT_EQ(clGetPlatformIDs(1, &platform, nullptr), CL_SUCCESS);
    cl_device_id device = nullptr;
    ASSERT_EQ(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr), CL_SUCCESS);
    cl_int error = 0;
    cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &error);
    ASSERT_EQ(error, CL_SUCCESS);
    cl_command_queue queue = clCreateCommandQueue(context, device, 0, &error);
    ASSERT_EQ(error, CL_SUCCESS);
    {
        const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 2));
        DeviceTensors tensors(data, context, queue, 0, true);
        msda::Options options = data.spec.options;
        options.device_context.queue = queue;
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), options));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), options));
        ASSERT_EQ(clFinish(queue), CL_SUCCESS);
        expect_correct(tensors, data);

        // The same cl_mem with msda's own queue: another context (the level
        // tables are read first).
        try {
            msda::forward(tensors.forward_args(), data.spec.options);
            ADD_FAILURE() << "a cl_mem of another context was accepted";
        } catch (const msda::Error &e) {
            EXPECT_NE(std::string(e.what()).find("msda: spatial_shapes: its cl_mem belongs to another OpenCL context"),
                      std::string::npos)
                << e.what();
        }
    }
    EXPECT_NO_THROW(msda::release_opencl_context(queue));
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
}

// Calls from four threads at once on msda's own queue, each on tensors of
// its own, at offsets that take each path.
TEST(OpenClTensors, ConcurrentCallsMatchTheReference) {
    MSDA_REQUIRE_OPENCL();
    const msda::OpenClQueue own = msda::opencl_queue();
    const std::size_t firsts[4] = {0, 128, 4, 256};
    std::vector<std::unique_ptr<ProblemData>> problems;
    std::vector<std::unique_ptr<DeviceTensors>> tensors;
    for (int t = 0; t < 4; ++t) {
        ProblemSpec spec = spec_for(t % 2 ? msda::LocationsLayout::B2QHLP : msda::LocationsLayout::BQHLP2,
                                    msda::ValueLayout::BLNC, t);
        spec.seed = 300 + t;
        problems.push_back(std::make_unique<ProblemData>(spec));
        tensors.push_back(std::make_unique<DeviceTensors>(*problems.back(), own, firsts[t]));
    }
    msda::testing::expect_concurrent_calls_correct(problems, tensors);
}

// A plan made for OpenCL runs device tensors call after call; one made for
// the CPU refuses them.
TEST(OpenClTensors, PlansRunThemOnOpenClOnly) {
    MSDA_REQUIRE_OPENCL();
    const msda::OpenClQueue own = msda::opencl_queue();
    const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 1));
    DeviceTensors tensors(data, own, 0);
    msda::testing::expect_plans_run_them_only_on(msda::Device::opencl, tensors, data,
                                                 "msda: value: is on an OpenCL device, but the plan was made for "
                                                 "Device::cpu");
}

// With no queries grad_value is zeroed, on the device, elements only.
TEST(OpenClTensors, AnEmptyQuerySetZeroesGradValue) {
    MSDA_REQUIRE_OPENCL();
    const msda::OpenClQueue own = msda::opencl_queue();
    ProblemSpec spec = spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BNLC, 2);
    spec.queries = 0;
    const ProblemData data(spec);
    DeviceTensors tensors(data, own, 4);
    msda::testing::expect_an_empty_query_set_zeroes_grad_value(tensors, data);
}

// What cannot run is refused before anything is written, naming the tensor.
TEST(OpenClTensors, BadDeviceTensorsAreRefusedByName) {
    MSDA_REQUIRE_OPENCL();
    const msda::OpenClQueue own = msda::opencl_queue();
    const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 0));
    DeviceTensors tensors(data, own, 0);
    const std::vector<std::uint8_t> before = tensors.host.output.bytes();
    const auto expect_refused = msda::testing::expect_forward_refused;
    msda::ForwardArgs mixed = tensors.forward_args();
    mixed.attention_weights = tensors.host.attention_weights.view();
    expect_refused(mixed, data.spec.options,
                   "msda: attention_weights: is a host tensor but value is on OpenCL device 0; the tensors of a "
                   "call are on one device");
    msda::ForwardArgs host_value = tensors.forward_args();
    host_value.value = tensors.host.value.view();
    expect_refused(host_value, data.spec.options, "msda: sampling_locations: is on OpenCL device 0 but value is a host tensor");
    msda::ForwardArgs other_id = tensors.forward_args();
    other_id.output.device_id = 1;
    expect_refused(other_id, data.spec.options, "msda: output: is on OpenCL device 1 but value is on OpenCL device 0");
    msda::ForwardArgs cuda = tensors.forward_args();
    cuda.output.device_type = msda::DeviceType::cuda;
    expect_refused(cuda, data.spec.options, "msda: output: is on CUDA device 0 but value is on OpenCL device 0");
    msda::ForwardArgs past_the_end = tensors.forward_args();
    past_the_end.output.byte_offset = 1 << 20;
    expect_refused(past_the_end, data.spec.options, "msda: output: its elements lie at bytes [1048576, ");
    msda::ForwardArgs tables = tensors.forward_args();
    tables.value = tensors.host.value.view();
    tables.sampling_locations = tensors.host.sampling_locations.view();
    tables.attention_weights = tensors.host.attention_weights.view();
    tables.output = tensors.host.output.view();
    tables.spatial_shapes = tables.spatial_shapes.on_device(msda::DeviceType::opencl);
    expect_refused(tables, data.spec.options, "msda: spatial_shapes: is on OpenCL device 0 but value is a host tensor");
    msda::Options with_queue = data.spec.options;
    with_queue.device_context.queue = own.queue;
    expect_refused(tensors.host.forward_args(), with_queue, "msda: options.device_context: is set, but the call runs on the CPU");
    msda::ForwardArgs flipped = tensors.forward_args();
    flipped.value.byte_offset += (flipped.value.shape[1] - 1) * flipped.value.strides[1] * 4;
    flipped.value.strides[1] = -flipped.value.strides[1];
    expect_refused(flipped, data.spec.options, "msda: value: dimension 1 has stride -");
    // Host tensors on Device::opencl too (N_p = 3: the last point first).
    msda::ForwardArgs host_flipped = tensors.host.forward_args();
    msda::TensorView &weights = host_flipped.attention_weights;
    weights.data = static_cast<float *>(weights.data) + (weights.shape[4] - 1) * weights.strides[4];
    weights.strides[4] = -weights.strides[4];
    msda::Options on_opencl = data.spec.options;
    on_opencl.device = msda::Device::opencl;
    expect_refused(host_flipped, on_opencl, "msda: attention_weights: dimension 4 has stride -");
    msda::ForwardArgs aliased = tensors.forward_args();
    aliased.output.data = tensors.forward_args().sampling_locations.data;
    aliased.output.byte_offset = 0;
    expect_refused(aliased, data.spec.options, "msda: output: its memory overlaps sampling_locations");
    EXPECT_EQ(tensors.host.output.bytes(), before);
    tensors.read_back();
    msda::testing::expect_inputs_unchanged(tensors.host, data);
    EXPECT_TRUE(tensors.host.output.all_hold(msda::testing::kSentinel));
}

TEST(OpenClTensors, AnOutOfOrderQueueIsRefused) {
    MSDA_REQUIRE_OPENCL();
    const msda::OpenClQueue own = msda::opencl_queue();
    cl_int error = 0;
    cl_command_queue queue = clCreateCommandQueue(static_cast<cl_context>(own.context),
                                                  static_cast<cl_device_id>(own.device),
                                                  CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &error);
    if (error != CL_SUCCESS) GTEST_SKIP() << "this OpenCL device has no out-of-order queues (error " << error << ")";
    const ProblemData data(spec_for(msda::LocationsLayout::BQHLP2, msda::ValueLayout::BLNC, 0));
    LibraryTensors tensors(data);
    msda::Options options = data.spec.options;
    options.device = msda::Device::opencl;
    options.device_context.queue = queue;
    try {
        msda::forward(tensors.forward_args(), options);
        ADD_FAILURE() << "an out-of-order queue was accepted";
    } catch (const msda::Error &e) {
        EXPECT_NE(std::string(e.what()).find("msda: options.device_context.queue: is an out-of-order queue"), std::string::npos)
            << e.what();
    }
    EXPECT_TRUE(tensors.output.all_hold(msda::testing::kSentinel));
    clReleaseCommandQueue(queue);
}

// DLPack's OpenCL tensors (data: the cl_mem) through msda::from_dlpack,
// and the C API's device fields, reach the same results.
TEST(OpenClTensors, DlpackAndTheCApiCarryTheDevice) {
    MSDA_REQUIRE_OPENCL();
    void *context = nullptr, *queue = nullptr;
    ASSERT_EQ(msda_opencl_queue(&context, &queue, nullptr), MSDA_OK) << msda_last_error();
    const ProblemData data(spec_for(msda::LocationsLayout::B2QHLP, msda::ValueLayout::BLNC, 1));
    DeviceTensors tensors(data, static_cast<cl_context>(context), static_cast<cl_command_queue>(queue), 8);
    // Each forward view as a DLTensor on kDLOpenCL, then back.
    msda::ForwardArgs args = tensors.forward_args();
    std::vector<std::vector<std::int64_t>> shapes, strides;
    for (msda::TensorView *view : {&args.value, &args.sampling_locations, &args.attention_weights, &args.output}) {
        shapes.emplace_back(view->shape, view->shape + view->rank);
        strides.emplace_back(view->strides, view->strides + view->rank);
        DLTensor dl{};
        dl.data = view->data;
        dl.device = {kDLOpenCL, 0};
        dl.ndim = view->rank;
        dl.dtype = {kDLFloat, 32, 1};
        dl.shape = shapes.back().data();
        dl.strides = strides.back().data();
        dl.byte_offset = static_cast<std::uint64_t>(view->byte_offset);
        *view = msda::from_dlpack(dl, "tensor");
    }
    ASSERT_NO_THROW(msda::forward(args, data.spec.options));
    // The backward through the C API.
    const msda::BackwardArgs backward = tensors.backward_args();
    msda_backward_args c_args = msda::testing::to_c(backward);
    c_args.spatial_shapes.device_type = 0;  // a zeroed field: the host
    msda_options c_options = msda_default_options();
    c_options.locations_layout = MSDA_B2QHLP;
    c_options.align_corners = data.spec.options.align_corners;
    c_options.padding_mode = static_cast<msda_padding_mode>(data.spec.options.padding_mode);
    ASSERT_EQ(msda_backward(&c_args, &c_options), MSDA_OK) << msda_last_error();
    expect_correct(tensors, data);
}

}  // namespace
