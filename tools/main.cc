// cutline: the command-line tool. Subcommands live in tools/<name>/ and are compiled in when
// present (CUTLINE_TOOL_<NAME> is defined by tools/CMakeLists.txt). Each one parses its own
// arguments with cutline/cli (`cutline <command> --help`); this file only picks the command and
// answers `cutline --help` / `cutline --version`.
#include <cstdio>
#include <string>
#include <string_view>

#include "cutline/cli/cli.h"

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
    {"policy",
     "Validate, explain, compare and propose policies (check, explain, diff, advise, schema)",
     cutline::tools::run_policy},
#endif
#ifdef CUTLINE_TOOL_PROBE
    {"probe", "Measure why answers get shorter and TTFT grows (load, switch)",
     cutline::tools::run_probe},
#endif
#ifdef CUTLINE_TOOL_MODEL
    {"model", "Write the deterministic tiny Llama GGUF, or describe a GGUF file (synth, info)",
     cutline::tools::run_model},
#endif
    {nullptr, nullptr, nullptr},
};

}  // namespace

int main(int argc, char** argv) {
  namespace cli = cutline::cli;
  if (argc >= 2) {
    for (const Command* c = kCommands; c->name; ++c) {
      if (std::string_view(argv[1]) == c->name) return c->run(argc - 1, argv + 1);
    }
    if (argv[1][0] != '-') {
      std::fprintf(stderr, "cutline: unknown command '%s' (see cutline --help)\n", argv[1]);
      return cli::kExitUsage;
    }
  }
  // No command, --help, --version, or something unknown: the root parser answers.
  auto app = cli::make_app("cutline", "Cutline's command-line tool.",
                           "Exit status: 0 ok, 1 runtime failure, 2 usage error, 3 the probe "
                           "found a serving defect, 4 policy explain: no rule matches the "
                           "request.");
  for (const Command* c = kCommands; c->name; ++c) app->add_subcommand(c->name, c->summary);
  app->require_subcommand(1);
  if (auto rc = cli::parse(*app, argc, argv)) return *rc;
  return cli::kExitUsage;  // unreachable: a known command was dispatched above
}
