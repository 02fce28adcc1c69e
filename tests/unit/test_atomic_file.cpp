// AtomicFile: the target holds its old contents or the whole new file, no
// temporary outlives its writer (not even one killed while writing, where
// unnamed temporaries are supported), writers never share a temporary, and
// the file gets the mode a plain create would give it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "support/child_process.hpp"
#include "support/paths.hpp"
#include "support/status_of.hpp"

namespace fs = std::filesystem;
using moe::AtomicFile;
using moe::Status;
using moe::test::status_of;

namespace {

std::string read_text(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void write_text(const std::string &path, const std::string &text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<std::string> names_in(const std::string &dir) {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    return names;
}

void put(AtomicFile &f, const std::string &text) { f.write(text.data(), text.size()); }

// The system calls of a system without unnamed files (no O_TMPFILE): the
// temporary is named from the start.
moe::FileOps named_temporaries() {
    moe::FileOps ops = moe::FileOps::posix();
    ops.open_unnamed = [](int, unsigned) {
        errno = EOPNOTSUPP;
        return -1;
    };
    return ops;
}

// Whether this system and the file system of `dir` have unnamed files that
// can be linked later (O_TMPFILE and /proc/self/fd).
bool unnamed_temporaries_work(const std::string &dir) {
#ifdef O_TMPFILE
    const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
    return ::access("/proc/self/fd", X_OK) == 0;
#else
    (void)dir;
    return false;
#endif
}

}  // namespace

TEST(AtomicFile, CommitPublishesTheWholeFile) {
    const std::string dir = moe::test::scratch_dir(), target = dir + "/out.bin";
    write_text(target, "old contents");
    AtomicFile f(target);
    put(f, "new ");
    const char tail[] = "CONTENTS, longer than the old";
    f.write_at(tail, sizeof tail - 1, 4);
    EXPECT_EQ(read_text(target), "old contents");  // nothing shows before commit()
    f.commit();
    EXPECT_EQ(read_text(target), "new CONTENTS, longer than the old");
    EXPECT_EQ(names_in(dir), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, WithoutCommitTheTargetIsUntouchedAndNoTemporaryStays) {
    for (const bool named : {false, true}) {
        const std::string dir = moe::test::scratch_dir();
        const moe::FileOps ops = named ? named_temporaries() : moe::FileOps::posix();
        write_text(dir + "/old.bin", "old");
        {
            AtomicFile replacing(dir + "/old.bin", ops), creating(dir + "/new.bin", ops);
            put(replacing, "partial");
            put(creating, "partial");
            if (named) EXPECT_EQ(names_in(dir).size(), 3u);  // the target and two temporaries
        }  // destroyed as an exception would unwind them
        EXPECT_EQ(read_text(dir + "/old.bin"), "old");
        EXPECT_EQ(names_in(dir), std::vector<std::string>{"old.bin"});
    }
}

// A writer that ends without unwinding, as Ctrl-C (SIGINT) or SIGKILL ends
// a command, leaves no temporary: it had no name yet.
TEST(AtomicFile, AWriterKilledBeforeCommitLeavesNothingBehind) {
    const std::string dir = moe::test::scratch_dir();
    if (!unnamed_temporaries_work(dir)) GTEST_SKIP() << "no O_TMPFILE here: the temporary is named";
    write_text(dir + "/old.bin", "old");
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        try {
            AtomicFile replacing(dir + "/old.bin"), creating(dir + "/new.bin");
            put(replacing, "partial");
            put(creating, "partial");
            ::_exit(0);  // no destructor runs
        } catch (...) {
        }
        ::_exit(1);
    }
    ASSERT_EQ(moe::test::wait_exit_code(pid), 0);
    EXPECT_EQ(read_text(dir + "/old.bin"), "old");
    EXPECT_EQ(names_in(dir), std::vector<std::string>{"old.bin"});
}

// Both kinds of temporary publish the same file and leave nothing behind.
TEST(AtomicFile, ANamedTemporaryIsTheFallbackWithoutUnnamedFiles) {
    const std::string dir = moe::test::scratch_dir(), target = dir + "/out.bin";
    write_text(target, "old");
    AtomicFile f(target, named_temporaries());
    put(f, "new");
    EXPECT_EQ(names_in(dir).size(), 2u);
    f.commit();
    EXPECT_EQ(read_text(target), "new");
    EXPECT_EQ(names_in(dir), std::vector<std::string>{"out.bin"});
}

// A name of the longest a directory entry allows (255 bytes) is written
// like any other, with both kinds of temporary: the temporary's own name,
// longer by its prefix and suffix, must not be what refuses it.
TEST(AtomicFile, ATargetNameAtTheEntryLimitIsWritten) {
    for (const bool named : {false, true}) {
        SCOPED_TRACE(named ? "named temporary" : "unnamed temporary");
        const std::string dir = moe::test::scratch_dir(), name(255, 'n'), target = dir + "/" + name;
        AtomicFile f(target, named ? named_temporaries() : moe::FileOps::posix());
        put(f, "new");
        f.commit();
        EXPECT_EQ(read_text(target), "new");
        EXPECT_EQ(names_in(dir), std::vector<std::string>{name});
    }
}

TEST(AtomicFile, TwoWritersForOneTargetDoNotShareATemporary) {
    for (const bool named : {false, true}) {
        const std::string dir = moe::test::scratch_dir(), target = dir + "/t.bin";
        const moe::FileOps ops = named ? named_temporaries() : moe::FileOps::posix();
        AtomicFile a(target, ops), b(target, ops);
        if (named) EXPECT_EQ(names_in(dir).size(), 2u);
        put(a, "written by a, the longer of the two");
        put(b, "by b");
        a.commit();
        EXPECT_EQ(read_text(target), "written by a, the longer of the two");
        b.commit();
        EXPECT_EQ(read_text(target), "by b");  // the last commit wins, whole
        EXPECT_EQ(names_in(dir), std::vector<std::string>{"t.bin"});
    }
}

TEST(AtomicFile, ModeFollowsTheUmask) {
    const std::string dir = moe::test::scratch_dir();
    const mode_t saved = ::umask(0);
    for (const mode_t mask : {mode_t(022), mode_t(027), mode_t(002), mode_t(077)}) {
        ::umask(mask);
        const std::string target = dir + "/m" + std::to_string(mask);
        AtomicFile f(target);
        f.commit();
        struct stat st {};
        EXPECT_EQ(::stat(target.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask) << std::oct << mask;
    }
    ::umask(saved);
}

TEST(AtomicFile, APrivateModeStaysPrivate) {
    const std::string target = moe::test::scratch_dir() + "/private.bin";
    const mode_t saved = ::umask(002);
    AtomicFile f(target, moe::FileOps::posix(), 0600);
    f.commit();
    ::umask(saved);
    struct stat st {};
    ASSERT_EQ(::stat(target.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A rename over a symbolic link would replace the link (as root, /dev/stdout
// itself): the file it points at is replaced instead, and the link stays.
TEST(AtomicFile, ASymbolicLinkIsFollowedAndStaysALink) {
    const std::string dir = moe::test::scratch_dir();
    fs::create_directory(dir + "/real");
    write_text(dir + "/real/file.bin", "old");
    fs::create_symlink("real/file.bin", dir + "/link.bin");
    AtomicFile f(dir + "/link.bin");
    put(f, "new");
    f.commit();
    EXPECT_TRUE(fs::is_symlink(dir + "/link.bin"));
    EXPECT_EQ(read_text(dir + "/real/file.bin"), "new");
    EXPECT_EQ(names_in(dir + "/real"), std::vector<std::string>{"file.bin"});
}

// write_place names the directory the write goes to, the linked file's for a
// link (the one a lock serialising writers of the file must take), and
// refuses what the constructor refuses.
TEST(AtomicFile, WritePlaceIsTheDirectoryOfTheFileReplaced) {
    const std::string dir = moe::test::scratch_dir();
    fs::create_directory(dir + "/real");
    write_text(dir + "/real/file.bin", "old");
    fs::create_symlink(dir + "/real/file.bin", dir + "/link.bin");
    const moe::WritePlace linked = moe::write_place(dir + "/link.bin");
    EXPECT_TRUE(fs::equivalent(linked.file, dir + "/real/file.bin")) << linked.file;
    EXPECT_TRUE(fs::equivalent(linked.directory, dir + "/real")) << linked.directory;
    EXPECT_EQ(moe::write_place(dir + "/new.bin").directory, dir);
    EXPECT_EQ(moe::write_place("bare.bin").directory, ".");
    EXPECT_EQ(status_of([&] { moe::write_place(dir + "/"); }), Status::invalid_argument);
}

// What a rename cannot replace without destroying it is refused before
// anything is written: a pipe, a device, a directory, a dangling link.
TEST(AtomicFile, TargetsThatAreNotPlainFilesAreRefused) {
    const std::string dir = moe::test::scratch_dir();
    ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
    fs::create_directory(dir + "/sub");
    fs::create_symlink("nowhere/file.bin", dir + "/dangling");
    for (const std::string target : {dir + "/fifo", dir + "/sub", dir + "/dangling", std::string("/dev/null")}) {
        std::string message;
        EXPECT_EQ(status_of([&] { AtomicFile f(target); }, &message), Status::invalid_argument) << target;
        EXPECT_NE(message.find(target), std::string::npos) << message;
    }
    EXPECT_TRUE(fs::is_symlink(dir + "/dangling"));
    EXPECT_TRUE(fs::is_fifo(dir + "/fifo"));
    EXPECT_EQ(names_in(dir).size(), 3u);
}

// A sync or rename that fails is reported with the path and the system's
// reason, and the old target stays (the last step before the rename).
TEST(AtomicFile, FailedSyncOrRenameReportsTheErrorAndKeepsTheOldTarget) {
    const std::string dir = moe::test::scratch_dir(), target = dir + "/keep.bin";
    write_text(target, "old");
    for (const int step : {0, 1, 2, 3}) {
        const bool fail_rename = step & 1;
        moe::FileOps ops = step & 2 ? named_temporaries() : moe::FileOps::posix();
        const int err = fail_rename ? EXDEV : EIO;
        auto failing = [err](auto...) {
            errno = err;
            return -1;
        };
        if (fail_rename)
            ops.rename = failing;
        else
            ops.fsync = failing;
        std::string message;
        EXPECT_EQ(status_of(
                      [&] {
                          AtomicFile f(target, ops);
                          put(f, "new");
                          f.commit();
                      },
                      &message),
                  Status::io);
        EXPECT_NE(message.find(target), std::string::npos) << message;
        EXPECT_NE(message.find(std::strerror(err)), std::string::npos) << message;
        EXPECT_EQ(read_text(target), "old");
        EXPECT_EQ(names_in(dir), std::vector<std::string>{"keep.bin"});
    }
}

TEST(AtomicFile, APathWithoutAFileOrADirectoryIsRefused) {
    std::string message;
    EXPECT_EQ(status_of([] { AtomicFile f(""); }), Status::invalid_argument);
    EXPECT_EQ(status_of([&] { AtomicFile f(moe::test::scratch_dir() + "/"); }), Status::invalid_argument);
    EXPECT_EQ(status_of([&] { AtomicFile f("/nonexistent-dir/x.bin"); }, &message), Status::io);
    EXPECT_NE(message.find("/nonexistent-dir/x.bin"), std::string::npos) << message;
}
