#pragma once
// The command-line layer of every Cutline binary (cutline-gateway, cutline-backend, cutline and
// its subcommands), on CLI11. A binary builds a CLI::App with make_app(), declares its options
// (durations and sizes through add_duration() / add_size(), which read the policy's grammar),
// and calls parse(): --help and --version print and exit 0; anything wrong on the command line
// (unknown flag, missing value, bad number, unreadable file) prints ONE line on stderr,
// "PROGRAM: what is wrong (see PROGRAM --help)", and exits 2. CLI11 throws while parsing; the
// exceptions never leave parse()/try_parse(), which run before any thread or event loop starts.
//
// Exit codes shared by every binary (kExitCodesHelp documents them in --help):
//   0 ok, 1 runtime failure, 2 usage error, 3 the probe found a serving defect.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cutline/cli/parsed.h"

namespace cutline::cli {

// An App named `program` with --help, --version and the exit codes in its footer.
// `exit_codes` replaces the footer's text (the probe documents code 3).
std::unique_ptr<CLI::App> make_app(std::string_view program, std::string_view description,
                                   std::string_view exit_codes = {});
extern const char* const kExitCodesHelp;

// A subcommand with --help, the same error handling and footer as make_app().
CLI::App* add_command(CLI::App& parent, std::string_view name, std::string_view description);

// A duration in the policy's grammar ("250ms", "30s", "1.5s", "2m"), stored in ms.
// `bare_unit_ms` > 0 also accepts a bare number in that unit (kept for flags that took seconds).
CLI::Option* add_duration(CLI::App& app, const std::string& name, int64_t& ms,
                          const std::string& description, int64_t bare_unit_ms = 0);
// A size in the policy's grammar ("256MiB", "2GiB", "4096"), stored in bytes; `min_bytes` is
// the smallest accepted value.
CLI::Option* add_size(CLI::App& app, const std::string& name, int64_t& bytes,
                      const std::string& description, int64_t min_bytes = 0);
// Same, for an optional value (unset unless the flag is given).
CLI::Option* add_size(CLI::App& app, const std::string& name, std::optional<int64_t>& bytes,
                      const std::string& description, int64_t min_bytes = 0);

// Validators: a file that exists and can be read (for inputs the command opens).
extern const CLI::Validator kReadableFile;

// Parses argv (argv[0] is the program and is skipped). Never throws.
Parsed try_parse(CLI::App& app, int argc, const char* const* argv);

// Parses and acts on the outcome: prints help (stdout) / version (stdout) / the error line
// (stderr). Returns the exit code to return from main, or nullopt when the command should run.
std::optional<int> parse(CLI::App& app, int argc, const char* const* argv);

// Reports an outcome of try_parse() the way parse() does; nullopt for kRun.
std::optional<int> finish(const CLI::App& app, const Parsed& parsed);

}  // namespace cutline::cli
