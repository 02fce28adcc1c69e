// The state file container: round trip, every corruption is refused with the
// right status before the caller sees any data, and saving is atomic under
// write failures, a full disk, a file size limit and kill -9.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.hpp"
#include "runtime/state_file.hpp"
#include "support/child_process.hpp"
#include "support/paths.hpp"
#include "support/scoped_env.hpp"

namespace fs = std::filesystem;
using namespace moe::state;
using moe::Status;

namespace {

// A small state: 3 layers, the last without a V cache (as latent attention).
struct Sample {
    StateShape shape;
    std::vector<int32_t> tokens, positions;
    std::vector<std::vector<uint8_t>> k, v;
    StateContents contents;

    explicit Sample(uint32_t n_past = 5, uint8_t seed = 1, size_t row_scale = 1) {
        shape.fingerprint = 0x1234'5678'9abc'def0ull;
        shape.n_layer = 3;
        shape.n_head_kv = 2;
        shape.head_dim_k = 4 * row_scale;
        shape.head_dim_v = 4 * row_scale;
        shape.n_ctx = 64 > n_past ? 64 : n_past;
        shape.kv_type = moe::GgmlType::F16;
        shape.n_vocab = 100;
        shape.kv_layout = 1;
        const uint64_t row = 2 * 4 * row_scale * 2;
        shape.k_row_bytes = {row, row, row};
        shape.v_row_bytes = {row, row, 0};
        contents.n_past = n_past;
        for (uint32_t t = 0; t < n_past; ++t) {
            tokens.push_back(static_cast<int32_t>((t * 7 + seed) % 100));
            positions.push_back(static_cast<int32_t>(t));
        }
        for (uint32_t l = 0; l < 3; ++l) {
            std::vector<uint8_t> kb(n_past * row), vb(n_past * shape.v_row_bytes[l]);
            for (size_t i = 0; i < kb.size(); ++i) kb[i] = static_cast<uint8_t>(i * 31 + l + seed);
            for (size_t i = 0; i < vb.size(); ++i) vb[i] = static_cast<uint8_t>(i * 17 + l * 3 + seed);
            k.push_back(std::move(kb));
            v.push_back(std::move(vb));
        }
        rebuild();
    }
    static std::span<const uint8_t> bytes_of(const std::vector<int32_t> &x) {
        return {reinterpret_cast<const uint8_t *>(x.data()), x.size() * 4};
    }
    void rebuild() {
        contents.sections.clear();
        contents.sections.push_back({SectionType::tokens, 0, {bytes_of(tokens)}});
        contents.sections.push_back({SectionType::positions, 0, {bytes_of(positions)}});
        for (uint32_t l = 0; l < 3; ++l) {
            // K of a layer handed over in two parts, as a context with per-head storage would.
            const auto &kb = k[l];
            contents.sections.push_back({SectionType::kv_k, l,
                                         {std::span(kb).first(kb.size() / 2), std::span(kb).subspan(kb.size() / 2)}});
            if (shape.v_row_bytes[l] != 0) contents.sections.push_back({SectionType::kv_v, l, {std::span(v[l])}});
        }
    }
    std::vector<uint8_t> encode() const { return encode_state(shape, contents); }
};

Status status_of(const std::function<void()> &fn, std::string *message = nullptr) {
    try {
        fn();
    } catch (const moe::Error &e) {
        if (message) *message = e.what();
        return e.status();
    }
    return Status::ok;
}

Status parse_status(std::vector<uint8_t> image, const StateShape &shape, std::string *message = nullptr) {
    return status_of([&] { parse_state(std::move(image), shape, "test.state"); }, message);
}

void fix_checksum(std::vector<uint8_t> &image) {
    const uint64_t sum = compute_checksum(image);
    std::memcpy(image.data() + kChecksumOffset, &sum, 8);
}

std::vector<uint8_t> read_bytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void expect_matches(const LoadedState &got, const Sample &s) {
    ASSERT_EQ(got.n_past, s.contents.n_past);
    EXPECT_TRUE(std::equal(got.tokens.begin(), got.tokens.end(), s.tokens.begin(), s.tokens.end()));
    EXPECT_TRUE(std::equal(got.positions.begin(), got.positions.end(), s.positions.begin(), s.positions.end()));
    for (size_t l = 0; l < 3; ++l) {
        EXPECT_TRUE(std::equal(got.k[l].begin(), got.k[l].end(), s.k[l].begin(), s.k[l].end())) << l;
        EXPECT_TRUE(std::equal(got.v[l].begin(), got.v[l].end(), s.v[l].begin(), s.v[l].end())) << l;
    }
}

size_t count_temp_files(const std::string &dir) {
    size_t n = 0;
    for (const auto &e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
    return n;
}

}  // namespace

TEST(StateFile, RoundTripsThroughAFile) {
    const std::string dir = moe::test::scratch_dir();
    Sample s;
    write_state_file(dir + "/a.state", s.shape, s.contents);
    EXPECT_EQ(read_bytes(dir + "/a.state"), s.encode());
    expect_matches(read_state_file(dir + "/a.state", s.shape), s);
    EXPECT_EQ(count_temp_files(dir), 0u);
    // Private whatever the umask: the file holds the conversation.
    struct stat st {};
    ASSERT_EQ(::stat((dir + "/a.state").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    // Sections start 8-aligned so token ids can be viewed in place.
    const LoadedState got = read_state_file(dir + "/a.state", s.shape);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got.tokens.data()) % 8, 0u);
}

TEST(StateFile, EmptyContextRoundTrips) {
    Sample s(0);
    const LoadedState got = parse_state(s.encode(), s.shape, "empty");
    EXPECT_EQ(got.n_past, 0u);
    EXPECT_TRUE(got.tokens.empty());
}

TEST(StateFile, SamplerAndOptionalSectionsAreCarried) {
    Sample s;
    const std::vector<uint8_t> sampler = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const std::vector<uint8_t> extension = {42};
    s.contents.sections.push_back({SectionType::sampler, 0, {std::span(sampler)}});
    s.contents.sections.push_back({static_cast<SectionType>(kOptionalSectionBit | 77), 0, {std::span(extension)}});
    const LoadedState got = parse_state(s.encode(), s.shape, "x");
    EXPECT_TRUE(std::equal(got.sampler.begin(), got.sampler.end(), sampler.begin(), sampler.end()));
    expect_matches(got, s);
}

TEST(StateFile, TruncationAtEveryOffsetIsBadFormat) {
    Sample s;
    const std::vector<uint8_t> full = s.encode();
    for (size_t n = 0; n < full.size(); ++n) {
        std::string msg;
        EXPECT_EQ(parse_status({full.begin(), full.begin() + n}, s.shape, &msg), Status::bad_format) << n;
        if (n >= kHeaderSize) EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
    }
}

TEST(StateFile, TruncatedFileOnDiskIsBadFormat) {
    const std::string dir = moe::test::scratch_dir();
    Sample s;
    write_state_file(dir + "/t.state", s.shape, s.contents);
    const auto size = fs::file_size(dir + "/t.state");
    for (uintmax_t n : {uintmax_t(0), uintmax_t(7), uintmax_t(kHeaderSize), size / 2, size - 1}) {
        fs::resize_file(dir + "/t.state", n);
        EXPECT_EQ(status_of([&] { read_state_file(dir + "/t.state", s.shape); }), Status::bad_format) << n;
    }
}

TEST(StateFile, TrailingBytesAreBadFormat) {
    Sample s;
    std::vector<uint8_t> image = s.encode();
    image.push_back(0);
    std::string msg;
    EXPECT_EQ(parse_status(image, s.shape, &msg), Status::bad_format);
    EXPECT_NE(msg.find("trailing"), std::string::npos) << msg;
}

namespace {

#ifdef MOESTREAM_TEST_SANITIZED
constexpr bool kSanitized = true;  // the sanitizers reserve terabytes of address space
#else
constexpr bool kSanitized = false;
#endif

// Runs fn in a child process whose address space is capped 256 MiB above what
// it maps now, so that a fn that allocates as much as a huge file fails
// (std::bad_alloc) instead of quietly succeeding. Returns fn's exit code;
// 100 when fn ran out of memory.
int run_with_capped_memory(const std::function<int()> &fn) {
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (!kSanitized) {
            long pages = 0;
            if (FILE *f = std::fopen("/proc/self/statm", "r")) {
                if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
                std::fclose(f);
            }
            const rlim_t cap = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (rlim_t(256) << 20);
            struct rlimit lim {cap, cap};
            if (pages <= 0 || setrlimit(RLIMIT_AS, &lim) != 0) _exit(99);
        }
        try {
            _exit(fn());
        } catch (const std::bad_alloc &) {
            _exit(100);
        } catch (...) {
            _exit(98);
        }
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

// A sparse file of `size` bytes starting with `head`.
void write_sparse(const std::string &path, const std::vector<uint8_t> &head, uint64_t size) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char *>(head.data()),
                                                static_cast<std::streamsize>(head.size()));
    fs::resize_file(path, size);
}

}  // namespace

