// The .npy format (numpy.lib.format): a 6-byte magic "\x93NUMPY", a
// major/minor version, a little-endian header length (2 bytes in version
// 1.0, 4 bytes in 2.0 and 3.0), then an ASCII (3.0: UTF-8) Python dict
// literal {'descr': ..., 'fortran_order': ..., 'shape': (...), } padded with
// spaces and a final '\n', then the raw data.
#include "npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

namespace npy {

// The data bytes are copied as they are, so the host must store numbers the
// way the files do.
static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kPreambleV1 = 10;  // magic, version, 2-byte length
constexpr std::size_t kPreambleV2 = 12;  // magic, version, 4-byte length
// numpy aligns the data to 64 bytes; readers must not rely on it, writers
// follow it so memory-mapping the files stays efficient.
constexpr std::size_t kDataAlignment = 64;

struct Descr {
    const char *text;
    DType dtype;
};
constexpr Descr kDescrs[] = {
    {"<f4", DType::float32},
    {"<f8", DType::float64},
    {"<i4", DType::int32},
    {"<i8", DType::int64},
};

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string shape_text(const std::vector<std::int64_t> &shape) {
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        text += std::to_string(shape[i]);
        if (i + 1 < shape.size() || shape.size() == 1) text += ",";
        if (i + 1 < shape.size()) text += " ";
    }
    return text + ")";
}

// The header is a Python dict literal. This parses the small subset numpy
// writes (string keys; string, bool and integer-tuple values) and reports
// anything else as a malformed header.
class HeaderParser {
public:
    HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

    struct Fields {
        std::string descr;
        bool fortran_order = false;
        std::vector<std::int64_t> shape;
    };

    Fields parse() {
        Fields fields;
        bool seen_descr = false, seen_order = false, seen_shape = false;
        expect('{');
        while (true) {
            skip_space();
            if (consume('}')) break;
            std::string key = parse_string();
            expect(':');
            if (key == "descr") {
                mark_seen(seen_descr, key);
                skip_space();
                if (peek() != '\'' && peek() != '"')
                    fail("'descr' must be a string such as '<f4' (structured dtypes are not supported)");
                fields.descr = parse_string();
            } else if (key == "fortran_order") {
                mark_seen(seen_order, key);
                fields.fortran_order = parse_bool();
            } else if (key == "shape") {
                mark_seen(seen_shape, key);
                fields.shape = parse_shape();
            } else {
                fail("unexpected key " + quoted(key) + " (expected only 'descr', 'fortran_order' and 'shape')");
            }
            skip_space();
            if (consume(',')) continue;
            expect('}');
            break;
        }
        skip_space();
        if (position_ != text_.size()) fail("unexpected text after the closing '}'");
        if (!seen_descr) fail("missing key 'descr'");
        if (!seen_order) fail("missing key 'fortran_order'");
        if (!seen_shape) fail("missing key 'shape'");
        return fields;
    }

private:
    [[noreturn]] void fail(const std::string &what) const {
        throw Error(std::string(name_) + ": malformed .npy header: " + what);
    }

    void mark_seen(bool &seen, const std::string &key) const {
        if (seen) fail("key " + quoted(key) + " appears twice");
        seen = true;
    }

    char peek() const { return position_ < text_.size() ? text_[position_] : '\0'; }

    void skip_space() {
        while (position_ < text_.size() && (text_[position_] == ' ' || text_[position_] == '\t' ||
                                             text_[position_] == '\n' || text_[position_] == '\r'))
            ++position_;
    }

    bool consume(char c) {
        skip_space();
        if (peek() != c) return false;
        ++position_;
        return true;
    }

    void expect(char c) {
        if (!consume(c))
            fail(std::string("expected '") + c + "' at character " + std::to_string(position_));
    }

    bool consume_word(std::string_view word) {
        skip_space();
        if (text_.substr(position_, word.size()) != word) return false;
        position_ += word.size();
        return true;
    }

    std::string parse_string() {
        skip_space();
        char quote = peek();
        if (quote != '\'' && quote != '"')
            fail("expected a quoted string at character " + std::to_string(position_));
        std::size_t end = text_.find(quote, position_ + 1);
        if (end == std::string_view::npos) fail("unterminated string");
        std::string value(text_.substr(position_ + 1, end - position_ - 1));
        position_ = end + 1;
        return value;
    }

    bool parse_bool() {
        if (consume_word("True")) return true;
        if (consume_word("False")) return false;
        fail("'fortran_order' must be True or False");
    }

    std::int64_t parse_dimension() {
        skip_space();
        std::int64_t value = 0;
        std::size_t start = position_;
        while (position_ < text_.size() && text_[position_] >= '0' && text_[position_] <= '9') {
            int digit = text_[position_] - '0';
            if (value > (std::numeric_limits<std::int64_t>::max() - digit) / 10)
                fail("a dimension in 'shape' is too large");
            value = value * 10 + digit;
            ++position_;
        }
        if (position_ == start) fail("'shape' must be a tuple of non-negative integers");
        return value;
    }

