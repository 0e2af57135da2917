#pragma once

#include <string>
#include <vector>

namespace sandboxrun::cli {

// `sandboxrun [run] ...`; argv0 wipe range is used to hide the caller's command line from the
// sandbox's /proc/1/cmdline.
int run_command(const std::vector<std::string>& args, char* wipe_begin, char* wipe_end);
int doctor_command(const std::vector<std::string>& args);
std::string new_run_id();

}  // namespace sandboxrun::cli
