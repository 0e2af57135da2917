// `sandboxrun repl`: blocks of stdin run as the cells of one session, printed as a notebook
// would, or one JSON object per cell.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "harness.hpp"

using sandboxrun::testing::run_program;
using sandboxrun::testing::TempDir;

namespace {

sandboxrun::testing::Exec repl(const TempDir& d, const std::string& input, const std::string& flags = "") {
  const std::string in = d.write("cells.txt", input);
  return run_program("/bin/sh", {"-c", std::string(SANDBOXRUN_BIN) + " repl " + flags + " --audit-log " + d.path() +
                                           "/audit.log < " + in});
}

}  // namespace

TEST(Repl, BlocksAreCellsThatKeepTheirState) {
  TempDir d;
  auto r = repl(d, "x = 41\nprint('hi')\n\nx + 1\n\ndef f():\n    return 1 / 0\n\nf()\n\nx\n");
  EXPECT_EQ(r.out, "hi\n42\n41\n") << r.err;
  EXPECT_NE(r.err.find("ZeroDivisionError: division by zero"), std::string::npos) << r.err;
  EXPECT_EQ(r.exit_code, 0) << "the last cell's status";
}

TEST(Repl, JsonIsOneObjectPerCell) {
  TempDir d;
  auto r = repl(d, "import os\nname = 'sys' + 'tem'\n\n1 / 0\n\nname\n", "--json --trust trusted");
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> cells;
  for (std::string line; std::getline(lines, line);) cells.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(cells.size(), 3u) << r.out << r.err;
  EXPECT_EQ(cells[0].value("status", ""), "ok");
  EXPECT_EQ(cells[1].value("status", ""), "error");
  EXPECT_EQ(cells[1]["error"].value("ename", ""), "ZeroDivisionError");
  EXPECT_EQ(cells[2]["result"].value("text/plain", ""), "'system'");
  for (const char* k : {"stdout", "stderr", "display", "assessment", "audit_seq", "duration_ms"})
    EXPECT_TRUE(cells[2].contains(k)) << k;
  auto blocked = repl(d, "import os\nname = 'sys' + 'tem'\n\ngetattr(os, name)('id')\n", "--json --trust trusted");
  EXPECT_EQ(blocked.exit_code, 126) << blocked.out << blocked.err;
  EXPECT_NE(blocked.out.find("\"status\":\"blocked\""), std::string::npos) << blocked.out;
}

// Figures and rich objects on the science image: a plot left open and one shown with plt.show()
// come back as PNG display items, a DataFrame as HTML.
TEST(Repl, FiguresAndDataFramesComeBackAsMimeBundles) {
  const bool ci = std::getenv("CI") && std::string(std::getenv("CI")) == "true";
  if (!std::filesystem::exists(sandboxrun::testing::source_dir() + "/rootfs/science/usr")) {
    if (ci) FAIL() << "rootfs/science is missing: CI must build it (scripts/build-image.sh science)";
    GTEST_SKIP() << "rootfs/science is not built (scripts/build-image.sh science); skipped outside CI";
  }
  TempDir d;
  auto r = repl(d,
                "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\n\n"
                "plt.figure(); plt.bar([1, 2], [3, 4]); plt.show()\n\n"
                "import pandas as pd\npd.DataFrame({'a': [1, 2]})\n",
                "--json --trust trusted --image science --svg-figures");
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> cells;
  for (std::string line; std::getline(lines, line);) cells.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(cells.size(), 3u) << r.out << r.err;
  for (int i : {0, 1}) {
    ASSERT_EQ(cells[i]["display"].size(), 1u) << cells[i].dump();
    const std::string png = cells[i]["display"][0].value("image/png", "");
    EXPECT_EQ(png.rfind("iVBORw0KGgo", 0), 0u) << "base64 of a PNG signature: " << png.substr(0, 20);
    EXPECT_GT(png.size(), 1000u);
    EXPECT_NE(cells[i]["display"][0].value("image/svg+xml", "").find("<svg"), std::string::npos) << "--svg-figures";
  }
  EXPECT_NE(cells[2]["result"].value("text/html", "").find("<table"), std::string::npos) << cells[2].dump();
}
