// Command image writes the mooncake container image, from scratch, as a tarball that `docker
// load`, `podman load` and containerd (`ctr images import`) accept: no Docker daemon, no base
// image, nothing but the static binary. `make image` runs it (see the Makefile and
// docs/deploy.md):
//
//	go run . -binary ../../bin/mooncake -out ../../dist/mooncake-image.tar -tag mooncake-go:0.1.0
//
// The image holds one layer:
//
//	/usr/local/bin/mooncake                the static binary (CGO_ENABLED=0)
//	/usr/local/bin/<name> -> mooncake      one link per name the binary answers to, as its own
//	                                       `mooncake install-links DIR` makes them
//	                                       (mooncake_master, mooncake_client, ...)
//	/etc/passwd, /etc/group                the user mooncake (uid/gid 65532), which runs it
//	/data                                  owned by that user: --data_dir and root_fs_dir
//	/tmp                                   1777
//
// and runs as 65532:65532 with the entrypoint /usr/local/bin/mooncake, so `docker run IMAGE
// master ...`, `docker run IMAGE mooncake_master --port 50051` and `docker run IMAGE mooncake
// standalone` all work, and so does a Kubernetes `command: [mooncake_master]` (PATH holds the
// links). Every timestamp is SOURCE_DATE_EPOCH (default 0): the same binary gives the same
// image digest.
//
// It lives in a module of its own so that go-containerregistry stays out of the main module's
// graph (the store's binary and its test run never compile it).
package main