// A model (or anything large) passed as a state file is refused from its
// header: the payload is never read, so memory stays at the header's 80
// bytes however large the file is.
TEST(StateFile, HugeFilesAreRefusedFromTheirHeaderAlone) {
    const std::string dir = moe::test::scratch_dir();
    const uint64_t size = uint64_t(2) << 30;
    const Sample s;
    auto read_status = [&](const std::string &path, Status want, const std::vector<std::string> &needles) {
        return run_with_capped_memory([&] {
            std::string msg;
            if (status_of([&] { read_state_file(path, s.shape); }, &msg) != want) return 1;
            for (const std::string &n : needles)
                if (msg.find(n) == std::string::npos) return 2;
            return 0;
        });
    };

    std::vector<uint8_t> gguf = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    gguf.resize(4096, 0xab);
    write_sparse(dir + "/model.gguf", gguf, size);
    EXPECT_EQ(read_status(dir + "/model.gguf", Status::bad_format, {"bad magic"}), 0);

    // A well-formed header whose payload fills the file but is far larger
    // than any state of this context: refused naming both sizes.
    std::vector<uint8_t> header = s.encode();
    header.resize(kHeaderSize);
    const uint64_t payload = size - kHeaderSize;
    std::memcpy(header.data() + 64, &payload, 8);
    write_sparse(dir + "/huge.state", header, size);
    const std::string limit = std::to_string(max_payload_size(s.shape));
    EXPECT_EQ(read_status(dir + "/huge.state", Status::bad_format, {std::to_string(payload), limit, "largest state"}),
              0);

    // The same from a context with a larger n_ctx is that context's state:
    // a mismatch naming the field, as it would be had it been read.
    const uint32_t n_ctx = 1u << 24;
    std::memcpy(header.data() + 40, &n_ctx, 4);
    write_sparse(dir + "/longer.state", header, size);
    EXPECT_EQ(read_status(dir + "/longer.state", Status::state_mismatch, {"n_ctx"}), 0);
}

