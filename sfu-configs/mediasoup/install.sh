#!/bin/sh
# Installs mediasoup (pinned) with its C++ worker built here, the ws package for the adapter's
# server, and bundles mediasoup-client into the adapter's cache ($1).
#
# mediasoup's meson build takes each library as a subproject that a .wrap downloads from outside
# the registries. Meson uses a subproject's folder as it finds it, so subprojects/ here puts a small
# meson.build in each one's place that hands over Debian's package (libuv1-dev, libsrtp2-dev,
# libusrsctp-dev, libabsl-dev, libflatbuffers-dev with its flatc); downloads are off, so a missing
# one fails rather than reaching out. OpenSSL is the one library built here, from crates.io's
# openssl-src (the wrap's version): Debian's is built with kernel TLS, which this worker's DTLS
# cannot run with (subprojects/openssl/meson.build says why). mediasoup's own sources and build
# files are as published. Why this version and not a newer one: sfu.toml. Idempotent; used by the
# local lab and by cloud-init alike.
set -eu
version=3.13.16
client_version=3.7.2
meson_version=1.3.0      # what this mediasoup's tasks.py installs from PyPI for its build
invoke_version=2.2.0
openssl_crate=300.0.12+3.0.8
openssl_sha256=4d974055736373bab35bdb25e578fd477e1e195611744c42373294ac8897068d
packages="build-essential pkg-config perl curl python3-venv libuv1-dev libsrtp2-dev libusrsctp-dev libabsl-dev
  libflatbuffers-dev flatbuffers-compiler"
here=$(cd "$(dirname "$0")" && pwd)
cache=${1:?usage: install.sh CACHE_DIR}
mkdir -p "$cache"

# OpenSSL as mediasoup's wrap builds it (static, no kernel TLS), into $1/dist.
build_openssl() {
  crate="$cache/openssl-src-$openssl_crate.crate"
  curl -sSfL --retry 3 -o "$crate" "https://static.crates.io/crates/openssl-src/openssl-src-$openssl_crate.crate"
  echo "$openssl_sha256  $crate" | sha256sum -c --quiet
  src="$cache/openssl-src"
  rm -rf "$src" && mkdir -p "$src" && tar -xzf "$crate" -C "$src" --strip-components=1
  (cd "$src/openssl" &&
    ./Configure linux-"$(uname -m)" no-shared no-tests no-ktls no-engine no-dso --prefix="$1/dist" --libdir=lib &&
    make -j"$(nproc)" build_libs && make install_dev) >"$cache/openssl-build.log" 2>&1 ||
    { echo "mediasoup: the OpenSSL build failed (log: $cache/openssl-build.log)" >&2; exit 1; }
  rm -rf "$src" "$crate"
}

if [ "$(cat "$cache/.server" 2>/dev/null)" != "$version" ]; then
  command -v npm >/dev/null || { echo "mediasoup: npm is needed" >&2; exit 1; }
  missing=$(for p in $packages; do
    dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || echo "$p"; done)
  if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086 # a list of package names
    { apt-get update -q && apt-get install -y -q $missing; } >"$cache/apt.log" 2>&1 ||
      { echo "mediasoup: apt-get install failed (log: $cache/apt.log)" >&2; exit 1; }
  fi
  work="$cache/server"
  rm -rf "$work" && mkdir -p "$work"
  # --ignore-scripts: the package's own postinstall first asks GitHub for a prebuilt worker
  (cd "$work" && npm install --silent --no-save --ignore-scripts "mediasoup@$version" ws@8.23.0 >/dev/null)
  worker="$work/node_modules/mediasoup/worker"
  for shim in "$here"/subprojects/*/; do
    name=$(basename "$shim")
    dir=$(sed -n 's/^directory *= *//p' "$worker/subprojects/$name.wrap")
    [ -n "$dir" ] || { echo "mediasoup: no $name.wrap in mediasoup $version's worker" >&2; exit 1; }
    rm -rf "$worker/subprojects/$dir" && cp -r "$shim" "$worker/subprojects/$dir"
  done
  build_openssl "$worker/subprojects/$(sed -n 's/^directory *= *//p' "$worker/subprojects/openssl.wrap")"
  python3 -m venv "$cache/build-env"
  "$cache/build-env/bin/pip" install -q --disable-pip-version-check "invoke==$invoke_version"
  # liburing: Debian's is older than the one this worker pins, and the worker runs without it
  (cd "$worker" && PYTHON="$cache/build-env/bin/python" MESON_VERSION="$meson_version" \
    MESON_ARGS="--wrap-mode=nodownload -Dms_disable_liburing=true" \
    "$cache/build-env/bin/python" -m invoke mediasoup-worker >"$cache/worker-build.log" 2>&1) ||
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
