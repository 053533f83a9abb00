// The C API's option codes reach the computation: every value layout,
// location layout, align_corners and padding mode given through msda.h gives
// the reference's results on tensors laid out accordingly.
#include <gtest/gtest.h>

#include <msda/msda.h>

#include "c_api_views.h"
#include "test_util.h"

namespace {

using namespace msda::testing;

TEST(CApiLayouts, EveryOptionCodeGivesTheReferenceResult) {
    for (int combination = 0; combination < 16; combination++) {
        ProblemSpec spec;
        spec.name = "c_api_layouts";
        spec.batch = 2;
        spec.queries = 9;
        spec.heads = 3;
        spec.channels = 5;
        spec.points = 2;
        spec.levels = {{3, 4}, {2, 3}};
        spec.locations = Locations::outside;  // both paddings and the gate matter
        spec.options.value_layout = combination & 1 ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
        spec.options.locations_layout =
            combination & 2 ? msda::LocationsLayout::B2QHLP : msda::LocationsLayout::BQHLP2;
        spec.options.align_corners = (combination & 4) != 0;
        spec.options.padding_mode = combination & 8 ? msda::PaddingMode::border : msda::PaddingMode::zeros;
        spec.seed = 700 + combination;
        SCOPED_TRACE(spec.describe());

        ProblemData data(spec);
        LibraryTensors tensors(data);
        msda_options options = msda_default_options();
        options.value_layout = combination & 1 ? MSDA_BNLC : MSDA_BLNC;
        options.locations_layout = combination & 2 ? MSDA_B2QHLP : MSDA_BQHLP2;
        options.align_corners = (combination & 4) != 0;
        options.padding_mode = combination & 8 ? MSDA_PADDING_BORDER : MSDA_PADDING_ZEROS;

        const msda_forward_args c_forward = to_c(tensors.forward_args());
        ASSERT_EQ(msda_forward(&c_forward, &options), MSDA_OK) << msda_last_error();
        const msda_backward_args c_backward = to_c(tensors.backward_args());
        ASSERT_EQ(msda_backward(&c_backward, &options), MSDA_OK) << msda_last_error();

        const msda::reference::Problem problem = data.reference_problem();
        const msda::reference::Gradients expected = msda::reference::backward(problem, data.grad_output_double());
        EXPECT_TRUE(matches_reference("output", tensors.output.canonical(), msda::reference::forward(problem)));
        EXPECT_TRUE(matches_reference("grad_value", tensors.grad_value.canonical(), expected.value));
        EXPECT_TRUE(matches_reference("grad_sampling_locations", tensors.grad_sampling_locations.canonical(),
                                      expected.sampling_locations));
        EXPECT_TRUE(matches_reference("grad_attention_weights", tensors.grad_attention_weights.canonical(),
                                      expected.attention_weights));
    }
}

}  // namespace
