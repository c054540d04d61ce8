#include "cutline/cli/cli.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cutline/cli/version.h"
#include "cutline/policy/duration.h"
#include "cutline/policy/size.h"

namespace cutline::cli {

const char* const kExitCodesHelp =
    "Exit status: 0 ok, 1 runtime failure, 2 usage error (one line on stderr says what).";

std::string version_line(std::string_view program) {
  return std::string(program) + " " CUTLINE_VERSION " (git " CUTLINE_GIT_COMMIT ")";
}

namespace {

// Thrown by -h/--help as soon as it is read, so that help wins over every other option's checks
// (`cutline policy explain F --help` with no F on disk prints help, not "cannot read F").
struct HelpRequested {
  std::string text;
};

// The help of `app` with its full command in the usage line ("cutline policy explain").
std::string full_help(const CLI::App& app) {
  std::string prefix;
  for (const CLI::App* p = app.get_parent(); p != nullptr; p = p->get_parent()) {
    prefix = p->get_name() + (prefix.empty() ? "" : " " + prefix);
  }
  return prefix.empty() ? app.help() : app.help(prefix);
}

void configure(CLI::App& app, std::string_view footer) {
  app.set_help_flag();
  app.add_flag_callback(
         "-h,--help", [&app] { throw HelpRequested{full_help(app)}; }, "Print this help and exit")
      ->trigger_on_parse();
  app.footer(std::string(footer.empty() ? kExitCodesHelp : footer));
  app.get_formatter()->column_width(30);
}

// The word to name from CLI11's ExtrasError ("...not expected: 1 --frobnicate"): the first that
// looks like an option (CLI11 lists positionals first), else the first.
std::string first_extra(const std::string& what) {
  const auto colon = what.find(": ");
  if (colon == std::string::npos) return what;
  std::vector<std::string> words;
  std::string rest = what.substr(colon + 2);
  for (size_t pos = 0; pos < rest.size();) {
    const size_t space = rest.find(' ', pos);
    const size_t end = space == std::string::npos ? rest.size() : space;
    if (end > pos) words.push_back(rest.substr(pos, end - pos));
    pos = end + 1;
  }
  for (const std::string& w : words) {
    if (w.size() > 1 && w[0] == '-') return w;
  }
  return words.empty() ? rest : words.front();
}

// CLI11's message, rewritten where ours says more plainly what is wrong.
std::string describe(const CLI::ParseError& e) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    const std::string arg = first_extra(what);
    if (arg.size() > 1 && arg[0] == '-') {
      return "unknown option '" + arg.substr(0, arg.find('=')) + "'";
    }
    return "unexpected argument '" + arg + "'";
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // "--port: 1 required INT missing" -> "--port needs a value"
    if (what.find("required") != std::string::npos && what.find("missing") != std::string::npos) {
      return what.substr(0, what.find(':')) + " needs a value";
    }
  }
  return what;  // conversion, validation, required: CLI11 names the option already
}

}  // namespace

std::unique_ptr<CLI::App> make_app(std::string_view program, std::string_view description,
                                   std::string_view exit_codes) {
  auto app = std::make_unique<CLI::App>(std::string(description), std::string(program));
  configure(*app, exit_codes);
  app->set_version_flag("--version", version_line(program), "Print the version and git commit")
      ->trigger_on_parse();
  return app;
}

CLI::App* add_command(CLI::App& parent, std::string_view name, std::string_view description) {
  CLI::App* sub = parent.add_subcommand(std::string(name), std::string(description));
  configure(*sub, parent.get_footer());
  return sub;
}

