#!/bin/sh
# ensure-pyzmq.sh PYTHON: make zmq and msgpack importable by PYTHON for the Python suite's KV
# event subscriber (python/tests/test_kv_events.py), from Debian's python3-zmq and
# python3-msgpack: the package itself needs neither, only the test's subscriber does. Prints
# the directory PYTHON must have on PYTHONPATH, or nothing (see ensure-debian-py.sh).
set -eu
exec sh "$(dirname "$0")/ensure-debian-py.sh" "${1:-python3}" "ensure-pyzmq: zmq and msgpack" 'import zmq, msgpack' python3-zmq python3-msgpack
