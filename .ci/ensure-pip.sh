#!/bin/sh
# ensure-pip.sh PYTHON: make sure PYTHON has pip and venv, for the Python suite (python/python_test.go
# installs the package with `pip install --no-index ./python`, as the README tells users to).
# Installs Debian's python3-pip with apt-get when pip is missing and we are root; otherwise
# says what to run and fails.
set -eu
py=${1:-python3}
# pip, and ensurepip for `python3 -m venv` (the wheel test installs into a venv); Debian
# splits them into python3-pip and python3-venv.
need=""
"$py" -m pip --version >/dev/null 2>&1 || need="python3-pip"
"$py" -c 'import ensurepip' >/dev/null 2>&1 || need="$need python3-venv"
if [ -z "$need" ]; then
	exit 0
fi
# shellcheck disable=SC2086 # one word per package
sh "$(dirname "$0")/apt-install.sh" "ensure-pip: $need for $py" $need
"$py" -m pip --version >/dev/null
"$py" -c 'import ensurepip'
