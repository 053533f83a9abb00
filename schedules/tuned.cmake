# The knob values (schedules/knobs.h, docs/knobs.md) that `msda sweep` chose,
# per class and schedule: msda_tuned(CLASS SCHEDULE knob=value ...), CLASS a
# CPU tier of cpu_tiers.cmake (x86-64, avx2, avx512_skylake, avx512_zen4,
# arm-64, arm_fp16),
# opencl or cuda; SCHEDULE forward, grad_value, grad_sample (also
# grad_attention_weights and grad_sampling_locations) or relayout. The build
# compiles each variant's code for a class with that class's row, and a
# class without one keeps its family's defaults. `msda sweep` rewrites the
# rows of the class and schedules it swept, and keeps the others.

# msda sweep 2026-12-06 on AMD EPYC: G 1.08x M0 1.06x the shipped speed (was: vector_width=16 tasks_per_batch=128 table_lanes=16)
msda_tuned(avx2 forward vector_width=16 tasks_per_batch=128 point_sums=2 table_lanes=8)
# msda sweep 2026-12-07 night on AMD EPYC (Zen 5), the corrected harness, scatter_levels=1 pinned: G 1.89x M0 1.82x the shipped speed; msda_ab: docs/performance-log.md (was: vector_width=16 fill_rows=64)
msda_tuned(avx2 grad_value fill_rows=64 unroll_channels=0 table_stages=1 table_lanes=4 scatter_levels=1)
# 2026-12-07 late night on AMD EPYC (Zen 5): the family's dot lanes (8) and table lanes (8), counted by callgrind
# (92.5 -> 75.6 instructions a sample, JIT) and timed by msda_ab against the row before, both orders: M0 local
# 0.74-0.78x, G local 0.86-0.89x, G uniform 0.83-0.86x, X and L1 local 0.78-0.84x; docs/performance-log.md
# (was: dot_lanes=4 table_stages=1 table_lanes=8, from a sweep on the harness corrected since)
msda_tuned(avx2 grad_sample dot_lanes=8 table_lanes=8)
# msda sweep 2026-12-06 on AMD EPYC: G 1.00x M0 1.06x the shipped speed (was: family defaults)
msda_tuned(avx512_skylake forward specialize_usual=0 table_lanes=8)
# msda sweep 2026-12-06 on AMD EPYC: G 1.07x M0 1.05x the shipped speed (was: family defaults)
# 2026-12-07 night: scatter_levels=1 added after msda_ab (the library before against it, both orders, M0 and G local, on a Zen 5): docs/performance-log.md
msda_tuned(avx512_skylake grad_value fill_rows=1024 unroll_channels=0 scatter_levels=1)
# msda sweep 2026-12-06 on AMD EPYC: G 1.00x M0 1.12x the shipped speed (was: tasks_per_batch=32)
msda_tuned(avx512_skylake grad_sample tasks_per_batch=32 table_lanes=8)
# msda sweep 2026-12-06 on AMD EPYC (M0 by query, table_stages, flat_rows, table_lanes): M0 1.07-1.13x the family defaults (was: vector_width=32 query_tile=32 tasks_per_batch=32 points_inner=1)
msda_tuned(avx512_zen4 forward vector_width=32 query_tile=32 tasks_per_batch=32 table_stages=1 points_inner=1)
# msda sweep 2026-12-03 on AMD EPYC: G 1.14x M0 1.13x the shipped speed (was: family defaults)
# 2026-12-07 night: scatter_levels=1 added after msda_ab (the library before against it, both orders, M0, G, X and L1 local, on a Zen 5): docs/performance-log.md
msda_tuned(avx512_zen4 grad_value unroll_channels=0 scatter_levels=1)
# msda sweep 2026-12-06 on AMD EPYC: G 1.00x M0 1.14x the shipped speed (was: vector_width=32 query_tile=32 tasks_per_batch=128 dot_lanes=16)
msda_tuned(avx512_zen4 grad_sample vector_width=32 query_tile=32 tasks_per_batch=128 dot_lanes=16 table_lanes=8)
# msda sweep 2026-12-06 on AMD EPYC: G 1.02x M0 1.03x the shipped speed (was: family defaults)
msda_tuned(x86-64 forward point_sums=2)
# 2026-12-07 late night on AMD EPYC (Zen 5), x86-64's first backward rows, chosen by callgrind's count (JIT, M0
# local: grad_sample 256.5 -> 236.2 instructions a sample, grad_value 270.1 -> 265.1) and timed by msda_ab against
# the family defaults, both orders, 7 rounds, same bits: grad_sample M0 local 0.90-0.91x, G local 0.92-1.01x, G
# uniform 0.95-1.05x; grad_value M0 and G local 0.98-1.00x; docs/performance-log.md (was: family defaults)
msda_tuned(x86-64 grad_sample table_stages=1 table_lanes=16 flat_rows=0)
msda_tuned(x86-64 grad_value table_lanes=16)
