#!/bin/sh
# ensure-torch.sh PYTHON: make torch importable by PYTHON for the Python suite's tensor tests
# (python/tests/test_tensor.py), from Debian's python3-torch: the package itself needs no
# torch, only its tensor helpers do. Installs python3-torch with apt-get when it is missing
# and we are root; otherwise says what to run and fails. Prints the directory PYTHON must
# have on PYTHONPATH to find it (nothing when PYTHON finds torch by itself: a Debian python3).
set -eu
py=${1:-python3}
if "$py" -c 'import torch' >/dev/null 2>&1; then
	exit 0
fi
deb=/usr/lib/python3/dist-packages
if [ ! -d "$deb/torch" ]; then
	sh "$(dirname "$0")/apt-install.sh" "ensure-torch: torch for $py" python3-torch
fi
if "$py" -c 'import torch' >/dev/null 2>&1; then
	exit 0
fi
# Another interpreter of the same version (pyenv, a venv) can use Debian's build.
if PYTHONPATH="$deb" "$py" -c 'import torch' >/dev/null 2>&1; then
	echo "$deb"
	exit 0
fi
echo "ensure-torch: $py cannot import Debian's torch from $deb (not the Python version Debian built it for?)" >&2
exit 1
