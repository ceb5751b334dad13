"""Runs that a test interrupts as a user would, with Ctrl-C."""
import signal


def as_a_terminal_starts_it() -> None:
    """A child's `preexec_fn`: SIGINT at its default, as a terminal's foreground job has it. A shell
    without job control (a script's `cmd &`, nohup) starts its jobs with SIGINT ignored and the
    child inherits that: Python then never raises KeyboardInterrupt, and a test of what the engine
    does on Ctrl-C would see only that nobody pressed it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
