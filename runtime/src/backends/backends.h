// The backends this library registers (backends.cpp), one per device.
#pragma once

#include "backends/backend.h"

namespace msda::detail {

const Backend &host_backend();
const Backend &opencl_backend();
const Backend &cuda_backend();

}  // namespace msda::detail
