#!/usr/bin/env bash
# Installs promtool, which the metrics exposition test runs (`promtool check metrics`), from
# Debian's `prometheus` package when it is missing. Only the tool is used: no Prometheus server
# is started (the package's service is not run in containers without systemd).
set -euo pipefail
if command -v promtool >/dev/null 2>&1 || [ -x /usr/bin/promtool ]; then
  exit 0
fi
echo "promtool not found: installing Debian's prometheus package" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null 2>&1 || [ -x /usr/bin/promtool ]
