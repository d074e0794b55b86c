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
sh "$(dirname "$0")/apt-install.sh" "ensure-pip: pip for $py" python3-pip
"$py" -m pip --version >/dev/null
