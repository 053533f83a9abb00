# The knob values (schedules/knobs.h, docs/knobs.md) that `msda sweep` chose,
# per class and schedule: msda_tuned(CLASS SCHEDULE knob=value ...), CLASS a
# CPU tier of cpu_tiers.cmake (x86-64, avx2, avx512_zen4, arm-64, arm_fp16),
# opencl or cuda; SCHEDULE forward, grad_value, grad_sample (also
# grad_attention_weights and grad_sampling_locations) or relayout. The build
# compiles each variant's code for a class with that class's row, and a
# class without one keeps its family's defaults. `msda sweep` rewrites the
# rows of the class and schedules it swept, and keeps the others.
