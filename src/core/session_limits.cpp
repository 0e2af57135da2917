#include "sandboxrun/session_limits.hpp"

#include "sandboxrun/error.hpp"

namespace sandboxrun {

void check_session_limits(const SandboxConfig& cfg, size_t open, size_t open_for_caller, const std::string& caller,
                          const std::string& close_hint) {
  const SessionSettings& s = cfg.sessions;
  if (open >= s.max)
    throw Error(std::to_string(open) + " sessions are open, sessions.max in " + cfg.file.string() + " allows " +
                    std::to_string(s.max),
                close_hint + ", or raise sessions.max")
        .as(ErrorKind::limits);
  if (open_for_caller >= s.max_per_caller)
    throw Error(std::to_string(open_for_caller) + " sessions are open for " +
                    (caller.empty() ? "callers without --caller" : caller) + ", sessions.max_per_caller in " +
                    cfg.file.string() + " allows " + std::to_string(s.max_per_caller),
                close_hint + ", or raise sessions.max_per_caller")
        .as(ErrorKind::limits);
}

}  // namespace sandboxrun
