#!/usr/bin/env python3
"""Turns msda_bench's Google Benchmark JSON into a Markdown results table.

    build/bin/msda_bench --benchmark_out=results.json --benchmark_out_format=json \\
        [--benchmark_repetitions=5]
    bench/table.py results.json [--targets] > results.md

Prints a header line (date, machine, threads, the probe's rates, the
grid_sample peer, msda's --relayout and --sample-order settings where the
JSON records them) from the JSON's context, then one row per (shape,
distribution), in the order the JSON lists them, with for each operator:
msda's time in ms, its floor ratio (with the bound that sets the floor),
grid_sample's time over msda's and cuda_port's time over msda's; msda's
backward time over its forward time; and the orders msda's forward and
backward walked the samples in (their by_query counters). With
repetitions the median aggregates are used, otherwise the iteration rows
(the median of them if a benchmark has several). Times are real_time,
converted from each row's time_unit: the bench times itself (manual
time).

Where the JSON has half-precision rows (implementations msda_f16 and
msda_bf16, on M0 and G), a second table follows, "Half precision (M0, G)":
one row per (shape, distribution, dtype), float32 first, with msda's time
per operator and its ratio to float32 msda's (the ratio of the two rows'
times in the same run; < 1 is faster).

Where the JSON has GKA rows (shapes GKA_G and GKA_BEV: msda's geometric
kernel attention and the gka_torch peer), a "GKA" table follows: one row per
(shape, distribution) with msda's forward and backward times, the gka_torch
peer's time over msda's for each (the speedup_vs_gka_torch counter), and
msda's backward time over its forward time.

--targets adds a check list of the issue's performance targets, each PASS
or FAIL with the numbers behind it (n/a where the JSON lacks them).

Python 3 standard library only.
"""

import argparse
import json
import statistics
import sys

OPS = ("forward", "backward", "forward_backward")
OP_SHORT = {"forward": "fwd", "backward": "bwd", "forward_backward": "fwd+bwd"}

# msda's implementation name per storage dtype (bench_main's msda_name).
DTYPE_IMPLEMENTATIONS = (("f32", "msda"), ("f16", "msda_f16"), ("bf16", "msda_bf16"))
HALF_IMPLEMENTATIONS = {implementation for dtype, implementation in DTYPE_IMPLEMENTATIONS if dtype != "f32"}

# real_time is in the row's time_unit; the table is in ms.
MS_PER_UNIT = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}

# The custom context bench_main adds (add_machine_context), in the order
# the header names them, with how to print each.
PROBE_KEYS = (
    ("probe_fma_gflops", "FMA", "GFMA/s"),
    ("probe_l1_GBps", "L1", "GB/s"),
    ("probe_l2_GBps", "L2", "GB/s"),
    ("probe_l3_GBps", "L3", "GB/s"),
    ("probe_dram_GBps", "DRAM", "GB/s"),
    ("probe_latency_ns", "latency", "ns"),
)


def ms_per_unit(unit):
    if unit not in MS_PER_UNIT:
        sys.exit("table.py: unknown time_unit %r" % unit)
    return MS_PER_UNIT[unit]


class Result:
    """One benchmark's numbers: msda's or a peer's, for one op/shape/distribution."""

    def __init__(self, rows):
        # rows: the JSON rows that stand for this benchmark (one median
        # aggregate, or its iteration rows).
        # Google Benchmark's default unit is ns; the bench asks for ms.
        self.ms = statistics.median(row["real_time"] * ms_per_unit(row.get("time_unit", "ns")) for row in rows)
        self.counters = {}
        for key in ("floor_ratio", "speedup_vs_grid_sample", "speedup_vs_gka_torch", "vs_f32", "ns_per_sample",
                    "GBps", "by_query"):
            values = [row[key] for row in rows if isinstance(row.get(key), (int, float))]
            if values:
                self.counters[key] = statistics.median(values)
        labels = [row["label"] for row in rows if row.get("label")]
        self.label = labels[0] if labels else ""

    @property
    def floor_bound(self):
        # bench_main labels every benchmark "floor <bound>".
        return self.label[len("floor "):] if self.label.startswith("floor ") else ""


