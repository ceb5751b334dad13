#!/usr/bin/env bash
# Fetch Selenium Grid (the version pinned in grid/pom.xml) and its dependencies into DEST/lib.
# DEST defaults to $SFUBENCH_CACHE/grid-<version> (SFUBENCH_CACHE defaults to ~/.cache/sfubench), so every
# clone on the machine shares one copy. Idempotent: DEST/lib carries a stamp with the pom's hash.
# Prints one line: what it did.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pom=$here/pom.xml
version=$(sed -n '/<artifactId>selenium-grid<\/artifactId>/{n;s:.*<version>\(.*\)</version>.*:\1:p}' "$pom")
[[ -n $version ]] || { echo "grid: cannot read the selenium-grid version from $pom" >&2; exit 1; }
dest=${1:-${SFUBENCH_CACHE:-$HOME/.cache/sfubench}/grid-$version}
hash=$(sha256sum "$pom" | cut -d' ' -f1)
stamp=$dest/lib/.pom-sha256

if [[ -f $stamp && $(<"$stamp") == "$hash" ]]; then
  echo "grid $version: cached in $dest/lib"
  exit 0
fi

for tool in mvn java; do
  command -v "$tool" >/dev/null || { echo "grid: $tool not found (scripts/deps.sh apt installs it)" >&2; exit 1; }
done

mkdir -p "$dest"
# Two clones installing at once must not interleave their copies.
exec 9>"$dest/.lock"
flock 9
if [[ -f $stamp && $(<"$stamp") == "$hash" ]]; then
  echo "grid $version: cached in $dest/lib (installed meanwhile)"
  exit 0
fi

# Fetch into a scratch folder and swap it in, so an interrupted fetch never leaves a stamped partial lib.
tmp=$dest/lib.partial
rm -rf "$tmp"
log=$dest/mvn.log
start=$SECONDS
if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$tmp" >"$log" 2>&1; then
  rm -rf "$tmp"
  err=$(grep -m1 '\[ERROR\]' "$log" || tail -n1 "$log")
  echo "grid: mvn failed (full log: $log): ${err//$'\e'\[0m/}" >&2
  exit 1
fi
echo "$hash" >"$tmp/.pom-sha256"
rm -rf "$dest/lib"
mv "$tmp" "$dest/lib"
echo "grid $version: fetched $(ls "$dest/lib" | wc -l) jars into $dest/lib in $((SECONDS - start)) s"
