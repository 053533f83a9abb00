"""The aarch64 command line agrees with the x86 one and with a float64
reference: forward and backward of MSDA and GKA, in f32, f16 and bf16
storage, on the same .npy files.

  cli_agreement.py --arm-cli build-aarch64/bin/msda --x86-cli build/bin/msda
                   --emulator "qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib" --work DIR

The reference (numpy, float64) computes each forward from the stored inputs
(rounded to the call's storage dtype as the CLI rounds them); both CLIs'
forwards must be within the SPEC's tolerance of it, and every result of the
two CLIs (forward and each gradient) within twice that of each other. The
ARM library's backward is checked against msda's double reference by the
arm suite's gtests."""

import argparse
import pathlib
import shlex
import subprocess
import sys

import numpy as np

LEVELS = [(5, 7), (3, 4)]
BATCH, QUERIES, HEADS, CHANNELS, POINTS = 2, 6, 2, 8, 3
TOLERANCE = {"f32": 1e-5, "f16": 5e-3, "bf16": 2e-2}


def stored(array, dtype):
    """array (float32) as the CLI stores it for the call, back in float64."""
    array = np.asarray(array, dtype=np.float32)
    if dtype == "f16":
        return array.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        bits = array.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16  # to nearest, ties to even
        return rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return array.astype(np.float64)


def msda_forward(value, locations, weights):
    """SPEC's MSDA forward, align_corners off, zero padding."""
    output = np.zeros((BATCH, QUERIES, HEADS, CHANNELS))
    start = 0
    for level, (height, width) in enumerate(LEVELS):
        level_value = value[:, start:start + height * width].reshape(BATCH, height, width, HEADS, CHANNELS)
        for b in range(BATCH):
            for q in range(QUERIES):
                for h in range(HEADS):
                    for p in range(POINTS):
                        u, v = locations[b, q, h, level, p]
                        x, y = u * width - 0.5, v * height - 0.5
                        if not (-1 < x < width and -1 < y < height):
                            continue
                        x0, y0 = int(np.floor(x)), int(np.floor(y))
                        fx, fy = x - x0, y - y0
                        sample = np.zeros(CHANNELS)
                        for dy, dx, corner_weight in ((0, 0, (1 - fy) * (1 - fx)), (0, 1, (1 - fy) * fx),
                                                      (1, 0, fy * (1 - fx)), (1, 1, fy * fx)):
                            yy, xx = y0 + dy, x0 + dx
                            if 0 <= yy < height and 0 <= xx < width:
                                sample += corner_weight * level_value[b, yy, xx, h]
                        output[b, q, h] += weights[b, q, h, level, p] * sample
        start += height * width
    return output.reshape(BATCH, QUERIES, HEADS * CHANNELS)


def gka_forward(value, locations, weights):
    """SPEC's GKA forward, floor rounding."""
    output = np.zeros((BATCH, QUERIES, HEADS, CHANNELS))
    start = 0
    for level, (height, width) in enumerate(LEVELS):
        for b in range(BATCH):
            for q in range(QUERIES):
                for h in range(HEADS):
                    for p in range(POINTS):
                        x, y = locations[b, q, h, level, p]
                        xi = int(min(max(np.floor(x), 0), width - 1))
                        yi = int(min(max(np.floor(y), 0), height - 1))
                        output[b, q, h] += weights[b, q, h, level, p] * value[b, start + yi * width + xi, h]
        start += height * width
    return output.reshape(BATCH, QUERIES, HEADS * CHANNELS)


