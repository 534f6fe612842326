#!/usr/bin/env bash
# The tests, as CI runs them (.ci/run calls this script): it installs what the tests need where it
# can (Debian packages when run as root, Python packages with pip), then checks formatting, vets,
# runs staticcheck, and runs every test of the library, the server and the CLI under the race
# detector, and the benchmark module's tests.
#
# Usage: bash scripts/test.sh
#
# Only Go is required. The differential tests of the memcached protocol need a real memcached and
# libmemcached's memcapable, the scale-out test twemproxy (nutcracker), the client test Python's
# pymemcache and python-memcached, the check of the systemd unit systemd-analyze, the exporter
# test the Prometheus memcached_exporter (built here from its Go module), the compressed values'
# tests the zstd command and curl (decoders nobody here wrote): without them
# those tests skip, saying so, and this script lists them at the start; with CI=true (as in CI)
# they fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v go >/dev/null 2>&1; then
	echo "go is not installed: https://go.dev/doc/install" >&2
	exit 1
fi
go version
go mod download

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

# What is missing, and the Debian package that has it.
pkgs=()
have nutcracker || pkgs+=(nutcracker)
have memcached || pkgs+=(memcached)
have memcapable || have memccapable || pkgs+=(libmemcached-tools)
have systemd-analyze || pkgs+=(systemd)
have zstd || pkgs+=(zstd)
have curl || pkgs+=(curl)
if [ ${#pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq && apt-get install -y -qq "${pkgs[@]}" >/dev/null
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
		sudo DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
			sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
	fi
fi
missing=()
have nutcracker || missing+=("twemproxy (nutcracker): TestTwemproxy and TestTwemproxySpread")
have memcached || missing+=("memcached: the protocol oracle tests (server/memcache, oracle_test.go)")
have memcapable || have memccapable || missing+=("memcapable (libmemcached-tools): TestMemcapable")
have systemd-analyze || missing+=("systemd-analyze (systemd): TestSystemdUnit (cmd/blobcache)")
have zstd || missing+=("zstd: TestZstdStream (internal/codec)")
have curl || missing+=("curl: TestGetZstd's decoding by curl (server/httpapi)")

# The Python memcached clients that TestPythonClients drives.
if command -v python3 >/dev/null 2>&1 && ! python3 -c "import pymemcache, memcache" >/dev/null 2>&1; then
	python3 -m pip install -q pymemcache python-memcached >/dev/null 2>&1 ||
		python3 -m pip install -q --user pymemcache python-memcached >/dev/null 2>&1 ||
		python3 -m pip install -q --break-system-packages pymemcache python-memcached >/dev/null 2>&1 || true
fi
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import pymemcache, memcache" >/dev/null 2>&1; then
	missing+=("python3 with pymemcache and python-memcached: TestPythonClients")
fi
# The Prometheus memcached_exporter, which TestMemcachedExporter (cmd/blobcache) runs against
# serve. Built from its module in a scratch module of its own, so that none of its dependencies
# enter this repository's go.mod; the public checksum database does not list v0.14.4, so its
# checksum is taken from the module proxy alone (GONOSUMDB).
exporter="$(go env GOPATH)/bin/memcached_exporter"
if [ ! -x "$exporter" ] && ! command -v memcached_exporter >/dev/null 2>&1; then
	scratch="$(mktemp -d)"
	(
		cd "$scratch" && go mod init exporterbuild >/dev/null 2>&1 &&
			GONOSUMDB=github.com/prometheus/memcached_exporter GOFLAGS=-mod=mod \
				go get github.com/prometheus/memcached_exporter/cmd/memcached_exporter@v0.14.4 >/dev/null 2>&1 &&
			GONOSUMDB=github.com/prometheus/memcached_exporter GOFLAGS=-mod=mod \
				go build -o "$exporter" github.com/prometheus/memcached_exporter/cmd/memcached_exporter
	) || true
	rm -rf "$scratch"
fi
[ -x "$exporter" ] || command -v memcached_exporter >/dev/null 2>&1 ||
	missing+=("memcached_exporter (github.com/prometheus/memcached_exporter v0.14.4, a Go build): TestMemcachedExporter")

if [ ${#missing[@]} -gt 0 ]; then
	{
		echo "Not installed, and this script could not install them (it needs root or sudo on Debian):"
		printf '  - %s\n' "${missing[@]}"
		if [ "${CI:-}" = true ]; then
			echo "With CI=true the tests that need them fail."
		else
			echo "The tests that need them will skip, each saying why."
		fi
	} >&2
fi

# Formatting, vet and staticcheck are part of the gate.
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...
# staticcheck, pinned so a new release's checks do not fail an unchanged tree.
go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck="$(go env GOPATH)/bin/staticcheck"
"$staticcheck" ./...
(cd bench && "$staticcheck" ./...)

# The library, the server and the CLI, under the race detector. The library's package takes about
# ten minutes under it on a slow 2-CPU machine, go test's default limit: the limit is raised.
go test -race -timeout 45m ./...
# The memcached front end's tests again with a goroutine per connection (above: event loops,
# the server's default on Linux).
BLOBCACHE_TEST_LOOPS=-1 go test -race -timeout 45m ./server/memcache/

# The benchmark tool is a module of its own (so the library's go.mod stays small): its unit
# tests and a tiny end-to-end run of the engines that need no C library (RocksDB is behind the
# rocksdb build tag).
(cd bench && go mod download && go vet ./... && go test ./...)
# The child binaries of run-rocksdb.sh (one engine each, no chart code) build and refuse to draw.
(cd bench && go vet -tags nocharts,nopebble,nobadger ./... && go test -tags nocharts -run TestChartsOff ./report/)
