// OpenCL's backend: a call's queue, its tensors' cl_mem described and
// checked, and the generated code's buffers handed over. Host tensors
// (Options::device): every input is marked as changed on the host, so the
// generated code copies it to the device, and once the call has succeeded
// its results are copied back into the caller's memory (their elements
// only); the device buffers are a Plan's (given back to it as the call
// ends) or the generated code's own (freed however the call ends). Tensors
// on the device: a cl_mem is handed to the generated code as it is where the
// buffer's element 0 is at offset 0 and no other buffer of the call shares
// its parent; as a sub-buffer of its span where the offset is a multiple of
// the device's base address alignment (OpenCL's rule for sub-buffers);
// otherwise through host memory: an input's span is read back (then copied
// to the device by the generated code), an output's results come back to
// host memory and are written into its elements in the cl_mem, whose other
// bytes keep what they held.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/backends.h"
#include "backends/device_call.h"
#include "backends/opencl.h"
#include "errors.h"

namespace msda::detail {

namespace {

class OpenClCall final : public DeviceCall {
public:
    explicit OpenClCall(const BoundCall &call) : DeviceCall(call) {
        context_.context = call.queue.own ? nullptr : call.queue.context;
        context_.queue = call.queue.own ? nullptr : call.queue.queue;
    }
    ~OpenClCall() { release(); }

    void execute() {
        prepare();
        run();
        finish();
    }

private:
    // A device tensor brought through host memory: the bytes of its span,
    // which starts at `begin` in its cl_mem.
    struct Staged {
        std::size_t buffer;
        std::uint64_t begin;
        std::int64_t first;  // element 0's offset in memory, in bytes
        std::vector<std::byte> memory;
    };

    opencl::Pool *pool() const { return static_cast<opencl::Pool *>(call_.pool); }

    // Before the call: each buffer's memory on the device, or marked to be
    // copied there.
    void prepare() {
        // Each device buffer's parent: OpenCL leaves a kernel's writes
        // undefined where it also reaches the same memory through a buffer
        // and its sub-buffer, so a cl_mem goes to the kernels as it is only
        // when no other tensor of the call shares its parent.
        std::vector<opencl::Memory> memories(count());
        std::vector<void *> roots(count(), nullptr);
        for (std::size_t i = 0; i < count(); ++i) {
            if (buffer(i).device_handle != nullptr) {
                memories[i] = opencl::memory(buffer(i).device_handle, call_.variant.name);
                roots[i] = memories[i].root;
            }
        }
        for (std::size_t i = 0; i < count(); ++i) {
            HalideBuffer &b = buffer(i);
            halide_buffer_t *raw = b.get();
            const bool input = is_input(i);
            if (b.device_handle == nullptr) {
                mark_host_copy(raw, input);
                const Reach reach = buffer_reach(*raw);
                if (pool() != nullptr && reach.low == 0) {
                    const std::uint64_t bytes = static_cast<std::uint64_t>((reach.high + 1) * raw->type.bytes());
                    if (void *memory = pool()->take(call_.queue, bytes)) {
                        pooled_.push_back({memory, bytes});
                        wrap(i, memory);
                    }
                }
                continue;
            }
            device_tensors_ = true;
            const Reach reach = buffer_reach(*raw);
            const std::int64_t element = raw->type.bytes();
            const bool alone = std::count(roots.begin(), roots.end(), roots[i]) == 1;
            if (reach.low == 0 && b.device_offset == 0 && alone) {
                wrap(i, b.device_handle);
                continue;
            }
            const opencl::Memory &memory = memories[i];
            const std::uint64_t origin = memory.root_offset + static_cast<std::uint64_t>(b.device_offset);
            if (reach.low == 0 && origin % opencl::base_alignment(call_.queue) == 0) {
                // Exactly its elements' span: sub-buffers of one parent
                // that the call writes never overlap (validation).
                std::int32_t error = 0;
                void *sub = opencl::sub_buffer(memory.root, origin,
                                               static_cast<std::uint64_t>((reach.high + 1) * element), error);
                if (sub != nullptr) {
                    subs_.push_back(sub);
                    wrap(i, sub);
                    continue;
                }
            }
            stage(i, reach, input);
        }
    }

    // After the call succeeded: host tensors' results in the caller's
    // memory, staged results in their cl_mem; on msda's own queue, the
    // device's work done.
    void finish() {
        copy_results_to_host([&](std::size_t i) { return is_staged(i); });
        for (Staged &staged : staged_) {
            if (is_input(staged.buffer)) continue;
            write_back(staged);
        }
        if (device_tensors_ && call_.queue.own) {
            const std::int32_t error = opencl::finish(call_.queue);
            if (error != 0) fail_with("waiting for", error, "clFinish failed");
        }
        completed_ = true;
    }

    bool is_staged(std::size_t i) const {
        for (const Staged &staged : staged_) {
            if (staged.buffer == i) return true;
        }
        return false;
    }

    void wrap(std::size_t i, void *memory) {
        const int result = opencl::wrap(&context_, buffer(i).get(), memory);
        if (result != 0) fail_with("handing a cl_mem to", result, context_.message);
        wrapped_.push_back(i);
    }

