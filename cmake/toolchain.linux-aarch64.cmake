# Cross-compiling msda for 64-bit ARM Linux with Debian's
# g++-aarch64-linux-gnu (the aarch64 tree, build-aarch64/; ./dev sets it up).
# The generators run on the build machine: the aarch64 tree imports them
# from the host tree (msda-halide_generators_ROOT), Halide's two-build flow.
# Programs built here run under qemu-aarch64, with the cross toolchain's
# sysroot as its library root: ctest runs the aarch64 tests that way.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
# Header-only packages (CLI11) and the build machine's Halide and generators
# come from outside the sysroot.
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# LD_LIBRARY_PATH keeps the guest on the sysroot's C and C++ libraries: with
# -L alone, its loader reads the build machine's /etc/ld.so.cache, which
# names the arm64 multiarch copies (/usr/lib/aarch64-linux-gnu, installed
# with libbenchmark-dev:arm64), a glibc of another build than the sysroot's
# loader, and threaded programs then hang. The bench's libbenchmark, only
# in multiarch, is found through its RUNPATH.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib)
