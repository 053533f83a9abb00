# The installed Python package: msda's operators through torch.ops, and the
# drop-in for Deformable DETR's and mmcv's multi-scale deformable attention,
# with their gradients.
import torch

import msda_torch  # loads libmsda_torch.so into torch
from msda_torch import MSDeformAttnFunction, multi_scale_deformable_attn

value = torch.randn(2, 30, 4, 8, requires_grad=True)  # (B, L, N_h, C_h)
spatial_shapes = torch.tensor([[4, 6], [2, 3]])  # (N_l, 2): (H, W) per level
level_start_index = torch.tensor([0, 24])
sampling_locations = torch.rand(2, 10, 4, 2, 4, 2, requires_grad=True)  # (B, N_q, N_h, N_l, N_p, 2) in [0, 1]
attention_weights = torch.rand(2, 10, 4, 2, 4).softmax(-1).requires_grad_()  # (B, N_q, N_h, N_l, N_p)

output = multi_scale_deformable_attn(value, spatial_shapes, level_start_index, sampling_locations,
                                     attention_weights, im2col_step=64)
output.square().sum().backward()
assert output.shape == (2, 10, 32)
assert value.grad is not None and sampling_locations.grad is not None and attention_weights.grad is not None

# The same operator as registered in torch (the library may also be loaded
# with torch.ops.load_library(msda_torch.LIBRARY)).
same = torch.ops.msda.ms_deform_attn(value, spatial_shapes, level_start_index, sampling_locations,
                                     attention_weights, value_layout="BLNC", align_corners=False)
assert torch.equal(same, output)
deformable_detr = MSDeformAttnFunction.apply(value, spatial_shapes, level_start_index, sampling_locations,
                                             attention_weights, 64)
assert torch.equal(deformable_detr, output)
print("msda_torch from", msda_torch.LIBRARY, ": output", tuple(output.shape), "with gradients")
