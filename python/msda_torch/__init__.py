"""msda's operators in PyTorch: multi-scale deformable attention and
geometric kernel attention on CPUs, with autograd, from libmsda_torch.so.

Importing the package loads the library into torch (torch.ops.load_library):
from MSDA_TORCH_LIBRARY when that is set, else from where CMake put it
beside this package (_library.py). The operators are then also reachable as
torch.ops.msda.ms_deform_attn and torch.ops.msda.geometric_kernel_attention.

Drop-in for Deformable DETR and mmcv:

    from msda_torch import multi_scale_deformable_attn, MSDeformAttnFunction
    output = multi_scale_deformable_attn(value, spatial_shapes, level_start_index,
                                         sampling_locations, attention_weights)
    output = MSDeformAttnFunction.apply(value, spatial_shapes, level_start_index,
                                        sampling_locations, attention_weights, im2col_step)
"""

import os
from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = [
    "LIBRARY",
    "MSDeformAttnFunction",
    "geometric_kernel_attention",
    "ms_deform_attn",
    "ms_deform_attn_backward",
    "geometric_kernel_attention_backward",
    "multi_scale_deformable_attn",
]


def _library_path():
    from_environment = os.environ.get("MSDA_TORCH_LIBRARY")
    if from_environment:
        return from_environment
    try:
        from ._library import RELATIVE_PATH
    except ImportError:
        raise ImportError(
            "msda_torch: cannot find libmsda_torch.so: this copy of the package was not built or "
            "installed by msda's CMake (it has no _library.py); set MSDA_TORCH_LIBRARY to the "
            "library's path") from None
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), RELATIVE_PATH))


LIBRARY = _library_path()
if not os.path.isfile(LIBRARY):
    raise ImportError("msda_torch: libmsda_torch.so is not at " + LIBRARY +
                      " (build msda with LibTorch, or set MSDA_TORCH_LIBRARY)")
torch.ops.load_library(LIBRARY)


def ms_deform_attn(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor, sampling_locations: Tensor,
                   attention_weights: Tensor, *, value_layout: str = "BLNC", locations_layout: str = "BQHLP2",
                   align_corners: bool = False, padding_mode: str = "zeros", target: str = "cpu") -> Tensor:
    """Multi-scale deformable attention (msda's SPEC).

    value (B, L, N_h, C_h) ("BLNC") or (B, N_h, L, C_h) ("BNLC"); spatial_shapes
    (N_l, 2) rows (H, W) and level_start_index (N_l,), int32 or int64;
    sampling_locations (B, N_q, N_h, N_l, N_p, 2) ("BQHLP2") or
    (B, 2, N_q, N_h, N_l, N_p) ("B2QHLP"), normalized to [0, 1];
    attention_weights (B, N_q, N_h, N_l, N_p). Returns (B, N_q, N_h * C_h).
    float32, float16, bfloat16 or float64 storage (float64 computes in
    float64); sampling_locations may be float32 with half storage, and are
    float64 with float64. target "cpu" (msda's CPU code), "opencl" or "cuda"
    (its OpenCL or CUDA code: the CPU tensors are copied to the device and
    the result back; float32, and float64 where the device computes it).
    The backward runs on the same target.
    """
    return torch.ops.msda.ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations,
                                         attention_weights, value_layout=value_layout,
                                         locations_layout=locations_layout, align_corners=align_corners,
                                         padding_mode=padding_mode, target=target)


def geometric_kernel_attention(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                               sampling_locations: Tensor, attention_weights: Tensor, *, rounding: str = "floor",
                               target: str = "cpu") -> Tensor:
    """Geometric kernel attention: sampling_locations are absolute pixel
    coordinates (x, y), each sample reads one value row (rounding "floor" or
    "nearest", half to even). sampling_locations get no gradient. target as
    for ms_deform_attn."""
    return torch.ops.msda.geometric_kernel_attention(value, spatial_shapes, level_start_index,
                                                     sampling_locations, attention_weights, rounding=rounding,
                                                     target=target)


def ms_deform_attn_backward(grad_output: Tensor, value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                            sampling_locations: Tensor, attention_weights: Tensor, *, value_layout: str = "BLNC",
                            locations_layout: str = "BQHLP2", align_corners: bool = False,
                            padding_mode: str = "zeros",
                            output_mask: Tuple[bool, bool, bool] = (True, True, True),
                            target: str = "cpu") -> Tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
    """(grad_value, grad_sampling_locations, grad_attention_weights); those
    output_mask leaves out are None."""
    return torch.ops.msda.ms_deform_attn_backward(grad_output, value, spatial_shapes, level_start_index,
                                                  sampling_locations, attention_weights,
                                                  value_layout=value_layout, locations_layout=locations_layout,
                                                  align_corners=align_corners, padding_mode=padding_mode,
                                                  output_mask=[output_mask[0], output_mask[1], output_mask[2]],
                                                  target=target)


def geometric_kernel_attention_backward(grad_output: Tensor, value: Tensor, spatial_shapes: Tensor,
                                        level_start_index: Tensor, sampling_locations: Tensor,
                                        attention_weights: Tensor, *, rounding: str = "floor",
                                        output_mask: Tuple[bool, bool] = (True, True),
                                        target: str = "cpu") -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """(grad_value, grad_attention_weights); those output_mask leaves out are None."""
    return torch.ops.msda.geometric_kernel_attention_backward(grad_output, value, spatial_shapes,
                                                              level_start_index, sampling_locations,
                                                              attention_weights, rounding=rounding,
                                                              output_mask=[output_mask[0], output_mask[1]],
                                                              target=target)


def multi_scale_deformable_attn(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                                sampling_locations: Tensor, attention_weights: Tensor,
                                im2col_step: Optional[int] = None) -> Tensor:
    """mmcv's and Deformable DETR's signature, layouts (value BLNC,
    locations BQHLP2, align_corners=False, zero padding) and dtype rule:
    sampling_locations and attention_weights are converted to value's dtype
    (so float32 ones meet half value under autocast), and their gradients
    come back in their own dtypes. im2col_step is accepted and ignored: msda
    needs no batch chunking. TorchScript compiles it."""
    return torch.ops.msda.ms_deform_attn(value, value_spatial_shapes, value_level_start_index,
                                         sampling_locations.type_as(value), attention_weights.type_as(value))


class MSDeformAttnFunction:
    """Stands in for Deformable DETR's MSDeformAttnFunction and mmcv's
    MultiScaleDeformableAttnFunction: .apply(value, spatial_shapes,
    level_start_index, sampling_locations, attention_weights, im2col_step).
    The gradient comes from the operator's own autograd kernel."""

    @staticmethod
    def apply(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
              sampling_locations: Tensor, attention_weights: Tensor, im2col_step: Optional[int] = None) -> Tensor:
        return multi_scale_deformable_attn(value, value_spatial_shapes, value_level_start_index,
                                           sampling_locations, attention_weights, im2col_step)
