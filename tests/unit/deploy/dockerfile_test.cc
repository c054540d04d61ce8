// deploy/Dockerfile, deploy/image.sh and deploy/container/cutline.yaml, checked without a
// container builder: the Dockerfile is parsed into stages and instructions, and its shape is
// asserted (a pinned Debian 12 slim base, a non-root user in the final stage, only runtime
// packages there, the three binaries installed, the ports the manifests use exposed, a health
// check on the admin listener); the image deploy/image.sh builds is the one every Cutline
// workload in deploy/k8s names; the container's default policy loads and spawns the installed
// backend on the tiny model.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cutline/policy/loader.h"

namespace cutline {
namespace {

namespace fs = std::filesystem;

const std::string kDeploy = CUTLINE_DEPLOY_DIR;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Instruction {
  std::string op;    // upper case: FROM, RUN, COPY, USER, ...
  std::string args;  // continuation lines joined with spaces
};

struct Stage {
  std::string base;  // FROM's image
  std::string name;  // AS name, or empty
  std::vector<Instruction> body;
  std::string all(const std::string& op) const {
    std::string out;
    for (const auto& i : body) {
      if (i.op == op) out += i.args + "\n";
    }
    return out;
  }
};

// Stages in order. Comments and blank lines are dropped; a trailing backslash continues a line.
std::vector<Stage> parse_dockerfile(const std::string& text) {
  std::vector<Stage> stages;
  std::istringstream in(text);
  std::string line, logical;
  auto flush = [&] {
    const auto start = logical.find_first_not_of(" \t");
    if (start == std::string::npos) return;
    std::string s = logical.substr(start);
    logical.clear();
    const auto sp = s.find_first_of(" \t");
    Instruction ins{s.substr(0, sp), sp == std::string::npos ? "" : s.substr(sp + 1)};
    std::transform(ins.op.begin(), ins.op.end(), ins.op.begin(), ::toupper);
    if (ins.op == "FROM") {
      std::istringstream a(ins.args);
      Stage st;
      std::string as;
      a >> st.base >> as >> st.name;
      stages.push_back(st);
    } else if (!stages.empty()) {
      stages.back().body.push_back(ins);
    }
  };
  while (std::getline(in, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (!line.empty() && line.back() == '\\') {
      logical += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    logical += line;
    flush();
  }
  flush();
  return stages;
}

// The words after `apt-get install` in a stage's RUN lines, options left out, up to `&&`.
std::vector<std::string> apt_packages(const Stage& stage) {
  std::vector<std::string> out;
  const std::string runs = stage.all("RUN");
  size_t at = 0;
  while ((at = runs.find("apt-get install", at)) != std::string::npos) {
    at += std::string("apt-get install").size();
    std::istringstream words(runs.substr(at, runs.find("&&", at) - at));
    std::string w;
    while (words >> w) {
      if (w[0] != '-') out.push_back(w);
    }
  }
  return out;
}

class Dockerfile : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kDeploy + "/Dockerfile"));
    stages_ = parse_dockerfile(read(kDeploy + "/Dockerfile"));
    ASSERT_GE(stages_.size(), 2u) << "a build stage and a runtime stage";
  }
  const Stage& final_stage() const { return stages_.back(); }
  std::vector<Stage> stages_;
};

TEST_F(Dockerfile, EveryStageStartsFromThePinnedDebian12SlimBase) {
  for (const auto& s : stages_) EXPECT_EQ(s.base, "debian:bookworm-slim") << s.name;
}

TEST_F(Dockerfile, TheBuildStageHasTheCompilerAndTheDevPackages) {
  const auto pkgs = apt_packages(stages_.front());
  for (const std::string want : {"build-essential", "cmake", "ninja-build", "libevent-dev"}) {
    EXPECT_NE(std::find(pkgs.begin(), pkgs.end(), want), pkgs.end()) << want;
  }
}

TEST_F(Dockerfile, TheFinalStageHasOnlyRuntimePackagesAndNoBuildTools) {
  const Stage& s = final_stage();
  const auto pkgs = apt_packages(s);
  ASSERT_FALSE(pkgs.empty());
  const std::regex build_only(
      "(.*-dev(:.*)?|build-essential|cmake|ninja-build|gcc(-.*)?|g\\+\\+(-.*)?|clang.*|make)");
  for (const auto& p : pkgs) EXPECT_FALSE(std::regex_match(p, build_only)) << p;
  // Nothing compiles there either.
  const std::string runs = s.all("RUN");
  for (const std::string tool : {"cmake ", "ninja ", "cpack "}) {
    EXPECT_EQ(runs.find(tool), std::string::npos) << tool;
  }
}

