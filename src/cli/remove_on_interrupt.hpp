// The CLI's own temporary files (PendingOutput) have names, unlike the
// library's: a command ended by Ctrl-C (SIGINT), SIGTERM or SIGHUP would leave
// them behind. A registered path is removed by the signal's handler, which
// then ends the process with the signal as before.
#pragma once

#include <signal.h>

#include <string>

namespace cli {

class RemoveOnInterrupt {
public:
    // Registers `path` (best effort: a path longer than PATH_MAX, or more
    // than a few at once, is not registered). A signal that was ignored when
    // the first path was registered stays ignored.
    explicit RemoveOnInterrupt(const std::string &path);
    ~RemoveOnInterrupt();
    RemoveOnInterrupt(const RemoveOnInterrupt &) = delete;
    RemoveOnInterrupt &operator=(const RemoveOnInterrupt &) = delete;

private:
    int slot_ = -1;
};

// Holds SIGINT, SIGTERM and SIGHUP back on this thread while in scope: a file
// created and registered inside is never left by a signal that came between.
class InterruptsHeld {
public:
    InterruptsHeld();
    ~InterruptsHeld();
    InterruptsHeld(const InterruptsHeld &) = delete;
    InterruptsHeld &operator=(const InterruptsHeld &) = delete;

private:
    sigset_t saved_;
};

}  // namespace cli
