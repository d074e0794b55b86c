#!/bin/sh
# ensure-debian-py.sh PYTHON NEED 'IMPORTS' PKG...: make the modules of the Python statement
# IMPORTS importable by PYTHON from Debian's packages PKG... (under /usr/lib/python3/dist-packages),
# for tests that need them (ensure-torch.sh, ensure-pyzmq.sh). Installs PKG... with apt-get when
# they are missing and we are root; otherwise says what to run (NEED names the need) and fails.
# Prints the directory PYTHON must have on PYTHONPATH to find them (nothing when PYTHON finds
# them by itself: a Debian python3).
set -eu
py=$1
need=$2
probe=$3
shift 3
if "$py" -c "$probe" >/dev/null 2>&1; then
	exit 0
fi
deb=/usr/lib/python3/dist-packages
if ! PYTHONPATH="$deb" "$py" -c "$probe" >/dev/null 2>&1; then
	sh "$(dirname "$0")/apt-install.sh" "$need" "$@"
fi
if "$py" -c "$probe" >/dev/null 2>&1; then
	exit 0
fi
# Another interpreter of the same version (pyenv, a venv) can use Debian's build.
if PYTHONPATH="$deb" "$py" -c "$probe" >/dev/null 2>&1; then
	echo "$deb"
	exit 0
fi
echo "$need: $py cannot import them from Debian's $deb (not the Python version Debian built them for?)" >&2
exit 1