TEST_F(Dockerfile, TheFinalStageInstallsTheThreeBinariesFromTheBuildStage) {
  const Stage& s = final_stage();
  const std::string copies = s.all("COPY");
  EXPECT_NE(copies.find("--from=" + stages_.front().name), std::string::npos) << copies;
  EXPECT_NE(copies.find("cutline_*.deb"), std::string::npos) << copies;
  const std::string runs = s.all("RUN");
  for (const std::string bin : {"cutline-gateway", "cutline-backend", "cutline"}) {
    EXPECT_TRUE(std::regex_search(runs, std::regex("test -x /usr/bin/" + bin + "\\s"))) << bin;
  }
  EXPECT_NE(s.all("CMD").find("cutline-gateway"), std::string::npos);
}

TEST_F(Dockerfile, TheFinalStageRunsAsANonRootUser) {
  const Stage& s = final_stage();
  std::string user;
  for (const auto& i : s.body) {
    if (i.op == "USER") user = i.args;
  }
  ASSERT_FALSE(user.empty()) << "no USER in the final stage: it would run as root";
  EXPECT_NE(user, "root");
  EXPECT_NE(user.substr(0, user.find(':')), "0");
  // The user exists there: the package's postinst creates it.
  EXPECT_EQ(user, "cutline");
}

TEST_F(Dockerfile, ExposesTheGatewayPortsAndChecksHealthOnTheAdminListener) {
  const Stage& s = final_stage();
  const std::string expose = s.all("EXPOSE");
  EXPECT_NE(expose.find("8080"), std::string::npos);
  EXPECT_NE(expose.find("8091"), std::string::npos);
  const std::string health = s.all("HEALTHCHECK");
  EXPECT_TRUE(std::regex_search(health, std::regex(":8091/(healthz|readyz)"))) << health;
  // The gateway manifest's container ports are the exposed ones.
  const YAML::Node gw = YAML::LoadFile(kDeploy + "/k8s/gateway.yaml");
  for (const auto& p : gw["spec"]["template"]["spec"]["containers"][0]["ports"]) {
    EXPECT_NE(expose.find(p["containerPort"].as<std::string>()), std::string::npos);
  }
}

TEST_F(Dockerfile, TheDefaultConfigIsCopiedInAndLoads) {
  EXPECT_NE(final_stage().all("COPY").find("deploy/container/cutline.yaml"), std::string::npos);
  auto loaded = policy::load_policy_file(kDeploy + "/container/cutline.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.error_text();
  const policy::Policy& p = *loaded.policy;
  ASSERT_TRUE(p.admin.has_value());
  EXPECT_EQ(p.admin->port, 8091);
  ASSERT_EQ(p.upstreams.size(), 1u);
  ASSERT_TRUE(p.upstreams[0].spawn.has_value());
  const auto& cmd = p.upstreams[0].spawn->command;
  ASSERT_FALSE(cmd.empty());
  EXPECT_EQ(cmd[0], "/usr/bin/cutline-backend");
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "tiny=builtin"), cmd.end());
}

// deploy/image.sh's default name is what every Cutline workload in deploy/k8s runs.
TEST(ContainerImage, TheManifestsNameTheImageThatImageShBuilds) {
  const std::string script = read(kDeploy + "/image.sh");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(script, m, std::regex(R"(image=\$\{CUTLINE_IMAGE:-([^}]+)\})")));
  const std::string built = m[1];
  EXPECT_EQ(built, "cutline:latest");
  EXPECT_NE(script.find("deploy/Dockerfile"), std::string::npos);
  int cutline_containers = 0;
  for (const auto& e : fs::directory_iterator(kDeploy + "/k8s")) {
    if (e.path().extension() != ".yaml") continue;
    for (const YAML::Node& doc : YAML::LoadAllFromFile(e.path().string())) {
      if (!doc.IsMap() || !doc["spec"] || !doc["spec"]["template"]) continue;
      for (const auto& c : doc["spec"]["template"]["spec"]["containers"]) {
        const std::string image = c["image"].as<std::string>("");
        if (image.rfind("redis", 0) == 0) continue;
        ++cutline_containers;
        EXPECT_EQ(image, built) << e.path().filename() << " " << c["name"].as<std::string>("");
      }
    }
  }
  EXPECT_EQ(cutline_containers, 2);  // gateway and backend
}

}  // namespace
}  // namespace cutline
