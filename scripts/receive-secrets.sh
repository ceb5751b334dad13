#!/bin/sh
# The one thing a run's SSH key may do on an SFU host: its authorized_keys line forces this command
# (restrict,command=...), whatever the client asks to run. It writes the run's token and the SFU's
# secrets, read from stdin as SFUBENCH_<NAME>=VALUE lines, to FILE, whole or not at all (a rename), readable by
# its owner only; `sfubench serve --secrets FILE` waits for it. Anything else on stdin is refused.
#   receive-secrets.sh FILE
set -eu
[ $# -eq 1 ] || { echo "usage: receive-secrets.sh FILE" >&2; exit 2; }
file=$1
umask 077
tmp=$file.new.$$
trap 'rm -f "$tmp"' EXIT
# at most 64 KiB: a secrets file is a few lines
head -c 65536 >"$tmp"
if [ ! -s "$tmp" ] || grep -qvE '^SFUBENCH_[A-Z0-9_]+=[[:graph:]]+$' "$tmp"; then
  echo "receive-secrets: refused: expected SFUBENCH_<SFU>_<KEY>=VALUE lines only" >&2
  exit 1
fi
mv "$tmp" "$file"
trap - EXIT
echo "receive-secrets: $(wc -l <"$file") secret(s) written to $file"
