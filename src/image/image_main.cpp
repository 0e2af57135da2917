// sandboxrun-image: `sandboxrun image ...` as a standalone binary (benchmarks, build scripts).
// A leading "image" word is accepted, so it can stand in for the main binary.
#include <string>
#include <vector>

#include "image/image.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == "image") args.erase(args.begin());
  return sandboxrun::image::image_command(args);
}
