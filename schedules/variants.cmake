# Every generated function, one row each: the one table the build reads
# (cmake/MsdaHalide.cmake: msda_variant) and msda_variants.h, the runtime's
# registry, is written from. Columns:
#   function   the generated C function (and its library and header): msdak_
#              and what it computes; each name once
#   op         msda, or gka (nearest-pixel samples at absolute coordinates)
#   kind       forward | grad_value (the deterministic scatter) |
#              grad_value_atomic (the GPU family's float atomic scatter,
#              Options::deterministic = false) | grad_value_serial (OpenCL:
#              the deterministic scatter for devices without 64-bit integer
#              atomics) | grad_sample (grad_attention_weights and
#              grad_sampling_locations in one pass) | grad_attention_weights |
#              grad_sampling_locations | relayout (a value-shaped copy between
#              layouts)
#   dtype      the storage of value, attention_weights, output, grad_output
#              and their gradients: f32, f16, bf16 or f64 (computed in
#              float64; f64 takes f64 locations)
#   loc        the storage of sampling_locations and its gradient: f32, or
#              the dtype (f64 for f64)
#   C_h        a compile-time channel count per head, 0 for any
#   N_l, N_p   a compile-time number of levels and points (both or neither,
#              0: any): the CPU family then walks the samples query by query
#              (Options::sample_order) and requires canonical strides on the
#              (l, p) dimensions of sampling_locations, attention_weights and
#              their gradients
#   family     cpu (the build's CPU family, x86 or arm: MSDA_CPU_TARGETS),
#              opencl (MSDA_OPENCL_TARGET, where MSDA_OPENCL is on) or cuda
#              (MSDA_CUDA_TARGET, where MSDA_CUDA is on)
#   config     the schedule configuration, an msda_schedule_config below:
#              knob values over every class's (schedules/knobs.h); each
#              class's own come from tuned.cmake, which `msda sweep` writes
#   set        the smallest MSDA_VARIANT_SET that holds the row: concurrency
#              (every tree; the tsan tree runs only test_concurrency, which
#              calls MSDA with float32 locations) or full (full trees only;
#              a call outside a tree's set is refused as having no
#              generated code)
# Two rows of one key (family, op, kind, dtype, loc, C_h, N_l, N_p) are a
# configure error: the runtime could call only one of them.

# The family defaults, with each class's tuned values (tuned.cmake).
msda_schedule_config(default)

#            function                                         op   kind                    dtype loc  C_h N_l N_p family config  set

