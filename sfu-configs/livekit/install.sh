#!/bin/sh
# Builds livekit-server (pinned) from the Go module proxy and bundles livekit-client from npm into the
# adapter's cache ($1). Idempotent: each part is skipped when its stamp matches. Used by the local lab
# and by cloud-init alike.
set -eu
server_version=1.13.5
client_version=2.23.0
here=$(cd "$(dirname "$0")" && pwd)
# the bundle is rebuilt when the client library or what client.html takes from it changes
bundle="$client_version $(cksum <"$here/client-entry.js")"
cache=${1:?usage: install.sh CACHE_DIR}
mkdir -p "$cache"

if [ "$(cat "$cache/.server" 2>/dev/null)" != "$server_version" ]; then
  command -v go >/dev/null || { echo "livekit: Go is needed to build livekit-server" >&2; exit 1; }
  rm -rf "$cache/.gobin"
  GOBIN="$cache/.gobin" GOFLAGS=-trimpath go install "github.com/livekit/livekit-server/cmd/server@v$server_version"
  mv -f "$cache/.gobin/server" "$cache/livekit-server"
  rm -rf "$cache/.gobin"
  echo "$server_version" >"$cache/.server"
fi

if [ "$(cat "$cache/.client" 2>/dev/null)" != "$bundle" ]; then
  command -v npm >/dev/null || { echo "livekit: npm is needed for livekit-client" >&2; exit 1; }
  work="$cache/npm"
  rm -rf "$work" && mkdir -p "$work"
  cp "$here/client-entry.js" "$work/entry.js"
  (cd "$work" && npm install --silent --no-save "livekit-client@$client_version" esbuild@0.28.2 >/dev/null &&
    mkdir -p "$cache/assets" &&
    node_modules/.bin/esbuild entry.js --bundle --format=iife --minify --outfile="$cache/assets/livekit.js" \
      --log-level=warning)
  echo "$bundle" >"$cache/.client"
fi
