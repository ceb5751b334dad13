"""What a setting is, apart from the settings themselves (config.py), so that the parts that own
settings of their own (the load shapes) declare them without importing the whole schema."""
from __future__ import annotations

from dataclasses import field

AUTO = "auto"


class ConfigError(ValueError):
    """A setting is wrong; the message is one line meant for the user."""


def opt(default, help, *, min=None, max=None, choices=None, metavar=None, scenario=True, kind=None,
        flag=None, repeat=False):
    """A setting. `scenario`: whether it shapes what the SFU is put through, so that runs differing in
    it are not comparable (compare refuses them, trends keep them apart); where results go, how the
    lab is named and what the clients may spend are not. A default of "auto" is resolved for the
    site the run uses (its `defaults`, sites.py); `kind` is then the setting's type. `flag`: its public name
    (flag, environment variable, file key) where that cannot be the Python name (a keyword).
    `repeat`: the flag may be given several times and a file may give a list; the values are kept
    joined by SEPARATOR."""
    return field(default=default, metadata=dict(help=help, min=min, max=max, choices=choices,
                                                metavar=metavar, scenario=scenario, kind=kind,
                                                flag=flag, repeat=repeat))


SEPARATOR = ";"   # between the values of a repeated setting


def public(name: str, metadata) -> str:
    """A setting's name as users write it (flag without dashes, file key): `flag` or its own."""
    return metadata.get("flag") or name
