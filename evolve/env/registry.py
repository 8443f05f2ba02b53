"""``load_environment(name | path)``: a built-in name from the registry, a user's task file or
dataset folder (``evolve.env.task_source``), or a module.

A new environment is one file: a module exposing ``load_environment(**options) -> Environment``,
named by a file path (``path/to/my_env.py``) or a dotted module (``mypkg.my_env``). No core edit.
Built-in names: the five suites and, for each, ``<suite>-repair`` (the self-repair episode).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path

from evolve.env import suites
from evolve.env.base import Environment
from evolve.env.repair import RepairEnv
from evolve.env.task_source import TASK_FILE_SUFFIXES, load_task_source, names_task_source
from evolve.errors import ConfigError

Factory = Callable[..., Environment]

ENVIRONMENTS: dict[str, Factory] = {
    "tiny-coder": suites.tiny_coder,
    "tiny-coder-hard": suites.tiny_coder_hard,
    "tiny-coder-chat": suites.tiny_coder_chat,
    "humaneval": suites.humaneval,
    "humaneval-chat": suites.humaneval_chat,
}


def _repair(base: Factory) -> Factory:
    def factory(max_turns: int = 3, **options) -> Environment:
        return RepairEnv(base(**options), max_turns=max_turns)
    return factory


for _name, _base in list(ENVIRONMENTS.items()):
    ENVIRONMENTS[f"{_name}-repair"] = _repair(_base)


def _repo_fix(**options) -> Environment:
    from evolve.env.repo_fix import load_environment as repo_fix  # lazy: only runs that use it pay

    return repo_fix(**options)


ENVIRONMENTS["repo-fix"] = _repo_fix


def register(name: str, factory: Factory) -> None:
    """Add a built-in name (plugins may call this; ``load_environment`` by path needs no registration)."""
    ENVIRONMENTS[name] = factory


def load_environment(name: str, **options) -> Environment:
    """The environment ``name`` with ``options`` (split_seed, heldout_fraction, max_turns, ...).

    A factory is given only the options it accepts, so a one-file environment may ignore them.
    """
    if name in ENVIRONMENTS:
        return _call(ENVIRONMENTS[name], options, name)
    if names_task_source(name):
        return load_task_source(name, **options)
    module = _import(name)
    factory = getattr(module, "load_environment", None)
    if not callable(factory):
        raise ConfigError(f"environment module {name!r} has no load_environment(**options) function")
    env = _call(factory, options, name)
    missing = [a for a in ("name", "max_turns", "splits", "first_messages", "wrap_verifier", "respond")
               if not hasattr(env, a)]
    if missing:
        raise ConfigError(f"environment {name!r} lacks {', '.join(missing)} (see evolve/env/base.py)")
    return env


def _call(factory: Factory, options: dict, name: str) -> Environment:
    params = inspect.signature(factory).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        options = {k: v for k, v in options.items() if k in params}
    return factory(**options)


def _import(name: str):
    if name.endswith(".py") or "/" in name:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"environment file not found: {name} (known names: {', '.join(sorted(ENVIRONMENTS))})")
        if path.suffix != ".py":
            raise ConfigError(f"{name}: neither a .py environment nor a task file ({', '.join(TASK_FILE_SUFFIXES)}) "
                              "nor a dataset folder saved with save_to_disk")
        key = "evolve_env_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module  # dataclasses and pickling look their module up while it loads
        try:
            spec.loader.exec_module(module)
        except Exception:
            sys.modules.pop(key, None)
            raise
        return module
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ConfigError(f"unknown suite or environment {name!r} (known: {', '.join(sorted(ENVIRONMENTS))}; "
                          "or a path to a .py file / a dotted module with load_environment)") from None