// The bound on the payload keeps a real state of a longer context what it
// was: a state mismatch naming n_ctx, not a malformed file.
// open(2) of a named pipe for reading waits for a writer: loading a state
// from one must fail at once instead of hanging the caller.
TEST(StateFile, APipeIsRejectedWithoutWaiting) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/pipe.state";
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    const Sample s;
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(5);
        std::string msg;
        const Status st = status_of([&] { read_state_file(path, s.shape); }, &msg);
        _exit(st == Status::io && msg.find("not a regular file") != std::string::npos ? 0 : 1);
    }
    EXPECT_EQ(moe::test::wait_exit_code(pid), 0);
    fs::remove_all(dir);
}

TEST(StateFile, StateOfALongerContextIsStillAMismatch) {
    const Sample longer(100, 1, 1024), ours(5, 1, 1024);
    const std::vector<uint8_t> image = longer.encode();
    ASSERT_GT(image.size() - kHeaderSize, max_payload_size(ours.shape));
    std::string msg;
    EXPECT_EQ(parse_status(image, ours.shape, &msg), Status::state_mismatch);
    EXPECT_NE(msg.find("n_ctx"), std::string::npos) << msg;
}

TEST(StateFile, EveryBitFlipIsDetected) {
    Sample s;
    const std::vector<uint8_t> full = s.encode();
    for (size_t byte = 0; byte < full.size(); ++byte) {
        for (int bit = 0; bit < 8; ++bit) {
            std::vector<uint8_t> image = full;
            image[byte] ^= static_cast<uint8_t>(1u << bit);
            const Status st = parse_status(std::move(image), s.shape);
            // The version field reports an unknown version; everything else is corrupt.
            const Status want = (byte >= 8 && byte < 12) ? Status::unsupported : Status::bad_format;
            ASSERT_EQ(st, want) << "byte " << byte << " bit " << bit;
        }
    }
}

