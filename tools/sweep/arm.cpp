#include "arm.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "child.h"

namespace msda_sweep {

namespace {

bool on_path(const std::string &program) {
    return run_child({"sh", "-c", "command -v " + program}, std::filesystem::temp_directory_path().string())
               .status == 0;
}

std::string flattened(std::string text) {
    for (char &c : text) c = c == '\n' ? ' ' : c;
    return text;
}

void must(const ChildResult &result, const std::string &what) {
    if (result.status != 0) {
        throw std::runtime_error(what + " failed (status " + std::to_string(result.status) + "): " +
                                 flattened(result.errors));
    }
}

// Elements from a buffer's host pointer to its last (strides positive).
std::int64_t span_of(const halide_buffer_t &buffer) {
    std::int64_t span = 1;
    for (int d = 0; d < buffer.dimensions; d++) {
        span += static_cast<std::int64_t>(buffer.dim[d].extent - 1) * buffer.dim[d].stride;
    }
    return span;
}

}  // namespace

bool arm_emulation_available(std::string &why) {
    for (const char *program : {"aarch64-linux-gnu-g++", "qemu-aarch64"}) {
        if (!on_path(program)) {
            why = std::string(program) + " is not on PATH (scripts/setup.sh installs it)";
            return false;
        }
    }
    return true;
}

EmulatedArm::EmulatedArm(const Halide::Target &target, const Variant &variant, const std::string &folder)
    : folder_(folder) {
    const auto start = std::chrono::steady_clock::now();
    std::filesystem::create_directories(folder);
    // The runner's object once per sweep folder.
    const std::string runner_object = folder + "/../arm_runner.o";
    if (!std::filesystem::exists(runner_object)) {
        must(run_child({"aarch64-linux-gnu-g++", "-O2", "-std=c++17", "-I" MSDA_SWEEP_HALIDE_LIB_DIR "/../include",
                        "-c", MSDA_SWEEP_SOURCE_DIR "/tools/sweep/arm_runner.cpp", "-o", runner_object},
                       folder),
             "compiling arm_runner.cpp");
    }
    compile_to_static_library(target, variant, folder + "/candidate");
    must(run_child({"aarch64-linux-gnu-g++", "-static", runner_object, folder + "/candidate.a", "-o",
                    folder + "/runner", "-lpthread", "-ldl"},
                   folder),
         "linking the ARM runner");
    compile_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void EmulatedArm::run(Tensors &tensors) const {
    const std::string problem = folder_ + "/problem";
    std::filesystem::remove_all(problem);
    std::filesystem::create_directories(problem);
    for (const auto &[name, buffer] : tensors.buffers()) {
        const halide_buffer_t &raw = *buffer.raw_buffer();
        std::ofstream out(problem + "/" + name + ".buf", std::ios::binary);
        const std::int32_t dimensions = raw.dimensions;
        out.write(reinterpret_cast<const char *>(&dimensions), sizeof dimensions);
        for (int d = 0; d < raw.dimensions; d++) {
            const std::int32_t extent_and_stride[2] = {raw.dim[d].extent, raw.dim[d].stride};
            out.write(reinterpret_cast<const char *>(extent_and_stride), sizeof extent_and_stride);
        }
        const std::int64_t span = span_of(raw);
        out.write(reinterpret_cast<const char *>(&span), sizeof span);
        out.write(reinterpret_cast<const char *>(raw.host), span * raw.type.bytes());
    }
    const std::pair<const char *, bool> scalars[] = {
        {"align_corners", tensors.align_corners}, {"border", tensors.border}, {"nearest", false}};
    for (const auto &[name, value] : scalars) {
        std::ofstream(problem + "/" + name + ".scalar", std::ios::binary).put(value ? 1 : 0);
    }
    must(run_child({"qemu-aarch64", folder_ + "/runner", problem}, folder_), "the candidate under qemu-aarch64");
    for (const auto &[name, buffer] : tensors.buffers()) {
        const std::string path = problem + "/" + name + ".out";
        if (!std::filesystem::exists(path)) continue;
        const halide_buffer_t &raw = *buffer.raw_buffer();
        std::vector<char> bytes(span_of(raw) * raw.type.bytes());
        std::ifstream in(path, std::ios::binary);
        if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
            throw std::runtime_error("the ARM runner's " + path + " is short");
        }
        // Only the elements the buffer addresses (the location planes
        // interleave).
        Halide::Runtime::Buffer<> result(raw.type, bytes.data(), raw.dimensions, raw.dim);
        tensors.named(name).copy_from(result);
    }
}

}  // namespace msda_sweep
