/* msda: the plain C interface, for engines and FFI that avoid C++
 * exceptions. Same semantics as msda.hpp: every call returns a status, and on
 * failure msda_last_error() gives the message (per thread). */
#ifndef MSDA_MSDA_H
#define MSDA_MSDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* On failure msda_last_error() gives the message. The kinds are msda.hpp's
 * (msda::ErrorKind): a failure while running (no device, generated code
 * failing, memory), a tensor of the wrong dtype, a bad shape, stride, value
 * or argument. */
typedef enum msda_status {
    MSDA_OK = 0,
    MSDA_ERROR = 1,       /* run time */
    MSDA_ERROR_TYPE = 2,  /* dtype */
    MSDA_ERROR_VALUE = 3  /* shape, stride, value, argument */
} msda_status;

typedef enum msda_dtype {
    MSDA_F32 = 0,
    MSDA_F16 = 1,
    MSDA_BF16 = 2,
    MSDA_F64 = 3,
    MSDA_I32 = 4,
    MSDA_I64 = 5
} msda_dtype;

#define MSDA_MAX_RANK 6

/* DLPack's device type codes (msda::DeviceType). */
#define MSDA_DEVICE_TYPE_CPU 1
#define MSDA_DEVICE_TYPE_CUDA 2
#define MSDA_DEVICE_TYPE_OPENCL 4

/* Versioned structs: msda_tensor and msda_options begin with struct_size,
 * the bytes of the struct as the caller's header declares it
 * (msda_contiguous and msda_default_options set it; 0, as in a zeroed
 * struct, means this first versioned layout). A later msda that adds
 * fields at the end reads only the fields within struct_size and gives the
 * others their defaults, so a caller built against an older header keeps
 * working; a struct_size larger than this library knows is refused. The
 * argument structs hold their tensors one after the other, each of the
 * size value.struct_size says. */

/* Strides in elements. data == NULL with rank == 0 means absent.
 * device_type: MSDA_DEVICE_TYPE_CPU (0, as in a zeroed struct, means the
 * same): data + byte_offset is the first element's address;
 * MSDA_DEVICE_TYPE_CUDA: the same, a device address, device_id the device
 * ordinal; MSDA_DEVICE_TYPE_OPENCL: data is the cl_mem, byte_offset where
 * the first element is in it (msda::TensorView). */
typedef struct msda_tensor {
    size_t struct_size; /* sizeof(msda_tensor), or 0 */
    void *data;
    msda_dtype dtype;
    int rank;
    int64_t shape[MSDA_MAX_RANK];
    int64_t strides[MSDA_MAX_RANK];
    int32_t device_type;
    int32_t device_id;
    int64_t byte_offset;
} msda_tensor;

typedef enum msda_value_layout { MSDA_BLNC = 0, MSDA_BNLC = 1 } msda_value_layout;
typedef enum msda_locations_layout { MSDA_BQHLP2 = 0, MSDA_B2QHLP = 1 } msda_locations_layout;
typedef enum msda_padding_mode { MSDA_PADDING_ZEROS = 0, MSDA_PADDING_BORDER = 1 } msda_padding_mode;
typedef enum msda_operator { MSDA_OP_MSDA = 0, MSDA_OP_GKA = 1 } msda_operator;
typedef enum msda_rounding { MSDA_ROUNDING_FLOOR = 0, MSDA_ROUNDING_NEAREST = 1 } msda_rounding;

/* See msda::Relayout in msda.hpp. */
typedef enum msda_relayout {
    MSDA_RELAYOUT_AUTOMATIC = 0,
    MSDA_RELAYOUT_ALWAYS = 1,
    MSDA_RELAYOUT_NEVER = 2
} msda_relayout;

/* See msda::SampleOrder in msda.hpp. */
typedef enum msda_sample_order {
    MSDA_SAMPLE_ORDER_AUTOMATIC = 0,
    MSDA_SAMPLE_ORDER_BY_LEVEL = 1,
    MSDA_SAMPLE_ORDER_BY_QUERY = 2
} msda_sample_order;

