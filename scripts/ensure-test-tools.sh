#!/usr/bin/env bash
# Installs what the tests run beside Node.js, from Debian's packages, when it is missing:
#   nats-server  the broker the integration tests start on their own loopback ports (package
#                nats-server); tests never use a server already running on the machine;
#   promtool     `promtool check metrics` in the metrics exposition test (package prometheus; only
#                the tool is used, no Prometheus server is started);
#   chromium     the browser the console and graph tests drive through playwright-core, which never
#                downloads one (package chromium, at /usr/bin/chromium).
# What is missing is installed with one package index update and one install.
set -euo pipefail
missing=()
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
command -v promtool >/dev/null 2>&1 || [ -x /usr/bin/promtool ] || missing+=(prometheus)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing Debian's ${missing[*]} for the tests" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]
command -v promtool >/dev/null 2>&1 || [ -x /usr/bin/promtool ]
[ -x /usr/bin/chromium ]
