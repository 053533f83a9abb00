#!/usr/bin/env bash
# pip install, as a user runs it: a fresh virtual environment over a Python
# that has torch (--system-site-packages: Debian's python3-torch by default),
# the build requirements from PyPI, `pip wheel --no-build-isolation` of the
# repository, the wheel installed, and the Python suite run against the
# installed package (no MSDA_TORCH_LIBRARY, no PYTHONPATH to the sources),
# from a directory outside the repository. Prints the wheel's build time and
# size.
#
#   tests/scripts/wheel_suite.sh BUILD_DIR [PYTHON]     (PYTHON: /usr/bin/python3)
#
# With MSDA_WHEEL_TORCH set (a requirement, torch==2.11.0), the environment
# is made without the system's packages and that torch installed into it
# from PyPI (tests/scripts/torch2_suite.sh does so).
#
# MSDA_WHEEL_DEFINES (default: BUILD_DIR's generators and BUILD_DIR's
# generated libraries, MSDA_VARIANT_SET=none MSDA_KERNELS_ROOT=BUILD_DIR, so
# the wheel's build compiles and packages the C++ and Python around code
# build/ generated and tested, within CI's time) are CMake definitions for
# this test's build; empty builds what a user's pip install builds (its own
# generators, every variant of every tier, about 10 minutes on 2 cores).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: wheel_suite.sh BUILD_DIR [PYTHON]}" && pwd)"
python="${2:-/usr/bin/python3}"
if [ -z "${MSDA_WHEEL_TORCH:-}" ] && ! "$python" -c "import torch" 2>/dev/null; then
    echo "SKIPPED: $python does not import torch (apt install python3-torch)"
    exit 0
fi
defines="${MSDA_WHEEL_DEFINES-MSDA_VARIANT_SET=none MSDA_KERNELS_ROOT=$build msda-halide_generators_ROOT=$build}"
work="$build/wheel-suite"
rm -rf "$work"
mkdir -p "$work"
venv="$work/venv"
if [ -n "${MSDA_WHEEL_TORCH:-}" ]; then
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$MSDA_WHEEL_TORCH"
else
    "$python" -m venv --system-site-packages "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check "scikit-build-core>=0.10" "halide==21.0.0" \
    "cmake>=3.28,<4" "ninja>=1.11"
echo "wheel_suite: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"

settings=(--config-settings "build-dir=$work/build")
for define in $defines; do settings+=(--config-settings "cmake.define.$define"); done
started=$SECONDS
"$venv/bin/pip" wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$work/dist" \
    "${settings[@]}" "$root"
seconds=$((SECONDS - started))
wheel=$(ls "$work"/dist/msda_torch-*.whl)
echo "wheel_suite: built $(basename "$wheel") in ${seconds} s, $(du -h "$wheel" | cut -f1) ($(unzip -l "$wheel" | tail -n 1 | awk '{print $1}') bytes unpacked), CMake definitions: ${defines:-none}"
unzip -l "$wheel"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$wheel"

# The suite against the installed package, from outside the repository.
mkdir -p "$work/run"
cd "$work/run"
env -u MSDA_TORCH_LIBRARY PYTHONPATH="$root/tests/python" "$venv/bin/python" - <<'PYTHON'
import os, sys
import msda_torch
where = os.path.dirname(msda_torch.__file__)
assert where.startswith(sys.prefix), "msda_torch came from " + where + ", not the virtual environment " + sys.prefix
assert os.path.dirname(msda_torch.LIBRARY) == where, msda_torch.LIBRARY
print("wheel_suite: msda_torch from", where)
PYTHON
env -u MSDA_TORCH_LIBRARY PYTHONPATH="$root/tests/python" "$venv/bin/python" -m unittest -v test_msda_torch
