#!/usr/bin/env bash
# Installs what sfubench needs on a Debian 12 machine; safe to rerun (each step skips when already done).
#   scripts/deps.sh                 the steps a load test needs: apt, python, grid
#   scripts/deps.sh apt|python|grid|cloud|go|node|host ...   only those steps (cloud: the cloud path's
#                                   tools and the suite's control plane, built from the Go module proxy;
#                                   go, node: toolchains an SFU's install needs on a bare cloud host;
#                                   host: the venv such a host serves its SFU with, in place of python's)
# One line per step on stdout; on failure one line on stderr naming the step and its log, exit status 1.
# Environment: PYTHON (the interpreter for a new .venv, default python3), SFUBENCH_CACHE (see grid/install.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
logs=$root/.cache/deps
APT_PACKAGES=(
  chromium chromium-driver ffmpeg janus libjs-janus-gateway opencv-data iproute2 procps fonts-dejavu-core maven
  espeak-ng  # the microphone's speech (sfubench/media.py)
  libvpx-dev pkg-config gcc  # VP9 SVC, which ffmpeg cannot encode: synth/svcenc/svcenc.c built against libvpx
  nftables  # the SFU's traffic counted by protocol: media (UDP) apart from signalling (TCP)
  ethtool  # the lab's emulated link turns veth offloads off
  python3-venv  # a bare Debian python3 cannot create a venv without it
  openssl       # the suite's control plane signs service-account tokens with a key it makes
  openssh-client  # a cloud run hands an SFU's secrets to its host over SSH
  openssh-server  # the suite's miniature cloud host takes them as a real one does (never started as a service)
  postgresql-15 libpq5  # a results database runners share (psycopg uses libpq); the suite starts its own server
  prometheus prometheus-pushgateway  # live samples and the dashboard's queries; the suite starts its own
  debootstrap systemd-container  # the cloud rehearsal's bare Debian host, booted with systemd
)
# Services that packages above would start on their default ports, kept off: runs start their own.
declare -A SERVICES=([janus]=janus.service [openssh-server]=ssh.service [postgresql-15]=postgresql.service
  [prometheus]=prometheus.service [prometheus-pushgateway]=prometheus-pushgateway.service)

step=
fail() {
  echo "deps: $step failed: $*" >&2
  exit 1
}

# Sets $detail to what was done.
step_apt() {
  local missing=() p log=$logs/apt.log
  for p in "${APT_PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    detail=cached
    return
  fi
  ((EUID == 0)) || fail "needs root to install: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >"$log" 2>&1 || fail "apt-get update (log: $log)"
  # Debian's policy-rc.d (exit 101): no package starts a service while it is installed
  local policy=/usr/sbin/policy-rc.d made=
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=1
  fi
  apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1 || {
    [[ -z $made ]] || rm -f "$policy"
    fail "apt-get install ${missing[*]} (log: $log)"
  }
  [[ -z $made ]] || rm -f "$policy"
  for p in "${missing[@]}"; do   # nor at the next boot
    if [[ -n ${SERVICES[$p]:-} && -d /run/systemd/system ]]; then
      systemctl disable --now "${SERVICES[$p]}" >>"$log" 2>&1 || fail "systemctl disable ${SERVICES[$p]} (log: $log)"
    fi
  done
  detail="installed ${missing[*]}"
}

# .venv with what `pip install` is given, then the package itself (editable), skipped where the
# digest `want` of what it installs is the one its marker kept.
install_venv() {
  local venv=$root/.venv log=$logs/$1.log want=$2
  shift 2
  if [[ -f $venv/.deps-sha256 && $(<"$venv/.deps-sha256") == "$want" ]]; then
    detail=cached
    return
  fi
  : >"$log"
  if ! "$venv/bin/python" -c '' >>"$log" 2>&1; then
    "${PYTHON:-python3}" -m venv --clear "$venv" >>"$log" 2>&1 || fail "creating $venv (log: $log)"
  fi
  local pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input -q)
  # --no-compile: most of the packages' modules are never imported; those that are compile on first
  # import, rather than every one of them at install
  "${pip[@]}" install --no-compile "$@" >>"$log" 2>&1 || fail "pip install $* (log: $log)"
  "${pip[@]}" install --no-deps -e "$root" >>"$log" 2>&1 || fail "pip install -e . (log: $log)"
  echo "$want" >"$venv/.deps-sha256"
  detail="$venv updated"
}

step_python() {
  # pyproject.toml too: the editable install's metadata and entry points come from it.
  install_venv python "$(cat "$root/requirements.txt" "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)" \
    -r "$root/requirements.txt"
}

