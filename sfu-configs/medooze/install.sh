#!/bin/sh
# Installs the Medooze media server library (pinned; its native module is compiled here against the
# system's Node headers) and the ws package for the adapter's server, into the adapter's cache ($1).
# Idempotent; used by the local lab and by cloud-init alike.
set -eu
version=1.156.2
cache=${1:?usage: install.sh CACHE_DIR}
mkdir -p "$cache"
if [ "$(cat "$cache/.server" 2>/dev/null)" != "$version" ]; then
  command -v npm >/dev/null || { echo "medooze: npm is needed" >&2; exit 1; }
  [ -d /usr/include/node ] || { echo "medooze: Node's headers are needed in /usr/include/node" >&2; exit 1; }
  work="$cache/server"
  rm -rf "$work" && mkdir -p "$work"
  (cd "$work" && npm_config_nodedir=/usr npm install --no-save "medooze-media-server@$version" ws@8.23.0 \
      >"$cache/build.log" 2>&1) || { echo "medooze: npm install failed (log: $cache/build.log)" >&2; exit 1; }
  echo "$version" >"$cache/.server"
fi
