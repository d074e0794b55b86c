#!/bin/sh
# staticcheck.sh [ARGS]: runs staticcheck, pinned, over ./... (or ARGS). `make lint` and
# .ci/run call it. `go run pkg@version` fetches it once through the Go module proxy (checked
# against sum.golang.org) and builds it into the Go build cache; it never touches go.mod.
# Which checks run is in staticcheck.conf at the repository root.
set -eu
# 2026.2.2: the first release that knows Go 1.26. Bump deliberately, and fix what it finds.
STATICCHECK_VERSION=v0.8.2
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- ./...
exec go run "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" "$@"
