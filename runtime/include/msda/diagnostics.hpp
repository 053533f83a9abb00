// msda's diagnostics: which compiled code this process runs and why, the
// OpenCL and CUDA devices this machine has, and the generated functions
// this library holds (`msda info` prints them all).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <msda/msda.hpp>

namespace msda {

// One of the targets this build compiled (x86-64 or 64-bit ARM).
struct CompiledTarget {
    std::string name;           // avx512_zen4, avx512_skylake, avx2 or x86-64 (MSDA_X86_TARGET's names);
                                // arm_fp16 or arm-64 (MSDA_ARM_TARGET's)
    std::string halide_target;  // the Halide target it was compiled for
    std::vector<std::string> features;  // the CPU features its code may use
    std::vector<std::string> missing;   // those this CPU lacks; empty when it can run it
};

// Which compiled code this process runs, and why. msda decides from the
// CPU's own words: on x86-64 cpuid and xgetbv (a feature counts only when
// the OS has also enabled its registers' state), on ARM the AT_HWCAP word
// Linux gives the process; the best compiled target whose every feature
// this CPU has, capped by the environment variable MSDA_X86_TARGET
// (avx512_zen4, avx512_skylake, avx2 or x86-64; MSDA_ARM_TARGET on ARM:
// arm_fp16 or arm-64)
// when it is set. A cap above what the CPU can run is an error: every call
// then throws it.
struct CpuDispatch {
    std::string family;                   // the target family of this library's code: x86 or arm
    std::string cpu;                      // vendor, family, model, stepping and name
    std::vector<CompiledTarget> targets;  // best first
    std::string selected;                 // the target calls run; empty when they fail
    std::string reason;                   // why that one: what the better targets need
    std::string cap_variable;             // MSDA_X86_TARGET or MSDA_ARM_TARGET
    std::string cap;                      // its value, empty when unset
    std::string error;                    // why every call fails, when one does
    std::string cpuid;                    // the words read: cpuid leaves, or AT_HWCAP (msda info --cpuid)
    // A core's caches, which the automatic relayout and sample order size
    // their working sets against (Linux's sysfs; 48 KiB and 2 MiB where it
    // says nothing), and where they were read.
    std::int64_t l1_data_cache_bytes = 0, l2_cache_bytes = 0;
    std::string caches;
};
CpuDispatch cpu_dispatch();

// The OpenCL devices this machine has (msda info lists them), read through
// the ICD loader (libOpenCL.so.1) as Halide's OpenCL runtime reads them
// (opencl_queue() says which one msda's own queue is on). error says why
// there are none.
struct OpenClDevice {
    std::string platform, platform_version;
    std::string name, version;
    std::string type;   // CPU, GPU, accelerator or other
    bool fp16 = false;  // cl_khr_fp16
};
struct OpenClReport {
    std::vector<OpenClDevice> devices;
    std::string error;
};
OpenClReport opencl_devices();

// The CUDA devices this machine has (msda info lists them), read through
// the CUDA driver (libcuda.so.1) as Halide's CUDA runtime reads it. error
// says why there are none (no driver, no device).
struct CudaDevice {
    std::string name;
    int compute_major = 0, compute_minor = 0;  // compute capability
    std::int64_t memory_bytes = 0;
};
struct CudaReport {
    std::vector<CudaDevice> devices;
    std::string driver_version;  // e.g. "12.4", empty without a driver
    std::string error;
};
CudaReport cuda_devices();

// One generated function of this library (msda info --variants lists them):
// each is compiled for every target of the library's family (cpu_dispatch's
// targets), and a call runs the one that serves its sizes and dtypes.
struct CompiledVariant {
    std::string name;    // its function, e.g. msdak_forward_c32
    std::string family;  // the target family it was compiled for: x86 or arm, opencl or cuda
    std::string kind;    // forward, grad_value, grad_sample (both per-sample gradients),
                         // grad_attention_weights, grad_sampling_locations, or relayout
                         // (value copied between layouts); on OpenCL and CUDA also
                         // grad_value_atomic (Options::deterministic = false) and, on
                         // OpenCL, grad_value_serial (the deterministic grad_value of
                         // devices without 64-bit integer atomics)
    Operator op;         // msda or gka (relayout: msda)
    DType dtype;            // storage of value, weights, outputs and their gradients
    DType locations_dtype;  // storage of sampling_locations and its gradient
    int channels;        // compile-time C_h, 0 for any
    int levels, points;  // compile-time N_l and N_p (the CPU family: its by-query walk), 0 for any
};
std::vector<CompiledVariant> compiled_variants();

}  // namespace msda
