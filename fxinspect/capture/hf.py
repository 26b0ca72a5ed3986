"""Hugging Face specifics of capture, found by duck typing (transformers is never imported).

A transformers model's forward builds cache objects (``DynamicCache``) when
``use_cache`` is on, which no tier can capture as part of a graph and which are no part
of one forward's computation. :func:`prepare_inputs` passes ``use_cache=False`` when
the model takes it and the user did not choose, and says so in the capture notes.

Example
-------
>>> import torch
>>> class Tiny(torch.nn.Module):
...     config = object()
...     def forward(self, input_ids, use_cache=None):
...         return input_ids
>>> args, kwargs, notes = prepare_inputs(Tiny(), (torch.zeros(1, 2),), {})
>>> kwargs, notes
({'use_cache': False}, ['passed use_cache=False to the Hugging Face model (cache objects are not part of one forward)'])
>>> prepare_inputs(Tiny(), (torch.zeros(1, 2),), {"use_cache": True})[1:]
({'use_cache': True}, [])
"""

from __future__ import annotations

import inspect

import torch

__all__ = ["is_hf_model", "prepare_inputs"]

USE_CACHE = "use_cache"


def is_hf_model(model: torch.nn.Module) -> bool:
    """A transformers-style model: a ``config`` attribute and a ``use_cache`` parameter."""
    return hasattr(model, "config") and USE_CACHE in _parameters(model)


def _parameters(model: torch.nn.Module) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError, AttributeError):
        return {}


def prepare_inputs(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict, list[str]]:
    """``(args, kwargs, notes)``: ``use_cache=False`` added for Hugging Face models.

    Nothing changes when the model is not one, or when ``use_cache`` was given (by
    keyword or position); ``kwargs`` is copied, never modified.
    """
    if not is_hf_model(model):
        return args, kwargs, []
    try:
        bound = inspect.signature(model.forward).bind_partial(*args, **kwargs)
    except TypeError:  # the call itself is wrong: let the tiers report it
        return args, kwargs, []
    if USE_CACHE in bound.arguments:
        return args, kwargs, []
    kwargs = {**kwargs, USE_CACHE: False}
    return (
        args,
        kwargs,
        ["passed use_cache=False to the Hugging Face model (cache objects are not part of one forward)"],
    )