CLI::Option* add_duration(CLI::App& app, const std::string& name, int64_t& ms,
                          const std::string& description, int64_t bare_unit_ms) {
  CLI::Validator duration(
      [bare_unit_ms](std::string& text) -> std::string {
        std::optional<int64_t> v = policy::parse_duration_ms(text);
        if (!v && bare_unit_ms > 0) {
          // A bare number in the flag's historical unit (e.g. --timeout 30 = 30 s).
          v = policy::parse_duration_ms(text + (bare_unit_ms == 1 ? "ms" : "s"));
          if (v && bare_unit_ms != 1 && bare_unit_ms != 1000) v = std::nullopt;
        }
        if (!v) return "not a duration: '" + text + "' (e.g. 250ms, 30s, 1.5s, 2m)";
        text = std::to_string(*v);
        return {};
      },
      "DURATION", "duration");
  return app.add_option(name, ms, description)->transform(duration)->type_name("DURATION");
}

namespace {

CLI::Validator size_validator(int64_t min_bytes) {
  return CLI::Validator(
      [min_bytes](std::string& text) -> std::string {
        std::optional<int64_t> v = policy::parse_size_bytes(text);
        if (!v) return "not a size: '" + text + "' (e.g. 256MiB, 2GiB, 4096)";
        if (*v < min_bytes) {
          return "'" + text + "' is below the minimum of " + std::to_string(min_bytes) + " bytes";
        }
        text = std::to_string(*v);
        return {};
      },
      "SIZE", "size");
}

}  // namespace

CLI::Option* add_size(CLI::App& app, const std::string& name, int64_t& bytes,
                      const std::string& description, int64_t min_bytes) {
  return app.add_option(name, bytes, description)
      ->transform(size_validator(min_bytes))
      ->type_name("SIZE");
}

CLI::Option* add_size(CLI::App& app, const std::string& name, std::optional<int64_t>& bytes,
                      const std::string& description, int64_t min_bytes) {
  return app
      .add_option_function<int64_t>(
          name, [&bytes](const int64_t& v) { bytes = v; }, description)
      ->transform(size_validator(min_bytes))
      ->type_name("SIZE");
}

const CLI::Validator kReadableFile(
    [](std::string& path) -> std::string {
      if (path.empty()) return "empty file name";
      if (access(path.c_str(), R_OK) != 0) {
        return "cannot read '" + path + "': " + std::strerror(errno);
      }
      return {};
    },
    "FILE", "readable file");

Parsed try_parse(CLI::App& app, int argc, const char* const* argv) {
  Parsed out;
  try {
    app.parse(argc, argv);
  } catch (const HelpRequested& help) {
    out.kind = Parsed::Kind::kHelp;
    out.text = help.text;
  } catch (const CLI::CallForVersion& e) {
    out.kind = Parsed::Kind::kVersion;
    out.text = e.what();
  } catch (const CLI::CallForHelp&) {
    out.kind = Parsed::Kind::kHelp;
    out.text = app.help();
  } catch (const CLI::CallForAllHelp&) {
    out.kind = Parsed::Kind::kHelp;
    out.text = app.help("", CLI::AppFormatMode::All);
  } catch (const CLI::ParseError& e) {
    out.kind = Parsed::Kind::kError;
    out.text = describe(e);
  } catch (const std::exception& e) {
    // A conversion that threw outside CLI11's own types (e.g. a bound callback).
    out.kind = Parsed::Kind::kError;
    out.text = e.what();
  }
  return out;
}

std::optional<int> finish(const CLI::App& app, const Parsed& parsed) {
  switch (parsed.kind) {
    case Parsed::Kind::kRun:
      return std::nullopt;
    case Parsed::Kind::kHelp:
      std::fputs(parsed.text.c_str(), stdout);
      return kExitOk;
    case Parsed::Kind::kVersion:
      std::printf("%s\n", parsed.text.c_str());
      return kExitOk;
    case Parsed::Kind::kError:
      break;
  }
  std::string help_cmd = app.get_name();
  for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
    sub = sub->get_subcommands().front();
    help_cmd += " " + sub->get_name();
  }
  std::fprintf(stderr, "%s: %s (see %s --help)\n", app.get_name().c_str(), parsed.text.c_str(),
               help_cmd.c_str());
  return kExitUsage;
}

std::optional<int> parse(CLI::App& app, int argc, const char* const* argv) {
  return finish(app, try_parse(app, argc, argv));
}

}  // namespace cutline::cli
