#!/usr/bin/env bash
# The torch 2.x suite (ctest label torch2, outside the default run: PyPI's
# torch wheel is about 5 GB). PyPI's torch (MSDA_TORCH_VERSION, default
# 2.11.0) goes into .venv-torch2 once; libmsda_torch.so is built against its
# LibTorch (its CPU and Meta kernels; the wheel's CUDA kernels need the CUDA
# toolkit, scripts/device_kit.sh) beside the build tree's libmsda.so; then
# the Python suites run with that torch: test_msda_torch (everything Debian's
# torch runs) and test_msda_torch2 (opcheck, torch.compile, torch.export).
#
#   tests/scripts/torch2_suite.sh [BUILD_DIR]    (default build/)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
version="${MSDA_TORCH_VERSION:-2.11.0}"
venv="$root/.venv-torch2"
if ! "$venv/bin/python" -c "import sys, torch; sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null; then
    echo "torch2 suite: installing torch==$version from PyPI into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "torch==$version"
fi
torch_dir="$("$venv/bin/python" -c "import os, torch; print(os.path.dirname(torch.__file__))")"
out="$build/torch2"
mkdir -p "$out"
src="$root/integrations/torch/src"
library="$out/libmsda_torch.so"
if [ ! -f "$library" ] || [ -n "$(find "$src" "$root/runtime/include" "$build/lib/libmsda.so" -newer "$library" -print -quit)" ]; then
    echo "torch2 suite: building $library against torch $version"
    pids=()
    for unit in operators kernels cpu_kernels meta_kernels autograd; do
        g++ -std=c++20 -O2 -fPIC -DNDEBUG -c -o "$out/$unit.o" \
            -I"$root/runtime/include" -I"$root/integrations/torch/include" -I"$src" \
            -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include" "$src/$unit.cpp" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    g++ -shared -o "$library" "$out"/{operators,kernels,cpu_kernels,meta_kernels,autograd}.o \
        -L"$build/lib" -lmsda -L"$torch_dir/lib" -lc10 -ltorch_cpu -ltorch \
        -Wl,-rpath,"$build/lib" -Wl,-rpath,"$torch_dir/lib"
fi
cd "$root/tests/python"
MSDA_TORCH_LIBRARY="$library" PYTHONPATH="$root/python" "$venv/bin/python" -m unittest -v test_msda_torch test_msda_torch2
