# The CPU tiers msda compiles for, per CPU family, worst first: the one list
# the build (cmake/MsdaHalide.cmake: which tier each of MSDA_X86_TARGETS or
# MSDA_ARM_TARGETS is) and the run-time decision (msda_cpu_tiers.h, written
# from this file: runtime/src/x86_cpu.cpp, arm_cpu.cpp and cpu_dispatch.cpp)
# both read.
#
# msda_cpu_tier(family tier [HALIDE feature...] [IMPLIED feature...])
#   A tier, its name as MSDA_X86_TARGET / MSDA_ARM_TARGET take it (in C++ its
#   '-' is '_'). HALIDE: the Halide target features that make a target of
#   this tier (a target's tier is the best its features make; the first tier,
#   with none, is the base every target has). IMPLIED: features Halide adds
#   to such a target's (the bits its multi-target wrapper asks the runtime
#   about), which a CPU of this tier may run too. A tier's code may carry the
#   features of every tier up to it.
# msda_cpu_isa_features(family feature...)
#   The Halide ISA features a target of the family may carry, which the
#   run-time check refuses unless the chosen tier allows them.
# msda_x86_cpuid(name tier leaf subleaf register bit [XCR0 mask])
#   A CPU feature the code of the tier (and those above) may use, as one bit
#   cpuid reports, or with XCR0 a register state the OS must enable before
#   the instructions that use it can run (xgetbv). In the order the
#   run-time messages list them.
# msda_arm_hwcap(name tier bit)
#   A capability the code of the tier may use, a bit of AT_HWCAP (Linux,
#   arch/arm64/include/uapi/asm/hwcap.h), by the name /proc/cpuinfo prints.

# x86-64. The x86-64 tier is Halide's x86-64-linux (LLVM -mcpu=k8): the
# baseline every x86-64 CPU has. avx2 is x86-64-linux-avx-avx2-f16c-fma-sse41
# (LLVM -mcpu=haswell -mattr=+fma,+f16c): its vector extensions, and the
# scalar ones LLVM's instruction selection emits on its own for haswell
# (BMI1, BMI2, LZCNT, MOVBE, POPCNT, CMPXCHG16B, LAHF/SAHF). avx512_skylake
# is x86-64-linux-avx512_skylake (LLVM -mcpu=skylake-avx512): AVX-512's F,
# CD, BW, DQ and VL subsets, what every AVX-512 server since Skylake-SP has
# (Skylake-SP, Cascade Lake, Cooper Lake, Ice Lake, Tiger Lake: the Intel
# servers of most clouds before Sapphire Rapids). avx512_zen4 is
# x86-64-linux-avx512_zen4 (LLVM -mcpu=znver4 with Halide's -mattr list):
# every AVX-512 subset znver4 has, and GFNI, which LLVM uses for byte shifts.
# Not required: extensions whose instructions LLVM emits only for their own
# intrinsics, which Halide's code does not call (AES, PCLMULQDQ, VAES,
# VPCLMULQDQ, SHA, ADX, RDRAND, RDSEED, PREFETCHW, CLFLUSHOPT, CLWB, FSGSBASE,
# XSAVEOPT, and AMD's SSE4A, CLZERO, MWAITX, RDPRU, which Intel CPUs lack);
# tests/check_target_instructions.py decodes every compiled object and fails
# if its code holds an instruction outside its tier's list.
msda_cpu_tier(x86 x86-64)
msda_cpu_tier(x86 avx2 HALIDE sse41 avx avx2 fma f16c)
msda_cpu_tier(x86 avx512_skylake HALIDE avx512_skylake IMPLIED avx512)
msda_cpu_tier(x86 avx512_zen4 HALIDE avx512_zen4 IMPLIED avx512_cannonlake)
msda_cpu_isa_features(x86 sse41 avx avx2 avxvnni fma fma4 f16c avx512 avx512_knl avx512_skylake avx512_cannonlake
                      avx512_zen4 avx512_zen5 avx512_sapphirerapids avx10_1 x86_apx)

#              name             tier           leaf       sub reg bit
msda_x86_cpuid(CMOV             x86-64         0x1        0   edx 15)
msda_x86_cpuid(CX8              x86-64         0x1        0   edx 8)
msda_x86_cpuid(FXSR             x86-64         0x1        0   edx 24)
msda_x86_cpuid(MMX              x86-64         0x1        0   edx 23)
msda_x86_cpuid(SSE              x86-64         0x1        0   edx 25)
msda_x86_cpuid(SSE2             x86-64         0x1        0   edx 26)