# A cloud host that only serves an SFU (cloud-init's) runs `sfubench serve`, which imports no more
# than these: not the reports', the scorers' or the suite's packages, whose wheels took a minute and
# a half of every host's boot. Their pins are requirements.txt's.
HOST_PACKAGES=(psutil)
step_host() {
  local pins
  pins=$(grep -E "^($(IFS='|'; echo "${HOST_PACKAGES[*]}"))==" "$root/requirements.txt" | cut -d' ' -f1) ||
    fail "requirements.txt pins none of ${HOST_PACKAGES[*]}"
  install_venv host "host $(printf '%s\n' "$pins" | cat - "$root/pyproject.toml" | sha256sum | cut -d' ' -f1)" $pins
}

step_grid() {
  local out
  out=$("$root/grid/install.sh" 2>&1) || fail "${out##*$'\n'}"
  if [[ $out == *": cached in "* ]]; then detail=cached; else detail=${out#grid }; fi
}

# Go for the SFUs built from Go sources (an adapter's `toolchains`), on a bare Debian 12 host
# (cloud-init's first steps): Debian 12's own Go is too old to build them or to fetch a newer
# toolchain, its backports' Go can fetch one, and the Go module proxy serves it (golang.org/toolchain,
# checked against the checksum database as any module); that one becomes the system's Go.
GO_MIN=1.26 GO_TOOLCHAIN=go1.27.3 GO_BOOTSTRAP=golang-1.23-go
step_go() {
  local log=$logs/go.log have gopath
  have=$(go env GOVERSION 2>/dev/null || true)
  if [[ -n $have ]] && printf '%s\n' "go$GO_MIN" "$have" | sort -C -V; then
    detail=cached
    return
  fi
  ((EUID == 0)) || fail "needs root to install Go $GO_MIN or later"
  : >"$log"
  export DEBIAN_FRONTEND=noninteractive
  echo "deb http://deb.debian.org/debian bookworm-backports main" >/etc/apt/sources.list.d/sfubench-backports.list
  apt-get update -q >>"$log" 2>&1 || fail "apt-get update (log: $log)"
  apt-get install -y -q --no-install-recommends -t bookworm-backports "$GO_BOOTSTRAP" ca-certificates >>"$log" 2>&1 ||
    fail "apt-get install $GO_BOOTSTRAP (log: $log)"
  gopath=$(mktemp -d)
  GOPATH=$gopath GOCACHE=$gopath/cache GOTOOLCHAIN=$GO_TOOLCHAIN /usr/lib/go-1.23/bin/go version >>"$log" 2>&1 ||
    fail "fetching $GO_TOOLCHAIN from the Go module proxy (log: $log)"
  rm -rf "/usr/local/lib/$GO_TOOLCHAIN"
  cp -a "$gopath"/pkg/mod/golang.org/toolchain@v0.0.1-"$GO_TOOLCHAIN".linux-*/ "/usr/local/lib/$GO_TOOLCHAIN"
  chmod -R u+w "$gopath" && rm -rf "$gopath"
  ln -sf "/usr/local/lib/$GO_TOOLCHAIN/bin/go" /usr/local/bin/go
  detail="installed $(go env GOVERSION)"
}

# Node.js with npm, and what npm's native modules compile with, from Debian.
step_node() {
  local log=$logs/node.log
  if command -v node >/dev/null && command -v npm >/dev/null && [[ -d /usr/include/node ]]; then
    detail=cached
    return
  fi
  ((EUID == 0)) || fail "needs root to install Node.js"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >"$log" 2>&1 || fail "apt-get update (log: $log)"
  apt-get install -y -q --no-install-recommends nodejs npm libnode-dev g++ make python3 >>"$log" 2>&1 ||
    fail "apt-get install nodejs npm (log: $log)"
  detail="installed node $(node --version)"
}

# ~15 min on a fresh machine of 2 cores (kube-apiserver 4.5, terraform 4, tflint 2), then cached by version.
step_cloud() {
  local out
  out=$("$root/scripts/tools.sh" terraform tflint kustomize etcd kube-apiserver kube-controller-manager \
    kube-scheduler kwok 2>&1) || fail "${out##*$'\n'}"
  if [[ $out == *"tools: built "* ]]; then
    detail=$(grep -o 'built [a-z-]* [0-9.]*' <<<"$out" | sed 's/^built //' | paste -sd, -)
    detail="built ${detail//,/, }"
  else
    detail=cached
  fi
}

steps=("$@")
((${#steps[@]})) || steps=(apt python grid)
for step in "${steps[@]}"; do
  [[ $step == @(apt|python|grid|cloud|go|node|host) ]] ||
    { echo "usage: scripts/deps.sh [apt|python|grid|cloud|go|node|host]..." >&2; exit 2; }
done
mkdir -p "$logs"
for step in "${steps[@]}"; do
  start=$SECONDS
  detail=
  "step_$step"
  [[ $detail == cached ]] || detail+=", $((SECONDS - start)) s"
  echo "deps: $step ok ($detail)"
done
