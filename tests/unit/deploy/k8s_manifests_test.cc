// deploy/k8s/: every manifest parses and the pieces fit together the way `kubectl apply -k`
// needs them to (selectors match labels, probes and Services name ports that exist, the HPA
// targets the gateway, the policy in the ConfigMap loads and points at the Redis and backend
// Services). No cluster is involved: this catches typos and drift, not scheduling problems.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cutline/policy/loader.h"
#include "support/ci.h"

namespace cutline {
namespace {

namespace fs = std::filesystem;

struct Manifest {
  std::string file;
  YAML::Node doc;
  std::string kind() const { return doc["kind"].as<std::string>(""); }
  std::string name() const { return doc["metadata"]["name"].as<std::string>(""); }
};

std::vector<Manifest> load_all() {
  std::vector<Manifest> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(CUTLINE_K8S_DIR)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(f.string())) {
      if (doc.IsNull()) continue;
      out.push_back({f.filename().string(), doc});
    }
  }
  return out;
}

class K8sManifests : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      manifests_ = load_all();
    } catch (const YAML::Exception& e) {
      FAIL() << "a manifest does not parse: " << e.what();
    }
  }
  const Manifest* find(const std::string& kind, const std::string& name) const {
    for (const auto& m : manifests_) {
      if (m.kind() == kind && m.name() == name) return &m;
    }
    return nullptr;
  }
  std::vector<const Manifest*> workloads() const {
    std::vector<const Manifest*> out;
    for (const auto& m : manifests_) {
      if (m.kind() == "Deployment" || m.kind() == "StatefulSet") out.push_back(&m);
    }
    return out;
  }
  static std::map<std::string, int> container_ports(const YAML::Node& container) {
    std::map<std::string, int> out;
    for (const auto& p : container["ports"]) {
      out[p["name"].as<std::string>("")] = p["containerPort"].as<int>(0);
    }
    return out;
  }
  std::vector<Manifest> manifests_;
};

TEST_F(K8sManifests, EveryDocumentIsAnObjectWithKindAndName) {
  ASSERT_FALSE(manifests_.empty());
  for (const auto& m : manifests_) {
    EXPECT_TRUE(m.doc.IsMap()) << m.file;
    EXPECT_FALSE(m.doc["apiVersion"].as<std::string>("").empty()) << m.file;
    EXPECT_FALSE(m.kind().empty()) << m.file;
    if (m.kind() != "Kustomization") {
      EXPECT_FALSE(m.name().empty()) << m.file << " " << m.kind();
    }
  }
}

TEST_F(K8sManifests, TheKustomizationAppliesEveryOtherFile) {
  std::set<std::string> files, listed;
  const Manifest* k = nullptr;
  for (const auto& m : manifests_) {
    if (m.kind() == "Kustomization") {
      k = &m;
    } else {
      files.insert(m.file);
    }
  }
  ASSERT_NE(k, nullptr);
  for (const auto& r : k->doc["resources"]) listed.insert(r.as<std::string>());
  EXPECT_EQ(listed, files);
}

TEST_F(K8sManifests, WorkloadsSelectTheirOwnPodsAndProbeNamedPorts) {
  ASSERT_EQ(workloads().size(), 3u);  // gateway, backend, redis
  for (const Manifest* w : workloads()) {
    const YAML::Node tpl = w->doc["spec"]["template"];
    for (const auto& kv : w->doc["spec"]["selector"]["matchLabels"]) {
      EXPECT_EQ(tpl["metadata"]["labels"][kv.first.as<std::string>()].as<std::string>(""),
                kv.second.as<std::string>())
          << w->name();
    }
    ASSERT_TRUE(tpl["spec"]["containers"].IsSequence()) << w->name();
    for (const auto& c : tpl["spec"]["containers"]) {
      const auto ports = container_ports(c);
      for (const char* probe : {"readinessProbe", "livenessProbe"}) {
        ASSERT_TRUE(c[probe].IsMap()) << w->name() << " has no " << probe;
        for (const char* how : {"httpGet", "tcpSocket"}) {
          if (!c[probe][how]) continue;
          const std::string port = c[probe][how]["port"].as<std::string>();
          EXPECT_TRUE(ports.count(port)) << w->name() << " " << probe << " port " << port;
        }
      }
      EXPECT_TRUE(c["resources"]["requests"].IsMap()) << w->name();
    }
  }
}

