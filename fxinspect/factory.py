"""What the command line's ``MODULE:CALLABLE`` names, built into a model, strictly.

``MODULE:CALLABLE`` is a function or class (``torchvision.models:resnet18``), a file's
(``path/to/file.py:build_model``), or a Hugging Face config class
(``transformers:GPT2Config``, built with ``AutoModel.from_config``); a Hugging Face
``config.json`` file (``path/to/config.json``, as a model's page on the Hub has it) is
built the same way, without a download. A factory is called with the positional and
keyword arguments given (``--args``, ``--factory-kwargs``); a config takes its fields
(``--config``, over the file's). ``generative=True`` builds a config's model with its
language-modelling head (``AutoModelForCausalLM``, or the sequence-to-sequence one for an
encoder-decoder), as generation needs. Every name is
checked: a misspelt module, attribute, config field or keyword is an error naming the
closest valid one, and a factory that raises is reported as the factory, not the model.

Example
-------
>>> build("torch.nn:Linear", args=[4, 2]).weight.shape
torch.Size([2, 4])
>>> build("torch.nn:Lineer")
Traceback (most recent call last):
fxinspect.errors.FxInspectError: 'torch.nn' has no 'Lineer' (did you mean 'Linear'?)
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import json
import pkgutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from .capture.base import one_line
from .errors import FxInspectError

__all__ = ["build", "check_keywords"]


def closest(name: str, options: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the option closest to ``name``, or ``""``."""
    found = difflib.get_close_matches(name, list(options), n=1)
    return f" (did you mean {found[0]!r}?)" if found else ""


def _module(name: str) -> Any:
    if name.endswith(".py"):
        path = Path(name)
        if not path.is_file():
            raise FxInspectError(f"no file {name!r}")
        loader = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or name
        parent, _, last = missing.rpartition(".")
        if parent:  # a submodule: the closest sibling
            siblings = [m.name for m in pkgutil.iter_modules(getattr(importlib.import_module(parent), "__path__", []))]
            hint = closest(last, siblings)
        else:  # a top-level package: the closest installed one, else how to install it
            hint = (
                closest(missing, (m.name for m in pkgutil.iter_modules()))
                or f" (is it installed? pip install {missing})"
            )
        raise FxInspectError(f"cannot import {name!r}: no module named {missing!r}{hint}") from None


def _resolve(spec: str) -> Any:
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise FxInspectError(f"expected MODULE:CALLABLE such as torchvision.models:resnet18, got {spec!r}")
    obj = _module(module_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = [n for n in dir(obj) if not n.startswith("_")]
            raise FxInspectError(f"{module_name!r} has no {attr!r}{closest(part, public)}")
        obj = getattr(obj, part)
    return obj


def _is_hf_config(obj: Any) -> bool:
    return isinstance(obj, type) and obj.__name__.endswith("Config") and hasattr(obj, "model_type")


def _from_config(config_class: type, fields: dict, base: dict | None = None, generative: bool = False):
    """The model of ``config_class(**base, **fields)``; an unknown field of ``fields`` is an error.
    ``generative``: the model with its language-modelling head (the first auto class that has one)."""
    import transformers

    known = set(config_class().to_dict()) | set(inspect.signature(config_class).parameters)
    for key in fields:
        if key not in known:
            raise FxInspectError(f"--config: {config_class.__name__} has no field {key!r}{closest(key, known)}")
    config = config_class(**fields) if base is None else config_class.from_dict({**base, **fields})
    if not generative:
        return transformers.AutoModel.from_config(config)
    for auto in _GENERATIVE:
        auto_class = getattr(transformers, auto)
        if config_class in auto_class._model_mapping:
            return auto_class.from_config(config)
    raise FxInspectError(
        f"{config_class.__name__} has no generative model in transformers (none of {', '.join(_GENERATIVE)})"
    )


_GENERATIVE = ("AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForSpeechSeq2Seq")


def _config_file(path: str) -> tuple[type, dict]:
    """A Hugging Face ``config.json``: its config class (by its ``model_type``) and its fields."""
    from transformers import CONFIG_MAPPING

    file = Path(path)
    if not file.is_file():
        raise FxInspectError(f"no file {path!r}")
    try:
        fields = json.loads(file.read_text())
    except json.JSONDecodeError as exc:
        raise FxInspectError(f"{path} is not JSON ({exc.msg})") from None
    model_type = fields.get("model_type") if isinstance(fields, dict) else None
    if model_type not in CONFIG_MAPPING:
        given = f"model_type {model_type!r}" if model_type else "no model_type"
        raise FxInspectError(
            f"{path}: expected a Hugging Face config.json with a model_type transformers knows, "
            f"got {given}{closest(str(model_type), CONFIG_MAPPING.keys()) if model_type else ''}"
        )
    return CONFIG_MAPPING[model_type], fields


def build(
    spec: str,
    config: dict | None = None,
    args: Sequence[Any] = (),
    kwargs: dict | None = None,
    generative: bool = False,
) -> torch.nn.Module:
    """The model ``spec`` names: see the module's docstring."""
    if spec.endswith(".json"):
        if args or kwargs:
            raise FxInspectError(f"{spec} is a config file: --args and --factory-kwargs do not apply (--config does)")
        config_class, fields = _config_file(spec)
        return _from_config(config_class, config or {}, fields, generative)
    obj, kwargs = _resolve(spec), kwargs or {}
    if isinstance(obj, torch.nn.Module):
        if config or args or kwargs:
            raise FxInspectError(f"{spec} is a module already: --config, --args and --factory-kwargs do not apply")
        return obj
    if _is_hf_config(obj):
        return _from_config(obj, config or {}, generative=generative)
    if config:
        raise FxInspectError("--config applies to a Hugging Face config class (such as transformers:GPT2Config)")
    try:
        inspect.signature(obj).bind(*args, **kwargs)
    except TypeError as exc:
        how = "without arguments" if not (args or kwargs) else "with the --args/--factory-kwargs given"
        raise FxInspectError(f"{spec} cannot be called {how} ({exc}); give them, or name a factory that can") from None
    except ValueError:  # a builtin without a signature: calling it will tell
        pass
    try:
        model = obj(*args, **kwargs)
    except Exception as exc:
        raise FxInspectError(f"building the model: {spec} raised {one_line(exc, limit=500)}") from exc
    if not isinstance(model, torch.nn.Module):
        raise FxInspectError(f"{spec} returned {type(model).__name__}, expected a torch.nn.Module")
    return model


def check_keywords(model: torch.nn.Module, names: Iterable[str]) -> None:
    """Keyword inputs the forward does not name: an error with the closest name. A forward
    that takes ``**kwargs`` accepts any name, so only a near miss of one it names is one."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return
    named = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for name in names:
        if name in named:
            continue
        hint = closest(name, named)
        if not open_ended or hint:
            raise FxInspectError(
                f"{type(model).__name__}.forward takes no keyword {name!r}{hint}; it takes {', '.join(named)}"
            )
