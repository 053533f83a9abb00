// The host CPU's backend: its tensors are host memory the generated code
// reads and writes where it is, so a call has nothing to resolve, hand
// over, copy or wait for.
#include "backends/backend.h"
#include "backends/backends.h"
#include "buffers.h"
#include "errors.h"

namespace msda::detail {

namespace {

class HostBackend final : public Backend {
public:
    Device device() const override { return Device::cpu; }
    DeviceType tensor_type() const override { return DeviceType::cpu; }
    const char *name() const override { return "CPU"; }
    const char *option_name() const override { return "cpu"; }
    TargetFamily family() const override { return kLibraryFamily; }

    Queue resolve(const DeviceContext &given, int) const override {
        if (given.context != nullptr || given.queue != nullptr) {
            fail("options.device_context",
                 "is set, but the call runs on the CPU (its tensors are host tensors and Options::device is cpu)");
        }
        return {};
    }
    MemorySpan span(const TensorView &t, const char *) const override {
        return {nullptr, reinterpret_cast<std::uintptr_t>(host_address(t))};
    }
    void check_memory(const TensorView &, const char *, const Queue &) const override {}
    int read(const Queue &, void *, std::uint64_t, std::size_t, void *) const override { return -1; }
    int write(const Queue &, void *, std::uint64_t, std::size_t, const void *) const override { return -1; }
    void run(const BoundCall &call) const override {
        CallContext context;
        call.run(call.closure, context);
    }
};

}  // namespace

const Backend &host_backend() {
    static const HostBackend backend;
    return backend;
}

}  // namespace msda::detail
