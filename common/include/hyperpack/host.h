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
// A TCP port the kernel just had free on loopback (29500 if it would not say), for a rendezvous.
// Another process could take it before it is bound; the rendezvous then fails with a clear error
// rather than joining a stranger.
int FreeLoopbackPort();

}  // namespace hyperpack
