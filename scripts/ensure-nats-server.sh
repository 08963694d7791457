#!/usr/bin/env bash
# Installs the nats-server binary the integration tests start (Debian package `nats-server`)
# when it is missing. Tests never use a server already running on the machine.
set -euo pipefail
if command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]; then
  exit 0
fi
echo "nats-server not found: installing Debian's nats-server package" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nats-server >/dev/null
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ]
