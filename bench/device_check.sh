#!/usr/bin/env bash
# The CUDA checks of one run on a machine with an NVIDIA GPU, within 8
# minutes: from device-kit/ (scripts/device_kit.sh builds it here; that
# machine reaches no package registry), in order:
#   1. the GPU and driver (nvidia-smi) and `msda info`;
#   2. the CUDA suites: test_cuda (both backward modes against the
#      reference, run-to-run bits, the fixed-point sums at every scale, half
#      precision refused), test_cuda_tensors (device tensors in the primary
#      context, on a caller's stream, in a caller's context, from four
#      threads, plans, DLPack, the C API, every refusal), the float32 grid,
#      GKA and determinism suites and the non-finite edge cases on
#      Device::cuda, the CLI's --target cuda round trip, and the torch
#      operators' CUDA kernels from Python (the machine's torch);
#   3. msda_gpu_bench on the canonical shapes beside the classic CUDA
#      baseline: its agreement checks, the timings, the issue's targets.
# Everything goes to $OUT (the device tool's folder; device-kit/out here):
# a log per suite, summary.txt, gpu_bench.txt and gpu_bench.json. The exit
# status is 0 when every suite passed and the bench's results agreed.
#
#   device tool: run  command "bash bench/device_check.sh"  carry ["device-kit"]
#   here:        bash bench/device_check.sh   (no GPU: every CUDA case SKIPPED)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
kit="${MSDA_DEVICE_KIT:-$root/device-kit}"
out="${OUT:-$kit/out}"
mkdir -p "$out"
if [ ! -x "$kit/bin/msda" ]; then
    echo "device_check: no kit in $kit (run scripts/device_kit.sh where the project builds)" | tee "$out/summary.txt"
    exit 1
fi
export LD_LIBRARY_PATH="$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MSDA_CLI="$kit/bin/msda"
status=0
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

note "device_check: kit of commit $(cat "$kit/commit" 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
if command -v nvidia-smi > /dev/null; then nvidia-smi > "$out/nvidia-smi.txt" 2>&1; else echo "nvidia-smi: not found" > "$out/nvidia-smi.txt"; fi
note "$(grep -m1 -E 'Driver Version|not found' "$out/nvidia-smi.txt" | tr -s ' ')"
"$kit/bin/msda" info > "$out/msda_info.txt" 2>&1
note "$(grep -E '^cuda' -A3 "$out/msda_info.txt" | head -4)"

# One suite: its log, and a line with its counts. Runs of a whole binary
# are bounded at 240 s each.
suite() {
    local name=$1
    shift
    local started=$SECONDS
    timeout 240 env "$@" > "$out/$name.log" 2>&1
    local rc=$?
    local passed failed skipped
    passed=$(grep -E -o '^\[  PASSED  \] [0-9]+' "$out/$name.log" | grep -o '[0-9]*$')
    failed=$(grep -E -o '^\[  FAILED  \] [0-9]+' "$out/$name.log" | grep -o '[0-9]*$')
    skipped=$(grep -E -o '^\[  SKIPPED \] [0-9]+' "$out/$name.log" | grep -o '[0-9]*$')
    if grep -q 'msda tests: the whole run is SKIPPED' "$out/$name.log"; then skipped="all"; passed=0; fi
    note "$(printf '%-34s rc %-3s passed %-4s failed %-4s skipped %-4s %3ss' "$name" "$rc" "${passed:-0}" \
        "${failed:-0}" "${skipped:-0}" "$((SECONDS - started))")"
    [ "$rc" -eq 0 ] || status=1
}

grid_filter='-*f16*:*bf16*:*float16*:*Half*:*half*:ThreadSafety.OnePlanSharedByFourThreads'
suite test_cuda "$kit/bin/test_cuda"
suite test_cuda_tensors "$kit/bin/test_cuda_tensors"
suite test_forward_backward.cuda MSDA_TEST_DEVICE=cuda "$kit/bin/test_forward_backward" --gtest_filter="$grid_filter"
suite test_gka.cuda MSDA_TEST_DEVICE=cuda "$kit/bin/test_gka" --gtest_filter="$grid_filter"
suite test_determinism.cuda MSDA_TEST_DEVICE=cuda "$kit/bin/test_determinism" --gtest_filter="$grid_filter"
suite test_input_edge_cases.cuda MSDA_TEST_DEVICE=cuda "$kit/bin/test_input_edge_cases" \
    --gtest_filter='NonFiniteWeightsAndGradients.*:ExtentOneChannels.*'
suite test_cli.cuda "$kit/bin/test_cli" --gtest_filter='CliGpu.TargetCuda*'

# The torch operators' CUDA kernels from the machine's own Python torch,
# which must be the version the kit's libmsda_torch.so was built against.
started=$SECONDS
torch_version=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)
if [ "$torch_version" != "$(cat "$kit/torch_version" 2>/dev/null)" ]; then
    note "$(printf '%-34s SKIPPED: python3 has torch %s, the kit was built for %s' torch_python_cuda \
        "${torch_version:-none}" "$(cat "$kit/torch_version" 2>/dev/null)")"
else
    PYTHONPATH="$root/python:$root/tests/python" MSDA_TORCH_LIBRARY="$kit/lib/libmsda_torch.so.0" \
        timeout 240 python3 -m unittest -v test_msda_torch_cuda > "$out/torch_python_cuda.log" 2>&1
    rc=$?
    note "$(printf '%-34s rc %-3s %s, %s %3ss' torch_python_cuda "$rc" \
        "$(grep -E '^Ran [0-9]+ test' "$out/torch_python_cuda.log")" "$(tail -n 1 "$out/torch_python_cuda.log")" \
        "$((SECONDS - started))")"
    [ "$rc" -eq 0 ] || status=1
fi

started=$SECONDS
timeout 300 "$kit/bin/msda_gpu_bench" --json "$out/gpu_bench.json" > "$out/gpu_bench.txt" 2>&1
rc=$?
note "$(printf '%-34s rc %-3s %3ss' msda_gpu_bench "$rc" "$((SECONDS - started))")"
[ "$rc" -eq 0 ] || status=1
cat "$out/gpu_bench.txt"
note "device_check: $([ "$status" -eq 0 ] && echo PASS || echo FAIL) in ${SECONDS}s"
exit "$status"