    std::vector<std::int64_t> parse_shape() {
        std::vector<std::int64_t> shape;
        if (!consume('(')) fail("'shape' must be a tuple of non-negative integers such as (2, 3)");
        while (!consume(')')) {
            shape.push_back(parse_dimension());
            if (consume(',')) continue;
            expect(')');
            break;
        }
        return shape;
    }

    std::string_view text_;
    std::string_view name_;
    std::size_t position_ = 0;
};

DType dtype_from_descr(const std::string &descr, std::string_view name) {
    for (const Descr &known : kDescrs)
        if (descr == known.text) return known.dtype;
    std::string prefix = std::string(name) + ": unsupported dtype " + quoted(descr) + ": ";
    if (!descr.empty() && descr[0] == '>')
        throw Error(prefix + "big-endian data is not supported (expected little-endian '<f4', '<f8', '<i4' or '<i8')");
    throw Error(prefix + "expected float32 ('<f4'), float64 ('<f8'), int32 ('<i4') or int64 ('<i8')");
}

const char *descr_of(DType dtype) {
    for (const Descr &known : kDescrs)
        if (known.dtype == dtype) return known.text;
    throw std::logic_error("npy: unknown DType");
}

std::uint32_t read_little_endian(std::string_view bytes) {
    std::uint32_t value = 0;
    for (std::size_t i = bytes.size(); i-- > 0;)
        value = (value << 8) | static_cast<unsigned char>(bytes[i]);
    return value;
}

