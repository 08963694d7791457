#!/usr/bin/env bash
# Installs the Chromium the browser tests drive (Debian package `chromium`, at /usr/bin/chromium)
# when it is missing. playwright-core never downloads a browser: the tests launch this one.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
echo "chromium not found: installing Debian's chromium package" >&2
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
[ -x /usr/bin/chromium ]
