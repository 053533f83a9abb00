// msda_bitwise: fingerprints of msda's results, for a bitwise comparison of
// two builds (a redesign must not change a bit). For every case it runs the
// forward and the backward (the gradients the case asks for) and prints one
// line a tensor:
//
//   <case name> <tensor> <FNV-1a 64-bit hash of the tensor's bytes, hex>
//
// for output, grad_value, grad_sampling_locations and grad_attention_weights
// (a gradient the case does not ask for prints "absent"), or, where the
// library refuses or fails a call, "<case name> error <message, first 60
// characters>" (unsupported combinations are recorded too). Plan cases run
// each call twice on the same plan and workspace; a second run with other
// bits than the first adds a "<case name> <tensor>_rerun_differs <hash>" line.
//
// Cases, in this order (the output's order is the cases' order, fixed):
//   canon/<shape>/<distribution>/<dtype>   the bench's canonical shapes
//       (bench/problem.cpp's sizes, replicated here so the program needs
//       only the public API), in float32, float16 and bfloat16 storage with
//       float32 locations, and with float16/bfloat16 locations.
//   grid/<nn>:<options>                    ~60 small cases from a fixed seed
//   opencl/...                             the float32 grid cases and S0 on
//       Options::device = opencl (host tensors), unless --only-cpu
//
// Every input comes from splitmix64 with a fixed seed: the same bytes on
// every machine and build. Only <msda/msda.hpp>'s core API is used (no
// device contexts or diagnostics), so this compiles against the library's
// old and new headers alike.
//
// Usage: msda_bitwise [--only-cpu] [--filter SUBSTR]
#include <msda/msda.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

// ---- deterministic numbers -------------------------------------------------

