// cutline: the command-line tool. Subcommands live in tools/<name>/ and are compiled in when
// present (CUTLINE_TOOL_<NAME> is defined by tools/CMakeLists.txt).
#include <cstdio>
#include <cstring>
#include <string_view>

namespace cutline::tools {
int run_policy(int argc, char** argv);
int run_probe(int argc, char** argv);
int run_model(int argc, char** argv);
}  // namespace cutline::tools

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int, char**);
};

constexpr Command kCommands[] = {
#ifdef CUTLINE_TOOL_POLICY
    {"policy", "check FILE | explain FILE --request REQ.json: validate and explain a policy",
     cutline::tools::run_policy},
#endif
#ifdef CUTLINE_TOOL_PROBE
    {"probe", "load | switch: measure why answers get shorter and TTFT grows",
     cutline::tools::run_probe},
#endif
#ifdef CUTLINE_TOOL_MODEL
    {"model", "synth --out FILE: write the deterministic tiny Llama GGUF",
     cutline::tools::run_model},
#endif
    {nullptr, nullptr, nullptr},
};

int usage(FILE* out) {
  std::fprintf(out, "usage: cutline <command> [args]\n\ncommands:\n");
  for (const Command* c = kCommands; c->name; ++c) {
    std::fprintf(out, "  %-8s %s\n", c->name, c->summary);
  }
  return out == stderr ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  std::string_view cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(stdout);
  for (const Command* c = kCommands; c->name; ++c) {
    if (cmd == c->name) return c->run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "cutline: unknown command '%s'\n", argv[1]);
  return usage(stderr);
}
