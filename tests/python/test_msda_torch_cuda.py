"""msda's operators on CUDA tensors from Python: the CUDA kernels of
libmsda_torch.so (built against a CUDA-enabled LibTorch, PyPI's torch:
scripts/device_kit.sh), against the float64 references of
test_msda_torch.py. Where torch has no CUDA device (Debian's python3-torch
is CPU-only, so in CI) the whole module is skipped, saying so.

Run by ctest (label torch) and by bench/device_check.sh on a GPU machine."""

import unittest

import torch

import msda_torch
from test_msda_torch import (BATCH, CHANNELS, HEADS, LEVELS, POINTS, QUERIES, Comparisons, double_inputs,
                             gka_reference, leaf, make_inputs, msda_reference)

NAMES = ("output", "grad_value", "grad_sampling_locations", "grad_attention_weights")


def setUpModule():
    if not torch.cuda.is_available():
        reason = f"torch {torch.__version__} has no CUDA device"
        print("msda tests: the whole run is SKIPPED: " + reason)
        raise unittest.SkipTest(reason)


def on_cuda(inputs, tables_on_cuda=True):
    value, spatial_shapes, level_start_index, locations, weights, grad_output = inputs
    tables = (spatial_shapes.cuda(), level_start_index.cuda()) if tables_on_cuda else (spatial_shapes,
                                                                                        level_start_index)
    return value.cuda(), tables[0], tables[1], locations.cuda(), weights.cuda(), grad_output.cuda()


class CudaTensors(Comparisons):
    def run_on_cuda(self, inputs, **options):
        actual = self.run_msda(on_cuda(inputs), **options)
        torch.cuda.synchronize()
        for tensor in actual:
            self.assertTrue(tensor is None or tensor.is_cuda)
        return tuple(None if tensor is None else tensor.cpu() for tensor in actual)

    def test_forward_and_gradients_match_the_float64_grid_sample_path(self):
        for seed, options in ((11, {}), (12, {"align_corners": True, "padding_mode": "border"})):
            inputs = make_inputs(seed)
            expected = msda_reference(inputs[0], inputs[1], inputs[3], inputs[4], inputs[5], **options)
            actual = self.run_on_cuda(inputs, **options)
            for name, a, e in zip(NAMES, actual, expected):
                self.assert_close(a, e, 1e-5, "cuda " + name)

    def test_float64_matches_the_float64_grid_sample_path(self):
        """Double CUDA tensors compute in float64 (the SPEC's 1e-9)."""
        inputs = double_inputs(17, LEVELS, BATCH, QUERIES, HEADS, CHANNELS, POINTS)
        expected = msda_reference(inputs[0], inputs[1], inputs[3], inputs[4], inputs[5])
        actual = self.run_on_cuda(inputs)
        for name, a, e in zip(NAMES, actual, expected):
            self.assertEqual(a.dtype, torch.float64, name)
            self.assert_close(a, e, 1e-9, "cuda float64 " + name)

    def test_level_tables_on_the_host_too(self):
        inputs = make_inputs(13)
        expected = msda_reference(inputs[0], inputs[1], inputs[3], inputs[4], inputs[5])
        actual = self.run_msda(on_cuda(inputs, tables_on_cuda=False))
        for name, a, e in zip(NAMES, actual, expected):
            self.assert_close(a.cpu(), e, 1e-5, "cuda " + name)

    def test_the_default_backward_repeats_its_bits(self):
        inputs = make_inputs(14)
        first = self.run_on_cuda(inputs)
        for _ in range(3):
            again = self.run_on_cuda(inputs)
            for name, a, b in zip(NAMES, again, first):
                self.assertTrue(torch.equal(a, b), name)

    def test_on_a_side_stream(self):
        """The kernels run on torch's current stream: on a side stream the
        results are there once that stream is synchronized."""
        inputs = make_inputs(15)
        expected = msda_reference(inputs[0], inputs[1], inputs[3], inputs[4], inputs[5])
        tensors = on_cuda(inputs, tables_on_cuda=False)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            actual = self.run_msda(tensors)
        stream.synchronize()
        for name, a, e in zip(NAMES, actual, expected):
            self.assert_close(a.cpu(), e, 1e-5, "side stream " + name)

    def test_gka(self):
        inputs = make_inputs(16, low=-1.0, high=9.0)
        expected = gka_reference(inputs[0], inputs[1], inputs[3], inputs[4], inputs[5])
        value, spatial_shapes, level_start_index, locations, weights, grad_output = on_cuda(inputs)
        value, weights = leaf(value), leaf(weights)
        output = msda_torch.geometric_kernel_attention(value, spatial_shapes, level_start_index, locations, weights)
        output.backward(grad_output)
        self.assert_close(output.detach().cpu(), expected[0], 1e-5, "gka output")
        self.assert_close(value.grad.cpu(), expected[1], 1e-5, "gka grad_value")
        self.assert_close(weights.grad.cpu(), expected[3], 1e-5, "gka grad_attention_weights")

    def test_the_drop_in_function(self):
        inputs = make_inputs(17)
        expected = msda_reference(inputs[0], inputs[1], inputs[3], inputs[4], inputs[5])
        value, spatial_shapes, level_start_index, locations, weights, _ = on_cuda(inputs)
        output = msda_torch.MSDeformAttnFunction.apply(value, spatial_shapes, level_start_index, locations, weights,
                                                       64)
        self.assert_close(output.cpu(), expected[0], 1e-5, "MSDeformAttnFunction output")

    def test_half_precision_is_refused(self):
        inputs = make_inputs(18, dtype=torch.float16)
        # A dtype the device does not compute: TypeError, as for any dtype msda refuses.
        with self.assertRaisesRegex(TypeError, "float32"):
            self.run_msda(on_cuda(inputs))


if __name__ == "__main__":
    unittest.main()
