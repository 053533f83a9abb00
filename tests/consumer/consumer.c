/* The C API from an installed msda: the problem of consumer.cpp, then a call
 * that must fail, name the bad tensor and leave the output alone. */
#include <msda/msda.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void check(int condition, const char *what) {
    if (!condition) {
        printf("FAIL %s (last error: \"%s\")\n", what, msda_last_error());
        ++failures;
    }
}

int main(void) {
    /* value (B=1, L=4, N_h=1, C_h=2); row = y*W + x. */
    float value[4 * 2] = {1, 10, 2, 20, 3, 30, 4, 40};
    int32_t spatial_shapes[2] = {2, 2};
    int32_t level_start_index[1] = {0};
    /* The centre of pixel (x=1, y=0), then the middle of the level. */
    float sampling_locations[2 * 2] = {0.75f, 0.25f, 0.5f, 0.5f};
    float attention_weights[2] = {1.0f, 0.5f};
    float output[2 * 2] = {-1, -1, -1, -1};

    const int64_t value_shape[4] = {1, 4, 1, 2};
    const int64_t spatial_shapes_shape[2] = {1, 2};
    const int64_t level_start_index_shape[1] = {1};
    const int64_t locations_shape[6] = {1, 2, 1, 1, 1, 2};
    const int64_t weights_shape[5] = {1, 2, 1, 1, 1};
    const int64_t output_shape[3] = {1, 2, 2};

    msda_forward_args args;
    msda_options options = msda_default_options();
    msda_status status;
    int i;

    args.value = msda_contiguous(value, MSDA_F32, 4, value_shape);
    args.spatial_shapes = msda_contiguous(spatial_shapes, MSDA_I32, 2, spatial_shapes_shape);
    args.level_start_index =
        msda_contiguous(level_start_index, MSDA_I32, 1, level_start_index_shape);
    args.sampling_locations = msda_contiguous(sampling_locations, MSDA_F32, 6, locations_shape);
    args.attention_weights = msda_contiguous(attention_weights, MSDA_F32, 5, weights_shape);
    args.output = msda_contiguous(output, MSDA_F32, 3, output_shape);

    status = msda_forward(&args, &options);
    check(status == MSDA_OK, "msda_forward succeeds");
    check(strcmp(msda_last_error(), "") == 0, "no error message after success");
    check(output[0] == 2.0f && output[1] == 20.0f, "a pixel centre returns that pixel");
    check(fabsf(output[2] - 1.25f) < 1e-6f, "the middle averages the pixels (channel 0)");
    check(fabsf(output[3] - 12.5f) < 1e-6f, "the middle averages the pixels (channel 1)");

    /* attention_weights with a query too many. */
    {
        const int64_t wrong_shape[5] = {1, 3, 1, 1, 1};
        for (i = 0; i < 4; ++i) output[i] = -7.0f;
        args.attention_weights = msda_contiguous(attention_weights, MSDA_F32, 5, wrong_shape);
        status = msda_forward(&args, &options);
        check(status == MSDA_ERROR_VALUE, "a wrong attention_weights shape fails");
        check(strstr(msda_last_error(), "attention_weights") != NULL,
              "the message names attention_weights");
        for (i = 0; i < 4; ++i) check(output[i] == -7.0f, "the output is left alone");
    }

    status = msda_forward(NULL, &options);
    check(status == MSDA_ERROR_VALUE && strstr(msda_last_error(), "args") != NULL,
          "a NULL args is reported");

    check(strchr(msda_version(), '.') != NULL, "msda_version gives major.minor.patch");
    check(strcmp(msda_cpu_target(), "avx512_zen4") == 0 || strcmp(msda_cpu_target(), "avx512_skylake") == 0 ||
              strcmp(msda_cpu_target(), "avx2") == 0 || strcmp(msda_cpu_target(), "x86-64") == 0,
          "msda_cpu_target names a compiled target");

    printf("%s: msda C consumer\n", failures == 0 ? "PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}
