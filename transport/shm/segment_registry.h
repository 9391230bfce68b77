// Names of shared-memory segments this process created and has not unlinked
// yet. Segments are unlinked as soon as every peer has mapped them; until then
// a SIGINT/SIGTERM or a normal exit() in the middle of set-up would leave them
// in /dev/shm. The registry unlinks them from a signal handler (then chains to
// the previous one) and from atexit; the handler does only async-signal-safe
// work (unlink(2) of paths computed at registration). SIGKILL cannot be caught: the window
// between create and unlink is kept short instead.
#pragma once

namespace ringlet::transport::shm {

// Remember `name` (as given to shm_open) for cleanup. Installs the handlers on
// first use. Silently best-effort when more than a few dozen are open at once.
void register_segment(const char* name);
// The segment was unlinked (or handed over): forget it.
void forget_segment(const char* name);

}  // namespace ringlet::transport::shm
