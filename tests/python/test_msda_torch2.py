"""msda's operators under a current torch 2.x (PyPI's wheel): the checks
torch offers custom operators, and the compilers that trace through them.

- torch.library.opcheck on each of the four operators: its schema, its
  autograd registration, its FakeTensor (Meta) kernel against the real one,
  and AOT dispatch with dynamic shapes;
- torch.compile(fullgraph=True) of a deformable attention layer built the
  way Deformable DETR's MSDeformAttn is (projections, softmax, the
  drop-in), forward and backward, against eager mode;
- torch.export of the same layer, run against eager mode.

Run by tests/scripts/torch2_suite.sh (ctest label torch2) with that
torch's Python and a libmsda_torch.so built against it."""

import unittest

import torch
import torch.nn.functional as F

import msda_torch
from test_msda_torch import LEVELS, make_inputs, leaf


class OpCheck(unittest.TestCase):
    def test_every_operator(self):
        value, spatial_shapes, level_start_index, locations, weights, grad_output = make_inputs(1)
        forward_inputs = (value, spatial_shapes, level_start_index, locations, weights)
        cases = [
            ("ms_deform_attn", (leaf(value), spatial_shapes, level_start_index, leaf(locations), leaf(weights)), {}),
            ("ms_deform_attn", forward_inputs, {"align_corners": True, "padding_mode": "border"}),
            ("ms_deform_attn", (value.permute(0, 2, 1, 3).contiguous(), spatial_shapes, level_start_index,
                                locations.permute(0, 5, 1, 2, 3, 4).contiguous(), weights),
             {"value_layout": "BNLC", "locations_layout": "B2QHLP"}),
            ("ms_deform_attn_backward", (grad_output,) + forward_inputs, {}),
            ("ms_deform_attn_backward", (grad_output,) + forward_inputs, {"output_mask": [True, False, True]}),
            ("geometric_kernel_attention", (leaf(value), spatial_shapes, level_start_index, locations * 4,
                                            leaf(weights)), {"rounding": "nearest"}),
            ("geometric_kernel_attention_backward", (grad_output, value, spatial_shapes, level_start_index,
                                                     locations * 4, weights), {}),
        ]
        for name, args, kwargs in cases:
            with self.subTest(op=name, kwargs=kwargs):
                torch.library.opcheck(getattr(torch.ops.msda, name).default, args, kwargs)


class DeformableAttention(torch.nn.Module):
    """A multi-scale deformable attention layer as Deformable DETR builds it:
    offsets and attention logits projected from the queries, a softmax over
    each head's levels and points, locations from reference points plus
    offsets normalised by each level's size, then the sampling (the
    drop-in) and an output projection."""

    def __init__(self, channels=24, heads=3, levels=len(LEVELS), points=2):
        super().__init__()
        self.heads, self.levels, self.points = heads, levels, points
        self.im2col_step = 64
        self.sampling_offsets = torch.nn.Linear(channels, heads * levels * points * 2)
        self.attention_weights = torch.nn.Linear(channels, heads * levels * points)
        self.value_proj = torch.nn.Linear(channels, channels)
        self.output_proj = torch.nn.Linear(channels, channels)

    def forward(self, query, reference_points, value_input, spatial_shapes, level_start_index):
        batch, queries, channels = query.shape
        value = self.value_proj(value_input).view(batch, -1, self.heads, channels // self.heads)
        offsets = self.sampling_offsets(query).view(batch, queries, self.heads, self.levels, self.points, 2)
        weights = self.attention_weights(query).view(batch, queries, self.heads, self.levels * self.points)
        weights = F.softmax(weights, -1).view(batch, queries, self.heads, self.levels, self.points)
        normalizer = torch.stack([spatial_shapes[..., 1], spatial_shapes[..., 0]], -1)
        locations = reference_points[:, :, None, :, None, :] + offsets / normalizer[None, None, None, :, None, :]
        output = msda_torch.MSDeformAttnFunction.apply(value, spatial_shapes, level_start_index, locations, weights,
                                                        self.im2col_step)
        return self.output_proj(output)


def layer_inputs(seed, batch=2, queries=7, channels=24):
    generator = torch.Generator().manual_seed(seed)
    spatial_shapes = torch.tensor(LEVELS, dtype=torch.int64)
    level_start_index = torch.cat([torch.zeros(1, dtype=torch.int64),
                                   (spatial_shapes[:, 0] * spatial_shapes[:, 1]).cumsum(0)[:-1]])
    length = sum(h * w for h, w in LEVELS)
    query = torch.randn(batch, queries, channels, generator=generator)
    reference_points = torch.rand(batch, queries, len(LEVELS), 2, generator=generator)
    value = torch.randn(batch, length, channels, generator=generator)
    return query, reference_points, value, spatial_shapes, level_start_index


class Compilers(unittest.TestCase):
    def run_layer(self, layer, inputs):
        query, reference_points, value, spatial_shapes, level_start_index = inputs
        query, value = leaf(query), leaf(value)
        layer.zero_grad()
        output = layer(query, reference_points, value, spatial_shapes, level_start_index)
        output.square().sum().backward()
        return [output.detach(), query.grad, value.grad] + [p.grad.clone() for p in layer.parameters()]

    def assert_all_close(self, actual, expected, what):
        for index, (a, e) in enumerate(zip(actual, expected)):
            torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5, msg=f"{what}: result {index}")

    def test_torch_compile_fullgraph(self):
        torch.manual_seed(0)
        layer = DeformableAttention()
        inputs = layer_inputs(2)
        eager = self.run_layer(layer, inputs)
        compiled = torch.compile(layer, fullgraph=True)
        self.assert_all_close(self.run_layer(compiled, inputs), eager, "torch.compile")
        # Another batch and query count: a recompile or a dynamic graph, same rules.
        other = layer_inputs(3, batch=1, queries=5)
        self.assert_all_close(self.run_layer(compiled, other), self.run_layer(layer, other), "torch.compile, resized")

    def test_torch_export(self):
        torch.manual_seed(0)
        layer = DeformableAttention()
        inputs = layer_inputs(4)
        exported = torch.export.export(layer, inputs)
        self.assertIn("msda.ms_deform_attn", str(exported.graph))
        with torch.no_grad():
            torch.testing.assert_close(exported.module()(*inputs), layer(*inputs), rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
