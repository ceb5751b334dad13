#!/usr/bin/env bash
# Builds the in-house SFU (sfu/inhouse in this repository) into the adapter's
# cache: $1, or $SFUBENCH_CACHE/inhouse-<version>. Idempotent: the build is
# skipped when the binary there was built from the same sources.
# Needs Go >= 1.26 and the Go module proxy (for the pinned modules in go.sum).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../../sfu/inhouse" && pwd)"
version="$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$here/sfu.toml")"
[[ -n "$version" ]] || { echo "install.sh: no version in $here/sfu.toml" >&2; exit 1; }
cache="${1:-${SFUBENCH_CACHE:?install.sh: pass the cache directory or set SFUBENCH_CACHE}/inhouse-$version}"

command -v go >/dev/null || { echo "install.sh: Go >= 1.26 is required and not on PATH" >&2; exit 1; }
gov="$(go env GOVERSION)"
if ! printf '%s\n' go1.26 "$gov" | sort -C -V; then
  echo "install.sh: Go >= 1.26 is required, found $gov" >&2
  exit 1
fi

# The hash covers everything that goes into the binary: module files,
# non-test Go sources and the toolchain.
hash="$(cd "$src" && {
  echo "$gov"
  find . -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs sha256sum
} | sha256sum | cut -d' ' -f1)"

bin="$cache/sfu-inhouse"
if [[ -x "$bin" && "$(cat "$cache/.source-hash" 2>/dev/null)" == "$hash" ]]; then
  echo "sfu-inhouse $version is up to date in $cache"
  exit 0
fi

mkdir -p "$cache"
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o "$bin.tmp" .)
got="$("$bin.tmp" -version)"
if [[ "$got" != "sfu-inhouse $version" ]]; then
  rm -f "$bin.tmp"
  echo "install.sh: built '$got', but sfu.toml pins $version" >&2
  exit 1
fi
mv -f "$bin.tmp" "$bin"
echo "$hash" > "$cache/.source-hash"
echo "built $got into $cache"
