#include "experts/usage_profile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace moe {

namespace {
constexpr char kMagic[8] = {'M', 'O', 'E', 'U', 'S', 'A', 'G', 'E'};
constexpr uint32_t kVersion = 1;

struct Header {
    char magic[8];
    uint32_t version;
    uint32_t n_layer;
    uint32_t n_expert;
    uint32_t reserved;
    uint64_t fingerprint;
};
static_assert(sizeof(Header) == 32);

// Owns a FILE* for the duration of a load.
struct FileCloser {
    FILE *f;
    ~FileCloser() {
        if (f) std::fclose(f);
    }
};
}  // namespace

std::optional<UsageProfile> load_usage_profile(const std::string &path, uint64_t model_fingerprint,
                                               uint32_t n_layer, uint32_t n_expert, std::string *why) {
    auto reject = [&](const std::string &reason) -> std::optional<UsageProfile> {
        if (why) *why = path + ": " + reason;
        return std::nullopt;
    };
    // O_NONBLOCK: opening a pipe for reading would wait for a writer, and
    // hang the open of the context, before fstat could tell it is no file.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return reject(std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return reject("not a plain file");
    }
    FileCloser file{::fdopen(fd, "rb")};
    if (!file.f) {
        ::close(fd);
        return reject(std::string("cannot open: ") + std::strerror(errno));
    }
    Header h{};
    if (std::fread(&h, sizeof h, 1, file.f) != 1) return reject("truncated header");
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return reject("not a usage profile");
    if (h.version != kVersion) return reject(format("unsupported version %u", h.version));
    if (h.fingerprint != model_fingerprint) return reject("written for another model");
    if (h.n_layer != n_layer || h.n_expert != n_expert)
        return reject(format("shape %ux%u does not match the model's %ux%u", h.n_layer, h.n_expert, n_layer,
                             n_expert));
    UsageProfile p;
    p.n_layer = n_layer;
    p.n_expert = n_expert;
    p.counts.resize(uint64_t(n_layer) * n_expert);
    if (std::fread(p.counts.data(), sizeof(uint64_t), p.counts.size(), file.f) != p.counts.size())
        return reject("truncated counts");
    return p;
}

void save_usage_profile(const std::string &path, uint64_t model_fingerprint, const UsageProfile &profile) {
    if (profile.counts.size() != uint64_t(profile.n_layer) * profile.n_expert)
        fail(Status::internal, "usage profile has %zu counts for %ux%u keys", profile.counts.size(),
             profile.n_layer, profile.n_expert);
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.version = kVersion;
    h.n_layer = profile.n_layer;
    h.n_expert = profile.n_expert;
    h.fingerprint = model_fingerprint;
    AtomicFile file(path);
    file.write(&h, sizeof h);
    file.write(profile.counts.data(), profile.counts.size() * sizeof(uint64_t));
    file.commit();  // a directory sync that fails is no loss: the profile is only a hint
}

}  // namespace moe
