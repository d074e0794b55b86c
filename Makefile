# Developer shortcuts. CI runs .ci/run, which runs the README's test command.
GO ?= go
TAGS ?= invariants
PKGS ?= ./...

.PHONY: test testrace stress lint bench fuzz check build install chromium libmooncake_store wheel image chart-check gpu-bundle

build:
	CGO_ENABLED=0 $(GO) build -o bin/mooncake ./cmd/mooncake

# libmooncake_store builds the C library (the only cgo target; needs gcc). Header: cmd/libmooncake_store/mooncake_store.h
libmooncake_store:
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o bin/libmooncake_store.so ./cmd/libmooncake_store

# gpu-bundle builds dist/gpu-bundle: what benchmarks/gpu/run.sh needs on a GPU machine that has
# Python with torch but no Go: the mooncake binary, the C library and the Python package,
# stripped so that the three fit what a device session carries (docs/python.md, "GPU memory").
gpu-bundle:
	rm -rf dist/gpu-bundle && mkdir -p dist/gpu-bundle
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o dist/gpu-bundle/mooncake ./cmd/mooncake
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags='-s -w' -buildmode=c-shared -o dist/gpu-bundle/libmooncake_store.so ./cmd/libmooncake_store
	rm -f dist/gpu-bundle/libmooncake_store.h
	mkdir -p dist/gpu-bundle/python && cp -r python/mooncake dist/gpu-bundle/python/mooncake
	find dist/gpu-bundle -name __pycache__ -prune -exec rm -rf {} +
	du -sh dist/gpu-bundle

# wheel builds dist/mooncake_go-VERSION-py3-none-manylinux_2_NN_ARCH.whl: the Python package with
# the C library inside (built here with Go and gcc; installing it needs neither). NN is the
# newest glibc the library needs (docs/python.md, "A wheel without Go").
PYTHON ?= python3
wheel:
	$(PYTHON) python/buildtools/mooncake_build.py dist

# image writes dist/mooncake-image.tar: the static binary (stripped) in an OCI image built from
# scratch, non-root, for `docker load` and `ctr images import`; no Docker daemon. The builder is
# deploy/image, a Go module of its own (go-containerregistry stays out of the store's graph).
IMAGE_TAG ?= mooncake-go:latest
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/mooncake-image ./cmd/mooncake
	cd deploy/image && $(GO) run . -binary ../../bin/mooncake-image -out ../../dist/mooncake-image.tar \
	  -tag $(IMAGE_TAG) -arch $$($(GO) env GOARCH)

# chart-check renders the Helm chart (deploy/helm/mooncake) with helm's Go engine for its
# defaults and two value sets, validates every object with kubeconform (strict) against the
# schemas of Kubernetes' own OpenAPI spec and the Prometheus Operator's CRD, decodes it strictly
# into its Kubernetes API type, and checks the masters' peers, the workers' volumes and huge pages, and every flag against the
# binary (deploy/chartcheck, a module of its own: helm and client-go compile for about two
# minutes on two cores, so it is not part of the default test run).
chart-check:
	cd deploy/chartcheck && $(GO) test -count=1 .

# install puts the binary in $(PREFIX)/bin with Mooncake's binary names linked to it
# (mooncake_master, mooncake_client, mooncake_http_metadata_server).
PREFIX ?= /usr/local
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 bin/mooncake $(DESTDIR)$(PREFIX)/bin/mooncake
	$(DESTDIR)$(PREFIX)/bin/mooncake install-links $(DESTDIR)$(PREFIX)/bin

test:
	$(GO) test -tags '$(TAGS)' $(PKGS)

testrace:
	$(GO) test -race -tags '$(TAGS)' -timeout 15m $(PKGS)

# stress runs the named tests many times: make stress PKGS=./dram RUN=TestArena
stress:
	$(GO) test -race -tags '$(TAGS)' -count 20 -run '$(RUN)' $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# fuzz runs every fuzz target for FUZZTIME each (not in CI).
FUZZTIME ?= 60s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# lint runs go vet, gofmt and staticcheck (pinned in .ci/staticcheck.sh, checks in staticcheck.conf).
lint:
	$(GO) vet $(PKGS)
	sh .ci/staticcheck.sh $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

check: lint
	$(GO) mod tidy -diff
	CGO_ENABLED=0 $(GO) build ./...

# chromium installs headless Chromium (Debian's package) for the dashboard test when missing.
chromium:
	sh .ci/ensure-chromium.sh
