// The generated code's scratch allocator (scratch.h).
#include "scratch.h"

#include <HalideRuntime.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace msda::detail {
namespace {

// Halide's contract for halide_malloc: aligned for any vector, a size that
// is a multiple of that alignment, and 8 bytes either side safe to read.
// Each block is [header: its capacity][payload][a guard of kAlignment].
constexpr std::size_t kAlignment = 128;

std::size_t rounded(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

std::size_t &capacity_of(void *payload) {
    return *reinterpret_cast<std::size_t *>(static_cast<char *>(payload) - kAlignment);
}

void *new_block(std::size_t capacity) {
    void *raw = std::aligned_alloc(kAlignment, kAlignment + capacity + kAlignment);
    if (raw == nullptr) return nullptr;
    void *payload = static_cast<char *>(raw) + kAlignment;
    capacity_of(payload) = capacity;
    return payload;
}

void delete_block(void *payload) { std::free(static_cast<char *>(payload) - kAlignment); }

// The freed blocks, shared by every thread: a block one of Halide's workers
// frees serves whichever thread next needs one, so a call allocates only
// when more of its tasks run at once than in any call before.
class Pool {
public:
    ~Pool() { release(); }

    std::size_t release() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::size_t bytes = 0;
        for (int i = 0; i < count_; i++) {
            bytes += capacity_of(blocks_[i]);
            delete_block(blocks_[i]);
        }
        count_ = 0;
        return bytes;
    }

    // The smallest kept block that holds `capacity`, taken out; null if none.
    void *take(std::size_t capacity) {
        std::lock_guard<std::mutex> lock(mutex_);
        int best = -1;
        for (int i = 0; i < count_; i++) {
            const std::size_t c = capacity_of(blocks_[i]);
            if (c >= capacity && (best < 0 || c < capacity_of(blocks_[best]))) best = i;
        }
        if (best < 0) return nullptr;
        void *block = blocks_[best];
        blocks_[best] = blocks_[--count_];
        return block;
    }

    // Keeps a block; when full, frees the smallest of it and the kept ones.
    void keep(void *block) {
        void *unkept = block;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (count_ < kScratchSlots) {
                blocks_[count_++] = block;
                return;
            }
            int smallest = 0;
            for (int i = 1; i < count_; i++) {
                if (capacity_of(blocks_[i]) < capacity_of(blocks_[smallest])) smallest = i;
            }
            if (capacity_of(block) > capacity_of(blocks_[smallest])) {
                unkept = blocks_[smallest];
                blocks_[smallest] = block;
            }
        }
        delete_block(unkept);
    }

private:
    std::mutex mutex_;
    void *blocks_[kScratchSlots] = {};
    int count_ = 0;
};

// Never destroyed: Halide's workers may free a block while the process
// exits (their pool outlives static destructors).
Pool &pool() {
    static Pool *const instance = new Pool;
    return *instance;
}

void *scratch_malloc(void *, std::size_t bytes) {
    const std::size_t capacity = rounded(bytes == 0 ? 1 : bytes);
    if (void *block = pool().take(capacity)) return block;
    return new_block(capacity);
}

void scratch_free(void *, void *payload) {
    if (payload != nullptr) pool().keep(payload);
}

}  // namespace

void install_scratch_allocator() {
    halide_set_custom_malloc(&scratch_malloc);
    halide_set_custom_free(&scratch_free);
}

std::size_t release_scratch() { return pool().release(); }

}  // namespace msda::detail
