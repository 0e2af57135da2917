// sandboxrun-mcp-http: `sandboxrun mcp --http ...` runs this with the same arguments. It is the
// one binary that links the HTTP library (and, through it, libssl): the sandboxrun command that
// every run starts stays without them.
#include <string>
#include <vector>

#include "cli.hpp"
#include "sandboxrun/mcp.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return sandboxrun::cli::mcp_command(args, SANDBOXRUN_VERSION, &sandboxrun::mcp::serve_http);
}