TEST(StateFile, BadMagicIsBadFormat) {
    Sample s;
    std::vector<uint8_t> image = s.encode();
    image[0] = 'X';
    std::string msg;
    EXPECT_EQ(parse_status(image, s.shape, &msg), Status::bad_format);
    EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
    EXPECT_EQ(parse_status(std::vector<uint8_t>(200, 0), s.shape), Status::bad_format);
}

TEST(StateFile, OtherVersionIsUnsupported) {
    Sample s;
    for (const uint32_t version : {0u, 3u}) {
        std::vector<uint8_t> image = s.encode();
        std::memcpy(image.data() + 8, &version, 4);
        fix_checksum(image);
        std::string msg;
        EXPECT_EQ(parse_status(image, s.shape, &msg), Status::unsupported);
        EXPECT_NE(msg.find("version " + std::to_string(version) + ";"), std::string::npos) << msg;
        EXPECT_NE(msg.find("versions 1 to 2"), std::string::npos) << msg;
    }
}

// Version 2: a layer with a window may hold only the rows of the last
// positions, as many as it reads from n_past on (window - 1) or more; every
// other rule of version 1 stays. A file whose layers all hold n_past rows is
// written as version 1.
TEST(StateFile, VersionTwoWindowLayersHoldTheirLastRows) {
    constexpr uint32_t n_past = 9;
    const uint64_t row = 16;
    // Layers 0 and 2 see 3 positions (2 before their own); layer 2 has no V.
    const auto sample = [&](uint32_t k0_rows, uint32_t v0_rows, uint32_t kv1_rows, uint32_t k2_rows) {
        Sample s(n_past);
        s.shape.window = {3, 0, 3};
        const auto last = [&](const std::vector<uint8_t> &b, uint32_t rows) {
            return std::span(b).subspan(b.size() - std::min<size_t>(b.size(), rows * row));
        };
        s.rebuild();
        s.contents.sections.resize(2);
        s.contents.sections.push_back({SectionType::kv_k, 0, {last(s.k[0], k0_rows)}});
        s.contents.sections.push_back({SectionType::kv_v, 0, {last(s.v[0], v0_rows)}});
        s.contents.sections.push_back({SectionType::kv_k, 1, {last(s.k[1], kv1_rows)}});
        s.contents.sections.push_back({SectionType::kv_v, 1, {last(s.v[1], kv1_rows)}});
        s.contents.sections.push_back({SectionType::kv_k, 2, {last(s.k[2], k2_rows)}});
        return s;
    };
    const Sample s = sample(2, 2, n_past, 4);
    const std::vector<uint8_t> image = s.encode();
    RawHeader raw;
    ASSERT_TRUE(peek_header(image, raw));
    EXPECT_EQ(raw.version, 2u);
    const LoadedState got = parse_state(image, s.shape, "test.state");
    EXPECT_EQ(got.version, 2u);
    EXPECT_EQ(got.rows, (std::vector<uint32_t>{2, n_past, 4}));
    EXPECT_TRUE(std::equal(got.k[0].begin(), got.k[0].end(), s.k[0].end() - 2 * row, s.k[0].end()));
    EXPECT_TRUE(std::equal(got.v[0].begin(), got.v[0].end(), s.v[0].end() - 2 * row, s.v[0].end()));
    EXPECT_TRUE(std::equal(got.k[2].begin(), got.k[2].end(), s.k[2].end() - 4 * row, s.k[2].end()));
    EXPECT_EQ(format_version_of(s.shape, sample(n_past, n_past, n_past, n_past).contents), 1u);

    struct Case {
        const char *what, *message;
        Sample sample;
    };
    const Case refused[] = {
        {"a window's row missing", "layer 0 holds the rows of 1 positions but reads the last 2", sample(1, 1, n_past, 4)},
        {"a full layer's row missing", "layer 1 holds the rows of 8 positions but reads 9", sample(2, 2, n_past - 1, 4)},
        {"K and V of other lengths", "layer 0 holds 2 K rows but 3 V rows", sample(2, 3, n_past, 4)},
    };
    for (const Case &c : refused) {
        std::string msg;
        EXPECT_EQ(parse_status(c.sample.encode(), c.sample.shape, &msg), Status::bad_format) << c.what;
        EXPECT_NE(msg.find(c.message), std::string::npos) << c.what << ": " << msg;
    }
    // Part of a row, and more rows than tokens.
    Sample odd = sample(2, 2, n_past, 4);
    odd.contents.sections[2].parts[0] = odd.contents.sections[2].parts[0].subspan(1);
    Sample more = sample(2, 2, n_past, 4);
    static const std::vector<uint8_t> extra(row, 7);
    more.contents.sections[4].parts.push_back(std::span(extra));
    for (const Sample *bad : {&odd, &more}) {
        std::string msg;
        EXPECT_EQ(parse_status(bad->encode(), bad->shape, &msg), Status::bad_format);
        EXPECT_NE(msg.find("not whole rows"), std::string::npos) << msg;
    }
    // A context without windows needs every row; version 1 always does.
    std::string msg;
    StateShape no_windows = s.shape;
    no_windows.window.clear();
    EXPECT_EQ(parse_status(image, no_windows, &msg), Status::bad_format);
    EXPECT_NE(msg.find("layer 0 holds the rows of 2 positions but reads 9"), std::string::npos) << msg;
    std::vector<uint8_t> as_v1 = image;
    const uint32_t v1 = 1;
    std::memcpy(as_v1.data() + 8, &v1, 4);
    fix_checksum(as_v1);
    EXPECT_EQ(parse_status(as_v1, s.shape, &msg), Status::bad_format);
    EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
}

