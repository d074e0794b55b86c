#!/bin/sh
# ensure-pip.sh PYTHON: make sure PYTHON has pip, for the Python suite (python/python_test.go
# installs the package with `pip install --no-index ./python`, as the README tells users to).
# Installs Debian's python3-pip with apt-get when pip is missing and we are root; otherwise
# says what to run and fails.
set -eu
py=${1:-python3}
if "$py" -m pip --version >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "ensure-pip: pip is not installed for $py; run as root: apt-get install -y python3-pip" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends python3-pip >&2
"$py" -m pip --version >/dev/null