def benchmark_key(row):
    """(op, shape, distribution, implementation) from a row's run_name, for
    example forward/M0/local/msda/manual_time; None for other benchmarks."""
    parts = row.get("run_name", row.get("name", "")).split("/")
    if len(parts) < 4 or parts[0] not in OPS:
        return None
    return tuple(parts[:4])


def is_gka_shape(shape):
    """The GKA shapes (bench_main's gka_shapes(): GKA_G, GKA_BEV)."""
    return shape.startswith("GKA")


def load_results(data):
    """{(op, shape, distribution, implementation): Result}, the (shape,
    distribution) pairs of the float32 MSDA rows (msda and the peers) in the
    order the JSON lists them, those of the half-precision rows and those
    of the GKA rows."""
    iterations, medians, order, half_order, gka_order = {}, {}, [], [], []
    for row in data.get("benchmarks", []):
        key = benchmark_key(row)
        if key is None or row.get("error_occurred"):
            continue
        if "real_time" not in row:
            continue  # a big-O or RMS aggregate
        pair = (key[1], key[2])
        if is_gka_shape(key[1]):
            pairs = gka_order
        else:
            pairs = half_order if key[3] in HALF_IMPLEMENTATIONS else order
        if pair not in pairs:
            pairs.append(pair)
        if row.get("run_type") == "aggregate":
            if row.get("aggregate_name") == "median":
                medians.setdefault(key, []).append(row)
        else:
            iterations.setdefault(key, []).append(row)
    results = {}
    for key in set(iterations) | set(medians):
        rows = medians.get(key) or iterations[key]
        result = Result(rows)
        if not result.label and key in iterations:
            # An aggregate carries the label only when every repetition had
            # the same one; the iteration rows have it in any case.
            result.label = Result(iterations[key]).label
        results[key] = result
    return results, order, half_order, gka_order


def repetitions(data):
    counts = [row.get("repetitions", 1) for row in data.get("benchmarks", []) if row.get("run_type") == "aggregate"]
    return max(counts) if counts else 1


def header(data):
    context = data.get("context", {})
    machine = []
    if "num_cpus" in context:
        cpus = "%s CPU%s" % (context["num_cpus"], "" if context["num_cpus"] == 1 else "s")
        if context.get("mhz_per_cpu"):
            cpus += " at %s MHz" % context["mhz_per_cpu"]
        machine.append(cpus)
    if "threads" in context:
        machine.append("%s thread%s" % (context["threads"], "" if str(context["threads"]) == "1" else "s"))
    text = "**msda_bench, %s, on %s**" % (context.get("date", "date unknown"), context.get("host_name", "?"))
    if machine:
        text += ": " + ", ".join(machine)
    if "cpu" in context:
        text += "; CPU " + context["cpu"]
    if "msda_target" in context:
        # The compiled code msda ran (absent from older benches' JSON).
        text += "; msda %s runs %s" % (context.get("msda_version", "?"), context["msda_target"])
    probes = ["%s %s %s" % (name, context[key], unit) for key, name, unit in PROBE_KEYS if key in context]
    if "probe_clock_GHz" in context:
        probes.append("clock %s GHz (%s vectors)" % (context["probe_clock_GHz"], context.get("probe_isa", "?")))
    # Any probe rate this script does not know yet, under its own name.
    known = {key for key, _, _ in PROBE_KEYS} | {"probe_clock_GHz", "probe_isa"}
    probes += ["%s %s" % (key, value) for key, value in context.items()
               if key.startswith("probe_") and key not in known]
    if probes:
        text += "; probe: " + ", ".join(probes)
    cycles = ["%s %s" % (key[len("per_core_cycle_"):].replace("_", " "), value) for key, value in context.items()
              if key.startswith("per_core_cycle_")]
    if cycles:
        text += "; per core and cycle against %s's documented peaks: %s" % (
            context.get("peaks_of", "?"), ", ".join(cycles))
    if context.get("floors", "").startswith("none"):
        text += "; NO FLOORS (%s)" % context["floors"]
    if "grid_sample_peer" in context:
        text += "; grid_sample peer: " + context["grid_sample_peer"]
    if "gka_torch_peer" in context and any(
            is_gka_shape((benchmark_key(row) or ("", ""))[1]) for row in data.get("benchmarks", [])):
        text += "; gka_torch peer: " + context["gka_torch_peer"]
    if "relayout" in context:
        # msda_bench's --relayout (absent from the JSON of older benches).
        text += "; relayout " + context["relayout"]
    if "sample_order" in context:
        # msda_bench's --sample-order (absent from older benches' JSON).
        text += "; sample order " + context["sample_order"]
    if context.get("msda_calls") == "one-shot":
        # msda_bench --one-shot: msda::forward/backward instead of a Plan.
        text += "; msda one-shot calls"
    if context.get("huge_pages") == "on":
        # msda_bench --huge-pages: the bench's tensors on transparent huge pages.
        text += "; tensors on huge pages"
    count = repetitions(data)
    text += "; %s." % ("median of %d repetitions" % count if count > 1 else "one run per benchmark")
    return text