# MSDA float32: a generic one for any C_h and compile-time C_h = 32 and 64 (a
# run-time channel count costs 1.5-2x). The per-sample gradients both in one
# pass (grad_sample) and each alone for calls that ask for one, at the same
# channel counts, so a gradient's bits do not depend on what else is asked
# (the channel sums run in the same order in all three).
msda_variant(msdak_forward_c0                                 msda forward                 f32   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_value_c0                              msda grad_value              f32   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_sample_c0                             msda grad_sample             f32   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_c0                  msda grad_attention_weights  f32   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_c0                 msda grad_sampling_locations f32   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_forward_c32                                msda forward                 f32   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_value_c32                             msda grad_value              f32   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sample_c32                            msda grad_sample             f32   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_c32                 msda grad_attention_weights  f32   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_c32                msda grad_sampling_locations f32   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_forward_c64                                msda forward                 f32   f32  64  0   0   cpu    default concurrency)
msda_variant(msdak_grad_value_c64                             msda grad_value              f32   f32  64  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sample_c64                            msda grad_sample             f32   f32  64  0   0   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_c64                 msda grad_attention_weights  f32   f32  64  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_c64                msda grad_sampling_locations f32   f32  64  0   0   cpu    default concurrency)
# The forward walked query by query (Options::sample_order), for C_h = 32 and
# the (N_l, N_p) of the models the bench measures: Deformable DETR and DINO
# (4, 4), Mask2Former's pixel decoder (3, 4), and 8 points (4, 8). In float32
# also the per-sample gradients (each set a call may ask for, so a gradient
# walks the same way, with the same bits, whatever else is asked) and
# grad_value's scatter, for (4, 4) and (4, 8): with (3, 4)'s 12-lane vectors
# the per-sample gradients were 1.47x slower than by level on M2 (msda_ab),
# where the forward gains, and the scatter did not gain (1.05x).
msda_variant(msdak_forward_c32_l4p4                           msda forward                 f32   f32  32  4   4   cpu    default concurrency)
msda_variant(msdak_grad_sample_c32_l4p4                       msda grad_sample             f32   f32  32  4   4   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_c32_l4p4            msda grad_attention_weights  f32   f32  32  4   4   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_c32_l4p4           msda grad_sampling_locations f32   f32  32  4   4   cpu    default concurrency)
msda_variant(msdak_grad_value_c32_l4p4                        msda grad_value              f32   f32  32  4   4   cpu    default concurrency)
msda_variant(msdak_forward_c32_l3p4                           msda forward                 f32   f32  32  3   4   cpu    default concurrency)
msda_variant(msdak_forward_c32_l4p8                           msda forward                 f32   f32  32  4   8   cpu    default concurrency)
msda_variant(msdak_grad_sample_c32_l4p8                       msda grad_sample             f32   f32  32  4   8   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_c32_l4p8            msda grad_attention_weights  f32   f32  32  4   8   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_c32_l4p8           msda grad_sampling_locations f32   f32  32  4   8   cpu    default concurrency)
msda_variant(msdak_grad_value_c32_l4p8                        msda grad_value              f32   f32  32  4   8   cpu    default concurrency)
# MSDA half precision (f16, bf16, with float32 locations or locations in the
# same type): generic and 32; with float32 locations also the by-query
# forwards (M0 local: 1.2-1.4x faster than by level in the quick driver).
msda_variant(msdak_forward_f16_locf32_c0                      msda forward                 f16   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_value_f16_locf32_c0                   msda grad_value              f16   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_sample_f16_locf32_c0                  msda grad_sample             f16   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_f16_locf32_c0       msda grad_attention_weights  f16   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_f16_locf32_c0      msda grad_sampling_locations f16   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_forward_f16_locf32_c32                     msda forward                 f16   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_value_f16_locf32_c32                  msda grad_value              f16   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sample_f16_locf32_c32                 msda grad_sample             f16   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_f16_locf32_c32      msda grad_attention_weights  f16   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_f16_locf32_c32     msda grad_sampling_locations f16   f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_forward_f16_locf32_c32_l4p4                msda forward                 f16   f32  32  4   4   cpu    default concurrency)
msda_variant(msdak_forward_f16_locf32_c32_l3p4                msda forward                 f16   f32  32  3   4   cpu    default concurrency)
msda_variant(msdak_forward_f16_locf32_c32_l4p8                msda forward                 f16   f32  32  4   8   cpu    default concurrency)
msda_variant(msdak_forward_f16_locf16_c0                      msda forward                 f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_grad_value_f16_locf16_c0                   msda grad_value              f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_grad_sample_f16_locf16_c0                  msda grad_sample             f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_grad_attention_weights_f16_locf16_c0       msda grad_attention_weights  f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_grad_sampling_locations_f16_locf16_c0      msda grad_sampling_locations f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_forward_f16_locf16_c32                     msda forward                 f16   f16  32  0   0   cpu    default full)
msda_variant(msdak_grad_value_f16_locf16_c32                  msda grad_value              f16   f16  32  0   0   cpu    default full)
msda_variant(msdak_grad_sample_f16_locf16_c32                 msda grad_sample             f16   f16  32  0   0   cpu    default full)
msda_variant(msdak_grad_attention_weights_f16_locf16_c32      msda grad_attention_weights  f16   f16  32  0   0   cpu    default full)
msda_variant(msdak_grad_sampling_locations_f16_locf16_c32     msda grad_sampling_locations f16   f16  32  0   0   cpu    default full)
msda_variant(msdak_forward_bf16_locf32_c0                     msda forward                 bf16  f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_value_bf16_locf32_c0                  msda grad_value              bf16  f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_sample_bf16_locf32_c0                 msda grad_sample             bf16  f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_bf16_locf32_c0      msda grad_attention_weights  bf16  f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_bf16_locf32_c0     msda grad_sampling_locations bf16  f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_forward_bf16_locf32_c32                    msda forward                 bf16  f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_value_bf16_locf32_c32                 msda grad_value              bf16  f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sample_bf16_locf32_c32                msda grad_sample             bf16  f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_attention_weights_bf16_locf32_c32     msda grad_attention_weights  bf16  f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_grad_sampling_locations_bf16_locf32_c32    msda grad_sampling_locations bf16  f32  32  0   0   cpu    default concurrency)
msda_variant(msdak_forward_bf16_locf32_c32_l4p4               msda forward                 bf16  f32  32  4   4   cpu    default concurrency)
msda_variant(msdak_forward_bf16_locf32_c32_l3p4               msda forward                 bf16  f32  32  3   4   cpu    default concurrency)
msda_variant(msdak_forward_bf16_locf32_c32_l4p8               msda forward                 bf16  f32  32  4   8   cpu    default concurrency)
msda_variant(msdak_forward_bf16_locbf16_c0                    msda forward                 bf16  bf16 0   0   0   cpu    default full)
msda_variant(msdak_grad_value_bf16_locbf16_c0                 msda grad_value              bf16  bf16 0   0   0   cpu    default full)
msda_variant(msdak_grad_sample_bf16_locbf16_c0                msda grad_sample             bf16  bf16 0   0   0   cpu    default full)
msda_variant(msdak_grad_attention_weights_bf16_locbf16_c0     msda grad_attention_weights  bf16  bf16 0   0   0   cpu    default full)
msda_variant(msdak_grad_sampling_locations_bf16_locbf16_c0    msda grad_sampling_locations bf16  bf16 0   0   0   cpu    default full)
msda_variant(msdak_forward_bf16_locbf16_c32                   msda forward                 bf16  bf16 32  0   0   cpu    default full)
msda_variant(msdak_grad_value_bf16_locbf16_c32                msda grad_value              bf16  bf16 32  0   0   cpu    default full)
msda_variant(msdak_grad_sample_bf16_locbf16_c32               msda grad_sample             bf16  bf16 32  0   0   cpu    default full)
msda_variant(msdak_grad_attention_weights_bf16_locbf16_c32    msda grad_attention_weights  bf16  bf16 32  0   0   cpu    default full)
msda_variant(msdak_grad_sampling_locations_bf16_locbf16_c32   msda grad_sampling_locations bf16  bf16 32  0   0   cpu    default full)
# GKA (forward, grad_value and grad_attention_weights: locations get no
# gradient): float32 generic and 32, half precision generic.
msda_variant(msdak_gka_forward_c0                             gka  forward                 f32   f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_value_c0                          gka  grad_value              f32   f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_attention_weights_c0              gka  grad_attention_weights  f32   f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_forward_c32                            gka  forward                 f32   f32  32  0   0   cpu    default full)
msda_variant(msdak_gka_grad_value_c32                         gka  grad_value              f32   f32  32  0   0   cpu    default full)
msda_variant(msdak_gka_grad_attention_weights_c32             gka  grad_attention_weights  f32   f32  32  0   0   cpu    default full)
msda_variant(msdak_gka_forward_f16_locf32_c0                  gka  forward                 f16   f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_value_f16_locf32_c0               gka  grad_value              f16   f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_attention_weights_f16_locf32_c0   gka  grad_attention_weights  f16   f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_forward_f16_locf16_c0                  gka  forward                 f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_value_f16_locf16_c0               gka  grad_value              f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_attention_weights_f16_locf16_c0   gka  grad_attention_weights  f16   f16  0   0   0   cpu    default full)
msda_variant(msdak_gka_forward_bf16_locf32_c0                 gka  forward                 bf16  f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_value_bf16_locf32_c0              gka  grad_value              bf16  f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_attention_weights_bf16_locf32_c0  gka  grad_attention_weights  bf16  f32  0   0   0   cpu    default full)
msda_variant(msdak_gka_forward_bf16_locbf16_c0                gka  forward                 bf16  bf16 0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_value_bf16_locbf16_c0             gka  grad_value              bf16  bf16 0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_attention_weights_bf16_locbf16_c0 gka  grad_attention_weights  bf16  bf16 0   0   0   cpu    default full)
# float64 storage, computed in float64 (the test recipes of Deformable DETR,
# mmcv and detrex check the operator in double): MSDA and GKA, generic C_h,
# walked by level (the GPU family's rows are below). float64 locations only: a float32 location would be
# rounded before the arithmetic that float64 is asked for.
msda_variant(msdak_forward_f64_c0                             msda forward                 f64   f64  0   0   0   cpu    default full)
msda_variant(msdak_grad_value_f64_c0                          msda grad_value              f64   f64  0   0   0   cpu    default full)
msda_variant(msdak_grad_sample_f64_c0                         msda grad_sample             f64   f64  0   0   0   cpu    default full)
msda_variant(msdak_grad_attention_weights_f64_c0              msda grad_attention_weights  f64   f64  0   0   0   cpu    default full)
msda_variant(msdak_grad_sampling_locations_f64_c0             msda grad_sampling_locations f64   f64  0   0   0   cpu    default full)
msda_variant(msdak_gka_forward_f64_c0                         gka  forward                 f64   f64  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_value_f64_c0                      gka  grad_value              f64   f64  0   0   0   cpu    default full)
msda_variant(msdak_gka_grad_attention_weights_f64_c0          gka  grad_attention_weights  f64   f64  0   0   0   cpu    default full)
# The GPU family's libraries, OpenCL and CUDA: MSDA and GKA in float32
# storage, any C_h, the samples walked by level (the GPU family has one walk
# and no relayout). grad_value, deterministic: summed in fixed point with
# 64-bit integer atomics (GradValueSum); OpenCL devices without them
# (cl_khr_int64_base_atomics) get grad_value_serial, a thread per grad_value
# column, instead. grad_value_atomic (Options::deterministic = false): float
# atomics.
msda_variant(msdak_forward_opencl                             msda forward                 f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_grad_value_serial_opencl                   msda grad_value_serial       f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_grad_value_opencl                          msda grad_value              f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_grad_value_atomic_opencl                   msda grad_value_atomic       f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_grad_attention_weights_opencl              msda grad_attention_weights  f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_grad_sample_opencl                         msda grad_sample             f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_grad_sampling_locations_opencl             msda grad_sampling_locations f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_gka_forward_opencl                         gka  forward                 f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_gka_grad_value_serial_opencl               gka  grad_value_serial       f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_gka_grad_value_opencl                      gka  grad_value              f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_gka_grad_value_atomic_opencl               gka  grad_value_atomic       f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_gka_grad_attention_weights_opencl          gka  grad_attention_weights  f32   f32  0   0   0   opencl default concurrency)
msda_variant(msdak_forward_cuda                               msda forward                 f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_grad_value_cuda                            msda grad_value              f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_grad_value_atomic_cuda                     msda grad_value_atomic       f32   f32  0   0   0   cuda   default concurrency)
# CUDA: MSDA with C_h, N_l and N_p known at compile time, for the models the
# bench measures (Deformable DETR and DINO: 32 channels, 4 levels, 4 points):
# the sample loops unrolled. Any other call runs the generic variants.
msda_variant(msdak_forward_c32_l4p4_cuda                      msda forward                 f32   f32  32  4   4   cuda   default concurrency)
msda_variant(msdak_grad_value_c32_l4p4_cuda                   msda grad_value              f32   f32  32  4   4   cuda   default concurrency)
msda_variant(msdak_grad_value_atomic_c32_l4p4_cuda            msda grad_value_atomic       f32   f32  32  4   4   cuda   default concurrency)
msda_variant(msdak_grad_sample_c32_l4p4_cuda                  msda grad_sample             f32   f32  32  4   4   cuda   default concurrency)
msda_variant(msdak_grad_attention_weights_c32_l4p4_cuda       msda grad_attention_weights  f32   f32  32  4   4   cuda   default concurrency)
msda_variant(msdak_grad_sampling_locations_c32_l4p4_cuda      msda grad_sampling_locations f32   f32  32  4   4   cuda   default concurrency)
msda_variant(msdak_grad_attention_weights_cuda                msda grad_attention_weights  f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_grad_sample_cuda                           msda grad_sample             f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_grad_sampling_locations_cuda               msda grad_sampling_locations f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_gka_forward_cuda                           gka  forward                 f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_gka_grad_value_cuda                        gka  grad_value              f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_gka_grad_value_atomic_cuda                 gka  grad_value_atomic       f32   f32  0   0   0   cuda   default concurrency)
msda_variant(msdak_gka_grad_attention_weights_cuda            gka  grad_attention_weights  f32   f32  0   0   0   cuda   default concurrency)
# float64 on the GPU family, OpenCL (devices with cl_khr_fp64) and CUDA: any
# C_h, walked by level. grad_value's deterministic sum is the ordered one (a
# thread per grad_value column, as grad_value_serial): the fixed-point sum
# is float32's. No float atomics (Options::deterministic = false runs the
# ordered sum too).
msda_variant(msdak_forward_f64_opencl                         msda forward                 f64   f64  0   0   0   opencl default full)
msda_variant(msdak_grad_value_f64_opencl                      msda grad_value              f64   f64  0   0   0   opencl default full)
msda_variant(msdak_grad_sample_f64_opencl                     msda grad_sample             f64   f64  0   0   0   opencl default full)
msda_variant(msdak_grad_attention_weights_f64_opencl          msda grad_attention_weights  f64   f64  0   0   0   opencl default full)
msda_variant(msdak_grad_sampling_locations_f64_opencl         msda grad_sampling_locations f64   f64  0   0   0   opencl default full)
msda_variant(msdak_gka_forward_f64_opencl                     gka  forward                 f64   f64  0   0   0   opencl default full)
msda_variant(msdak_gka_grad_value_f64_opencl                  gka  grad_value              f64   f64  0   0   0   opencl default full)
msda_variant(msdak_gka_grad_attention_weights_f64_opencl      gka  grad_attention_weights  f64   f64  0   0   0   opencl default full)
msda_variant(msdak_forward_f64_cuda                           msda forward                 f64   f64  0   0   0   cuda   default full)
msda_variant(msdak_grad_value_f64_cuda                        msda grad_value              f64   f64  0   0   0   cuda   default full)
msda_variant(msdak_grad_sample_f64_cuda                       msda grad_sample             f64   f64  0   0   0   cuda   default full)
msda_variant(msdak_grad_attention_weights_f64_cuda            msda grad_attention_weights  f64   f64  0   0   0   cuda   default full)
msda_variant(msdak_grad_sampling_locations_f64_cuda           msda grad_sampling_locations f64   f64  0   0   0   cuda   default full)
msda_variant(msdak_gka_forward_f64_cuda                       gka  forward                 f64   f64  0   0   0   cuda   default full)
msda_variant(msdak_gka_grad_value_f64_cuda                    gka  grad_value              f64   f64  0   0   0   cuda   default full)
msda_variant(msdak_gka_grad_attention_weights_f64_cuda        gka  grad_attention_weights  f64   f64  0   0   0   cuda   default full)
# The copy that stages value head-major (and brings grad_value's sums back),
# one per storage size.
msda_variant(msdak_relayout_f32                               msda relayout                f32   f32  0   0   0   cpu    default concurrency)
msda_variant(msdak_relayout_f16                               msda relayout                f16   f16  0   0   0   cpu    default concurrency)
msda_variant(msdak_relayout_bf16                              msda relayout                bf16  bf16 0   0   0   cpu    default concurrency)
msda_variant(msdak_relayout_f64                               msda relayout                f64   f64  0   0   0   cpu    default full)
