# The schedule families at generation time (schedules/schedules.cpp): the CPU
# family serves 64-bit ARM as it serves x86-64, the GPU family CUDA as it
# serves OpenCL (whose libraries the build makes), and a target without a
# family is refused with a message naming it.
if (TARGET msda_generators)
    set(_msda_schedule_dir ${CMAKE_CURRENT_BINARY_DIR}/schedule_family)
    file(MAKE_DIRECTORY ${_msda_schedule_dir})
    set(_msda_forward_params channels=32 storage=float16 locations=float32 op=msda levels=0 points=0)
    add_test(NAME schedule_cpu_family_generates_arm_64
        COMMAND msda_generators -g msda_forward -o ${_msda_schedule_dir} -e object -f msdak_forward_arm
            target=arm-64-linux-arm_fp16-user_context-large_buffers ${_msda_forward_params})
    # The GPU family serves OpenCL and CUDA, the backward's scatter included.
    set(_msda_f32_params channels=0 storage=float32 locations=float32 op=msda levels=0 points=0)
    add_test(NAME schedule_gpu_family_generates_cuda
        COMMAND msda_generators -g msda_backward -o ${_msda_schedule_dir} -e object -f msdak_grad_value_cuda
            target=x86-64-linux-cuda-user_context ${_msda_f32_params} part=value)
    add_test(NAME schedule_no_family_for_other_gpu_targets
        COMMAND msda_generators -g msda_forward -o ${_msda_schedule_dir} -e object -f msdak_forward_metal
            target=x86-64-linux-metal-user_context ${_msda_forward_params})
    set_tests_properties(schedule_no_family_for_other_gpu_targets PROPERTIES
        PASS_REGULAR_EXPRESSION "msda has no schedule for the GPU target x86-64-linux-metal[^:]*: its GPU schedule family serves OpenCL and CUDA")
    add_test(NAME schedule_no_family_for_32_bit_arm
        COMMAND msda_generators -g msda_forward -o ${_msda_schedule_dir} -e object -f msdak_forward_arm32
            target=arm-32-linux-user_context ${_msda_forward_params})
    set_tests_properties(schedule_no_family_for_32_bit_arm PROPERTIES
        PASS_REGULAR_EXPRESSION "msda has no schedule for target arm-32-linux[^:]*: its CPU schedule family serves x86-64 and 64-bit ARM")
    set_tests_properties(schedule_cpu_family_generates_arm_64 schedule_gpu_family_generates_cuda
        schedule_no_family_for_other_gpu_targets schedule_no_family_for_32_bit_arm PROPERTIES LABELS core)
endif ()