void append_little_endian(std::string &out, std::uint32_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// The element count of `shape`, or nullopt when its byte size would not fit
// in memory (a corrupt header must not turn into a huge allocation). The
// non-zero extents must multiply within range even when another extent is
// zero, so callers may multiply any subset of extents without overflow.
std::optional<std::int64_t> checked_numel(const std::vector<std::int64_t> &shape, std::size_t element_bytes) {
    const std::int64_t limit = std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(element_bytes);
    std::int64_t nonzero_product = 1;
    bool empty = false;
    for (std::int64_t extent : shape) {
        if (extent == 0) {
            empty = true;
            continue;
        }
        if (nonzero_product > limit / extent) return std::nullopt;
        nonzero_product *= extent;
    }
    return empty ? 0 : nonzero_product;
}

struct FileCloser {
    void operator()(std::FILE *file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::string system_error_text() { return std::strerror(errno); }

}  // namespace

std::size_t element_size(DType dtype) {
    switch (dtype) {
    case DType::float32:
    case DType::int32: return 4;
    case DType::float64:
    case DType::int64: return 8;
    }
    throw std::logic_error("npy: unknown DType");
}

const char *dtype_name(DType dtype) {
    switch (dtype) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    }
    return "unknown";
}

Array::Array(DType dtype, std::vector<std::int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
    for (std::int64_t extent : shape_)
        if (extent < 0) throw Error("npy: negative extent in shape " + shape_text(shape_));
    auto count = checked_numel(shape_, element_size(dtype_));
    if (!count) throw Error("npy: array of shape " + shape_text(shape_) + " is too large");
    std::size_t bytes = static_cast<std::size_t>(*count) * element_size(dtype_);
    storage_.assign((bytes + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t), 0);
}

std::int64_t Array::numel() const {
    std::int64_t count = 1;
    for (std::int64_t extent : shape_) count *= extent;
    return count;
}

void Array::check_element_type(DType requested) const {
    if (requested != dtype_)
        throw std::logic_error(std::string("npy::Array holds ") + dtype_name(dtype_) + ", not " +
                               dtype_name(requested));
}

Array parse(std::string_view bytes, std::string_view name) {
    const std::string where(name);
    if (bytes.substr(0, kMagic.size()) != kMagic)
        throw Error(where + ": not a .npy file (it does not start with the \\x93NUMPY magic)");
    if (bytes.size() < kPreambleV1)
        throw Error(where + ": truncated .npy file (" + std::to_string(bytes.size()) +
                    " bytes: it ends inside the preamble, which takes " + std::to_string(kPreambleV1) + ")");
    const int major = static_cast<unsigned char>(bytes[6]);
    const int minor = static_cast<unsigned char>(bytes[7]);
    if (major < 1 || major > 3 || minor != 0)
        throw Error(where + ": unsupported .npy format version " + std::to_string(major) + "." +
                    std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
    const std::size_t preamble = major == 1 ? kPreambleV1 : kPreambleV2;
    if (bytes.size() < preamble) throw Error(where + ": truncated .npy file (it ends inside the preamble)");
    const std::size_t header_length = read_little_endian(bytes.substr(8, preamble - 8));
    if (bytes.size() - preamble < header_length)
        throw Error(where + ": truncated .npy file (the header says it is " + std::to_string(header_length) +
                    " bytes long, the file ends before that)");
    const std::string_view header = bytes.substr(preamble, header_length);
    if (header.empty() || header.back() != '\n')
        throw Error(where + ": malformed .npy header: it does not end with a newline");

    const HeaderParser::Fields fields = HeaderParser(header, name).parse();
    const DType dtype = dtype_from_descr(fields.descr, name);
    if (fields.fortran_order)
        throw Error(where + ": fortran_order=True arrays are not supported (expected C order; "
                            "save np.ascontiguousarray(a))");
    const std::optional<std::int64_t> count = checked_numel(fields.shape, element_size(dtype));
    if (!count) throw Error(where + ": shape " + shape_text(fields.shape) + " is too large");

    // The size is checked before anything is allocated: a corrupt header may
    // claim terabytes.
    const std::size_t data_bytes = static_cast<std::size_t>(*count) * element_size(dtype);
    const std::string_view data = bytes.substr(preamble + header_length);
    const std::string expected_text = "the header's shape " + shape_text(fields.shape) + " of " +
                                      dtype_name(dtype) + " needs " + std::to_string(data_bytes) + " data bytes";
    if (data.size() < data_bytes)
        throw Error(where + ": truncated .npy file: it holds " + std::to_string(data.size()) + " data bytes, " +
                    expected_text);
    if (data.size() > data_bytes)
        throw Error(where + ": .npy file has " + std::to_string(data.size() - data_bytes) +
                    " unexpected bytes after its data (" + expected_text + ")");
    Array array(dtype, fields.shape);
    if (array.byte_size() > 0) std::memcpy(array.data(), data.data(), array.byte_size());
    return array;
}

Array read(const std::string &path) {
    File file(std::fopen(path.c_str(), "rb"));
    if (!file) throw Error(path + ": cannot open: " + system_error_text());
    std::string bytes;
    char chunk[1 << 16];
    while (true) {
        std::size_t got = std::fread(chunk, 1, sizeof chunk, file.get());
        bytes.append(chunk, got);
        if (got < sizeof chunk) break;
    }
    if (std::ferror(file.get())) throw Error(path + ": cannot read: " + system_error_text());
    return parse(bytes, path);
}

std::string serialize(const Array &array) {
    std::string header = std::string("{'descr': '") + descr_of(array.dtype()) +
                         "', 'fortran_order': False, 'shape': " + shape_text(array.shape()) + ", }";
    // Version 1.0 when the length fits its 2-byte field, as numpy does.
    const bool version1 = header.size() + 1 + (kDataAlignment - 1) <= 0xffff;
    const std::size_t preamble = version1 ? kPreambleV1 : kPreambleV2;
    const std::size_t unpadded = preamble + header.size() + 1;
    header.append((kDataAlignment - unpadded % kDataAlignment) % kDataAlignment, ' ');
    header += '\n';

    std::string out(kMagic);
    out += static_cast<char>(version1 ? 1 : 2);
    out += static_cast<char>(0);
    append_little_endian(out, static_cast<std::uint32_t>(header.size()), version1 ? 2 : 4);
    out += header;
    if (array.byte_size() > 0) out.append(static_cast<const char *>(array.data()), array.byte_size());
    return out;
}

namespace {

// The permissions a file created now gets (0666 less the umask), as fopen
// would give it; a temporary from mkstemp has 0600.
mode_t new_file_mode() {
    const mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

}  // namespace

PendingWrite::PendingWrite(const std::string &path, const Array &array) : path_(path) {
    const std::string bytes = serialize(array);
    std::string name = path + ".msda-XXXXXX";
    const int descriptor = mkstemp(name.data());
    if (descriptor < 0) throw Error(path + ": cannot create a file beside it to write: " + system_error_text());
    // A constructor that throws runs no destructor: the temporary is
    // removed here on every failure.
    auto fail = [&](const std::string &why) {
        std::remove(name.c_str());
        throw Error(path + ": cannot write: " + why);
    };
    std::size_t written = 0;
    while (written < bytes.size()) {
        const ssize_t done = ::write(descriptor, bytes.data() + written, bytes.size() - written);
        if (done < 0 && errno == EINTR) continue;
        if (done <= 0) {
            const std::string why = done < 0 ? system_error_text() : "no progress";
            ::close(descriptor);
            fail(why);
        }
        written += static_cast<std::size_t>(done);
    }
    const bool kept = fchmod(descriptor, new_file_mode()) == 0 && fsync(descriptor) == 0;
    const std::string why = kept ? "" : system_error_text();
    if (::close(descriptor) != 0 || !kept) fail(kept ? system_error_text() : why);
    temporary_ = name;
}

PendingWrite::~PendingWrite() {
    if (!committed_ && !temporary_.empty()) std::remove(temporary_.c_str());
}

void PendingWrite::commit() {
    if (std::rename(temporary_.c_str(), path_.c_str()) != 0)
        throw Error(path_ + ": cannot put the written file in place: " + system_error_text());
    committed_ = true;
}

void write(const std::string &path, const Array &array) {
    PendingWrite file(path, array);
    file.commit();
}

}  // namespace npy
