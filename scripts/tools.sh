#!/usr/bin/env bash
# Builds the cloud path's tools from the Go module proxy into $SFUBENCH_CACHE/tools/<name>-<version>/
# (SFUBENCH_CACHE defaults to ~/.cache/sfubench), once per version, shared by every clone.
#   scripts/tools.sh NAME...     build those (names below); prints "NAME PATH" per tool
#   scripts/tools.sh --path NAME prints only the binary's path (building it first if needed)
#   scripts/tools.sh --version NAME  prints the version pinned here
# A tool already on PATH at any version is used as is for terraform (or tofu) and kustomize; the
# control plane is always the pinned build, because the tests speak to its API version.
# Build logs go to <dest>.log; a failed build leaves nothing stamped.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cache=${SFUBENCH_CACHE:-$HOME/.cache/sfubench}/tools

# name → version and how to build it. Versions are the newest the module proxy builds on Go 1.26
# (terraform 1.9+ and newer kube releases are refused by the proxy or need replaces it cannot serve).
declare -A VERSION=(
  [terraform]=1.8.5 [tflint]=0.64.0 [kustomize]=5.8.2 [kwok]=0.8.0
  [kube-apiserver]=1.36.3 [kube-controller-manager]=1.36.3 [kube-scheduler]=1.36.3 [etcd]=3.6.16
)
declare -A PACKAGE=(
  [terraform]=github.com/hashicorp/terraform [tflint]=github.com/terraform-linters/tflint
  [kustomize]=sigs.k8s.io/kustomize/kustomize/v5 [kwok]=sigs.k8s.io/kwok/cmd/kwok
)

on_path() {
  case $1 in
    terraform) command -v terraform || command -v tofu ;;
    kustomize) command -v kustomize ;;
    *) return 1 ;;
  esac
}

build() {
  local name=$1 version=${VERSION[$1]} dest bin log
  dest=$cache/$name-$version
  bin=$dest/$name
  [[ -x $bin ]] && { echo "$bin"; return; }
  command -v go >/dev/null || { echo "tools: go not found (needed to build $name $version)" >&2; return 1; }
  mkdir -p "$dest"
  exec 9>"$dest/.lock"
  flock 9
  [[ -x $bin ]] && { echo "$bin"; return; }
  log=$dest.log
  echo "tools: building $name $version (log: $log)" >&2
  local start=$SECONDS ok=1
  case $name in
    kube-*)
      # The wrapper module's replaces let the proxy resolve k8s.io/kubernetes' staging modules;
      # tests/kube/etcd's version must match the one pinned above, as tests/kube's must.
      local minor=${version#*.}
      minor=${minor%%.*}
      (cd "$here/tests/kube" && GOFLAGS=-mod=readonly go build -trimpath -o "$bin.partial" \
        -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
        "k8s.io/kubernetes/cmd/$name") >"$log" 2>&1 || ok=0 ;;
    etcd)
      (cd "$here/tests/kube/etcd" && GOFLAGS=-mod=readonly go build -trimpath -o "$bin.partial" -ldflags "-s -w" \
        go.etcd.io/etcd/server/v3) >"$log" 2>&1 || ok=0 ;;
    terraform)
      GOBIN=$dest.partial go install -trimpath -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" \
        "${PACKAGE[$name]}@v$version" >"$log" 2>&1 && mv "$dest.partial/$name" "$bin.partial" || ok=0 ;;
    *)
      GOBIN=$dest.partial go install -trimpath -ldflags "-s -w" "${PACKAGE[$name]}@v$version" >"$log" 2>&1 &&
        mv "$dest.partial/$name" "$bin.partial" || ok=0 ;;
  esac
  rm -rf "$dest.partial"
  if ((!ok)); then
    rm -f "$bin.partial"
    echo "tools: building $name $version failed (log: $log)" >&2
    return 1
  fi
  mv "$bin.partial" "$bin"
  echo "tools: built $name $version in $((SECONDS - start)) s" >&2
  echo "$bin"
}

resolve() {
  [[ -n ${VERSION[$1]:-} ]] || { echo "tools: unknown tool '$1' (known: ${!VERSION[*]})" >&2; return 2; }
  on_path "$1" || build "$1"
}

if [[ ${1:-} == --version ]]; then
  (($# == 2)) && [[ -n ${VERSION[$2]:-} ]] || { echo "usage: scripts/tools.sh --version NAME" >&2; exit 2; }
  echo "${VERSION[$2]}"
  exit
fi
if [[ ${1:-} == --path ]]; then
  (($# == 2)) || { echo "usage: scripts/tools.sh --path NAME" >&2; exit 2; }
  resolve "$2"
  exit
fi
(($#)) || { echo "usage: scripts/tools.sh NAME... (${!VERSION[*]})" >&2; exit 2; }
for name in "$@"; do
  path=$(resolve "$name")
  echo "$name $path"
done
