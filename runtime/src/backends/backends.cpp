// The registration of every backend: one line a device.
#include "backends/backends.h"

namespace msda::detail {

namespace {

const Backend *const *registered() {
    static const Backend *const backends[] = {
        &host_backend(),
        &opencl_backend(),
        &cuda_backend(),
        nullptr,
    };
    return backends;
}

}  // namespace

const Backend &backend_for(Device device) {
    for (const Backend *const *b = registered(); *b != nullptr; ++b) {
        if ((*b)->device() == device) return **b;
    }
    return host_backend();  // validation refuses an unknown Options::device first
}

const Backend *backend_of(DeviceType type) {
    for (const Backend *const *b = registered(); *b != nullptr; ++b) {
        if ((*b)->tensor_type() == type) return *b;
    }
    return nullptr;
}

}  // namespace msda::detail