TEST_F(K8sManifests, ServicesReachPortsThatExist) {
  int services = 0;
  for (const auto& s : manifests_) {
    if (s.kind() != "Service") continue;
    ++services;
    const YAML::Node selector = s.doc["spec"]["selector"];
    const Manifest* target = nullptr;
    for (const Manifest* w : workloads()) {
      bool all = true;
      for (const auto& kv : selector) {
        all = all && w->doc["spec"]["template"]["metadata"]["labels"][kv.first.as<std::string>()]
                             .as<std::string>("") == kv.second.as<std::string>();
      }
      if (all) target = w;
    }
    ASSERT_NE(target, nullptr) << "Service " << s.name() << " selects no workload";
    const auto ports = container_ports(target->doc["spec"]["template"]["spec"]["containers"][0]);
    for (const auto& p : s.doc["spec"]["ports"]) {
      EXPECT_TRUE(ports.count(p["targetPort"].as<std::string>()))
          << s.name() << " targetPort " << p["targetPort"].as<std::string>();
    }
  }
  EXPECT_EQ(services, 4);
}

TEST_F(K8sManifests, TheAdminListenerHasItsOwnService) {
  const Manifest* clients = find("Service", "cutline-gateway");
  const Manifest* admin = find("Service", "cutline-gateway-admin");
  ASSERT_NE(clients, nullptr);
  ASSERT_NE(admin, nullptr);
  for (const auto& p : clients->doc["spec"]["ports"]) {
    EXPECT_NE(p["targetPort"].as<std::string>(), "admin") << "admin on the clients' Service";
  }
  ASSERT_EQ(admin->doc["spec"]["ports"].size(), 1u);
  EXPECT_EQ(admin->doc["spec"]["ports"][0]["targetPort"].as<std::string>(), "admin");
}

// The pod labels a NetworkPolicy's `from` entry admits ("name" label of its podSelector).
std::vector<std::string> admitted(const YAML::Node& rule) {
  std::vector<std::string> out;
  for (const auto& peer : rule["from"]) {
    out.push_back(
        peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>("<any>"));
  }
  if (!rule["from"]) out.push_back("<any>");
  return out;
}

TEST_F(K8sManifests, NetworkPoliciesAdmitOnlyTheGatewayToBackendAndRedis) {
  struct Want {
    std::string policy, workload_kind, workload;
    std::vector<std::string> allowed;  // pod names that may connect
  };
  const std::vector<Want> wants = {
      {"cutline-backend", "StatefulSet", "cutline-backend", {"cutline-gateway", "prometheus"}},
      {"cutline-redis", "Deployment", "cutline-redis", {"cutline-gateway"}},
  };
  for (const Want& w : wants) {
    const Manifest* np = find("NetworkPolicy", w.policy);
    ASSERT_NE(np, nullptr) << w.policy;
    const Manifest* target = find(w.workload_kind, w.workload);
    ASSERT_NE(target, nullptr) << w.workload;
    // The policy selects the workload's pods...
    for (const auto& kv : np->doc["spec"]["podSelector"]["matchLabels"]) {
      EXPECT_EQ(target->doc["spec"]["template"]["metadata"]["labels"][kv.first.as<std::string>()]
                    .as<std::string>(""),
                kv.second.as<std::string>())
          << w.policy;
    }
    EXPECT_EQ(np->doc["spec"]["policyTypes"][0].as<std::string>(), "Ingress") << w.policy;
    // ...and admits only the wanted peers, on ports the container has.
    const auto ports = container_ports(target->doc["spec"]["template"]["spec"]["containers"][0]);
    ASSERT_GE(np->doc["spec"]["ingress"].size(), 1u) << w.policy;
    for (const auto& rule : np->doc["spec"]["ingress"]) {
      for (const std::string& peer : admitted(rule)) {
        EXPECT_NE(std::find(w.allowed.begin(), w.allowed.end(), peer), w.allowed.end())
            << w.policy << " admits " << peer;
      }
      ASSERT_GE(rule["ports"].size(), 1u) << w.policy << ": a rule without ports opens all";
      for (const auto& p : rule["ports"]) {
        EXPECT_TRUE(ports.count(p["port"].as<std::string>()))
            << w.policy << " port " << p["port"].as<std::string>();
      }
    }
  }
}

