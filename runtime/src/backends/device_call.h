// What the GPU family's backends share in running one generated function:
// host tensors marked so the generated code copies them to the device (and
// their results copied back), the call's errors, and every buffer given
// back as it was, however the call ends. Each backend adds how its device
// memory is handed over (opencl_call.cpp, cuda_call.cpp).
#pragma once

#include <HalideRuntime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "buffers.h"

namespace msda::detail {

class DeviceCall {
public:
    explicit DeviceCall(const BoundCall &call) : call_(call) {}
    DeviceCall(const DeviceCall &) = delete;
    DeviceCall &operator=(const DeviceCall &) = delete;

protected:
    std::size_t count() const { return call_.count; }
    bool is_input(std::size_t i) const { return i < call_.inputs; }
    HalideBuffer &buffer(std::size_t i) const { return *call_.buffers[i]; }

    // Marks a buffer the generated code reads as changed on the host (so it
    // is copied to the device), and one it writes as not.
    static void mark_host_copy(halide_buffer_t *raw, bool input) {
        if (input) {
            raw->flags |= halide_buffer_flag_host_dirty;
        } else {
            raw->flags &= ~static_cast<std::uint64_t>(halide_buffer_flag_host_dirty);
        }
    }

    // Runs the generated function in the call's context.
    void run() { call_.run(call_.closure, context_); }

    // The results of the outputs that live in host memory (host tensors,
    // `staged` ones) copied back there from the device.
    template <typename Staged>
    void copy_results_to_host(Staged staged) {
        for (std::size_t i = call_.inputs; i < call_.count; ++i) {
            if (buffer(i).device_handle != nullptr && !staged(i)) continue;
            const int result = halide_copy_to_host(&context_, buffer(i).get());
            if (result != 0) fail_with("copying the results of", result, context_.message);
        }
    }

    // Every buffer as it was: the wrapped device memory detached (by
    // `detach`), whatever Halide allocated freed.
    template <typename Detach>
    void release_buffers(Detach detach) {
        CallContext context = context_;
        for (std::size_t i : wrapped_) detach(&context, buffer(i).get());
        wrapped_.clear();
        for (std::size_t i = 0; i < call_.count; ++i) {
            halide_buffer_t *raw = buffer(i).get();
            if (raw->device != 0) halide_device_free(&context, raw);
            // Even where the free failed: the next call of this backward
            // hands the same buffer over afresh.
            raw->device = 0;
            raw->device_interface = nullptr;
            raw->flags = 0;
            if (buffer(i).device_handle != nullptr) raw->host = nullptr;
        }
    }

    [[noreturn]] void fail_with(const char *what, int code, const std::string &message) const {
        throw Error(std::string("msda: ") + what + " " + kind_name(call_.variant.kind) + " on " +
                    family_name(call_.variant.family) + " failed (error " + std::to_string(code) +
                    "): " + (message.empty() ? "no message" : message));
    }

    const BoundCall &call_;
    CallContext context_;
    std::vector<std::size_t> wrapped_;
    bool device_tensors_ = false;
    bool completed_ = false;
};

}  // namespace msda::detail
