#!/bin/sh
# ensure-pyzmq.sh PYTHON: make zmq and msgpack importable by PYTHON for the Python suite's KV
# event subscriber (python/tests/test_kv_events.py), from Debian's python3-zmq and
# python3-msgpack: the package itself needs neither, only the test's subscriber does.
# Installs them with apt-get when missing and we are root; otherwise says what to run and
# fails. Prints the directory PYTHON must have on PYTHONPATH to find them (nothing when PYTHON
# finds them by itself: a Debian python3).
set -eu
py=${1:-python3}
probe='import zmq, msgpack'
if "$py" -c "$probe" >/dev/null 2>&1; then
	exit 0
fi
deb=/usr/lib/python3/dist-packages
if [ ! -d "$deb/zmq" ] || [ ! -d "$deb/msgpack" ]; then
	sh "$(dirname "$0")/apt-install.sh" "ensure-pyzmq: zmq and msgpack for $py" python3-zmq python3-msgpack
fi
if "$py" -c "$probe" >/dev/null 2>&1; then
	exit 0
fi
# Another interpreter of the same version (pyenv, a venv) can use Debian's build.
if PYTHONPATH="$deb" "$py" -c "$probe" >/dev/null 2>&1; then
	echo "$deb"
	exit 0
fi
echo "ensure-pyzmq: $py cannot import Debian's zmq and msgpack from $deb (not the Python version Debian built them for?)" >&2
exit 1
