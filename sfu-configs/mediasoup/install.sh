#!/bin/sh
# Installs mediasoup (pinned) with its C++ worker built here, the ws package for the adapter's
# server, and bundles mediasoup-client into the adapter's cache ($1). mediasoup 3.9 and later fetch
# their build dependencies from outside the registries at build time; 3.8.4 bundles them. Its abseil
# needs one line fixed for current glibc, and its bundled gyp predates Python 3.10: gyp-next (the gyp
# Node keeps, from PyPI) reads the same files, so the build needs no old Python. Idempotent; used by
# the local lab and by cloud-init alike.
set -eu
version=3.8.4
client_version=3.6.103
gyp_version=0.22.4
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: install.sh CACHE_DIR}
mkdir -p "$cache"

if [ "$(cat "$cache/.server" 2>/dev/null)" != "$version" ]; then
  command -v npm >/dev/null || { echo "mediasoup: npm is needed" >&2; exit 1; }
  work="$cache/server"
  rm -rf "$work" && mkdir -p "$work"
  (cd "$work" && npm install --silent --no-save --ignore-scripts "mediasoup@$version" ws@8.23.0 >/dev/null)
  worker="$work/node_modules/mediasoup/worker"
  sed -i 's/std::max(SIGSTKSZ, 65536)/std::max<size_t>(SIGSTKSZ, 65536)/' \
    "$worker/deps/libwebrtc/deps/abseil-cpp/abseil-cpp/absl/debugging/failure_signal_handler.cc"
  python3 -m venv "$cache/gyp" && "$cache/gyp/bin/pip" install -q --disable-pip-version-check "gyp-next==$gyp_version"
  rm -rf "$worker/deps/gyp/pylib/gyp"
  ln -s "$("$cache/gyp/bin/python" -c 'import gyp, os; print(os.path.dirname(gyp.__file__))')" "$worker/deps/gyp/pylib/gyp"
  (cd "$worker" && PYTHON="$cache/gyp/bin/python" make -j"$(nproc)" >"$cache/worker-build.log" 2>&1) ||
    { echo "mediasoup: the worker build failed (log: $cache/worker-build.log)" >&2; exit 1; }
  test -x "$worker/out/Release/mediasoup-worker"
  echo "$version" >"$cache/.server"
fi

if [ "$(cat "$cache/.client" 2>/dev/null)" != "$client_version" ]; then
  work="$cache/client"
  rm -rf "$work" && mkdir -p "$work"
  cp "$here/client-entry.js" "$work/entry.js"
  (cd "$work" && npm install --silent --no-save "mediasoup-client@$client_version" esbuild@0.28.2 >/dev/null &&
    mkdir -p "$cache/assets" &&
    node_modules/.bin/esbuild entry.js --bundle --format=iife --minify --outfile="$cache/assets/mediasoup.js" \
      --log-level=warning)
  echo "$client_version" >"$cache/.client"
fi
