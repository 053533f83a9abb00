// Programs the sweep runs in a fresh process: itself (an autoscheduler's
// candidate, a callgrind count), the cross compiler and qemu (ARM).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace msda_sweep {

struct ChildResult {
    int status = 0;  // the exit status, or 128 + the signal that ended it
    std::string output, errors;  // its standard output, and the end of its errors
};
// Runs words[0] (looked up in PATH) with the rest as arguments, its output
// and errors into files under `folder`, with `environment` set; one that
// runs past `time_limit_seconds` (0: none) is ended by SIGALRM, and one
// that asks for more than `memory_limit_bytes` of address space (0: none)
// is refused it.
ChildResult run_child(const std::vector<std::string> &words, const std::string &folder,
                      const std::vector<std::pair<std::string, std::string>> &environment = {},
                      unsigned time_limit_seconds = 0, unsigned long long memory_limit_bytes = 0);

}  // namespace msda_sweep