TEST(StateFile, WrongFingerprintIsStateMismatch) {
    Sample s;
    StateShape other = s.shape;
    other.fingerprint ^= 1;
    std::string msg;
    EXPECT_EQ(parse_status(s.encode(), other, &msg), Status::state_mismatch);
    EXPECT_NE(msg.find("another model"), std::string::npos) << msg;
}

TEST(StateFile, WrongShapeIsStateMismatchNamingTheField) {
    Sample s;
    const std::vector<uint8_t> image = s.encode();
    struct Case {
        const char *field;
        std::function<void(StateShape &)> change;
    };
    const std::vector<Case> cases = {
        {"n_layer", [](StateShape &x) { x.n_layer = 4; x.k_row_bytes.push_back(16); x.v_row_bytes.push_back(16); }},
        {"n_head_kv", [](StateShape &x) { x.n_head_kv = 4; }},
        {"head_dim_k", [](StateShape &x) { x.head_dim_k = 8; }},
        {"head_dim_v", [](StateShape &x) { x.head_dim_v = 8; }},
        {"n_ctx", [](StateShape &x) { x.n_ctx = 128; }},
        {"KV cache", [](StateShape &x) { x.kv_type = moe::GgmlType::F32; }},
        {"n_vocab", [](StateShape &x) { x.n_vocab = 101; }},
        {"kv_layout", [](StateShape &x) { x.kv_layout = 2; }},
    };
    for (const Case &c : cases) {
        StateShape other = s.shape;
        c.change(other);
        std::string msg;
        EXPECT_EQ(parse_status(image, other, &msg), Status::state_mismatch) << c.field;
        EXPECT_NE(msg.find(c.field), std::string::npos) << msg;
    }
}

