#!/usr/bin/env bash
# make's pytest over one marker expression (a tier of docs/testing.md), in two passes: the tests marked
# `beside` (tests/support/tiers.py: they neither load the machine nor time anything on it) on every
# core at once, then the rest one at a time, as their timings and the clients' headroom want.
#   scripts/pytest.sh EXPR [PYTEST ARGS...]     the arguments go to both passes
# pytest exits 5 when it collected nothing: one pass may, the tier may not.
set -u
expr=$1
shift
py=.venv/bin/python
"$py" -m pytest -ra --durations=20 -m "($expr) and beside" -n auto --dist loadfile "$@"
beside=$?
"$py" -m pytest -ra --durations=20 -m "($expr) and not beside" "$@"
alone=$?
if [ "$beside" -eq 5 ] && [ "$alone" -eq 5 ]; then
  echo "make: no tests were collected" >&2
  exit 1
fi
for rc in "$beside" "$alone"; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
done
