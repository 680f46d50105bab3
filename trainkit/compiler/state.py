"""Where a region finds tensors by name, and where it keeps state for its next call.

A region reads tensors it is not given (parameters, a closure's tensors: ``reachable_tensors``, ``watch_points``,
guarded by ``Guards``) and may leave tensors it made where its next call finds them: an RNN's hidden state in a
list of its closure (``state[0] = (h, c)``), a module attribute (``self.last = out.detach()``), a global. A replay
repeats such a store: ``carried`` finds, after the capture, each place (a *root*: a closure cell, a global, an item
of a list or dict held there, a module's plain attribute) that now holds tensors the region made, and each tensor
the region read from such a place, which a replay reads from the place anew (``locate``) rather than keeping the
one the capture saw.
"""

from __future__ import annotations

import functools

from ..autograd.tensor import Tensor

DEPTH = 3  # how deep into tuples, lists and dicts a root's value is searched for tensors


def _code_of(fn):
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__func__", fn)


def reachable_tensors(fn) -> list:
    """The tensors a function reaches by name: in its closure, the globals its code names, a partial's arguments.
    An op may take one's array as a keyword argument (a loss's targets, an embedding's indices): known, the array
    is read from its tensor at each replay.

    >>> import trainkit
    >>> y = trainkit.tensor([1, 0])
    >>> [t is y for t in reachable_tensors(lambda: y + 1)]
    [True]
    """
    found: list = []
    while isinstance(fn, functools.partial):
        found.extend(v for v in (*fn.args, *fn.keywords.values()) if isinstance(v, Tensor))
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not yet filled
            continue
        if isinstance(value, Tensor):
            found.append(value)
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    for name in code.co_names if code is not None else ():
        value = names.get(name)
        if isinstance(value, Tensor):
            found.append(value)
    return found


def watch_points(fn, modules) -> list:
    """Where the region finds tensors by name rather than through its arguments: ``(container, key, tensor)`` for
    each tensor in the function's closure (or in a list, tuple or dict there), in the globals its code names, and
    in the plain attributes of the modules it calls. A later call that finds another object there must not
    replay the plan (``Guards``).

    >>> import trainkit
    >>> w = trainkit.ones(1)
    >>> [t is w for _, _, t in watch_points(lambda: w * 2, [])]
    [True]
    """
    points: list = []

    def look(container, key, value):
        if isinstance(value, Tensor):
            points.append((container, key, value))
        elif isinstance(value, (list, tuple)) and key is not None:
            points.extend((value, i, v) for i, v in enumerate(value) if isinstance(v, Tensor))
        elif isinstance(value, dict) and key is not None:
            points.extend((value, k, v) for k, v in value.items() if isinstance(v, Tensor))

    for container, key in _places(fn, ()):  # its closure's cells and the globals it names
        look(container, key, current(container, key))
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, Tensor):
                points.append((vars(module), name, value))
    return points


def current(container, key):
    """What a root or watch point holds now: a closure cell's contents (``key`` "cell"), a dict's, list's or
    tuple's item; None when it is gone.

    >>> current({"h": 1}, "h"), current([1, 2], 5)
    (1, None)
    """
    if key == "cell" and not isinstance(container, (dict, list, tuple)):
        try:
            return container.cell_contents
        except ValueError:
            return None
    if isinstance(container, dict):
        return container.get(key)
    return container[key] if key < len(container) else None


def put(container, key, value) -> None:
    """Store ``value`` at a root, as the region's own code did."""
    if key == "cell" and not isinstance(container, (dict, list, tuple)):
        container.cell_contents = value
    else:
        container[key] = value


def roots(fn, modules) -> list:
    """``(container, key)`` of every place a region may keep state for its next call: its closure's cells and the
    globals its code names (for a list or dict there: its items), the plain attributes of ``modules``.

    >>> state = [None, None]
    >>> [key for _, key in roots(lambda: state, [])]
    [0, 1]
    """
    found: list = []
    for container, key in _places(fn, modules):
        _add(found, container, key, current(container, key))
    return found


def _add(found: list, container, key, value, held: list | None = None, depth: int = 0) -> None:
    """A root; for a list or dict (changed in place, not replaced), the roots of its items instead, ``DEPTH``
    deep, each such container noted in ``held`` with the place that holds it."""
    if isinstance(value, (list, dict)) and depth < DEPTH:
        if held is not None:
            held.append((container, key, value))
        for k, item in list(enumerate(value) if isinstance(value, list) else value.items()):
            _add(found, value, k, item, held, depth + 1)
    else:
        found.append((container, key))