TEST_F(K8sManifests, OnlyPrometheusReachesTheGatewayAdminPort) {
  const Manifest* np = find("NetworkPolicy", "cutline-gateway");
  ASSERT_NE(np, nullptr);
  bool admin_rule = false;
  for (const auto& rule : np->doc["spec"]["ingress"]) {
    for (const auto& p : rule["ports"]) {
      if (p["port"].as<std::string>() != "admin") continue;
      admin_rule = true;
      EXPECT_EQ(admitted(rule), std::vector<std::string>{"prometheus"});
    }
  }
  EXPECT_TRUE(admin_rule);
}

TEST_F(K8sManifests, GatewayProbesAndScrapesItsAdminListener) {
  const Manifest* gw = find("Deployment", "cutline-gateway");
  ASSERT_NE(gw, nullptr);
  const YAML::Node pod = gw->doc["spec"]["template"];
  const YAML::Node c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"].as<std::string>(), "admin");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(c["livenessProbe"]["httpGet"]["port"].as<std::string>(), "admin");
  const auto ports = container_ports(c);
  const YAML::Node ann = pod["metadata"]["annotations"];
  EXPECT_EQ(ann["prometheus.io/scrape"].as<std::string>(), "true");
  EXPECT_EQ(ann["prometheus.io/port"].as<int>(), ports.at("admin"));
  EXPECT_EQ(ann["prometheus.io/path"].as<std::string>(), "/metrics");
  // The drain (--drain-timeout) must fit in the termination grace period.
  const auto args = c["args"].as<std::vector<std::string>>();
  const auto drain = std::find(args.begin(), args.end(), "--drain-timeout");
  ASSERT_NE(drain, args.end());
  EXPECT_LT(std::stoi(*(drain + 1)), pod["spec"]["terminationGracePeriodSeconds"].as<int>());

  const Manifest* hpa = find("HorizontalPodAutoscaler", "cutline-gateway");
  ASSERT_NE(hpa, nullptr);
  EXPECT_EQ(hpa->doc["spec"]["scaleTargetRef"]["kind"].as<std::string>(), "Deployment");
  EXPECT_EQ(hpa->doc["spec"]["scaleTargetRef"]["name"].as<std::string>(), "cutline-gateway");
  std::set<std::string> metrics;
  for (const auto& m : hpa->doc["spec"]["metrics"]) {
    metrics.insert(m["type"].as<std::string>() == "Resource"
                       ? m["resource"]["name"].as<std::string>()
                       : m["pods"]["metric"]["name"].as<std::string>());
  }
  EXPECT_EQ(metrics, (std::set<std::string>{"cpu", "cutline_active_streams"}));
}

