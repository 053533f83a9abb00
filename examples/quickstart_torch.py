# The README's PyTorch example: msda_torch's drop-in for Deformable DETR's and
# mmcv's multi_scale_deformable_attn, with autograd. The suite runs it
# (tests/readme_snippets.cmake: readme_torch_example_runs, label torch) and it
# fails unless the output and the three gradients match a float64 grid_sample
# computation (mmcv's pure-PyTorch path) within 1e-4 of each tensor's largest
# magnitude.
import torch
import torch.nn.functional as F

import msda_torch  # loads libmsda_torch.so into torch: also torch.ops.msda.*

torch.manual_seed(0)
shapes = torch.tensor([[16, 20], [8, 10]])  # (N_l, 2): (H, W) per level
starts = torch.tensor([0, 16 * 20])  # level_start_index
value = torch.randn(2, 16 * 20 + 8 * 10, 8, 32, requires_grad=True)  # (B, L, N_h, C_h)
locations = torch.rand(2, 100, 8, 2, 4, 2, requires_grad=True)  # (B, N_q, N_h, N_l, N_p, 2): (x, y) in [0, 1]
weights = torch.rand(2, 100, 8, 2, 4, requires_grad=True)  # (B, N_q, N_h, N_l, N_p)
output = msda_torch.multi_scale_deformable_attn(value, shapes, starts, locations, weights)  # (B, N_q, N_h * C_h)
output.square().sum().backward()  # value.grad, locations.grad, weights.grad


def grid_sample_reference(value, shapes, locations, weights):
    """mmcv's multi_scale_deformable_attn_pytorch."""
    batch, _, heads, channels = value.shape
    _, queries, _, levels, points, _ = locations.shape
    per_level = value.split([h * w for h, w in shapes.tolist()], dim=1)
    samples = []
    for level, (h, w) in enumerate(shapes.tolist()):
        level_value = per_level[level].flatten(2).transpose(1, 2).reshape(batch * heads, channels, h, w)
        grid = (2 * locations[:, :, :, level] - 1).transpose(1, 2).flatten(0, 1)  # (B * N_h, N_q, N_p, 2)
        samples.append(F.grid_sample(level_value, grid, mode="bilinear", padding_mode="zeros", align_corners=False))
    attention = weights.transpose(1, 2).reshape(batch * heads, 1, queries, levels * points)
    out = (torch.stack(samples, dim=-2).flatten(-2) * attention).sum(-1).view(batch, heads * channels, queries)
    return out.transpose(1, 2)


inputs = [t.detach().double().requires_grad_() for t in (value, locations, weights)]
expected = grid_sample_reference(inputs[0], shapes, inputs[1], inputs[2])
expected.square().sum().backward()
failures = []
for name, got, want in (("output", output, expected), ("grad_value", value.grad, inputs[0].grad),
                        ("grad_sampling_locations", locations.grad, inputs[1].grad),
                        ("grad_attention_weights", weights.grad, inputs[2].grad)):
    error = (got.double() - want).abs().max().item() / want.abs().max().item()
    print(f"{name:24} max error {error:.2e} of its largest magnitude")
    if not error <= 1e-4:
        failures.append(name)
print("FAIL: " + ", ".join(failures) if failures else "PASS")
raise SystemExit(1 if failures else 0)