def format_ms(ms):
    # Three significant digits or so, from 0.417 to 2405.
    if ms >= 100:
        return "%.0f" % ms
    if ms >= 10:
        return "%.1f" % ms
    if ms >= 1:
        return "%.2f" % ms
    return "%.3f" % ms


def format_ratio(ratio):
    if ratio >= 100:
        return "%.0fx" % ratio
    if ratio >= 10:
        return "%.1fx" % ratio
    return "%.2fx" % ratio


def table(results, order):
    columns = ["shape", "dist"]
    for op in OPS:
        short = OP_SHORT[op]
        columns += ["%s ms" % short, "%s floor" % short, "%s vs gs" % short, "%s vs port" % short]
    columns += ["bwd/fwd", "order"]
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join(["---"] * 2 + ["--:"] * (len(columns) - 3) + ["---"]) + "|"]
    for shape, distribution in order:
        cells = [shape, distribution]
        for op in OPS:
            msda = results.get((op, shape, distribution, "msda"))
            if msda is None:
                cells += ["-"] * 4
                continue
            cells.append(format_ms(msda.ms))
            floor = msda.counters.get("floor_ratio")
            if floor is None:
                cells.append("-")
            else:
                cells.append(format_ratio(floor) + (" " + msda.floor_bound if msda.floor_bound else ""))
            speedup = msda.counters.get("speedup_vs_grid_sample")
            cells.append("-" if speedup is None else format_ratio(speedup))
            port = results.get((op, shape, distribution, "cuda_port"))
            cells.append("-" if port is None or msda.ms <= 0 else format_ratio(port.ms / msda.ms))
        cells.append(backward_over_forward(results, shape, distribution))
        cells.append(sample_order(results, shape, distribution))
        lines.append("| " + " | ".join(cells) + " |")
    legend = ("ms: msda's time. floor: msda's time over the floor (bench/README.md), with the bound that sets "
              "it. vs gs, vs port: the grid_sample and cuda_port peers' times over msda's (- where a peer did "
              "not run). bwd/fwd: msda's backward time over its forward time. order: how msda's forward / backward "
              "walked the samples (Options::sample_order: by query or by level; one word when both agree; - "
              "where the JSON does not record it).")
    return "\n".join(lines) + "\n\n" + legend


def sample_order(results, shape, distribution):
    """The orders of msda's forward and backward (their rows' by_query
    counters): "query", "level", or "query / level" when they differ."""
    orders = []
    for op in ("forward", "backward"):
        msda = results.get((op, shape, distribution, "msda"))
        flag = None if msda is None else msda.counters.get("by_query")
        orders.append("-" if flag is None else "query" if flag >= 0.5 else "level")
    return orders[0] if orders[0] == orders[1] else " / ".join(orders)


