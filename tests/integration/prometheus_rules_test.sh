#!/usr/bin/env bash
# deploy/prometheus checked by Prometheus's own tool: the scrape config (with the rule file it
# names), the alert rules, and their unit tests (alerts_test.yml). promtool comes from Debian's
# prometheus package: skipped (exit 77) where it is missing, a failure under CI=true.
set -euo pipefail
dir=${1:?usage: prometheus_rules_test.sh DEPLOY_PROMETHEUS_DIR}
if ! command -v promtool >/dev/null 2>&1; then
  if [[ "${CI:-}" == true ]]; then
    echo "FAIL: CI=true but promtool is not installed (Debian package prometheus; deploy/setup.sh)" >&2
    exit 1
  fi
  echo "SKIP: promtool not installed (Debian package prometheus)"
  exit 77
fi
cd "$dir"
promtool check config prometheus.yml
promtool check rules alerts.yml
promtool test rules alerts_test.yml