def within(actual, expected, tolerance):
    scale = max(np.abs(expected).max(), 1e-30)
    error = np.abs(actual.astype(np.float64) - expected).max()
    return error <= tolerance * scale, error, scale


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arm-cli", required=True)
    parser.add_argument("--x86-cli", required=True)
    parser.add_argument("--emulator", required=True)
    parser.add_argument("--work", required=True, type=pathlib.Path)
    arguments = parser.parse_args()
    work = arguments.work
    work.mkdir(parents=True, exist_ok=True)

    generator = np.random.default_rng(7)
    length = sum(h * w for h, w in LEVELS)
    starts = np.cumsum([0] + [h * w for h, w in LEVELS])[:-1]
    inputs = {
        "value": generator.standard_normal((BATCH, length, HEADS, CHANNELS)).astype(np.float32),
        "spatial_shapes": np.array(LEVELS, dtype=np.int64),
        "level_start_index": starts.astype(np.int64),
        "attention_weights": generator.random((BATCH, QUERIES, HEADS, len(LEVELS), POINTS)).astype(np.float32),
        "grad_output": generator.standard_normal((BATCH, QUERIES, HEADS * CHANNELS)).astype(np.float32),
    }
    normalized = generator.uniform(-0.1, 1.1, (BATCH, QUERIES, HEADS, len(LEVELS), POINTS, 2)).astype(np.float32)
    pixels = normalized * np.array([[w, h] for h, w in LEVELS], dtype=np.float32)[None, None, None, :, None, :]
    locations = {"msda": normalized, "gka": pixels.astype(np.float32)}
    for name, array in inputs.items():
        np.save(work / f"{name}.npy", array)
    for op, array in locations.items():
        np.save(work / f"locations_{op}.npy", array)

    emulator = shlex.split(arguments.emulator)
    failures = []
    checks = 0
    for op in ("msda", "gka"):
        for dtype in ("f32", "f16", "bf16"):
            results = {}
            for machine, command in (("x86", [arguments.x86_cli]), ("arm", emulator + [arguments.arm_cli])):
                prefix = work / f"{op}_{dtype}_{machine}"
                common = ["--value", work / "value.npy", "--spatial-shapes", work / "spatial_shapes.npy",
                          "--level-start-index", work / "level_start_index.npy",
                          "--sampling-locations", work / f"locations_{op}.npy",
                          "--attention-weights", work / "attention_weights.npy", "--op", op, "--dtype", dtype]
                gradients = ["--grad-value", f"{prefix}_grad_value.npy",
                             "--grad-attention-weights", f"{prefix}_grad_attention_weights.npy"]
                if op == "msda":
                    gradients += ["--grad-sampling-locations", f"{prefix}_grad_sampling_locations.npy"]
                for run in (["forward"] + common + ["-o", f"{prefix}_output.npy"],
                            ["backward"] + common + ["--grad-output", work / "grad_output.npy"] + gradients):
                    done = subprocess.run(command + [str(part) for part in run], capture_output=True, text=True)
                    if done.returncode != 0:
                        failures.append(f"{machine} {' '.join(map(str, run[:1]))} {op} {dtype}: exit "
                                        f"{done.returncode}: {done.stderr.strip()}")
                names = ["output", "grad_value", "grad_attention_weights"]
                if op == "msda":
                    names.append("grad_sampling_locations")
                results[machine] = {name: np.load(f"{prefix}_{name}.npy") for name in names
                                    if pathlib.Path(f"{prefix}_{name}.npy").exists()}
            value = stored(inputs["value"], dtype)
            weights = stored(inputs["attention_weights"], dtype)
            where = locations[op].astype(np.float64)  # float32 locations (--locations-dtype's default)
            expected = (msda_forward if op == "msda" else gka_forward)(value, where, weights)
            tolerance = TOLERANCE[dtype]
            for machine in ("x86", "arm"):
                checks += 1
                if "output" not in results[machine]:
                    failures.append(f"{machine} forward {op} {dtype}: no output")
                    continue
                ok, error, scale = within(results[machine]["output"], expected, tolerance)
                if not ok:
                    failures.append(f"{machine} forward {op} {dtype}: largest error {error} against the reference "
                                    f"(largest magnitude {scale}, tolerance {tolerance})")
            for name in results["x86"]:
                checks += 1
                if name not in results["arm"]:
                    failures.append(f"arm {op} {dtype}: {name} missing")
                    continue
                ok, error, scale = within(results["arm"][name], results["x86"][name].astype(np.float64),
                                          2 * tolerance)
                if not ok:
                    failures.append(f"{op} {dtype} {name}: arm and x86 differ by {error} (largest magnitude {scale})")
            print(f"{op} {dtype}: aarch64 and x86-64 agree on {', '.join(results['x86'])}; forward within "
                  f"{tolerance} of the float64 reference on both")
    for failure in failures:
        print("FAIL", failure)
    print(f"{checks} comparisons, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
