// A process's CPU affinity as this machine has it: read, set for every
// thread, and CPU lists written as Linux writes them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ringlet::topology {

// The CPUs this process may run on (sched_getaffinity), OS indexes ascending.
std::vector<int> process_affinity();

// This machine's online CPUs (/sys/devices/system/cpu/online; where that
// cannot be read, 0 .. the count the C library reports - 1).
std::vector<int> online_cpus();

// Binds every thread of this process to `cpus`, so that threads a framework
// started before (and those started later, which inherit it) all run there.
// Throws an internal common::Failure naming the call and the CPUs.
void bind_process(const std::vector<int>& cpus);

// "0-7,16-23": CPUs (ascending) as Linux lists them; "" for none.
std::string cpu_list_text(const std::vector<int>& cpus);
// The other way, ascending and without repeats; nullopt when malformed.
std::optional<std::vector<int>> parse_cpu_list(const std::string& text);

}  // namespace ringlet::topology