struct Random {
    std::uint64_t state;
    explicit Random(std::uint64_t seed) : state(seed) {}
    std::uint64_t next() {  // splitmix64
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // [0, 1) with 24 bits: exact in float.
    float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
    float uniform(float low, float high) { return low + (high - low) * unit(); }
    int range(int low, int high) { return low + static_cast<int>(next() % static_cast<std::uint64_t>(high - low + 1)); }
    template <typename T>
    const T &pick(const std::vector<T> &v) { return v[next() % v.size()]; }
    bool chance(int percent) { return static_cast<int>(next() % 100) < percent; }
};

std::uint64_t fnv1a(const void *data, std::size_t bytes) {
    const unsigned char *p = static_cast<const unsigned char *>(data);
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < bytes; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

std::uint16_t to_f16(float f) {  // round to nearest even
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return static_cast<std::uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow to inf
    if (abs < 0x38800000u) {                                                   // subnormal or zero
        float a;
        std::memcpy(&a, &abs, 4);
        const float scaled = a * 16777216.0f;  // 2^24: units of the smallest subnormal
        const std::uint32_t m = static_cast<std::uint32_t>(std::nearbyint(scaled));
        return static_cast<std::uint16_t>(sign | m);
    }
    const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

std::uint16_t to_bf16(float f) {
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
    return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

std::size_t size_of(msda::DType t) {
    switch (t) {
    case msda::DType::f16:
    case msda::DType::bf16: return 2;
    case msda::DType::f64:
    case msda::DType::i64: return 8;
    default: return 4;
    }
}

const char *dtype_str(msda::DType t) {
    switch (t) {
    case msda::DType::f32: return "f32";
    case msda::DType::f16: return "f16";
    case msda::DType::bf16: return "bf16";
    case msda::DType::f64: return "f64";
    case msda::DType::i32: return "i32";
    case msda::DType::i64: return "i64";
    }
    return "?";
}

// A host tensor: bytes (8-byte aligned) and its view.
struct Tensor {
    std::vector<std::uint64_t> storage;
    msda::DType dtype = msda::DType::f32;
    std::vector<std::int64_t> shape;
    std::int64_t count = 0;

    Tensor() = default;
    Tensor(msda::DType t, std::vector<std::int64_t> s) : dtype(t), shape(std::move(s)) {
        count = 1;
        for (std::int64_t d : shape) count *= d;
        storage.assign((static_cast<std::size_t>(count) * size_of(t) + 7) / 8 + 1, 0);
    }
    void *data() { return storage.data(); }
    std::size_t bytes() const { return static_cast<std::size_t>(count) * size_of(dtype); }
    void set(std::int64_t i, double v) {
        unsigned char *p = reinterpret_cast<unsigned char *>(storage.data()) + i * size_of(dtype);
        switch (dtype) {
        case msda::DType::f32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
        case msda::DType::f16: { std::uint16_t h = to_f16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
        case msda::DType::bf16: { std::uint16_t h = to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
        case msda::DType::f64: std::memcpy(p, &v, 8); break;
        case msda::DType::i32: { std::int32_t k = static_cast<std::int32_t>(v); std::memcpy(p, &k, 4); break; }
        case msda::DType::i64: { std::int64_t k = static_cast<std::int64_t>(v); std::memcpy(p, &k, 8); break; }
        }
    }
    void poison() { std::memset(storage.data(), 0xcd, storage.size() * 8); }
    std::uint64_t hash() const { return fnv1a(storage.data(), bytes()); }
    msda::TensorView view() {
        msda::TensorView v;
        v.data = storage.data();
        v.dtype = dtype;
        v.rank = static_cast<int>(shape.size());
        std::int64_t stride = 1;
        for (int d = v.rank - 1; d >= 0; --d) {
            v.shape[d] = shape[d];
            v.strides[d] = stride;
            stride *= shape[d];
        }
        return v;
    }
};

// ---- cases -----------------------------------------------------------------

enum class Locations { local, uniform, wide };  // wide: [-0.05, 1.05] with edge values

struct Case {
    std::string name;
    msda::Options options;
    std::int64_t batch = 1, queries = 1, heads = 1, channels = 1, points = 1;
    std::vector<std::pair<std::int64_t, std::int64_t>> levels;  // (H, W)
    msda::DType dtype = msda::DType::f32, locations_dtype = msda::DType::f32;
    bool index64 = false;
    bool encoder = false;  // local locations centred on the queries' own pixels
    Locations locations = Locations::wide;
    bool plan = false;
    std::uint64_t seed = 1;
};

std::string one_line(const std::string &s, std::size_t n) {
    std::string out = s.substr(0, n);
    for (char &c : out)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    return out;
}

void print(const std::string &name, const char *tensor, std::uint64_t hash) {
    std::printf("%s %s %016llx\n", name.c_str(), tensor, static_cast<unsigned long long>(hash));
}

void run_case(const Case &c) {
    const std::int64_t B = c.batch, Q = c.queries, H = c.heads, C = c.channels, P = c.points;
    const std::int64_t NL = static_cast<std::int64_t>(c.levels.size());
    std::int64_t L = 0;
    for (auto &lv : c.levels) L += lv.first * lv.second;
    const bool gka = c.options.op == msda::Operator::gka;
    const msda::DType index_type = c.index64 ? msda::DType::i64 : msda::DType::i32;
    Random random(c.seed);

    Tensor shapes(index_type, {NL, 2}), starts(index_type, {NL});
    {
        std::int64_t start = 0;
        for (std::int64_t l = 0; l < NL; ++l) {
            shapes.set(2 * l, static_cast<double>(c.levels[l].first));
            shapes.set(2 * l + 1, static_cast<double>(c.levels[l].second));
            starts.set(l, static_cast<double>(start));
            start += c.levels[l].first * c.levels[l].second;
        }
    }
    const bool blnc = c.options.value_layout == msda::ValueLayout::BLNC;
    Tensor value(c.dtype, blnc ? std::vector<std::int64_t>{B, L, H, C} : std::vector<std::int64_t>{B, H, L, C});
    for (std::int64_t i = 0; i < value.count; ++i) value.set(i, random.uniform(-1.0f, 1.0f));

    const bool qhlp2 = c.options.locations_layout == msda::LocationsLayout::BQHLP2;
    Tensor locations(c.locations_dtype,
                     qhlp2 ? std::vector<std::int64_t>{B, Q, H, NL, P, 2} : std::vector<std::int64_t>{B, 2, Q, H, NL, P});
    const std::int64_t per_batch = Q * H * NL * P;
    for (std::int64_t b = 0; b < B; ++b) {
        for (std::int64_t q = 0; q < Q; ++q) {
            // The query's reference point (local locations).
            float cx = random.unit(), cy = random.unit();
            if (c.encoder) {
                std::int64_t pixel = q;
                for (auto &lv : c.levels) {
                    if (pixel < lv.first * lv.second) {
                        cx = (static_cast<float>(pixel % lv.second) + 0.5f) / static_cast<float>(lv.second);
                        cy = (static_cast<float>(pixel / lv.second) + 0.5f) / static_cast<float>(lv.first);
                        break;
                    }
                    pixel -= lv.first * lv.second;
                }
            }
            for (std::int64_t h = 0; h < H; ++h) {
                for (std::int64_t l = 0; l < NL; ++l) {
                    const float height = static_cast<float>(c.levels[l].first), width = static_cast<float>(c.levels[l].second);
                    for (std::int64_t p = 0; p < P; ++p) {
                        float xy[2];
                        for (int k = 0; k < 2; ++k) {
                            const float size = k == 0 ? width : height;
                            float v;
                            if (c.locations == Locations::local) {
                                v = (k == 0 ? cx : cy) + random.uniform(-2.0f, 2.0f) / size;
                            } else if (c.locations == Locations::uniform) {
                                v = random.unit();
                            } else {
                                const int kind = static_cast<int>(random.next() % 16);
                                if (kind == 0) v = 0.0f;
                                else if (kind == 1) v = 1.0f;
                                else if (kind == 2) v = (static_cast<float>(random.range(0, static_cast<int>(size))) + 0.5f) / size;  // a pixel centre
                                else if (kind == 3) v = static_cast<float>(random.range(0, static_cast<int>(size))) / size;  // a pixel edge
                                else v = random.uniform(-0.05f, 1.05f);
                            }
                            if (gka) v *= size;  // absolute pixel coordinates of level l
                            xy[k] = v;
                        }
                        const std::int64_t sample = ((q * H + h) * NL + l) * P + p;
                        for (int k = 0; k < 2; ++k)
                            locations.set(qhlp2 ? (b * per_batch + sample) * 2 + k : (b * 2 + k) * per_batch + sample, xy[k]);
                    }
                }
            }
        }
    }
    Tensor weights(c.dtype, {B, Q, H, NL, P});
    for (std::int64_t i = 0; i < weights.count; ++i)
        weights.set(i, c.locations == Locations::wide ? random.uniform(-0.5f, 1.0f) : random.unit() / static_cast<float>(NL * P));
    Tensor grad_output(c.dtype, {B, Q, H * C});
    for (std::int64_t i = 0; i < grad_output.count; ++i) grad_output.set(i, random.uniform(-1.0f, 1.0f));

    Tensor output(c.dtype, {B, Q, H * C});
    Tensor grad_value(c.dtype, value.shape), grad_locations(c.locations_dtype, locations.shape),
        grad_weights(c.dtype, weights.shape);

    msda::ForwardArgs fa;
    fa.value = value.view();
    fa.spatial_shapes = shapes.view();
    fa.level_start_index = starts.view();
    fa.sampling_locations = locations.view();
    fa.attention_weights = weights.view();
    fa.output = output.view();
    msda::BackwardArgs ba;
    ba.value = fa.value;
    ba.spatial_shapes = fa.spatial_shapes;
    ba.level_start_index = fa.level_start_index;
    ba.sampling_locations = fa.sampling_locations;
    ba.attention_weights = fa.attention_weights;
    ba.grad_output = grad_output.view();
    if (c.options.grad_value) ba.grad_value = grad_value.view();
    if (c.options.grad_sampling_locations) ba.grad_sampling_locations = grad_locations.view();
    if (c.options.grad_attention_weights) ba.grad_attention_weights = grad_weights.view();

    struct Out {
        const char *name;
        Tensor *tensor;
        bool present;
    };
    const Out backward_outputs[] = {{"grad_value", &grad_value, c.options.grad_value},
                                    {"grad_sampling_locations", &grad_locations, c.options.grad_sampling_locations},
                                    {"grad_attention_weights", &grad_weights, c.options.grad_attention_weights}};
    const char *stage = "forward";
    try {
        if (!c.plan) {
            output.poison();
            msda::forward(fa, c.options);
            print(c.name, "output", output.hash());
            stage = "backward";
            for (const Out &o : backward_outputs) o.tensor->poison();
            msda::backward(ba, c.options);
        } else {
            msda::ProblemSize size;
            size.batch = B;
            size.value_length = L;
            size.heads = H;
            size.channels = C;
            size.levels = NL;
            size.queries = Q;
            size.points = P;
            size.dtype = c.dtype;
            size.locations_dtype = c.locations_dtype;
            stage = "plan";
            const msda::Plan plan(size, c.options);
            std::vector<std::uint64_t> workspace(plan.workspace_size() / 8 + 1);
            void *ws = plan.workspace_size() ? workspace.data() : nullptr;
            // Dirty workspace: results must not depend on what it held.
            std::memset(workspace.data(), 0xab, workspace.size() * 8);
            stage = "forward";
            std::uint64_t first = 0;
            for (int run = 0; run < 2; ++run) {
                output.poison();
                plan.forward(fa, ws, plan.workspace_size());
                if (run == 0) first = output.hash();
            }
            print(c.name, "output", first);
            if (output.hash() != first) print(c.name, "output_rerun_differs", output.hash());
            stage = "backward";
            std::uint64_t firsts[3] = {};
            for (int run = 0; run < 2; ++run) {
                for (const Out &o : backward_outputs) o.tensor->poison();
                plan.backward(ba, ws, plan.workspace_size());
                if (run == 0)
                    for (int k = 0; k < 3; ++k) firsts[k] = backward_outputs[k].tensor->hash();
            }
            for (int k = 0; k < 3; ++k) {
                const Out &o = backward_outputs[k];
                if (!o.present) continue;
                if (o.tensor->hash() != firsts[k])
                    print(c.name, (std::string(o.name) + "_rerun_differs").c_str(), o.tensor->hash());
            }
            for (int k = 0; k < 3; ++k) {
                const Out &o = backward_outputs[k];
                if (o.present) print(c.name, o.name, firsts[k]);
                else std::printf("%s %s absent\n", c.name.c_str(), o.name);
            }
            return;
        }
    } catch (const std::exception &e) {
        std::printf("%s error %s: %s\n", c.name.c_str(), stage, one_line(e.what(), 60).c_str());
        return;
    }
    for (const Out &o : backward_outputs) {
        if (o.present) print(c.name, o.name, o.tensor->hash());
        else std::printf("%s %s absent\n", c.name.c_str(), o.name);
    }
}

// ---- the canonical shapes (bench/problem.cpp's canonical_shapes and
// gka_shapes, replicated) ------------------------------------------------------

struct Shape {
    const char *id;
    bool gka;
    std::int64_t batch, queries, heads, channels, points;
    std::vector<std::pair<std::int64_t, std::int64_t>> levels;
};

std::vector<Shape> canonical_shapes() {
    const std::vector<std::pair<std::int64_t, std::int64_t>> detr = {{100, 167}, {50, 84}, {25, 42}, {13, 21}};
    const std::vector<std::pair<std::int64_t, std::int64_t>> g = {{60, 40}, {60, 40}, {60, 40}, {60, 40}};
    const std::vector<std::pair<std::int64_t, std::int64_t>> bev = {{116, 200}, {58, 100}, {29, 50}, {15, 25}};
    // The bench's sizes, batch included (G, L1, GKA_G and GKA_BEV: 6); the
    // largest fwd+bwd takes a few seconds a dtype on a 2-core VM.
    return {
        {"S0", false, 1, 300, 8, 32, 4, detr},
        {"S1", false, 2, 900, 8, 32, 4, detr},
        {"M0", false, 1, 22223, 8, 32, 4, detr},
        {"M2", false, 1, 21504, 8, 32, 4, {{128, 128}, {64, 64}, {32, 32}}},
        {"X", false, 1, 15200, 8, 32, 8, {{100, 152}, {50, 76}, {25, 38}, {13, 19}}},
        {"G", false, 6, 9680, 8, 32, 4, g},
        {"L1", false, 6, 9680, 8, 32, 8, bev},
        {"GKA_G", true, 6, 9680, 8, 32, 4, g},
        {"GKA_BEV", true, 6, 9680, 8, 32, 8, bev},
    };
}

bool is_encoder(const Shape &s) {
    std::int64_t L = 0;
    for (auto &lv : s.levels) L += lv.first * lv.second;
    return s.queries == L || (!s.levels.empty() && s.queries == s.levels[0].first * s.levels[0].second);
}

Case canonical_case(const Shape &s, Locations dist, msda::DType dtype, msda::DType ldtype, std::uint64_t seed) {
    Case c;
    c.name = std::string("canon/") + s.id + "/" + (dist == Locations::local ? "local" : "uniform") + "/" +
             dtype_str(dtype) + "-loc" + dtype_str(ldtype);
    c.options.op = s.gka ? msda::Operator::gka : msda::Operator::msda;
    c.options.grad_sampling_locations = !s.gka;
    c.batch = s.batch;
    c.queries = s.queries;
    c.heads = s.heads;
    c.channels = s.channels;
    c.points = s.points;
    c.levels = s.levels;
    c.dtype = dtype;
    c.locations_dtype = ldtype;
    c.encoder = is_encoder(s);
    c.locations = dist;
    c.seed = seed;
    return c;
}

std::vector<Case> canonical_cases() {
    using msda::DType;
    const std::pair<DType, DType> dtypes[] = {{DType::f32, DType::f32}, {DType::f16, DType::f32}, {DType::bf16, DType::f32},
                                              {DType::f16, DType::f16}, {DType::bf16, DType::bf16}};
    std::vector<Case> cases;
    std::uint64_t seed = 1000;
    for (const Shape &s : canonical_shapes()) {
        // Uniform locations on the small shapes only (the large ones' time
        // goes to the dtypes).
        const bool small = std::string(s.id) == "S0" || std::string(s.id) == "S1";
        for (Locations dist : {Locations::local, Locations::uniform}) {
            if (dist == Locations::uniform && !small) continue;
            ++seed;
            for (auto [dt, ldt] : dtypes) cases.push_back(canonical_case(s, dist, dt, ldt, seed));
        }
    }
    return cases;
}

// ---- the random grid ---------------------------------------------------------

std::vector<Case> grid_cases() {
    using msda::DType;
    Random random(0x6d73646162697477ull);  // "msdabitw"
    std::vector<Case> cases;
    const std::vector<int> channel_choices = {1, 3, 8, 32, 33, 64};
    const std::vector<std::pair<DType, DType>> dtypes = {{DType::f32, DType::f32}, {DType::f32, DType::f32},
                                                         {DType::f16, DType::f32}, {DType::bf16, DType::f32},
                                                         {DType::f16, DType::f16}, {DType::bf16, DType::bf16}};
    const int count = 64;
    for (int i = 0; i < count; ++i) {
        Case c;
        c.seed = random.next();
        const bool gka = random.chance(25);
        c.options.op = gka ? msda::Operator::gka : msda::Operator::msda;
        if (gka) c.options.rounding = random.chance(50) ? msda::Rounding::floor : msda::Rounding::nearest;
        c.options.value_layout = random.chance(50) ? msda::ValueLayout::BLNC : msda::ValueLayout::BNLC;
        c.options.locations_layout = random.chance(50) ? msda::LocationsLayout::BQHLP2 : msda::LocationsLayout::B2QHLP;
        if (!gka) {
            c.options.align_corners = random.chance(50);
            c.options.padding_mode = random.chance(50) ? msda::PaddingMode::zeros : msda::PaddingMode::border;
        }
        c.options.relayout = random.pick(std::vector<msda::Relayout>{msda::Relayout::automatic, msda::Relayout::always,
                                                                     msda::Relayout::never});
        c.options.sample_order = random.pick(std::vector<msda::SampleOrder>{
            msda::SampleOrder::automatic, msda::SampleOrder::by_level, msda::SampleOrder::by_query});
        c.channels = random.pick(channel_choices);
        c.heads = random.range(1, 8);
        const int nl = random.range(1, 4);
        c.points = random.range(1, 8);
        // Every fourth case: the by-query shapes (C_h 32 with (4,4), (3,4), (4,8)).
        if (i % 4 == 1) {
            const std::pair<int, int> lp[] = {{4, 4}, {3, 4}, {4, 8}};
            const auto chosen = lp[(i / 4) % 3];
            c.channels = 32;
            c.points = chosen.second;
            c.levels.clear();
            for (int l = 0; l < chosen.first; ++l) c.levels.push_back({random.range(1, 12), random.range(1, 12)});
        } else {
            for (int l = 0; l < nl; ++l) c.levels.push_back({random.range(1, 12), random.range(1, 12)});
        }
        c.batch = random.range(1, 3);
        c.queries = random.range(1, 50);
        auto [dt, ldt] = random.pick(dtypes);
        if (i % 4 == 1 && random.chance(50)) { dt = DType::f32; ldt = DType::f32; }
        c.dtype = dt;
        c.locations_dtype = ldt;
        c.index64 = random.chance(30);
        c.locations = random.chance(20) ? Locations::local : Locations::wide;
        c.options.grad_value = !random.chance(20);
        c.options.grad_attention_weights = !random.chance(20);
        c.options.grad_sampling_locations = !gka && !random.chance(20);
        c.plan = random.chance(30);

        static const char *relayouts[] = {"auto", "always", "never"};
        static const char *orders[] = {"auto", "bylevel", "byquery"};
        char name[512];
        std::string levels;
        for (auto &lv : c.levels) levels += std::to_string(lv.first) + "x" + std::to_string(lv.second) + ";";
        levels.pop_back();
        std::snprintf(name, sizeof name,
                      "grid/%02d:%s%s,%s,%s,ac%d,%s,rel=%s,ord=%s,B%lld,Q%lld,H%lld,C%lld,P%lld,lv=%s,%s-loc%s,%s,%s,g%d%d%d%s",
                      i, gka ? "gka" : "msda", gka ? (c.options.rounding == msda::Rounding::floor ? "-floor" : "-nearest") : "",
                      c.options.value_layout == msda::ValueLayout::BLNC ? "BLNC" : "BNLC",
                      c.options.locations_layout == msda::LocationsLayout::BQHLP2 ? "BQHLP2" : "B2QHLP",
                      c.options.align_corners ? 1 : 0, c.options.padding_mode == msda::PaddingMode::zeros ? "zeros" : "border",
                      relayouts[static_cast<int>(c.options.relayout)], orders[static_cast<int>(c.options.sample_order)],
                      static_cast<long long>(c.batch), static_cast<long long>(c.queries), static_cast<long long>(c.heads),
                      static_cast<long long>(c.channels), static_cast<long long>(c.points), levels.c_str(), dtype_str(c.dtype),
                      dtype_str(c.locations_dtype), c.index64 ? "i64" : "i32", c.locations == Locations::local ? "local" : "wide",
                      c.options.grad_value ? 1 : 0, c.options.grad_sampling_locations ? 1 : 0,
                      c.options.grad_attention_weights ? 1 : 0, c.plan ? ",plan" : "");
        c.name = name;
        cases.push_back(c);
    }
    return cases;
}

}  // namespace

int main(int argc, char **argv) {
    bool only_cpu = false;
    std::string filter;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--only-cpu") only_cpu = true;
        else if (arg == "--filter" && i + 1 < argc) filter = argv[++i];
        else {
            std::fprintf(stderr, "usage: msda_bitwise [--only-cpu] [--filter SUBSTR]\n");
            return 2;
        }
    }
    const auto started = std::chrono::steady_clock::now();
    std::vector<Case> cases = canonical_cases();
    const std::vector<Case> grid = grid_cases();
    cases.insert(cases.end(), grid.begin(), grid.end());

    auto selected = [&](const Case &c) { return filter.empty() || c.name.find(filter) != std::string::npos; };
    int ran = 0;
    for (const Case &c : cases) {
        if (!selected(c)) continue;
        const auto t0 = std::chrono::steady_clock::now();
        run_case(c);
        std::fflush(stdout);
        ++ran;
        std::fprintf(stderr, "%.2fs %s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                     c.name.c_str());
    }

    if (!only_cpu) {
        // OpenCL: the float32 grid cases and S0 (local) on msda's own queue,
        // host tensors (msda copies them). The sample order and relayout do
        // not apply there; the options stay as the CPU case had them.
        std::vector<Case> device_cases;
        for (const Case &c : cases) {
            const bool s0 = c.name == "canon/S0/local/f32-locf32";
            const bool grid_f32 = c.name.rfind("grid/", 0) == 0 && c.dtype == msda::DType::f32 &&
                                  c.locations_dtype == msda::DType::f32;
            if (!s0 && !grid_f32) continue;
            Case d = c;
            d.name = "opencl/" + c.name;
            d.options.device = msda::Device::opencl;
            if (selected(d)) device_cases.push_back(d);
        }
        if (!device_cases.empty()) {
            // Is there OpenCL at all? A tiny forward tells.
            bool available = true;
            try {
                float value[2] = {1.0f, 2.0f}, loc[2] = {0.5f, 0.5f}, weight[1] = {1.0f}, out[2] = {};
                std::int32_t shapes[2] = {1, 1}, starts[1] = {0};
                msda::ForwardArgs fa;
                using msda::TensorView;
                fa.value = TensorView::contiguous(value, msda::DType::f32, {1, 1, 1, 2});
                fa.spatial_shapes = TensorView::contiguous(shapes, msda::DType::i32, {1, 2});
                fa.level_start_index = TensorView::contiguous(starts, msda::DType::i32, {1});
                fa.sampling_locations = TensorView::contiguous(loc, msda::DType::f32, {1, 1, 1, 1, 1, 2});
                fa.attention_weights = TensorView::contiguous(weight, msda::DType::f32, {1, 1, 1, 1, 1});
                fa.output = TensorView::contiguous(out, msda::DType::f32, {1, 1, 2});
                msda::Options o;
                o.device = msda::Device::opencl;
                msda::forward(fa, o);
            } catch (const std::exception &e) {
                std::printf("opencl unavailable %s\n", one_line(e.what(), 200).c_str());
                available = false;
            }
            if (available) {
                for (const Case &c : device_cases) {
                    const auto t0 = std::chrono::steady_clock::now();
                    run_case(c);
                    std::fflush(stdout);
                    ++ran;
                    std::fprintf(stderr, "%.2fs %s\n",
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                                 c.name.c_str());
                }
            }
        }
    }
    std::fprintf(stderr, "msda_bitwise: %d cases in %.1f s\n", ran,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return 0;
}
