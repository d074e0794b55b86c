#!/bin/sh
# apt-install.sh WHAT PKG...: installs Debian packages for the test setup (ensure-pip.sh,
# ensure-torch.sh) when we are root; otherwise says what to run (WHAT names the need) and fails.
set -eu
what=$1
shift
if [ "$(id -u)" != 0 ]; then
	echo "$what is not installed; run as root: apt-get install -y $*" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "$@" >&2
