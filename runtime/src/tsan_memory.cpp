// Only in a ThreadSanitizer tree (MSDA_SANITIZE=thread, runtime/CMakeLists.txt).
//
// Halide 21's ThreadSanitizer instrumentation (its LLVM) turns the generated
// code's memcpy and memset into calls to __tsan_memcpy and __tsan_memset,
// which the ThreadSanitizer runtime of clang 14, the tree's compiler, does
// not define (later runtimes do). These forward to memcpy and memset, which
// that runtime intercepts and checks, so the copies are still seen.
#include <cstddef>
#include <cstring>

extern "C" {

__attribute__((weak)) void *__tsan_memcpy(void *destination, const void *source, std::size_t bytes) {
    return std::memcpy(destination, source, bytes);
}

__attribute__((weak)) void *__tsan_memset(void *destination, int byte, std::size_t bytes) {
    return std::memset(destination, byte, bytes);
}

__attribute__((weak)) void *__tsan_memmove(void *destination, const void *source, std::size_t bytes) {
    return std::memmove(destination, source, bytes);
}

}  // extern "C"
