// libFuzzer target over the command line's .npy reader (tools/npy.h): any
// bytes either parse into an array or throw npy::Error whose message names
// the file; nothing else may happen (another exception, a crash, a
// sanitizer finding, an allocation the file's size does not justify). An
// array that parses must hold exactly the file's data bytes, and survive a
// round trip through the writer's bytes unchanged. Seeds in
// tests/fuzz_corpus/npy.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "npy.h"

namespace {

[[noreturn]] void bug(const std::string &what) {
    std::fprintf(stderr, "fuzz_npy: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char *>(data), size);
    npy::Array array;
    try {
        array = npy::parse(bytes, "fuzzed.npy");
    } catch (const npy::Error &e) {
        const std::string message = e.what();
        if (message.find("fuzzed.npy") == std::string::npos) bug("an error that does not name the file: " + message);
        return 0;
    } catch (const std::exception &e) {
        bug(std::string("an exception other than npy::Error: ") + e.what());
    }
    // Accepted: the data is the file's last byte_size() bytes.
    if (array.byte_size() > size) bug("an array larger than its file");
    if (array.byte_size() > 0 &&
        std::memcmp(array.data(), data + size - array.byte_size(), array.byte_size()) != 0) {
        bug("the array's bytes are not the file's data");
    }
    const std::string written = npy::serialize(array);
    npy::Array again;
    try {
        again = npy::parse(written, "rewritten.npy");
    } catch (const std::exception &e) {
        bug(std::string("the writer's bytes do not parse: ") + e.what());
    }
    if (again.dtype() != array.dtype() || again.shape() != array.shape() ||
        (array.byte_size() > 0 && std::memcmp(again.data(), array.data(), array.byte_size()) != 0)) {
        bug("a round trip changed the array");
    }
    return 0;
}