typedef enum msda_device { MSDA_DEVICE_CPU = 0, MSDA_DEVICE_OPENCL = 1, MSDA_DEVICE_CUDA = 2 } msda_device;

/* The context and queue (or stream) of a call on a device, both NULL for
 * msda's own (msda::DeviceContext in msda/device.hpp): OpenCL takes a
 * cl_command_queue as queue, CUDA a CUcontext and a CUstream. */
typedef struct msda_device_context {
    void *context;
    void *queue;
} msda_device_context;

typedef struct msda_options {
    size_t struct_size; /* sizeof(msda_options), or 0 */
    msda_operator op;
    msda_rounding rounding; /* GKA only */
    msda_value_layout value_layout;
    msda_locations_layout locations_layout;
    int align_corners;
    msda_padding_mode padding_mode;
    int grad_value; /* non-zero: compute it */
    int grad_sampling_locations;
    int grad_attention_weights;
    msda_relayout relayout;
    msda_sample_order sample_order;
    msda_device device; /* where the call computes (msda::Device) */
    int atomic_grad_value; /* non-zero: OpenCL and CUDA sum grad_value by float atomics
                              (msda::Options::deterministic = false) */
    msda_device_context device_context; /* msda::Options::device_context */
} msda_options;

typedef struct msda_forward_args {
    msda_tensor value, spatial_shapes, level_start_index, sampling_locations,
        attention_weights, output;
} msda_forward_args;

typedef struct msda_backward_args {
    msda_tensor value, spatial_shapes, level_start_index, sampling_locations,
        attention_weights, grad_output, grad_value, grad_sampling_locations,
        grad_attention_weights;
} msda_backward_args;

typedef struct msda_problem_size {
    int64_t batch, value_length, heads, channels, levels, queries, points;
    msda_dtype dtype, locations_dtype;
} msda_problem_size;

typedef struct msda_plan msda_plan;

/* The defaults of msda::Options (all three gradients). */
msda_options msda_default_options(void);
/* Fills a row-major tensor description. */
msda_tensor msda_contiguous(void *data, msda_dtype dtype, int rank, const int64_t *shape);

msda_status msda_forward(const msda_forward_args *args, const msda_options *options);
msda_status msda_backward(const msda_backward_args *args, const msda_options *options);

msda_status msda_plan_create(const msda_problem_size *size, const msda_options *options,
                             msda_plan **plan);
void msda_plan_destroy(msda_plan *plan);
size_t msda_plan_workspace_size(const msda_plan *plan);
msda_status msda_plan_forward(const msda_plan *plan, const msda_forward_args *args,
                              void *workspace, size_t workspace_bytes);
msda_status msda_plan_backward(const msda_plan *plan, const msda_backward_args *args,
                               void *workspace, size_t workspace_bytes);

void msda_set_num_threads(int threads);
/* The one-shot calls' workspace cache (msda::cached_workspace_bytes and
 * msda::release_cached_workspace in msda.hpp). */
size_t msda_cached_workspace_bytes(void);
void msda_release_cached_workspace(void);
/* The library's version, "major.minor.patch". */
const char *msda_version(void);
/* The compiled x86-64 target calls run on this CPU (avx512_zen4,
 * avx512_skylake, avx2 or x86-64; msda::cpu_dispatch tells why), or "" when every call
 * fails (MSDA_X86_TARGET asks for more than the CPU has: the calls' error
 * says what it lacks). */
const char *msda_cpu_target(void);
/* msda's own OpenCL context, queue and device (msda::opencl_queue); any
 * pointer may be NULL. */
msda_status msda_opencl_queue(void **context, void **queue, void **device);
/* Before destroying a context msda ran on (msda::release_opencl_context). */
msda_status msda_release_opencl_context(void *queue);
/* Before destroying a CUDA context msda ran in (msda::release_cuda_context). */
msda_status msda_release_cuda_context(void *context);
/* The layout version of the structs this library reads (1: the first with
 * struct_size), for a caller that loads msda at run time. */
int msda_abi_version(void);
/* The message of this thread's last failed call ("" if none). */
const char *msda_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
