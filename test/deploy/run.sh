#!/usr/bin/env bash
# Validates everything under deploy/ and helm/: promtool checks and unit tests of the SLO rules,
# then the node tests of test/deploy (dashboards, Dockerfiles, compose; the chart rendered by real
# Helm, fetched once through npm, and validated against the Kubernetes and CRD schemas; the KEDA
# query under promtool). Building and running the images is `pnpm test:images`.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v promtool >/dev/null; then
  echo "promtool missing: installing Debian's prometheus package" >&2
  if [ "$(id -u)" = 0 ]; then apt-get install -y prometheus >&2; else sudo apt-get install -y prometheus >&2; fi
fi
promtool check rules deploy/prometheus/slo-rules.yaml
promtool test rules deploy/prometheus/slo-rules.test.yaml
npx tsc -b
# The test files on the tiers' Node.js (TEST_NODE), each file's time printed at the end.
source scripts/test-tiers.sh
run_tests -- test/deploy/*.test.ts
