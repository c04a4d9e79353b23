// Facts about this machine and its processes.
// Thread-safety: pure functions over the system.
#pragma once

#include <cstdint>
#include <string>

namespace hyperpack {

// This machine's host name.
std::string HostName();
// True when a process with this pid exists on this machine.
bool ProcessAlive(int64_t pid);
// Seconds since the epoch, wall clock.
double WallNow();
// "2026-11-22 14:03:05" in local time.
std::string FormatTimestamp(double seconds_since_epoch);

}  // namespace hyperpack
