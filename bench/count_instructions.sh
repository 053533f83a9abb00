#!/usr/bin/env bash
# Instructions per sample of msda's forward and backward, counted by
# valgrind --tool=callgrind (repeatable where time is not), on the compiled
# x86 targets valgrind executes (it has no AVX-512: avx2 and x86-64, capped
# with MSDA_X86_TARGET), one thread, beside the floor's multiply-adds per
# sample (4 C_h forward, 8 C_h backward) and the fewest vector instructions
# that do them.
#
#   bench/count_instructions.sh [SHAPE [DISTRIBUTION [CALLS]]]   (default M0 local 2)
#
# Needs build/bin/msda_bench and valgrind. Each count is the instructions
# executed inside msda_bench_counted_calls (the plan's calls after a
# warm-up) over CALLS times the samples of a call.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench="${MSDA_BUILD_DIR:-$root/build}/bin/msda_bench"
shape="${1:-M0}"
distribution="${2:-local}"
calls="${3:-2}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

printf "%-8s %-9s %14s %11s %11s %13s %7s\n" target op instructions "per sample" "floor FMAs" "floor instrs" ratio
for target in avx2 x86-64; do
    for op in forward backward; do
        MSDA_X86_TARGET=$target valgrind --tool=callgrind --callgrind-out-file="$out/$target.$op" \
            --collect-atstart=no --toggle-collect=msda_bench_counted_calls \
            "$bench" --threads 1 --count-calls "$calls" --shapes "$shape" --distributions "$distribution" \
            --ops "$op" > "$out/$target.$op.log" 2> "$out/$target.$op.err"
        line="$(grep 'msda_bench --count-calls' "$out/$target.$op.log")"
        runs="$(sed -n 's/.* msda runs \([^ ]*\) on .*/\1/p' <<< "$line")"
        if [ "$runs" != "$target" ]; then
            echo "count_instructions.sh: MSDA_X86_TARGET=$target ran $runs" >&2
            exit 1
        fi
        samples="$(sed -n 's/.* \([0-9]*\) samples a call.*/\1/p' <<< "$line")"
        channels="$(sed -n 's/.* C_h \([0-9]*\),.*/\1/p' <<< "$line")"
        total="$(sed -n 's/^summary: \([0-9]*\).*/\1/p' "$out/$target.$op")"
        # The floor's multiply-adds a sample, and the fewest instructions
        # that do them: 8-lane FMAs on avx2; a 4-lane multiply and a 4-lane
        # add on x86-64 (SSE2 has no FMA).
        [ "$op" = forward ] && fmas=$((4 * channels)) || fmas=$((8 * channels))
        [ "$target" = avx2 ] && instructions=$((fmas / 8)) || instructions=$((2 * fmas / 4))
        python3 -c "import sys; t, s, c, f, i = map(int, sys.argv[1:6]); p = t / (s * c); \
print('%-8s %-9s %14d %11.1f %11d %13d %6.1fx' % ('$target', '$op', t, p, f, i, p / i))" \
            "$total" "$samples" "$calls" "$fmas" "$instructions"
    done
done
