"""What every sfubench command shares: its exit codes, and how an error the user can fix becomes
one line."""
from __future__ import annotations

import shutil

# Exit codes: 0 done, 1 the run failed, 2 bad input or missing dependency, 3 the run ran but a
# threshold (--assert) failed, 130 interrupted.
EXIT_FAILED, EXIT_USAGE, EXIT_THRESHOLDS, EXIT_INTERRUPTED = 1, 2, 3, 130


class UsageError(Exception):
    pass


def require(*commands: str) -> None:
    missing = [c for c in commands if shutil.which(c) is None]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}: run `make deps` (scripts/deps.sh) first")


def one_line(e: Exception) -> str:
    return " | ".join(line.strip() for line in str(e).strip().splitlines() if line.strip()) or type(e).__name__