msda_x86_cpuid(SSE3             avx2           0x1        0   ecx 0)
msda_x86_cpuid(SSSE3            avx2           0x1        0   ecx 9)
msda_x86_cpuid(SSE4_1           avx2           0x1        0   ecx 19)
msda_x86_cpuid(SSE4_2           avx2           0x1        0   ecx 20)
msda_x86_cpuid(POPCNT           avx2           0x1        0   ecx 23)
msda_x86_cpuid(CMPXCHG16B       avx2           0x1        0   ecx 13)
msda_x86_cpuid(LAHF_SAHF        avx2           0x80000001 0   ecx 0)
msda_x86_cpuid(MOVBE            avx2           0x1        0   ecx 22)
msda_x86_cpuid(LZCNT            avx2           0x80000001 0   ecx 5)
msda_x86_cpuid(BMI1             avx2           0x7        0   ebx 3)
msda_x86_cpuid(BMI2             avx2           0x7        0   ebx 8)
msda_x86_cpuid(AVX              avx2           0x1        0   ecx 28)
msda_x86_cpuid(AVX2             avx2           0x7        0   ebx 5)
msda_x86_cpuid(FMA              avx2           0x1        0   ecx 12)
msda_x86_cpuid(F16C             avx2           0x1        0   ecx 29)
# xgetbv itself needs OSXSAVE; without it XCR0 cannot be read.
msda_x86_cpuid(OSXSAVE          avx2           0x1        0   ecx 27)
# XCR0: x87 (bit 0), SSE (1) and AVX (2) state.
msda_x86_cpuid(OS_YMM_STATE     avx2           0x0        0   eax 0   XCR0 0x6)

msda_x86_cpuid(AVX512F          avx512_skylake 0x7        0   ebx 16)
msda_x86_cpuid(AVX512CD         avx512_skylake 0x7        0   ebx 28)
msda_x86_cpuid(AVX512BW         avx512_skylake 0x7        0   ebx 30)
msda_x86_cpuid(AVX512DQ         avx512_skylake 0x7        0   ebx 17)
msda_x86_cpuid(AVX512VL         avx512_skylake 0x7        0   ebx 31)
# XCR0: AVX-512's opmask (5), the upper halves of zmm0-15 (6) and zmm16-31
# (7), with SSE's and AVX's.
msda_x86_cpuid(OS_ZMM_STATE     avx512_skylake 0x0        0   eax 0   XCR0 0xe6)

msda_x86_cpuid(AVX512_IFMA      avx512_zen4    0x7        0   ebx 21)
msda_x86_cpuid(AVX512_VBMI      avx512_zen4    0x7        0   ecx 1)
msda_x86_cpuid(AVX512_VBMI2     avx512_zen4    0x7        0   ecx 6)
msda_x86_cpuid(AVX512_VNNI      avx512_zen4    0x7        0   ecx 11)
msda_x86_cpuid(AVX512_BITALG    avx512_zen4    0x7        0   ecx 12)
msda_x86_cpuid(AVX512_VPOPCNTDQ avx512_zen4    0x7        0   ecx 14)
msda_x86_cpuid(AVX512_BF16      avx512_zen4    0x7        1   eax 5)
msda_x86_cpuid(GFNI             avx512_zen4    0x7        0   ecx 8)

# 64-bit ARM. arm-64: ARMv8-A with NEON (Advanced SIMD), Halide's
# arm-64-linux. arm_fp16: also ARMv8.2's half-precision arithmetic, scalar
# and vector (Halide's arm_fp16 feature), for float16 storage.
msda_cpu_tier(arm arm-64)
msda_cpu_tier(arm arm_fp16 HALIDE arm_fp16)
msda_cpu_isa_features(arm arm_fp16 arm_dot_prod sve sve2 armv81a armv82a armv83a armv84a armv85a armv86a armv87a
                      armv88a armv89a armv7s)

msda_arm_hwcap(fp      arm-64   0)
msda_arm_hwcap(asimd   arm-64   1)
msda_arm_hwcap(fphp    arm_fp16 9)
msda_arm_hwcap(asimdhp arm_fp16 10)
