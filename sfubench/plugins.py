"""Parts found by name in a folder of their own (load shapes, outputs): each module of the package
is imported, and every subclass of the part's base class that has a `name` is registered. A part's
own settings (`options`) join the one schema (config.py)."""
from __future__ import annotations

import importlib
import pkgutil


def discover(package: str, path, base: type) -> dict[str, type]:
    """Name -> class of every `base` subclass the modules of `package` (at `path`) define."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")
    return dict(sorted((c.name, c) for c in _subclasses(base) if c.name))


def _subclasses(cls: type) -> list[type]:
    return [s for sub in cls.__subclasses__() for s in (sub, *_subclasses(sub))]


def options(classes) -> dict:
    """The settings the classes declare, by name."""
    out: dict = {}
    for c in classes:
        out.update(c.options)
    return out