// Files that carry a valid checksum but break a section rule (as a buggy or
// hostile writer could produce) are refused too.
TEST(StateFile, MalformedSectionsAreBadFormat) {
    struct Case {
        const char *what;
        std::function<void(Sample &)> change;
        Status want = Status::bad_format;
    };
    const std::vector<Case> cases = {
        {"token out of range", [](Sample &s) { s.tokens[2] = 100; }},
        {"negative token", [](Sample &s) { s.tokens[0] = -1; }},
        {"positions not increasing", [](Sample &s) { s.positions[3] = 2; }},
        {"position beyond n_ctx", [](Sample &s) { s.positions[4] = 64; }},
        {"missing tokens", [](Sample &s) { s.contents.sections.erase(s.contents.sections.begin()); }},
        {"missing positions", [](Sample &s) { s.contents.sections.erase(s.contents.sections.begin() + 1); }},
        {"missing K", [](Sample &s) { s.contents.sections.erase(s.contents.sections.begin() + 2); }},
        {"missing V", [](Sample &s) { s.contents.sections.erase(s.contents.sections.begin() + 3); }},
        {"duplicate tokens", [](Sample &s) { s.contents.sections.push_back(s.contents.sections[0]); }},
        {"duplicate K", [](Sample &s) { s.contents.sections.push_back(s.contents.sections[2]); }},
        // Refused even by a load without a sampler, which ignores one sampler section.
        {"duplicate sampler",
         [](Sample &s) {
             static const uint8_t bytes[64] = {};
             s.contents.sections.push_back({SectionType::sampler, 0, {std::span(bytes)}});
             s.contents.sections.push_back({SectionType::sampler, 0, {std::span(bytes)}});
         }},
        {"V for a layer without V",
         [](Sample &s) { s.contents.sections.push_back({SectionType::kv_v, 2, {std::span(s.v[0])}}); }},
        {"layer out of range", [](Sample &s) { s.contents.sections[2].index = 3; }},
        {"short K", [](Sample &s) { s.contents.sections[2].parts.pop_back(); }},
        {"unknown required section",
         [](Sample &s) { s.contents.sections.push_back({static_cast<SectionType>(9), 0, {}}); },
         Status::unsupported},
    };
    for (const Case &c : cases) {
        Sample s;
        c.change(s);
        std::string msg;
        EXPECT_EQ(parse_status(s.encode(), s.shape, &msg), c.want) << c.what;
    }
    {
        // More tokens than n_ctx.
        Sample s(70);
        StateShape small = s.shape;
        std::vector<uint8_t> image = s.encode();
        EXPECT_EQ(parse_status(image, small, nullptr), Status::ok);
        const uint32_t n_ctx = 64;
        std::memcpy(image.data() + 40, &n_ctx, 4);
        fix_checksum(image);
        small.n_ctx = 64;
        EXPECT_EQ(parse_status(image, small), Status::bad_format);
    }
    {
        // Non-zero padding and a section count that disagrees with the payload.
        Sample s;
        std::vector<uint8_t> image = s.encode();
        RawHeader raw;
        ASSERT_TRUE(peek_header(image, raw));
        const uint32_t more = raw.n_sections + 1, fewer = raw.n_sections - 1;
        std::vector<uint8_t> a = image, b = image;
        std::memcpy(a.data() + 60, &more, 4);
        std::memcpy(b.data() + 60, &fewer, 4);
        fix_checksum(a);
        fix_checksum(b);
        EXPECT_EQ(parse_status(a, s.shape), Status::bad_format);
        EXPECT_EQ(parse_status(b, s.shape), Status::bad_format);
        // Tokens section: 5 ids = 20 bytes + 4 bytes padding at offset 80 + 16 + 20.
        std::vector<uint8_t> c = image;
        c[kHeaderSize + kSectionHeaderSize + 20] = 1;
        fix_checksum(c);
        std::string msg;
        EXPECT_EQ(parse_status(c, s.shape, &msg), Status::bad_format);
        EXPECT_NE(msg.find("padding"), std::string::npos) << msg;
    }
}

namespace {

// FileOps that fail one kind of call after a number of bytes or calls.
struct FaultyOps {
    size_t write_budget = SIZE_MAX;  // bytes accepted before writes fail
    int write_errno = ENOSPC;
    bool short_writes = false;       // accept at most 3 bytes per call
    bool fail_fsync = false;
    bool fail_directory_fsync = false;  // only the directory's, after the rename
    bool fail_rename = false;
    int open_directory_errno = 0;       // non-zero: opening the directory fails with it
    size_t written = 0;
    int renames = 0;

