#!/usr/bin/env bash
# Builds here what bench/device_check.sh runs on a CUDA machine that reaches
# no package registry (the H200 the device tool lends): the x86-64 CUDA test
# binaries, the CLI and msda_gpu_bench (with its nvcc-built baseline), with
# libmsda.so (its CUDA code is PTX, compiled by the driver there), stripped,
# into device-kit/ (git-ignored; carry it with the run). Also
# libmsda_torch.so with the operators' CUDA kernels, built against the
# LibTorch of PyPI's torch wheel (CUDA-enabled, the C++11 ABI; Debian's is
# CPU-only): the wheel of MSDA_TORCH_VERSION (default 2.11.0+cu130, the
# torch on this workplace's H200 machines) is downloaded once into
# .cache/ and only its headers and the libraries the kernels link are
# unpacked.
#
#   scripts/device_kit.sh      then, on the device: bash bench/device_check.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MSDA_BUILD_DIR:-$root/build}"
kit="$root/device-kit"
programs=(test_cuda test_cuda_tensors test_forward_backward test_gka test_determinism test_input_edge_cases test_cli
          msda msda_gpu_bench)

"$root/scripts/setup.sh"
if [ ! -f "$build/CMakeCache.txt" ]; then
    "$root/.venv/bin/cmake" -S "$root" -B "$build" -G Ninja \
        -DCMAKE_MAKE_PROGRAM="$root/.venv/bin/ninja" -DCMAKE_BUILD_TYPE=Release
fi
targets=()
for program in "${programs[@]}"; do
    [ "$program" = msda ] && program=msda_cli  # the CLI's target
    targets+=(--target "$program")
done
"$root/.venv/bin/cmake" --build "$build" "${targets[@]}"

rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib"
for program in "${programs[@]}"; do
    if [ ! -x "$build/bin/$program" ]; then
        echo "device_kit: $build/bin/$program was not built (msda_gpu_bench needs nvcc: the CUDA toolkit)" >&2
        exit 1
    fi
    strip -o "$kit/bin/$program" "$build/bin/$program"
done
strip -o "$kit/lib/libmsda.so.0" "$build/lib/libmsda.so.0"

# The torch operators against PyPI's LibTorch, with their CUDA kernels.
torch_version="${MSDA_TORCH_VERSION:-2.11.0}"
cache="$root/.cache/torch-$torch_version"
if [ ! -f "$cache/torch/include/c10/cuda/CUDAStream.h" ]; then
    mkdir -p "$cache"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 -d "$cache/wheel" "torch==$torch_version"
    unzip -q -o "$cache"/wheel/torch-*.whl 'torch/include/*' 'torch/lib/libc10.so' 'torch/lib/libc10_cuda.so' \
        'torch/lib/libtorch.so' 'torch/lib/libtorch_cpu.so' 'torch/version.py' -d "$cache"
    rm -rf "$cache/wheel"
fi
cuda_include="$(dirname "$(command -v nvcc)")/../include"
g++ -std=c++20 -O2 -fPIC -shared -DNDEBUG -o "$kit/lib/libmsda_torch.so.0" \
    -I"$root/runtime/include" -I"$root/integrations/torch/include" -I"$root/integrations/torch/src" \
    -isystem "$cache/torch/include" -isystem "$cache/torch/include/torch/csrc/api/include" -isystem "$cuda_include" \
    "$root"/integrations/torch/src/{operators,kernels,cpu_kernels,meta_kernels,cuda_kernels,autograd}.cpp \
    -L"$build/lib" -lmsda -L"$cache/torch/lib" -lc10 -lc10_cuda -ltorch_cpu -ltorch \
    -Wl,--allow-shlib-undefined -Wl,-rpath,'$ORIGIN' -Wl,-soname,libmsda_torch.so.0
strip "$kit/lib/libmsda_torch.so.0"
grep -o "__version__ = '[^']*'" "$cache/torch/version.py" | cut -d"'" -f2 > "$kit/torch_version"
git -C "$root" rev-parse HEAD > "$kit/commit"
echo "device_kit: $(du -sh "$kit" | cut -f1) in $kit (commit $(cut -c1-10 "$kit/commit"))"
