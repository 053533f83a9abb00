// Anonymous memory reserved without backing (MAP_NORESERVE): untouched
// pages cost nothing and read as zeros, so a test can describe tensors of
// tens of gigabytes and commit only the pages a call touches.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace msda::testing {

class SparseMemory {
public:
    // whole: memory a call will write whole (an output of gigabytes), asked
    // for in transparent huge pages where the kernel allows (madvise), so
    // committing it takes a fault per 2 MiB rather than per 4 KiB.
    explicit SparseMemory(std::size_t bytes, bool whole = false) : bytes_(bytes) {
        void *p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        data_ = p == MAP_FAILED ? nullptr : p;
        if (data_ != nullptr && whole) madvise(data_, bytes_, MADV_HUGEPAGE);  // advice: its failure changes nothing
    }
    SparseMemory(const SparseMemory &) = delete;
    SparseMemory &operator=(const SparseMemory &) = delete;
    ~SparseMemory() {
        if (data_ != nullptr) munmap(data_, bytes_);
    }
    template <typename T> T *as() const { return static_cast<T *>(data_); }
    std::size_t bytes() const { return bytes_; }

private:
    std::size_t bytes_;
    void *data_;
};

}  // namespace msda::testing