def anchors(fn, modules) -> list:
    """``(container, key, obj)`` for each list or dict whose items are roots (see ``roots``): the place that holds
    it must still hold that same object for a plan to fit, or its stores and reads would go to a list the code no
    longer uses.

    >>> box = {"state": [None]}
    >>> [(key, type(obj).__name__) for _, key, obj in anchors(lambda: box, [])]
    [('box', 'dict'), ('state', 'list')]
    """
    held: list = []
    for container, key in _places(fn, modules):
        _add([], container, key, current(container, key), held)
    return held


def _places(fn, modules) -> list:
    """The cells, globals and module attributes ``roots`` starts from."""
    found: list = []
    fn = _code_of(fn)
    for cell in getattr(fn, "__closure__", None) or ():
        found.append((cell, "cell"))
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    found.extend((names, name) for name in (code.co_names if code is not None else ()) if name in names)
    for module in modules:
        found.extend((vars(module), name) for name, value in vars(module).items() if not _table(name, value))
    return found


def _table(name: str, value) -> bool:
    """A module's own table (parameters, buffers, submodules, hooks), not an attribute of the model's."""
    return name.startswith("_") and isinstance(value, dict)


def module_roots(module) -> list:
    """The roots of a module's own plain attributes (not its tables of parameters, buffers, submodules and
    hooks)."""
    found: list = []
    for name, value in vars(module).items():
        if not _table(name, value):
            _add(found, vars(module), name, value)
    return found


def tensor_paths(value, path: tuple = (), depth: int = 0) -> list:
    """``(path, tensor)`` for each tensor in ``value``, looking into tuples, lists and dicts ``DEPTH`` deep.

    >>> import trainkit
    >>> h = trainkit.zeros(1)
    >>> [p for p, _ in tensor_paths((h, [1, h]))]
    [(0,), (1, 1)]
    """
    if isinstance(value, Tensor):
        return [(path, value)]
    if depth >= DEPTH:
        return []
    if isinstance(value, (tuple, list)):
        items = enumerate(value)
    elif isinstance(value, dict):
        items = value.items()
    else:
        return []
    return [found for key, v in items for found in tensor_paths(v, (*path, key), depth + 1)]


def locate(container, key, path: tuple):
    """The object found at a root and then down ``path`` (None when the way is gone)."""
    value = current(container, key)
    for step in path:
        try:
            value = value[step]
        except (TypeError, KeyError, IndexError):
            return None
    return value


def note_places(places: dict, points) -> None:
    """Remember where each tensor sits before the region runs: ``places[id(tensor)] = (container, key, path,
    tensor)`` for the roots ``points``, the first place found winning; and each root that exists then
    (``places[(id(container), key)]``): a place the region makes (an item appended to a list, a new attribute) is
    not state a replay can keep."""
    for container, key in points:
        places[(id(container), key)] = container
        for path, t in tensor_paths(current(container, key)):
            places.setdefault(id(t), (container, key, path, t))


def carried(fn, modules, slot_of: dict, inputs: set, externals, places: dict) -> tuple:
    """After a capture: ``(stores, located)``. ``stores``: ``(container, key, value)`` for each root that holds
    tensors the region made (every tensor in its value must be one of the region's slots); ``located``:
    ``(slot, container, key, path)`` for each tensor the region read that sat, when it started, in a root it
    stores to (the state it carried from its previous call)."""
    stores = []
    for container, key in roots(fn, modules):
        value = current(container, key)
        slots = [slot_of.get(id(t)) for _, t in tensor_paths(value)]
        existed = (id(container), key) in places
        if existed and slots and None not in slots and any(s not in inputs for s in slots):
            if not any(c is container and k == key for c, k, _ in stores):
                stores.append((container, key, value))
    located = []
    for slot, t in externals:
        place = places.get(id(t))
        if place is not None and any(c is place[0] and k == place[1] for c, k, _ in stores):
            located.append((slot, *place[:3]))
    return stores, located


__all__ = [
    "anchors",
    "carried",
    "current",
    "locate",
    "module_roots",
    "note_places",
    "put",
    "reachable_tensors",
    "roots",
    "watch_points",
]
