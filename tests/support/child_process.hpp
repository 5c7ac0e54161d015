#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace wgsl_forge::testing {

// Starts `/bin/sh -c COMMAND` as a child process (the tests give it `exec wgsl-forge ...` with
// its output redirected to files) and returns its pid.
pid_t start_shell(const std::string& command);

// The child's exit code, or 128 + its signal; a child still running after `limit` is killed and
// gives -1, so that a test of real processes never hangs.
int finish_child(pid_t child, std::chrono::seconds limit = std::chrono::seconds(300));

}  // namespace wgsl_forge::testing