def vs_f32(results, op, shape, distribution, implementation):
    """The half row's time over float32 msda's, both measured in the same run:
    the ratio of the two rows' times (medians with repetitions), else the
    vs_f32 counter. Not the counter first: with repetitions, Google Benchmark
    runs every float32 repetition before the half ones, so each half
    repetition's counter divides by the last float32 repetition only."""
    half = results.get((op, shape, distribution, implementation))
    if half is None:
        return None
    f32 = results.get((op, shape, distribution, "msda"))
    if f32 is not None and f32.ms > 0:
        return half.ms / f32.ms
    return half.counters.get("vs_f32")


def backward_over_forward(results, shape, distribution):
    """msda's backward time over its forward time, as a cell ("-" without both)."""
    forward = results.get(("forward", shape, distribution, "msda"))
    backward = results.get(("backward", shape, distribution, "msda"))
    if forward is None or backward is None or forward.ms <= 0:
        return "-"
    return "%.2f" % (backward.ms / forward.ms)


def half_table(results, half_order):
    """msda per storage dtype on the shapes with half-precision rows."""
    columns = ["shape", "dist", "dtype"]
    for op in OPS:
        short = OP_SHORT[op]
        columns += ["%s ms" % short, "%s vs f32" % short]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(["---"] * 3 + ["--:"] * (len(columns) - 3)) + "|"]
    for shape, distribution in half_order:
        for dtype, implementation in DTYPE_IMPLEMENTATIONS:
            if not any((op, shape, distribution, implementation) in results for op in OPS):
                continue
            cells = [shape, distribution, dtype]
            for op in OPS:
                result = results.get((op, shape, distribution, implementation))
                if result is None:
                    cells += ["-", "-"]
                    continue
                cells.append(format_ms(result.ms))
                if implementation == "msda":
                    cells.append("1")
                else:
                    ratio = vs_f32(results, op, shape, distribution, implementation)
                    cells.append("-" if ratio is None else "%.2fx" % ratio)
            lines.append("| " + " | ".join(cells) + " |")
    legend = ("ms: msda's time with value, attention_weights, grad_output and the results (but the location "
              "gradient) stored in that dtype, locations float32, arithmetic float32. vs f32: that time over "
              "float32 msda's for the same benchmark in the same run (below 1: faster; 1 on the float32 rows, the "
              "reference; - where float32 did not run).")
    return "\n".join(lines) + "\n\n" + legend


def gka_table(results, gka_order):
    """msda's GKA against the gka_torch peer."""
    columns = ["shape", "dist", "fwd ms", "fwd vs gka_torch", "bwd ms", "bwd vs gka_torch", "bwd/fwd"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(["---"] * 2 + ["--:"] * (len(columns) - 2)) + "|"]
    for shape, distribution in gka_order:
        cells = [shape, distribution]
        for op in ("forward", "backward"):
            msda = results.get((op, shape, distribution, "msda"))
            if msda is None:
                cells += ["-", "-"]
                continue
            cells.append(format_ms(msda.ms))
            speedup = msda.counters.get("speedup_vs_gka_torch")
            if speedup is None:
                peer = results.get((op, shape, distribution, "gka_torch"))
                speedup = peer.ms / msda.ms if peer is not None and msda.ms > 0 else None
            cells.append("-" if speedup is None else format_ratio(speedup))
        cells.append(backward_over_forward(results, shape, distribution))
        lines.append("| " + " | ".join(cells) + " |")
    legend = ("ms: msda's GKA time (floor rounding, float32). vs gka_torch: the gka_torch peer's time (LibTorch "
              "gather and weighted sum, backward through autograd) over msda's (- where the peer did not run). "
              "bwd/fwd: msda's backward time over its forward time.")
    return "\n".join(lines) + "\n\n" + legend


