#!/usr/bin/env bash
# Installs what msda needs on a fresh Debian 12 machine: system packages from
# Debian (only those missing) and Halide 21.0.0 + CMake + Ninja from PyPI into
# the project-local virtual environment .venv. Idempotent and quiet when done.
#
#   scripts/setup.sh   what building, testing and benchmarking need: the
#                      compilers (and the aarch64 cross compiler) and test
#                      libraries, qemu-user for the emulated suites, LibTorch (libtorch-dev) for the torch operator and
#                      the bench's peers, python3-torch for its Python tests,
#                      libdlpack-dev for msda/dlpack.hpp, the OpenCL ICD loader
#                      and PoCL (the CPU OpenCL driver the opencl suite runs on),
#                      with the loader's headers and link library
#                      (ocl-icd-opencl-dev) for the suite's device tensors, clang 14 and
#                      its sanitizer and libFuzzer runtimes (libclang-rt-14-dev) for the
#                      sanitizer trees, valgrind (its callgrind counts instructions for
#                      msda sweep --count and bench/count_instructions.sh); on x86-64 also the aarch64 tree's cross compiler
#                      and Google Benchmark
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

debian_packages=(g++ python3-venv libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev qemu-user
    libtorch-dev python3-torch libdlpack-dev ocl-icd-libopencl1 pocl-opencl-icd ocl-icd-opencl-dev
    clang-14 libclang-rt-14-dev valgrind)
# On x86-64, the aarch64 tree's cross compiler (its GoogleTest is built from
# libgtest-dev's sources, its programs run under qemu-user) and its bench's
# Google Benchmark: Debian's arm64 build, through multiarch (dpkg's arm64
# architecture is added for it).
sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
new_architecture=0
if [ "$(uname -m)" = "x86_64" ]; then
    debian_packages+=(g++-aarch64-linux-gnu libbenchmark-dev:arm64)
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        echo "setup: adding dpkg architecture arm64 (for libbenchmark-dev:arm64)"
        "${sudo_cmd[@]}" dpkg --add-architecture arm64
        new_architecture=1
    fi
fi
missing=()
for p in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})) || ((new_architecture)); then
    echo "setup: installing Debian packages: ${missing[*]}"
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

venv="$root/.venv"
stamp="$venv/.msda-requirements"
requirements="$root/scripts/requirements.txt"
if [ ! -f "$stamp" ] || ! cmp -s "$stamp" "$requirements"; then
    echo "setup: creating $venv with $(tr '\n' ' ' < "$requirements")"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$stamp"
fi
