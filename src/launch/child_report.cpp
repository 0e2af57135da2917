#include <unistd.h>

#include <cstring>

#include "child_plan.hpp"
#include "sandboxrun/fd.hpp"

namespace sandboxrun::launch {

void report_error(const ChildPlan& plan, const char* stage, int err, const char* detail) noexcept {
  ChildError e{};
  std::strncpy(e.stage, stage, sizeof e.stage - 1);
  e.err = err;
  if (detail) std::strncpy(e.detail, detail, sizeof e.detail - 1);
  write_all(plan.error_write, &e, sizeof e);
}

void report_degradation(const ChildPlan& plan, const char* what, int err) noexcept {
  ChildError e{};
  std::strncpy(e.detail, what, sizeof e.detail - 1);
  e.err = err;
  e.degraded = 1;
  write_all(plan.error_write, &e, sizeof e);
}

}  // namespace sandboxrun::launch
