#!/bin/sh
# ensure-chromium.sh: make sure a headless-capable Chromium is installed, for the dashboard
# test (server's TestDashboardChromium, cmd/mooncake's TestDashboardInChromium). Prints the
# browser's path. Installs Debian's `chromium` with apt-get when it is missing and we are
# root; otherwise says what to run and fails.
set -eu
for b in chromium chromium-browser google-chrome; do
	if p=$(command -v "$b" 2>/dev/null); then
		echo "$p"
		exit 0
	fi
done
if [ "$(id -u)" != 0 ]; then
	echo "ensure-chromium: chromium is not installed; run as root: apt-get install -y chromium" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
command -v chromium
