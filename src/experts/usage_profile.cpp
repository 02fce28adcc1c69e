#include "experts/usage_profile.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/regular_file.hpp"
#include "common/saturating.hpp"
#include "common/unique_fd.hpp"

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

// Holds an exclusive advisory lock, while alive, on the directory a write of
// `path` goes to (symbolic links followed as the write follows them, so
// contexts naming one file through a link and through its path take the same
// lock). Best effort: where the directory cannot be opened or locked, or the
// path cannot be written at all (the save says why), nothing is held.
class DirectoryLock {
public:
    explicit DirectoryLock(const std::string &path) {
        std::string dir;
        try {
            dir = write_place(path).directory;
        } catch (const Error &) {
            return;
        }
        fd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!fd_) return;
        int rc;
        do rc = ::flock(fd_.get(), LOCK_EX);
        while (rc != 0 && errno == EINTR);
    }

private:
    UniqueFd fd_;  // closing it releases the lock
};
}  // namespace

std::optional<UsageProfile> load_usage_profile(const std::string &path, uint64_t model_fingerprint,
                                               uint32_t n_layer, uint32_t n_expert, std::string *why,
                                               ProfileLoadFailure *failure) {
    auto reject = [&](ProfileLoadFailure kind, const std::string &reason) -> std::optional<UsageProfile> {
        if (why) *why = path + ": " + reason;
        if (failure) *failure = kind;
        return std::nullopt;
    };
    auto unusable = [&](const std::string &reason) { return reject(ProfileLoadFailure::unusable, reason); };
    if (failure) *failure = ProfileLoadFailure::none;
    int err = 0;
    const FilePtr file = open_regular_file(path, err);
    if (!file)
        return reject(err == ENOENT ? ProfileLoadFailure::absent : ProfileLoadFailure::unreadable,
                      err ? std::string("cannot open: ") + std::strerror(err) : "not a plain file");
    // A read that fails (rather than ending early) says nothing about the contents.
    auto short_read = [&](const char *what) {
        return std::ferror(file.get()) ? reject(ProfileLoadFailure::unreadable,
                                                std::string("cannot read: ") + std::strerror(errno))
                                       : unusable(what);
    };
    Header h{};
    if (std::fread(&h, sizeof h, 1, file.get()) != 1) return short_read("truncated header");
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return unusable("not a usage profile");
    if (h.version != kVersion) return unusable(format("unsupported version %u", h.version));
    if (h.fingerprint != model_fingerprint) return unusable("written for another model");
    if (h.n_layer != n_layer || h.n_expert != n_expert)
        return unusable(format("shape %ux%u does not match the model's %ux%u", h.n_layer, h.n_expert, n_layer,
                               n_expert));
    UsageProfile p;
    p.n_layer = n_layer;
    p.n_expert = n_expert;
    p.counts.resize(uint64_t(n_layer) * n_expert);
    if (std::fread(p.counts.data(), sizeof(uint64_t), p.counts.size(), file.get()) != p.counts.size())
        return short_read("truncated counts");
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

void add_to_usage_profile(const std::string &path, uint64_t model_fingerprint, const UsageProfile &run,
                          const UsageProfile *opened) {
    const DirectoryLock lock(path);
    std::string why;
    ProfileLoadFailure failure = ProfileLoadFailure::none;
    std::optional<UsageProfile> now =
        load_usage_profile(path, model_fingerprint, run.n_layer, run.n_expert, &why, &failure);
    if (failure == ProfileLoadFailure::unreadable) fail(Status::io, "%s; left as it is", why.c_str());
    UsageProfile sum = run;
    const UsageProfile *base = now ? &*now : opened;
    if (base && base->counts.size() == sum.counts.size())
        for (size_t i = 0; i < sum.counts.size(); ++i)
            sum.counts[i] = sat_add(sum.counts[i], base->counts[i]);  // a wrapped count would turn cold
    save_usage_profile(path, model_fingerprint, sum);
}

}  // namespace moe
