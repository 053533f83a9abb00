// Runs one sweep candidate compiled for ARM (linked in as
// msda_sweep_candidate) under qemu, for `msda sweep --target arm`: for each
// argument of the candidate (its metadata gives them, in order) it reads
// DIR/NAME.scalar (one byte) or DIR/NAME.buf (the buffer's dimensions, then
// the elements it spans), calls the candidate, and writes each output's
// elements to DIR/NAME.out. The sweep compiles it with the cross compiler
// when it sweeps ARM; it is no part of the library.
//   arm_runner DIR
#include <HalideRuntime.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

extern "C" int msda_sweep_candidate_argv(void **args);
extern "C" const halide_filter_metadata_t *msda_sweep_candidate_metadata();

namespace {

struct Argument {
    std::vector<halide_dimension_t> dims;
    std::vector<char> bytes;
    halide_buffer_t buffer = {};
    bool scalar = false;
};

bool read_buffer(const std::string &path, const halide_type_t &type, Argument &argument) {
    std::ifstream in(path, std::ios::binary);
    std::int32_t dimensions = 0;
    std::int64_t span = 0;
    if (!in.read(reinterpret_cast<char *>(&dimensions), sizeof dimensions) || dimensions < 0 || dimensions > 8) {
        return false;
    }
    argument.dims.resize(dimensions);
    for (halide_dimension_t &dim : argument.dims) {
        std::int32_t extent_and_stride[2];
        if (!in.read(reinterpret_cast<char *>(extent_and_stride), sizeof extent_and_stride)) return false;
        dim = halide_dimension_t(0, extent_and_stride[0], extent_and_stride[1]);
    }
    if (!in.read(reinterpret_cast<char *>(&span), sizeof span) || span < 0) return false;
    argument.bytes.resize(static_cast<std::size_t>(span) * type.bytes());
    if (!in.read(argument.bytes.data(), static_cast<std::streamsize>(argument.bytes.size()))) return false;
    argument.buffer.host = reinterpret_cast<std::uint8_t *>(argument.bytes.data());
    argument.buffer.type = type;
    argument.buffer.dimensions = dimensions;
    argument.buffer.dim = argument.dims.data();
    return true;
}

// The file of an argument: a pipeline's output is named after its Func,
// uniquified (output$1; a Tuple's elements grads$1.0, grads$1.1, ...), and
// its file after the generator's output (output; grads_0, grads_1, ...).
std::string file_name(const std::string &name) {
    const std::size_t dollar = name.find('$');
    if (dollar == std::string::npos) return name;
    const std::size_t dot = name.find('.', dollar);
    return name.substr(0, dollar) + (dot == std::string::npos ? "" : "_" + name.substr(dot + 1));
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: arm_runner DIR\n");
        return 2;
    }
    const std::string folder = argv[1];
    const halide_filter_metadata_t *metadata = msda_sweep_candidate_metadata();
    std::vector<Argument> arguments(metadata->num_arguments);
    std::vector<void *> argv_of(metadata->num_arguments);
    for (int i = 0; i < metadata->num_arguments; i++) {
        const halide_filter_argument_t &a = metadata->arguments[i];
        Argument &argument = arguments[i];
        if (a.kind == halide_argument_kind_input_scalar) {
            std::ifstream in(folder + "/" + file_name(a.name) + ".scalar", std::ios::binary);
            argument.bytes.resize(8, 0);
            if (!in.read(argument.bytes.data(), 1)) {
                std::fprintf(stderr, "arm_runner: no %s/%s.scalar\n", folder.c_str(), a.name);
                return 2;
            }
            argument.scalar = true;
            argv_of[i] = argument.bytes.data();
        } else {
            if (!read_buffer(folder + "/" + file_name(a.name) + ".buf", a.type, argument)) {
                std::fprintf(stderr, "arm_runner: cannot read %s/%s.buf\n", folder.c_str(), file_name(a.name).c_str());
                return 2;
            }
            argv_of[i] = &argument.buffer;
        }
    }
    const int status = msda_sweep_candidate_argv(argv_of.data());
    if (status != 0) {
        std::fprintf(stderr, "arm_runner: the candidate failed (Halide error %d)\n", status);
        return 1;
    }
    for (int i = 0; i < metadata->num_arguments; i++) {
        if (metadata->arguments[i].kind != halide_argument_kind_output_buffer) continue;
        std::ofstream out(folder + "/" + file_name(metadata->arguments[i].name) + ".out", std::ios::binary);
        out.write(arguments[i].bytes.data(), static_cast<std::streamsize>(arguments[i].bytes.size()));
        if (!out) return 2;
    }
    return 0;
}
