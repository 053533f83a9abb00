// The generated code's scratch memory: what Halide's schedules allocate
// inside a call (halide_malloc: a tile's corner table, a run of
// grad_output rows, a task's partial sums), kept in a process-wide pool
// instead of going back to the C heap after every task.
//
// So once calls of the same sizes have run, a call allocates nothing on
// the heap unless more of its tasks run at once than ever before: the plan
// and workspace API's promise (Plan, README). The pool keeps at most
// kScratchSlots blocks (the largest ones) until release_scratch.
#pragma once

#include <cstddef>

namespace msda::detail {

constexpr int kScratchSlots = 1024;

// Makes the Halide runtime allocate through the caches (once per process;
// install_error_handler calls it).
void install_scratch_allocator();

// Frees the kept blocks (blocks lent to a running call stay lent); returns
// how many bytes they held.
std::size_t release_scratch();

}  // namespace msda::detail
