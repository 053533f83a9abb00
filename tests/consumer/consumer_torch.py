# The installed Python package: the drop-in for Deformable DETR's and mmcv's
# multi-scale deformable attention, trained through autograd.
import torch
from msda_torch import multi_scale_deformable_attn

value = torch.randn(2, 30, 4, 8, requires_grad=True)          # (B, L, N_h, C_h)
spatial_shapes = torch.tensor([[4, 6], [2, 3]])               # (N_l, 2): (H, W)
level_start_index = torch.tensor([0, 24])
sampling_locations = torch.rand(2, 10, 4, 2, 4, 2, requires_grad=True)    # in [0, 1]
attention_weights = torch.rand(2, 10, 4, 2, 4).softmax(-1).requires_grad_()

output = multi_scale_deformable_attn(value, spatial_shapes, level_start_index,
                                     sampling_locations, attention_weights, im2col_step=64)
output.square().sum().backward()
assert output.shape == (2, 10, 32)
assert value.grad is not None and sampling_locations.grad is not None
print("msda_torch.multi_scale_deformable_attn: output", tuple(output.shape), "with gradients")
