// The .npy reader and writer of the msda command line: round trips of every
// supported dtype, the header numpy expects, and rejection of every kind of
// file the command line cannot use, with a message that names the file and
// says what was expected.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

#include "npy.h"

namespace {

namespace fs = std::filesystem;

class NpyFiles : public ::testing::Test {
protected:
    void SetUp() override {
        const auto *test = ::testing::UnitTest::GetInstance()->current_test_info();
        directory_ = fs::temp_directory_path() /
                     ("msda_test_npy_" + std::to_string(::getpid()) + "_" + test->name());
        fs::create_directories(directory_);
    }
    void TearDown() override { fs::remove_all(directory_); }

    std::string path(const std::string &name) const { return (directory_ / name).string(); }

    std::string write_bytes(const std::string &name, const std::string &bytes) const {
        std::ofstream(path(name), std::ios::binary) << bytes;
        return path(name);
    }

    // The message npy::read gives for `bytes`, or "" when it accepts them.
    std::string rejection(const std::string &bytes) const {
        const std::string file = write_bytes("bad.npy", bytes);
        try {
            npy::read(file);
        } catch (const npy::Error &error) {
            return error.what();
        }
        return "";
    }

private:
    fs::path directory_;
};

// A .npy file as numpy lays it out, with any version and header text; the
// header is padded to a multiple of 64 bytes like numpy's.
std::string npy_bytes(int major, const std::string &dict, const std::string &data) {
    const std::size_t preamble = major == 1 ? 10 : 12;
    std::string header = dict;
    while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string bytes = "\x93NUMPY";
    bytes += static_cast<char>(major);
    bytes += '\0';
    for (std::size_t i = 0; i < preamble - 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return bytes + header + data;
}

std::string float_data(std::vector<float> values) {
    return {reinterpret_cast<const char *>(values.data()), values.size() * sizeof(float)};
}

const std::string kTwoByThreeFloats = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

template <typename T>
npy::Array filled(std::vector<std::int64_t> shape) {
    npy::Array array(npy::dtype_of<T>(), std::move(shape));
    auto elements = array.elements<T>();
    for (std::size_t i = 0; i < elements.size(); ++i)
        elements[i] = static_cast<T>(i % 2 ? -static_cast<double>(i) * 1.25 : static_cast<double>(i) * 3);
    return array;
}

void expect_same(const npy::Array &written, const npy::Array &read) {
    EXPECT_EQ(read.dtype(), written.dtype());
    EXPECT_EQ(read.shape(), written.shape());
    ASSERT_EQ(read.byte_size(), written.byte_size());
    if (written.byte_size() > 0) {
        EXPECT_EQ(std::memcmp(read.data(), written.data(), written.byte_size()), 0);
    }
}

const std::vector<std::vector<std::int64_t>> kShapes = {
    {}, {0}, {1}, {7}, {2, 3}, {2, 0, 3}, {2, 1, 3, 2, 2, 3},
};

TEST_F(NpyFiles, EveryDtypeAndRankRoundTripsThroughAFile) {
    for (const auto &shape : kShapes) {
        for (const npy::Array &array : {filled<float>(shape), filled<double>(shape), filled<std::int32_t>(shape),
                                        filled<std::int64_t>(shape)}) {
            SCOPED_TRACE(std::string(npy::dtype_name(array.dtype())) + " rank " + std::to_string(shape.size()));
            npy::write(path("a.npy"), array);
            expect_same(array, npy::read(path("a.npy")));
        }
    }
}

TEST_F(NpyFiles, SpecialFloatValuesKeepTheirBits) {
    npy::Array array(npy::DType::float32, {5});
    auto values = array.elements<float>();
    values[0] = std::numeric_limits<float>::quiet_NaN();
    values[1] = std::numeric_limits<float>::infinity();
    values[2] = -0.0f;
    values[3] = std::numeric_limits<float>::denorm_min();
    values[4] = std::numeric_limits<float>::max();
    npy::write(path("special.npy"), array);
    expect_same(array, npy::read(path("special.npy")));
}

TEST(NpyFormat, WritesTheHeaderNumpyWrites) {
    const std::string bytes = npy::serialize(filled<float>({2, 3}));
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const std::size_t header_length = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    EXPECT_EQ((10 + header_length) % 64, 0u) << "numpy aligns the data to 64 bytes";
    const std::string header = bytes.substr(10, header_length);
    EXPECT_EQ(header.substr(0, kTwoByThreeFloats.size()), kTwoByThreeFloats);
    EXPECT_EQ(header.back(), '\n');
    EXPECT_EQ(bytes.size(), 10 + header_length + 6 * sizeof(float));
}

TEST(NpyFormat, WritesPythonTupleShapes) {
    EXPECT_NE(npy::serialize(filled<std::int64_t>({5})).find("'shape': (5,), "), std::string::npos);
    EXPECT_NE(npy::serialize(filled<double>({})).find("'shape': (), "), std::string::npos);
    EXPECT_NE(npy::serialize(filled<std::int32_t>({4, 0})).find("'descr': '<i4'"), std::string::npos);
}

TEST_F(NpyFiles, ReadsVersions2And3) {
    for (int major : {2, 3}) {
        const std::string file = write_bytes("v.npy", npy_bytes(major, kTwoByThreeFloats, float_data({1, 2, 3, 4, 5, 6})));
        const npy::Array array = npy::read(file);
        EXPECT_EQ(array.shape(), (std::vector<std::int64_t>{2, 3}));
        EXPECT_EQ(array.elements<float>()[5], 6.0f);
    }
}

TEST_F(NpyFiles, ReadsHeadersWrittenDifferently) {
    // Key order, quotes, spacing and the trailing comma are not fixed.
    const std::string dict = "{\"shape\":(6 ,),'fortran_order' :False , 'descr':'<f4'}";
    const npy::Array array = npy::read(write_bytes("ok.npy", npy_bytes(1, dict, float_data({1, 2, 3, 4, 5, 6}))));
    EXPECT_EQ(array.shape(), std::vector<std::int64_t>{6});
}

struct BadFile {
    const char *what;
    std::string bytes;
    const char *expected_in_message;
};

TEST_F(NpyFiles, RejectsWhatItCannotReadNamingTheFileAndTheExpectation) {
    const std::string six_floats = float_data({1, 2, 3, 4, 5, 6});
    const std::string good = npy_bytes(1, kTwoByThreeFloats, six_floats);
    auto with_dict = [&](const std::string &dict) { return npy_bytes(1, dict, six_floats); };
    const std::vector<BadFile> cases = {
        {"empty file", "", "not a .npy file"},
        {"wrong magic", std::string("\x93NUMPZ", 6) + good.substr(6), "not a .npy file"},
        {"the magic and a version, nothing more", good.substr(0, 8), "truncated .npy file (8 bytes"},
        {"version 4.0", npy_bytes(4, kTwoByThreeFloats, six_floats), "expected 1.0, 2.0 or 3.0"},
        {"version 1.1", "\x93NUMPY\x01\x01" + good.substr(8), "expected 1.0, 2.0 or 3.0"},
        {"truncated version 2 preamble", std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated"},
        {"truncated header", good.substr(0, 40), "truncated"},
        {"header without newline", std::string("\x93NUMPY\x01\x00\x05\x00{}   ", 15), "newline"},
        {"missing shape", with_dict("{'descr': '<f4', 'fortran_order': False}"), "missing key 'shape'"},
        {"missing descr", with_dict("{'fortran_order': False, 'shape': (2, 3)}"), "missing key 'descr'"},
        {"extra key", with_dict(kTwoByThreeFloats.substr(0, kTwoByThreeFloats.size() - 1) + "'x': 1}"),
         "unexpected key 'x'"},
        {"duplicate key", with_dict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}"),
         "appears twice"},
        {"fortran order", with_dict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"), "C order"},
        {"fortran_order not a bool", with_dict("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}"),
         "True or False"},
        {"big-endian", with_dict("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }"), "big-endian"},
        {"float16", with_dict("{'descr': '<f2', 'fortran_order': False, 'shape': (12,), }"),
         "expected float32 ('<f4'), float64 ('<f8'), int32 ('<i4') or int64 ('<i8')"},
        {"bool", with_dict("{'descr': '|b1', 'fortran_order': False, 'shape': (24,), }"), "expected float32"},
        {"structured dtype", with_dict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }"),
         "structured"},
        {"shape not a tuple", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': 6, }"),
         "'shape' must be a tuple"},
        {"negative extent", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }"),
         "non-negative integers"},
        {"absurd shape", with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
         "too large"},
        {"truncated data", good.substr(0, good.size() - 1), "needs 24 data bytes"},
        {"a header claiming terabytes", with_dict("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }"),
         "truncated"},
        {"data after the array", good + "xy", "2 unexpected bytes"},
        {"text after the dict", with_dict(kTwoByThreeFloats + " 1"), "after the closing"},
    };
    for (const BadFile &bad : cases) {
        SCOPED_TRACE(bad.what);
        const std::string message = rejection(bad.bytes);
        EXPECT_NE(message.find(path("bad.npy")), std::string::npos) << message;
        EXPECT_NE(message.find(bad.expected_in_message), std::string::npos) << message;
    }
}

TEST_F(NpyFiles, MissingFilesAndDirectoriesAreErrorsNamingThePath) {
    try {
        npy::read(path("missing.npy"));
        FAIL() << "a missing file was read";
    } catch (const npy::Error &error) {
        EXPECT_NE(std::string(error.what()).find(path("missing.npy")), std::string::npos) << error.what();
    }
    fs::create_directories(path("folder.npy"));
    EXPECT_THROW(npy::read(path("folder.npy")), npy::Error);
    EXPECT_THROW(npy::write(path("no/such/folder/out.npy"), filled<float>({2})), npy::Error);
}

TEST(NpyArray, ElementAccessChecksTheDtype) {
    npy::Array array(npy::DType::int32, {3});
    EXPECT_EQ(array.elements<std::int32_t>().size(), 3u);
    EXPECT_THROW(array.elements<float>(), std::logic_error);
    EXPECT_THROW(npy::Array(npy::DType::float32, {-1}), npy::Error);
}

}  // namespace
