// Whether huge pages can be had is read from the kernel's THP mode, because
// madvise(MADV_HUGEPAGE) succeeds even when the mode is "never".
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <filesystem>
#include <fstream>

#include "common/huge_pages.hpp"
#include "support/paths.hpp"

namespace {

using moe::ThpMode;

void write_file(const std::filesystem::path &path, const char *text) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

TEST(HugePages, TheSelectedModeIsTheBracketedOne) {
    EXPECT_EQ(moe::parse_thp_mode("always [madvise] never\n"), ThpMode::madvise);
    EXPECT_EQ(moe::parse_thp_mode("[always] madvise never\n"), ThpMode::always);
    EXPECT_EQ(moe::parse_thp_mode("always madvise [never]\n"), ThpMode::never);
    EXPECT_EQ(moe::parse_thp_mode("always [inherit] madvise never\n"), ThpMode::inherit);
    EXPECT_EQ(moe::parse_thp_mode("always madvise never"), ThpMode::unknown);
    EXPECT_EQ(moe::parse_thp_mode("[sometimes]"), ThpMode::unknown);
    EXPECT_EQ(moe::parse_thp_mode("never [always"), ThpMode::unknown);
    EXPECT_EQ(moe::parse_thp_mode(""), ThpMode::unknown);
}

TEST(HugePages, ThePerSizeSettingWinsUnlessItInherits) {
    const std::filesystem::path dir = moe::test::scratch_dir();
    EXPECT_EQ(moe::read_thp_mode((dir / "absent").string()), ThpMode::unknown);

    write_file(dir / "global" / "enabled", "always madvise [never]\n");
    EXPECT_EQ(moe::read_thp_mode((dir / "global").string()), ThpMode::never);

    write_file(dir / "inherits" / "enabled", "always madvise [never]\n");
    write_file(dir / "inherits" / "hugepages-2048kB" / "enabled", "always [inherit] madvise never\n");
    EXPECT_EQ(moe::read_thp_mode((dir / "inherits").string()), ThpMode::never);

    write_file(dir / "own" / "enabled", "always madvise [never]\n");
    write_file(dir / "own" / "hugepages-2048kB" / "enabled", "always inherit [madvise] never\n");
    EXPECT_EQ(moe::read_thp_mode((dir / "own").string()), ThpMode::madvise);

    write_file(dir / "off" / "enabled", "[always] madvise never\n");
    write_file(dir / "off" / "hugepages-2048kB" / "enabled", "always inherit madvise [never]\n");
    EXPECT_EQ(moe::read_thp_mode((dir / "off").string()), ThpMode::never);
}

TEST(HugePages, NeverMeansNoHugePagesWhateverMadviseSays) {
    const size_t len = size_t{4} << 20;
    void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_FALSE(moe::advise_huge_pages(p, len, ThpMode::never));
    EXPECT_FALSE(moe::advise_huge_pages(nullptr, len, ThpMode::always));
#ifdef MADV_HUGEPAGE
    // Where the kernel takes the advice (THP built in), the other modes report it.
    const bool kernel_takes_it = ::madvise(p, len, MADV_HUGEPAGE) == 0;
    EXPECT_EQ(moe::advise_huge_pages(p, len, ThpMode::madvise), kernel_takes_it);
    EXPECT_EQ(moe::advise_huge_pages(p, len, ThpMode::unknown), kernel_takes_it);
#endif
    ::munmap(p, len);
}

}  // namespace
