"""In-place ops through views and views of views, and chains of in-place changes: the base, the view and a
sibling view made before the changes are compared (values, grad_fn names, gradients), and the refusals (views of
leaves, views made in no_grad mode)."""

from __future__ import annotations

from .harness import T

# A view step by its text (the text is what a case id shows).
STEPS = {
    "[1:]": lambda t: t[1:],
    "[1]": lambda t: t[1],
    "[:,::2]": lambda t: t[:, ::2],
    ".t()": lambda t: t.t(),
    ".transpose(0,1)": lambda t: t.transpose(0, 1),
    ".permute(1,0)": lambda t: t.permute(1, 0),
    ".narrow(1,1,2)": lambda t: t.narrow(1, 1, 2),
    ".view(24)": lambda t: t.view(24),
    ".reshape(2,12)": lambda t: t.reshape(2, 12),
    ".diagonal()": lambda t: t.diagonal(),
    ".unsqueeze(0)": lambda t: t.unsqueeze(0),
    "[None]": lambda t: t[None],
    "[...]": lambda t: t[...],
    "[0,1:]": lambda t: t[0, 1:],
}

CHAINS = (
    ("[1:]",),
    ("[1]",),
    (".t()",),
    (".narrow(1,1,2)",),
    (".view(24)",),
    (".diagonal()",),
    ("[...]",),
    ("[0,1:]",),
    ("[1:]", "[:,::2]"),
    ("[1:]", ".t()"),
    (".t()", "[1]"),
    (".view(24)", "[1:]"),
    (".reshape(2,12)", ".t()"),
    (".permute(1,0)", ".narrow(1,1,2)"),
    (".unsqueeze(0)", "[...]"),
    ("[None]", "[1]"),
    (".transpose(0,1)", "[1:]", ".t()"),
    ("[1:]", ".diagonal()"),
)

# An in-place change by its text: (target, change); the target is the view "v", the base "a" or the sibling "w".
CHANGES = {
    "v.mul_(2)": lambda v, a, w, y: v.mul_(2),
    "v.mul_(y)": lambda v, a, w, y: v.mul_(y),
    "v.add_(y,alpha=2)": lambda v, a, w, y: v.add_(y, alpha=2),
    "v.div_(y)": lambda v, a, w, y: v.div_(y),
    "v.copy_(y)": lambda v, a, w, y: v.copy_(y),
    "v.zero_()": lambda v, a, w, y: v.zero_(),
    "v.fill_(1.5)": lambda v, a, w, y: v.fill_(1.5),
    "v.clamp_(-1,1)": lambda v, a, w, y: v.clamp_(-1, 1),
    "v.exp_()": lambda v, a, w, y: v.exp_(),
    "v[...]=y": lambda v, a, w, y: v.__setitem__(Ellipsis, y),
    "v.sigmoid_()": lambda v, a, w, y: v.sigmoid_(),
    "a.mul_(3)": lambda v, a, w, y: a.mul_(3),
    "a.add_(y)": lambda v, a, w, y: a.add_(y),
    "w.mul_(y)": lambda v, a, w, y: w.mul_(y),
    "w.sub_(1)": lambda v, a, w, y: w.sub_(1),
}

SEQUENCES = (
    ("v.mul_(2)", "v.add_(y,alpha=2)"),
    ("v.mul_(y)", "a.mul_(3)"),
    ("a.mul_(3)", "v.mul_(y)"),
    ("w.mul_(y)", "v.exp_()"),
    ("v.copy_(y)", "w.sub_(1)", "a.add_(y)"),
    ("a.add_(y)",),
    ("w.mul_(y)",),
    ("v.zero_()", "v.add_(y,alpha=2)"),
)


def _view_inplace(L, x, y, chain, changes, clone=True, no_grad_view=False, plain=False):
    """``x`` (a leaf) cloned unless ``clone`` is False (or detached with ``plain``: only ``y`` then brings the
    graph in), viewed through ``chain``, changed in place by ``changes``; the base, the view and the sibling view
    ``a[:2]`` (made before the changes) are the results."""
    a = x.detach() if plain else x.clone() if clone else x
    if no_grad_view:
        with L.no_grad():
            v = _through(a, chain)
    else:
        v = _through(a, chain)
    w = a[:2]
    for change in changes:
        CHANGES[change](v, a, w, y)
    return a, v, w


def _through(t, chain):
    for step in chain:
        t = STEPS[step](t)
    return t


def views_inplace(b) -> None:
    """In-place changes through views and views of views, chains of changes, and their refusals."""
    op = "Tensor.__setitem__"  # grouped with item assignment: the same write-through-a-view machinery
    x, y = T((4, 6)), T(())
    for chain in CHAINS:
        for change in ("v.mul_(2)", "v.mul_(y)", "v.copy_(y)", "v.clamp_(-1,1)", "v[...]=y", "v.exp_()"):
            b.add(op, _view_inplace, x, y, chain, (change,))
        b.add(op, _view_inplace, T((4, 6), "f64"), T((), "f64"), chain, ("v.div_(y)", "v.sigmoid_()"))
        b.add(op, _view_inplace, x, y, chain, ("v.add_(y,alpha=2)",), plain=True)
        b.add(op, _view_inplace, x, y, chain, ("v.mul_(2)",), clone=False)
        b.add(op, _view_inplace, x, y, chain, ("v.fill_(1.5)",), no_grad_view=True)
    for chain in CHAINS[:8]:
        for changes in SEQUENCES:
            b.add(op, _view_inplace, x, y, chain, changes)
            b.add(op, _view_inplace, x, y, chain, changes, plain=True)
