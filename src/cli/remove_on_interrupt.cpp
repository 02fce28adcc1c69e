#include "remove_on_interrupt.hpp"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>

namespace cli {
namespace {

// Fixed storage: the handler may only read memory nothing frees under it.
struct Slot {
    std::atomic<bool> claimed{false};
    std::atomic<bool> armed{false};  // path is complete
    char path[PATH_MAX];
};
Slot g_slots[4];

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_and_reraise(int sig) {
    const int saved = errno;
    for (Slot &s : g_slots)
        if (s.armed.load(std::memory_order_acquire)) ::unlink(s.path);
    errno = saved;
    // The default action, delivered when the handler returns: the process
    // ends by the signal, as its parent expects.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

sigset_t interrupt_signals() {
    sigset_t set;
    ::sigemptyset(&set);
    for (const int sig : kSignals) ::sigaddset(&set, sig);
    return set;
}

void install_handlers_once() {
    static const bool installed = [] {
        for (const int sig : kSignals) {
            struct sigaction old {};
            if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // ignored: keep it so
            struct sigaction sa {};
            sa.sa_handler = remove_and_reraise;
            sa.sa_mask = interrupt_signals();
            ::sigaction(sig, &sa, nullptr);
        }
        return true;
    }();
    (void)installed;
}

}  // namespace

RemoveOnInterrupt::RemoveOnInterrupt(const std::string &path) {
    if (path.empty() || path.size() >= PATH_MAX) return;
    install_handlers_once();
    for (int i = 0; i < int(std::size(g_slots)); ++i) {
        bool expected = false;
        if (!g_slots[i].claimed.compare_exchange_strong(expected, true)) continue;
        std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
        g_slots[i].armed.store(true, std::memory_order_release);
        slot_ = i;
        return;
    }
}

InterruptsHeld::InterruptsHeld() {
    const sigset_t set = interrupt_signals();
    ::pthread_sigmask(SIG_BLOCK, &set, &saved_);
}

InterruptsHeld::~InterruptsHeld() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

RemoveOnInterrupt::~RemoveOnInterrupt() {
    if (slot_ < 0) return;
    g_slots[slot_].armed.store(false, std::memory_order_release);
    g_slots[slot_].claimed.store(false, std::memory_order_release);
}

}  // namespace cli
