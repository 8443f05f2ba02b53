"""The one config style: a pydantic model per component, frozen, unknown keys refused, a description
per field, and any field settable from the command line by its dotted name.

``ConfigModel`` is the base of the loop, prompt-evolution and selection configs (the policy spec and
``[cluster]`` use the same settings). ``validate_as`` turns pydantic's error list into one
``ConfigError`` line naming the file and the key; an unknown key names where that key does belong
when another component has it (``roots``). ``field_paths`` walks a model's schema (nested models,
discriminated unions, free-form tables) and ``apply_override`` sets one dotted path in a raw dict,
so the CLI needs no per-field options.
"""

from __future__ import annotations

import tomllib
import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, ValidationError

from evolve.errors import ConfigError

FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True)


class ConfigModel(BaseModel):
    """Frozen, no unknown keys; ints and floats strict (a quoted number or a bool is an error, as the
    hand-written checks had it; lists still become tuples)."""

    model_config = FROZEN


def members(annotation: Any) -> list[Any]:
    """The alternatives of a union (``X | None``, ``Annotated[A | B, ...]``), else the annotation."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return members(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in members(a)]
    return [annotation]


def is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def is_table(t: Any) -> bool:
    return t is dict or typing.get_origin(t) is dict


def field_paths(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every settable dotted path of ``model`` -> its annotation. A nested model contributes its own
    paths (each member of a union, so ``selection.val_tasks`` and ``selection.challenger_pool`` both
    appear); a free-form table (``dict``) is a leaf that also takes ``path.KEY``."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        kinds = [m for m in members(info.annotation) if m is not type(None)]
        nested = [m for m in kinds if is_model(m)]
        if not nested:
            out[path] = info.annotation
        for m in nested:
            for sub, annotation in field_paths(m, f"{path}.").items():
                # a key every member of a union has (its `type`): any member's value
                out[sub] = Union[out[sub], annotation] if sub in out else annotation  # noqa: UP007
    return out


def _leaf(paths: dict[str, Any], path: str) -> tuple[str, Any] | None:
    """(the declared path, its annotation) that ``path`` sets: itself, or a key of a table field."""
    if path in paths:
        return path, paths[path]
    head, _, _ = path.rpartition(".")
    if head in paths and any(is_table(m) for m in members(paths[head])):
        return head, str
    return None


def owners(key: str, roots: dict[str, type[BaseModel]]) -> list[str]:
    """Dotted paths under ``roots`` (settings and the tables holding them) whose last part is ``key``:
    where a misplaced key belongs."""
    found = set()
    for name, model in roots.items():
        for path in field_paths(model, f"{name}."):
            parts = path.split(".")
            found |= {".".join(parts[:i + 1]) for i in range(1, len(parts)) if parts[i] == key}
    return sorted(found)


def validate_as(cls: type[BaseModel], data: Any, source: str, where: str = "",
                roots: dict[str, type[BaseModel]] | None = None) -> Any:
    """``cls.model_validate(data)`` or one ConfigError line: ``SOURCE: WHERE.KEY: problem``."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {describe(e, cls, where, roots)}") from None


def _untag(model: type[BaseModel], loc: list[str]) -> tuple[list[str], str | None]:
    """``loc`` without the tag pydantic inserts after a discriminated union's field
    (``selection.gate.val_tasks`` -> ``selection.val_tasks``), and that tag."""
    out: list = []
    tag = None
    current: type[BaseModel] | None = model
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        out.append(part)
        info = current.model_fields.get(part) if current is not None else None
        models = [m for m in members(info.annotation) if is_model(m)] if info is not None else []
        current = models[0] if len(models) == 1 else None
        if len(models) > 1 and parts:  # the next part is the tag that chose the member
            tag = parts.pop(0)
            current = next((m for m in models if m.model_fields.get("type") and
                            m.model_fields["type"].default == tag), None)
    return out, tag


def describe(e: ValidationError, model: type[BaseModel], where: str = "",
             roots: dict[str, type[BaseModel]] | None = None) -> str:
    """The first error of ``e`` as ``KEY: problem`` (+N more); an unknown key says where it belongs."""
    errors = e.errors()
    err = errors[0]
    loc, tag = _untag(model, [str(p) for p in err.get("loc", ())])
    key = ".".join(([where] if where else []) + loc) or where or "(top level)"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    if err.get("type") == "extra_forbidden":
        found = owners(loc[-1], roots or {}) if loc else []
        own = next((name for name, m in (roots or {}).items() if m is model), "")
        same = [p for p in found if p == f"{own}.{'.'.join(loc)}"]
        if tag and same:  # a key of the union's other member
            return f"unknown key {key!r}: not a setting of type {tag!r} (another type has it){more}"
        elsewhere = [p for p in found if p not in same]
        hint = f"; it belongs in {' or '.join(elsewhere)}" if elsewhere else ""
        return f"unknown key {key!r}{hint}{more}"
    msg = str(err.get("msg", "invalid")).replace("Value error, ", "")
    return f"{key}: {msg}{more}"


def coerce(annotation: Any, raw: str) -> Any:
    """A command-line value for a field: ``none``/``null`` for an optional field, the text itself for a
    string field, else the text read as a TOML value (``8``, ``0.7``, ``true``, ``[1, 4]``,
    ``{prompt = "q"}``), or the text as is when it is not one (pydantic then says what is wrong)."""
    kinds = members(annotation)
    if raw.lower() in ("none", "null") and type(None) in kinds:
        return None
    if all(m is str or (typing.get_origin(m) is Literal and all(isinstance(a, str) for a in typing.get_args(m)))
           or m is type(None) for m in kinds):
        return raw
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_override(data: dict[str, Any], model: type[BaseModel], path: str, raw: str, root: str) -> dict[str, Any]:
    """``data`` (a raw table of ``model``) with the dotted ``path`` (below ``root``) set from ``raw``;
    ConfigError naming the option when no field has that path."""
    leaf = _leaf(field_paths(model), path)
    if leaf is None:
        raise ConfigError(f"--{root}.{path}: no such setting (`evolve config --fields` lists them)")
    parts = path.split(".")
    out = dict(data)
    node = out
    for part in parts[:-1]:
        child = node.get(part)
        child = dict(child) if isinstance(child, dict) else (child.model_dump() if isinstance(child, BaseModel) else {})
        node[part] = child
        node = child
    value = coerce(leaf[1], raw)
    if parts[-1] == "type" and len(parts) > 1 and node.get("type") != value:
        node.clear()  # another member of a discriminated union: the old member's keys do not apply
    node[parts[-1]] = value
    return out