    FileOps ops() {
        FileOps o = FileOps::posix();
        o.write = [this](int fd, const void *buf, size_t n) -> long {
            if (short_writes && n > 3) n = 3;
            if (written >= write_budget) {
                errno = write_errno;
                return -1;
            }
            const size_t allowed = std::min(n, write_budget - written);
            const long w = ::write(fd, buf, allowed);
            if (w > 0) written += static_cast<size_t>(w);
            return w;
        };
        o.fsync = [this](int fd) {
            struct stat st {};
            const bool directory = ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
            if (fail_fsync || (fail_directory_fsync && directory)) {
                errno = EIO;
                return -1;
            }
            return ::fsync(fd);
        };
        o.rename = [this](const char *a, const char *b) {
            ++renames;
            if (fail_rename) {
                errno = EXDEV;
                return -1;
            }
            return std::rename(a, b);
        };
        o.open_directory = [this](const char *dir) {
            if (open_directory_errno) {
                errno = open_directory_errno;
                return -1;
            }
            return FileOps::posix().open_directory(dir);
        };
        return o;
    }
};

}  // namespace

TEST(StateFile, DiskFullAtAnyPointKeepsThePreviousFile) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/s.state";
    Sample old_state(5, 1), new_state(9, 2);
    write_state_file(path, old_state.shape, old_state.contents);
    const std::vector<uint8_t> old_bytes = read_bytes(path);
    const size_t new_size = new_state.encode().size();
    for (size_t budget = 0; budget < new_size; budget += 7) {
        FaultyOps faults;
        faults.write_budget = budget;
        std::string msg;
        const Status st = status_of([&] { write_state_file(path, new_state.shape, new_state.contents, faults.ops()); }, &msg);
        ASSERT_EQ(st, Status::io) << budget;
        EXPECT_NE(msg.find("errno 28"), std::string::npos) << msg;
        EXPECT_NE(msg.find(path), std::string::npos) << msg;
        EXPECT_EQ(read_bytes(path), old_bytes) << budget;
        EXPECT_EQ(count_temp_files(dir), 0u) << budget;
    }
}

TEST(StateFile, FailedSyncOrRenameKeepsThePreviousFile) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/s.state";
    Sample old_state(5, 1), new_state(9, 2);
    write_state_file(path, old_state.shape, old_state.contents);
    const std::vector<uint8_t> old_bytes = read_bytes(path);
    for (int which = 0; which < 2; ++which) {
        FaultyOps faults;
        (which == 0 ? faults.fail_fsync : faults.fail_rename) = true;
        EXPECT_EQ(status_of([&] { write_state_file(path, new_state.shape, new_state.contents, faults.ops()); }),
                  Status::io);
        EXPECT_EQ(read_bytes(path), old_bytes);
        EXPECT_EQ(count_temp_files(dir), 0u);
    }
}

// A directory the process may write but not read (mode 0300 for a user
// other than root) cannot be opened for its fsync. That must fail the save
// before the previous file is replaced, not after.
TEST(StateFile, UnopenableDirectoryFailsBeforeAnythingIsRenamed) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/s.state";
    Sample old_state(5, 1), new_state(9, 2);
    write_state_file(path, old_state.shape, old_state.contents);
    const std::vector<uint8_t> old_bytes = read_bytes(path);
    FaultyOps faults;
    faults.open_directory_errno = EACCES;
    std::string msg;
    EXPECT_EQ(status_of([&] { write_state_file(path, new_state.shape, new_state.contents, faults.ops()); }, &msg),
              Status::io);
    EXPECT_NE(msg.find(dir), std::string::npos) << msg;
    EXPECT_NE(msg.find("errno 13"), std::string::npos) << msg;
    EXPECT_EQ(faults.renames, 0);
    EXPECT_EQ(read_bytes(path), old_bytes);
    EXPECT_EQ(count_temp_files(dir), 0u);
}

// Once the rename has put the new file in place, the save has happened: a
// directory fsync that fails afterwards is a warning, not a failed save
// (which would claim the previous file is still there).
TEST(StateFile, FailedDirectorySyncAfterTheRenameIsAWarning) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/s.state";
    Sample old_state(5, 1), new_state(9, 2);
    EXPECT_EQ(write_state_file(path, old_state.shape, old_state.contents), "");
    FaultyOps faults;
    faults.fail_directory_fsync = true;
    std::string warning;
    EXPECT_EQ(status_of([&] { warning = write_state_file(path, new_state.shape, new_state.contents, faults.ops()); }),
              Status::ok);
    EXPECT_NE(warning.find("could not be synced"), std::string::npos) << warning;
    EXPECT_NE(warning.find(dir), std::string::npos) << warning;
    EXPECT_NE(warning.find("errno 5"), std::string::npos) << warning;
    expect_matches(read_state_file(path, new_state.shape), new_state);
    EXPECT_EQ(count_temp_files(dir), 0u);
}

