"""Caching. This module holds the identity-keyed cache behind the package's ``get_*`` helpers.

Chapters are independent pages, yet several ask for the same expensive object (a model's
contextual circuit, its neuron scores, a pool of prompts). The ``get_*`` functions keep the last
few in an :class:`IdentityCache`, keyed by the model or circuit *object* (not a copy of it).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any, Callable


class IdentityCache:
    """A small cache keyed by objects' identity that holds only weak references to them.

    ``id()`` alone is not a safe key: once an object is garbage-collected its id can be reused by
    a new object, which would then be served the old object's value. Each entry therefore keeps
    weak references to its key objects and counts only while they are the very objects asked
    about. The oldest entries are dropped beyond ``size``.
    """

    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict[tuple, tuple[list[weakref.ref], Any]] = OrderedDict()

    def get(self, objects: tuple, extra: tuple, build: Callable[[], Any]) -> Any:
        """The value cached for ``objects`` (by identity) and ``extra`` (by value), else built."""
        key = tuple(id(obj) for obj in objects) + tuple(extra)
        entry = self._entries.get(key)
        if entry is not None and all(ref() is obj for ref, obj in zip(entry[0], objects)):
            self._entries.move_to_end(key)
            return entry[1]
        value = build()
        self._entries[key] = ([weakref.ref(obj) for obj in objects], value)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        self._entries.clear()
