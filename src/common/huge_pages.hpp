// Transparent huge pages asked for with madvise(MADV_HUGEPAGE). The kernel
// accepts the advice even when its THP mode is "never" and then backs the
// range with 4 KiB pages, so whether huge pages can be had is read from the
// mode, not from madvise's return value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace moe {

enum class ThpMode { always, madvise, never, inherit, unknown };

// The selected mode in the text of a THP "enabled" file ("always [madvise]
// never"); unknown when none is selected.
ThpMode parse_thp_mode(std::string_view sysfs_text);
// The mode that applies to 2 MiB pages under `thp_dir`: the per-size setting
// (hugepages-2048kB/enabled) unless it is absent or "inherit", else the
// global one; unknown where neither can be read (no THP support, or a
// sandbox that hides /sys).
ThpMode read_thp_mode(const std::string &thp_dir);
// This machine's mode, read once (an administrator's setting, seldom changed).
ThpMode thp_mode();

// Asks for huge pages over [data, data + len). True when the kernel took the
// advice and `mode` lets it act on it (always or madvise; unknown trusts the
// kernel's answer); false where huge pages cannot be had.
bool advise_huge_pages(void *data, size_t len, ThpMode mode);
inline bool advise_huge_pages(void *data, size_t len) { return advise_huge_pages(data, len, thp_mode()); }

}  // namespace moe
