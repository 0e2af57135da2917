// What the library's session tests share: an Executor on a test config and audit log, and
// sessions bounded so that a hang shows as a lost session, not a hung test.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "harness.hpp"
#include "sandboxrun/executor.hpp"

namespace sandboxrun::testing {

struct SessionFixture : ::testing::Test {
  TempDir d;
  std::string log = d.path() + "/audit.log";
  Executor ex = Executor::open({.config = write_config(d), .audit_log = log});
  Session open(Trust t = Trust::untrusted) {
    SessionRequest req;
    req.trust = t;
    req.lifetime_s = 120;
    req.idle_timeout_s = 120;
    return ex.open_session(req);
  }
};

}  // namespace sandboxrun::testing