def targets(results, order):
    """The issue's targets as (verdict, what, numbers) lines."""
    checks = []

    def verdict(passed):
        return "PASS" if passed else "FAIL"

    def speedup_check(op):
        what = "M0 local: %s >= 100x grid_sample" % op
        msda = results.get((op, "M0", "local", "msda"))
        speedup = msda.counters.get("speedup_vs_grid_sample") if msda else None
        if speedup is None:
            checks.append(("n/a", what, "no grid_sample time for %s/M0/local" % op))
        else:
            numbers = "%s (msda %s ms)" % (format_ratio(speedup), format_ms(msda.ms))
            checks.append((verdict(speedup >= 100), what, numbers))

    speedup_check("forward")
    speedup_check("forward_backward")

    what = "M0 local: forward within 2x floor"
    msda = results.get(("forward", "M0", "local", "msda"))
    ratio = msda.counters.get("floor_ratio") if msda else None
    if ratio is None:
        checks.append(("n/a", what, "no forward/M0/local/msda"))
    else:
        checks.append((verdict(ratio <= 2), what, "%s the %s floor (msda %s ms, floor %s ms)" % (
            format_ratio(ratio), msda.floor_bound or "?", format_ms(msda.ms), format_ms(msda.ms / ratio))))

    what = "every shape: backward <= 2.5x forward"
    ratios = []
    for shape, distribution in order:
        forward = results.get(("forward", shape, distribution, "msda"))
        backward = results.get(("backward", shape, distribution, "msda"))
        if forward and backward and forward.ms > 0:
            ratios.append(("%s %s" % (shape, distribution), backward.ms / forward.ms))
    if not ratios:
        checks.append(("n/a", what, "no shape with both forward and backward"))
    else:
        failing = [(name, r) for name, r in ratios if r > 2.5]
        worst = max(ratios, key=lambda item: item[1])
        numbers = "%d rows, worst %s %.2f" % (len(ratios), worst[0], worst[1])
        if failing:
            numbers += "; over 2.5: " + ", ".join("%s %.2f" % item for item in failing)
        checks.append((verdict(not failing), what, numbers))

    # Only the operators whose floor the latency bound sets: elsewhere (S0's
    # uniform floors are L3's here) the target does not apply.
    latency_rows = 0
    for shape, distribution in order:
        if distribution != "uniform":
            continue
        measured = []
        for op in OPS:
            msda = results.get((op, shape, distribution, "msda"))
            if msda and msda.floor_bound == "latency" and "floor_ratio" in msda.counters:
                measured.append((op, msda.counters["floor_ratio"]))
        if measured:
            latency_rows += 1
            numbers = ", ".join("%s %s" % (op, format_ratio(r)) for op, r in measured)
            checks.append((verdict(all(r <= 1.5 for _, r in measured)),
                           "%s uniform: within 1.5x latency floor" % shape, numbers))
    if latency_rows == 0:
        checks.append(("n/a", "uniform: within 1.5x latency floor", "no uniform benchmark has a latency floor"))

    # Issue 4 (half-precision storage).
    what = "M0 local: bf16 forward <= 0.8x the f32 time"
    ratio = vs_f32(results, "forward", "M0", "local", "msda_bf16")
    if ratio is None:
        checks.append(("n/a", what, "no forward/M0/local/msda_bf16 with its float32 time"))
    else:
        bf16 = results[("forward", "M0", "local", "msda_bf16")]
        numbers = "%.2fx (bf16 %s ms, f32 %s ms)" % (ratio, format_ms(bf16.ms), format_ms(bf16.ms / ratio))
        checks.append((verdict(ratio <= 0.8), what, numbers))
    return checks


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", help="msda_bench's --benchmark_out file (JSON), or - for stdin")
    parser.add_argument("--targets", action="store_true", help="also check the issue's performance targets")
    args = parser.parse_args()
    if args.json == "-":
        data = json.load(sys.stdin)
    else:
        with open(args.json) as file:
            data = json.load(file)

    results, order, half_order, gka_order = load_results(data)
    print(header(data))
    print()
    if not order and not half_order and not gka_order:
        print("(no op/shape/distribution/implementation benchmarks in %s)" % args.json)
        return
    if order:
        print(table(results, order))
    if half_order:
        if order:
            print()
        print("Half precision (M0, G):")
        print()
        print(half_table(results, half_order))
    if gka_order:
        if order or half_order:
            print()
        print("GKA:")
        print()
        print(gka_table(results, gka_order))
    if args.targets:
        print()
        print("Targets:")
        print()
        for verdict, what, numbers in targets(results, order):
            print("- **%s** %s: %s" % (verdict, what, numbers))


if __name__ == "__main__":
    main()