    void stage(std::size_t i, const Reach &reach, bool input) {
        HalideBuffer &b = buffer(i);
        halide_buffer_t *raw = b.get();
        const std::int64_t element = raw->type.bytes();
        Staged staged{i, static_cast<std::uint64_t>(b.device_offset + reach.low * element), -reach.low * element, {}};
        staged.memory.resize(static_cast<std::size_t>((reach.high - reach.low + 1) * element));
        if (input) {
            const std::int32_t error =
                opencl::read(call_.queue, b.device_handle, staged.begin, staged.memory.size(), staged.memory.data());
            if (error != 0) fail_with("reading an input of", error, "clEnqueueReadBuffer failed");
        }
        staged_.push_back(std::move(staged));
        Staged &kept = staged_.back();
        raw->host = reinterpret_cast<std::uint8_t *>(kept.memory.data() + kept.first);
        mark_host_copy(raw, input);
    }

    // A staged output's elements into its cl_mem: the span as it is now
    // (after the call's kernels), its elements replaced, written back.
    void write_back(const Staged &staged) {
        HalideBuffer &b = buffer(staged.buffer);
        const std::size_t element = b.get()->type.bytes();
        const int error = rewrite_span(opencl_backend(), call_.queue, b.device_handle, staged.begin,
                                       staged.memory.size(), [&](std::byte *now) {
                                           auto copy = [&](std::int64_t offset) {
                                               const std::size_t at = static_cast<std::size_t>(
                                                   staged.first + offset * static_cast<std::int64_t>(element));
                                               std::memcpy(now + at, staged.memory.data() + at, element);
                                           };
                                           for_each_element(*b.get(), b.get()->dimensions - 1, 0, copy);
                                       });
        if (error != 0) fail_with("writing an output of", error, "reading or writing its span failed");
    }

    // Every buffer as it was: wrapped cl_mem detached, whatever Halide
    // allocated freed, sub-buffers released, staged host memory dropped.
    void release() {
        release_buffers([](void *context, halide_buffer_t *raw) { opencl::detach(context, raw); });
        for (void *sub : subs_) opencl::release(sub);
        subs_.clear();
        // A failed call may leave kernels running on the plan's buffers:
        // they are given back for the next call once the queue is done.
        if (!completed_ && !pooled_.empty()) opencl::finish(call_.queue);
        for (const auto &[memory, bytes] : pooled_) pool()->give(call_.queue, memory, bytes);
        pooled_.clear();
        opencl::release_leftover_lock();
    }

    std::vector<void *> subs_;
    std::vector<std::pair<void *, std::uint64_t>> pooled_;  // a Plan's buffers taken, and their sizes
    std::vector<Staged> staged_;
};

class OpenClBackend final : public Backend {
public:
    Device device() const override { return Device::opencl; }
    DeviceType tensor_type() const override { return DeviceType::opencl; }
    const char *name() const override { return "OpenCL"; }
    const char *option_name() const override { return "opencl"; }
    TargetFamily family() const override { return TargetFamily::opencl; }

    Queue resolve(const DeviceContext &given, int) const override { return opencl::call_queue(given); }

    MemorySpan span(const TensorView &t, const char *name) const override {
        const opencl::Memory memory = opencl::memory(t.data, name);
        return {memory.root, memory.root_offset + static_cast<std::uint64_t>(t.byte_offset)};
    }

    // A device tensor's elements within its cl_mem, which belongs to the
    // context of the call's queue (after validation's addressing checks).
    void check_memory(const TensorView &t, const char *name, const Queue &queue) const override {
        const opencl::Memory memory = opencl::memory(t.data, name);
        if (memory.context != queue.context) {
            fail(name, std::string("its cl_mem belongs to another OpenCL context than the call's queue (") +
                           (queue.own ? "msda's own, msda::opencl_queue()" : "Options::device_context") + ")");
        }
        if (t.numel() == 0) return;
        const Reach reach = reach_of(t);
        const std::int64_t size = static_cast<std::int64_t>(dtype_size(t.dtype));
        const std::int64_t begin = t.byte_offset + reach.low * size, end = t.byte_offset + (reach.high + 1) * size;
        if (begin < 0 || static_cast<std::uint64_t>(end) > memory.size) {
            fail(name, "its elements lie at bytes [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ") of its cl_mem, which holds " + std::to_string(memory.size) + " bytes");
        }
    }

    int read(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes, void *host) const override {
        return opencl::read(queue, memory, offset, bytes, host);
    }
    int write(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes,
              const void *host) const override {
        return opencl::write(queue, memory, offset, bytes, host);
    }

    void run(const BoundCall &call) const override { OpenClCall(call).execute(); }

    bool needs_serial_scatter(const Queue &queue) const override { return !opencl::has_int64_atomics(queue); }
    bool computes_float64(const Queue &queue) const override { return opencl::has_fp64(queue); }
    std::shared_ptr<DevicePool> make_pool() const override { return std::make_shared<opencl::Pool>(); }
};

}  // namespace

const Backend &opencl_backend() {
    static const OpenClBackend backend;
    return backend;
}

}  // namespace msda::detail