TEST_F(K8sManifests, ThePolicyInTheConfigMapLoadsAndMatchesTheServices) {
  const Manifest* cm = find("ConfigMap", "cutline-policy");
  ASSERT_NE(cm, nullptr);
  const std::string text = cm->doc["data"]["cutline.yaml"].as<std::string>();
  // The gateway's environment carries the Redis password from the Secret (checked below).
  policy::LoadOptions env;
  env.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "REDIS_PASSWORD") return std::string("from-the-secret");
    return std::nullopt;
  };
  auto loaded = policy::load_policy_text(text, "cutline-policy/cutline.yaml", env);
  ASSERT_TRUE(loaded.ok()) << loaded.error_text();
  const policy::Policy& p = *loaded.policy;
  // Every route the gateway runs has a rule (the Responses API and embeddings included).
  for (const policy::Diagnostic& w : loaded.warnings) {
    EXPECT_EQ(w.message.find("no rule matches route"), std::string::npos) << w.message;
  }

  // The gateway mounts it where --config looks.
  const Manifest* gw = find("Deployment", "cutline-gateway");
  ASSERT_NE(gw, nullptr);
  const YAML::Node c = gw->doc["spec"]["template"]["spec"]["containers"][0];
  const auto args = c["args"].as<std::vector<std::string>>();
  EXPECT_EQ(args[0], "--config");
  EXPECT_EQ(args[1], c["volumeMounts"][0]["mountPath"].as<std::string>() + "/cutline.yaml");
  const auto ports = container_ports(c);
  ASSERT_EQ(p.listen.size(), 1u);
  EXPECT_EQ(p.listen[0].host, "0.0.0.0");
  EXPECT_EQ(p.listen[0].port, ports.at("http"));
  ASSERT_TRUE(p.admin);
  EXPECT_EQ(p.admin->host, "0.0.0.0");
  EXPECT_EQ(p.admin->port, ports.at("admin"));

  // Shared pools in the Redis Service; upstreams at the backend Service's port.
  EXPECT_EQ(p.budget_store.kind, policy::BudgetStoreKind::kRedis);
  const Manifest* redis = find("Service", p.budget_store.host);
  ASSERT_NE(redis, nullptr) << p.budget_store.host;
  EXPECT_EQ(redis->doc["spec"]["ports"][0]["port"].as<int>(), p.budget_store.port);
  ASSERT_FALSE(p.upstreams.empty());
  const Manifest* backend = find("Service", "cutline-backend");
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(p.upstreams[0].url,
            "http://cutline-backend:" + backend->doc["spec"]["ports"][0]["port"].as<std::string>());

  // The upstream is the pool of backend pods behind the headless Service.
  ASSERT_TRUE(p.upstreams[0].dns);
  EXPECT_EQ(p.upstreams[0].dns->name, "cutline-backend");
  EXPECT_EQ(backend->doc["spec"]["clusterIP"].as<std::string>(), "None");
  EXPECT_EQ(p.upstreams[0].load_report.kind, policy::LoadReportKind::kCutline);

  // Redis and the gateway take the password from the same Secret; the policy reads it from the
  // gateway's environment.
  EXPECT_EQ(p.budget_store.password, "from-the-secret");
  const Manifest* secret = find("Secret", "cutline-redis");
  ASSERT_NE(secret, nullptr);
  EXPECT_TRUE(secret->doc["stringData"]["password"].IsScalar());
  auto secret_env = [](const YAML::Node& container) {
    for (const auto& e : container["env"]) {
      if (e["name"].as<std::string>("") == "REDIS_PASSWORD") {
        return e["valueFrom"]["secretKeyRef"]["name"].as<std::string>("") + "/" +
               e["valueFrom"]["secretKeyRef"]["key"].as<std::string>("");
      }
    }
    return std::string();
  };
  EXPECT_EQ(secret_env(c), "cutline-redis/password");
  const Manifest* redis_deploy = find("Deployment", "cutline-redis");
  ASSERT_NE(redis_deploy, nullptr);
  const YAML::Node rc = redis_deploy->doc["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(secret_env(rc), "cutline-redis/password");
  const auto redis_args = rc["args"].as<std::vector<std::string>>();
  auto pass = std::find(redis_args.begin(), redis_args.end(), "--requirepass");
  ASSERT_NE(pass, redis_args.end());
  EXPECT_EQ(*(pass + 1), "$(REDIS_PASSWORD)");
}

TEST_F(K8sManifests, BackendAsksForAGpuAndKeepsModelsOnAVolume) {
  const Manifest* be = find("StatefulSet", "cutline-backend");
  ASSERT_NE(be, nullptr);
  const YAML::Node c = be->doc["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["resources"]["requests"]["nvidia.com/gpu"].as<int>(), 1);
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 1);
  const std::string claim =
      be->doc["spec"]["volumeClaimTemplates"][0]["metadata"]["name"].as<std::string>();
  EXPECT_EQ(c["volumeMounts"][0]["name"].as<std::string>(), claim);
  const std::string mount = c["volumeMounts"][0]["mountPath"].as<std::string>();
  const auto args = c["args"].as<std::vector<std::string>>();
  EXPECT_NE(std::find(args.begin(), args.end(), "--cache-dir=" + mount + "/cache"), args.end());
  EXPECT_EQ(be->doc["spec"]["serviceName"].as<std::string>(), "cutline-backend");
}

// What `kubectl apply -k` would send: kubectl's own kustomize renders the directory, and the
// rendered set is exactly the objects of the listed files (nothing dropped, nothing renamed).
TEST_F(K8sManifests, KubectlKustomizeRendersEveryObject) {
  const std::string command = std::string("kubectl kustomize ") + CUTLINE_K8S_DIR + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string rendered;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) rendered.append(buf, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    if (cutline::test::running_in_ci()) FAIL() << "CI=true but kubectl is not installed";
    GTEST_SKIP() << "kubectl not installed (deploy/setup.sh test installs it)";
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << rendered;
  std::set<std::pair<std::string, std::string>> expected, got;
  for (const auto& m : manifests_) {
    if (m.kind() != "Kustomization") expected.insert({m.kind(), m.name()});
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(rendered);
  } catch (const YAML::Exception& e) {
    FAIL() << "kubectl kustomize printed something that does not parse: " << e.what();
  }
  for (const YAML::Node& doc : docs) {
    if (doc.IsNull()) continue;
    got.insert({doc["kind"].as<std::string>(""), doc["metadata"]["name"].as<std::string>("")});
  }
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace cutline