TEST(StateFile, ShortWritesAreResumed) {
    const std::string dir = moe::test::scratch_dir();
    Sample s;
    FaultyOps faults;
    faults.short_writes = true;
    write_state_file(dir + "/s.state", s.shape, s.contents, faults.ops());
    expect_matches(read_state_file(dir + "/s.state", s.shape), s);
}

TEST(StateFile, UnwritableDirectoryIsIoError) {
    Sample s;
    std::string msg;
    EXPECT_EQ(status_of([&] { write_state_file("/nonexistent-dir/x.state", s.shape, s.contents); }, &msg),
              Status::io);
    EXPECT_NE(msg.find("/nonexistent-dir/x.state"), std::string::npos) << msg;
    EXPECT_EQ(status_of([&] { write_state_file("", s.shape, s.contents); }), Status::invalid_argument);
    EXPECT_EQ(status_of([&] { read_state_file("/nonexistent-dir/x.state", s.shape); }), Status::io);
}

// A real size limit (RLIMIT_FSIZE: the kernel refuses writes past it with
// EFBIG) in a child process, so the limit does not leak into other tests.
TEST(StateFile, FileSizeLimitKeepsThePreviousFile) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/s.state";
    Sample old_state(5, 1), big(40, 2, 1024);  // about 1.6 MB
    write_state_file(path, old_state.shape, old_state.contents);
    const std::vector<uint8_t> old_bytes = read_bytes(path);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim {64 * 1024, 64 * 1024};
        setrlimit(RLIMIT_FSIZE, &lim);
        try {
            write_state_file(path, big.shape, big.contents);
            _exit(1);  // should not succeed
        } catch (const moe::Error &e) {
            _exit(e.status() == Status::io && std::strstr(e.what(), "errno 27") ? 0 : 2);
        } catch (...) {
            _exit(3);
        }
    }
    EXPECT_EQ(moe::test::wait_exit_code(pid), 0);
    EXPECT_EQ(read_bytes(path), old_bytes);
    EXPECT_EQ(count_temp_files(dir), 0u);
}

// A child saves two different states in turn as fast as it can; the parent
// kills it with SIGKILL at random moments. Whatever moment the kill lands,
// the file at the path is one complete state or the other.
TEST(StateFile, KillDuringSaveNeverCorruptsTheLastGoodFile) {
    const std::string dir = moe::test::scratch_dir();
    const std::string path = dir + "/k.state";
    const Sample a(40, 1, 256), b(60, 2, 256);  // a few hundred KB each
    write_state_file(path, a.shape, a.contents);
    std::mt19937 rng(12345);
    int killed_mid_save = 0;  // rounds that left a temporary file: the kill hit a save
    for (int round = 0; round < 25; ++round) {
        int ready[2];
        ASSERT_EQ(pipe(ready), 0);
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            close(ready[0]);
            for (uint64_t i = 0;; ++i) {
                const Sample &s = (i % 2) ? a : b;
                try {
                    write_state_file(path, s.shape, s.contents);
                } catch (...) {
                    _exit(2);
                }
                if (i == 0) {
                    (void)!write(ready[1], "x", 1);
                    close(ready[1]);
                }
            }
        }
        close(ready[1]);
        char c;
        (void)!read(ready[0], &c, 1);  // at least one save has completed
        close(ready[0]);
        usleep(std::uniform_int_distribution<int>(0, 20000)(rng));
        kill(pid, SIGKILL);
        int status = 0;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
        killed_mid_save += count_temp_files(dir) > 0;
        for (const auto &e : fs::directory_iterator(dir))
            if (e.path() != fs::path(path)) fs::remove(e.path());
        const LoadedState got = read_state_file(path, a.shape);
        if (got.n_past == a.contents.n_past)
            expect_matches(got, a);
        else
            expect_matches(got, b);
    }
    // How often the kill hit a save in progress depends on the machine; report it.
    RecordProperty("killed_mid_save", killed_mid_save);
    std::printf("kill landed during a save in %d of 25 rounds\n", killed_mid_save);
}
