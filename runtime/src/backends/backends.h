// The registration of every backend: one line a device. Inline, so that
// finding a call's backend is no call into another file.
#pragma once

#include "backends/backend.h"

namespace msda::detail {

const Backend &host_backend();
const Backend &opencl_backend();
const Backend &cuda_backend();

inline const Backend *const *registered_backends() {
    static const Backend *const backends[] = {
        &host_backend(),
        &opencl_backend(),
        &cuda_backend(),
        nullptr,
    };
    return backends;
}

inline const Backend &backend_for(Device device) {
    for (const Backend *const *b = registered_backends(); *b != nullptr; ++b) {
        if ((*b)->device() == device) return **b;
    }
    return host_backend();  // validation refuses an unknown Options::device first
}

inline const Backend *backend_of(DeviceType type) {
    for (const Backend *const *b = registered_backends(); *b != nullptr; ++b) {
        if ((*b)->tensor_type() == type) return *b;
    }
    return nullptr;
}

}  // namespace msda::detail
