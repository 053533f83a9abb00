#!/usr/bin/env python3
"""Every instruction of msda's compiled code against the CPU features its
target is run with.

msda's runtime runs a compiled x86 target only on a CPU that has every
feature of that target's list (runtime/src/x86_cpu.cpp; `msda info
--features` prints the lists). This decodes each object that the build
generated (one per variant and target, the multi-target wrappers and the
Halide runtime) with iced-x86, asks for each instruction the CPUID features
it needs, and fails if any needs a feature outside its target's list: the
list would let a CPU run code it cannot execute.

usage: check_target_instructions.py --msda build/bin/msda \
           --objects build/generators --runtime build/msda_halide_runtime.o
"""
import argparse
import collections
import pathlib
import re
import struct
import subprocess
import sys

import iced_x86

# What every x86-64 CPU executes: the architecture's baseline (the 8086 to
# 486 integer and x87 instructions, the 64-bit mode ones, CPUID, the long
# NOPs, PAUSE, CLFLUSH, SYSCALL and RDTSC). msda's x86-64 list names the
# rest of the baseline itself (CMOV CX8 FXSR MMX SSE SSE2).
ARCHITECTURAL = {
    "INTEL8086", "INTEL186", "INTEL286", "INTEL386", "INTEL486", "X64", "FPU", "FPU287", "FPU387",
    "CPUID", "MULTIBYTENOP", "PAUSE", "CLFSH", "SYSCALL", "TSC",
}
# msda's names that are register states, not instructions.
OS_STATES = {"OSXSAVE", "OS_YMM_STATE", "OS_ZMM_STATE"}
# LAHF and SAHF in 64-bit mode need cpuid 0x80000001 ecx bit 0; iced-x86
# counts them as 8086 instructions.
NOT_IN_ICED = {"LAHF_SAHF"}
# The feature whose instructions a tier's code must contain, so that an
# empty or misread object set cannot pass.
SIGNATURE = {"avx512_zen4": "AVX512F", "avx512_skylake": "AVX512F", "avx2": "AVX2", "x86-64": "SSE2"}

FEATURE_NAMES = {value: name for name, value in vars(iced_x86.CpuidFeature).items() if isinstance(value, int)}


def executable_sections(path):
    """The bytes of each executable section of an ELF64 object."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise SystemExit(f"{path}: not an ELF64 object")
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    for index in range(count):
        _, kind, flags, _, offset, size = struct.unpack_from("<IIQQQQ", data, section_offset + index * entry_size)
        if kind == 1 and flags & 0x4:  # SHT_PROGBITS, SHF_EXECINSTR
            yield data[offset:offset + size]


def needed_features(path):
    """Counter of feature -> instructions, and one example per feature."""
    counts, examples = collections.Counter(), {}
    formatter = iced_x86.Formatter(iced_x86.FormatterSyntax.GAS)
    for code in executable_sections(path):
        for instruction in iced_x86.Decoder(64, code):
            if instruction.code == iced_x86.Code.INVALID:
                raise SystemExit(f"{path}: bytes that decode to no instruction at {instruction.ip:#x}")
            names = {FEATURE_NAMES[f] for f in instruction.cpuid_features()}
            # LLVM writes cttz with an undefined result for 0 as TZCNT even
            # without BMI1: a CPU without BMI1 runs it as BSF (the same
            # prefix-ignoring encoding), which agrees for every input but 0.
            if names == {"BMI1"} and instruction.mnemonic == iced_x86.Mnemonic.TZCNT:
                names = {"BSF as TZCNT"}
            for name in names:
                counts[name] += 1
                examples.setdefault(name, formatter.format(instruction))
    return counts, examples


def target_lists(msda):
    """{halide_target: (tier, set of features)} from `msda info --features`."""
    text = subprocess.run([msda, "info", "--features"], check=True, capture_output=True, text=True).stdout
    lists = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^  (\S+)\s+(x86-64-linux\S*)\s", line)
        if match:
            needs = re.match(r"^\s+needs: (.*)$", lines[i + 1])
            if not needs:
                raise SystemExit(f"msda info --features: no feature list after {line!r}")
            lists[match.group(2)] = (match.group(1), set(needs.group(1).split()))
    if not lists:
        raise SystemExit("msda info --features listed no x86-64 targets:\n" + text)
    return lists


def object_target(path, targets):
    """The Halide target of a generated object, from its file name (a library
    built for one target, as in a sanitizer tree, names none: its objects are
    that target's). A sanitizer's feature in the name is not part of the
    tier's target."""
    if len(targets) == 1:
        return next(iter(targets))
    match = re.search(r"-(x86-64-linux.*?)-user_context", path.name)
    name = re.sub(r"-(asan|tsan)$", "", match.group(1)) if match else None
    if name not in targets:
        raise SystemExit(f"{path}: no compiled target in its name (known: {', '.join(targets)})")
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--msda", required=True, help="the msda command line")
    parser.add_argument("--objects", required=True, type=pathlib.Path, help="the generated objects' folder")
    parser.add_argument("--runtime", required=True, type=pathlib.Path, help="the Halide runtime object")
    args = parser.parse_args()

    targets = target_lists(args.msda)
    base = list(targets)[-1]  # the wrappers and the runtime: every CPU runs them
    objects = collections.defaultdict(list)
    for path in sorted(args.objects.glob("*.o")):
        # The multi-target wrappers, and the OpenCL and CUDA libraries' host
        # code (compiled for MSDA_OPENCL_TARGET and MSDA_CUDA_TARGET, the
        # baseline), run on every CPU.
        every_cpu = path.name.endswith(("_wrapper.o", "_opencl.o", "_cuda.o"))
        objects[base if every_cpu else object_target(path, targets)].append(path)
    objects[base].append(args.runtime)

    failures = 0
    for target, (tier, allowed) in targets.items():
        used, examples, files = collections.Counter(), {}, {}
        for path in objects[target]:
            counts, found = needed_features(path)
            used.update(counts)
            for name, example in found.items():
                examples.setdefault(name, example)
                files.setdefault(name, path.name)
        permitted = allowed | ARCHITECTURAL | {"BSF as TZCNT"}
        outside = sorted(set(used) - permitted)
        print(f"{tier} ({target}): {len(objects[target])} objects, {sum(used.values())} feature uses")
        for name in sorted(used):
            mark = "NOT IN ITS LIST" if name in outside else ""
            print(f"  {name:18} {used[name]:8}  e.g. {examples[name]}  {mark}")
        for name in outside:
            print(f"FAIL: {tier} code uses {name} (e.g. {examples[name]} in {files[name]}), "
                  f"which msda does not require of the CPUs it runs {tier} on")
            failures += 1
        if SIGNATURE[tier] not in used:
            print(f"FAIL: no {SIGNATURE[tier]} instruction in {tier}'s objects: were they found?")
            failures += 1
        unknown = allowed - OS_STATES - NOT_IN_ICED - set(FEATURE_NAMES.values())
        if unknown:
            print(f"FAIL: {tier}'s list names features iced-x86 does not know: {sorted(unknown)}")
            failures += 1
    print("PASS" if failures == 0 else f"{failures} failures")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
