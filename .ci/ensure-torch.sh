#!/bin/sh
# ensure-torch.sh PYTHON: make torch importable by PYTHON for the Python suite's tensor tests
# (python/tests/test_tensor.py), from Debian's python3-torch: the package itself needs no
# torch, only its tensor helpers do. Prints the directory PYTHON must have on PYTHONPATH, or
# nothing (see ensure-debian-py.sh).
set -eu
exec sh "$(dirname "$0")/ensure-debian-py.sh" "${1:-python3}" "ensure-torch: torch" 'import torch' python3-torch
