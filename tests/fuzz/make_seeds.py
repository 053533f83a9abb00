#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (tests/fuzz_corpus/), reproducibly.

npy/: .npy files of each kind the reader takes (float32, float64, int32,
int64; format versions 1.0, 2.0 and 3.0; a scalar, an empty array, rank 6)
and of kinds it refuses (float16, Fortran order, big endian, truncated,
trailing bytes, the magic alone, a shape past 2^63 elements).
c_api/: fuzz_c_api reads its input as a stream of choices; random streams
of several lengths reach most of its branches, the longer ones holding
enough bytes for every tensor's values.

Inputs the fuzzer later finds worth keeping are added beside these.
"""
import os
import random
import struct
import sys


def npy(descr, shape, data, version=(1, 0), fortran=False):
    shape_text = "(" + "".join(f"{n}, " for n in shape)[:-2] + ("," if len(shape) == 1 else "") + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_text}, }}"
    length_format = "<H" if version == (1, 0) else "<I"
    preamble = 8 + struct.calcsize(length_format)
    padded = header + " " * ((64 - (preamble + len(header) + 1) % 64) % 64) + "\n"
    encoding = "utf8" if version == (3, 0) else "latin1"
    return (b"\x93NUMPY" + bytes(version) + struct.pack(length_format, len(padded)) + padded.encode(encoding)
            + data)


def main(root):
    floats = struct.pack("<6f", *range(6))
    good = npy("<f4", (2, 3), floats)
    seeds = {
        "f32_2x3.npy": good,
        "f64_scalar.npy": npy("<f8", (), struct.pack("<d", 1.5)),
        "i32_empty.npy": npy("<i4", (0, 4), b""),
        "i64_levels.npy": npy("<i8", (2, 2), struct.pack("<4q", 4, 5, 2, 3)),
        "f32_v2.npy": npy("<f4", (1, 2, 2), struct.pack("<4f", 1, 1, 1, 1), version=(2, 0)),
        "f32_v3.npy": npy("<f4", (3,), struct.pack("<3f", 1, 2, 3), version=(3, 0)),
        "f32_rank6.npy": npy("<f4", (1, 2, 1, 2, 1, 2), bytes(32)),
        "f16_refused.npy": npy("<f2", (2,), bytes(4)),
        "fortran_refused.npy": npy("<f4", (2, 3), floats, fortran=True),
        "big_endian_refused.npy": npy(">f4", (2,), bytes(8)),
        "truncated_data.npy": good[:-3],
        "trailing_bytes.npy": good + b"\0\0",
        "magic_only.npy": good[:8],
        "huge_shape.npy": npy("<f4", (9223372036854775807, 3), b""),
    }
    os.makedirs(os.path.join(root, "npy"), exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(root, "npy", name), "wb") as f:
            f.write(data)
    rng = random.Random(2026)
    os.makedirs(os.path.join(root, "c_api"), exist_ok=True)
    for i, n in enumerate([1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 300, 700, 1500, 3000, 6000, 12000]):
        with open(os.path.join(root, "c_api", f"random_{i:02d}_{n}"), "wb") as f:
            f.write(bytes(rng.getrandbits(8) for _ in range(n)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fuzz_corpus"))
