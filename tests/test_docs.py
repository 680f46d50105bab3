"""The examples in docs/autograd.md and in the docstrings of trainkit.autograd run and print what they say.

docs/autograd.md: every ```python block is run. The blocks of one ``##`` section run cumulatively, in order, in one
namespace of their own; each section starts from an empty namespace (as the page says). A block with ``>>>`` lines
runs through ``doctest`` and must print exactly the output written under each line (NORMALIZE_WHITESPACE and
ELLIPSIS on; the block stops at its first failing line); any other block is executed as a script and must not
raise. A section stops at its first failing block, and the test fails with that block's text and the error.

Docstrings: ``doctest`` runs the examples in every module of trainkit (each package's ``__init__`` included), one
test per module, with the same option flags.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
import re
import traceback
from pathlib import Path

import pytest

import trainkit
import trainkit.autograd
import trainkit.autograd.ops

DOCS = Path(__file__).resolve().parent.parent / "docs" / "autograd.md"
OPTIONFLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


class Block:
    """One ```python block: its code and the line of the file where the code starts (1-based)."""

    def __init__(self, code: str, line: int):
        self.code = code
        self.line = line

    @property
    def is_doctest(self) -> bool:
        return any(line.lstrip().startswith(">>>") for line in self.code.splitlines())


def _sections(text: str) -> list[tuple[str, list[Block]]]:
    """The ``##`` sections of the page, in order, each with its python blocks (the text before the first one too)."""
    starts = [(m.start(), m.group(1).strip()) for m in re.finditer(r"^## (.+)$", text, re.MULTILINE)]
    bounds = [(0, "(top of page)")] + starts
    sections = []
    for i, (start, title) in enumerate(bounds):
        end = bounds[i + 1][0] if i + 1 < len(bounds) else len(text)
        blocks = []
        for m in FENCE.finditer(text, start, end):
            line = text.count("\n", 0, m.start(1)) + 1
            blocks.append(Block(m.group(1), line))
        if blocks:
            sections.append((title, blocks))
    return sections


SECTIONS = _sections(DOCS.read_text(encoding="utf-8")) if DOCS.exists() else []


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _run_block(block: Block, globs: dict) -> str | None:
    """Run one block in ``globs``; the failure report, or None when it passed."""
    if block.is_doctest:
        parser = doctest.DocTestParser()
        test = parser.get_doctest(block.code, globs, f"{DOCS.name}:{block.line}", str(DOCS), block.line - 1)
        out = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS | doctest.FAIL_FAST)
        result = runner.run(test, out=out.write, clear_globs=False)
        globs.update(test.globs)  # DocTest works on a copy of globs: carry its names on to the next block
        return out.getvalue() if result.failed else None
    try:
        exec(compile(block.code, f"{DOCS}:{block.line}", "exec"), globs)
    except Exception:
        return traceback.format_exc()
    return None


def test_docs_page_has_examples():
    assert DOCS.exists(), f"{DOCS} is missing"
    assert sum(len(blocks) for _, blocks in SECTIONS) > 0, f"{DOCS} has no ```python blocks"


@pytest.mark.parametrize("title,blocks", [pytest.param(title, blocks, id=_slug(title)) for title, blocks in SECTIONS])
def test_docs_section(title: str, blocks: list[Block]):
    globs: dict = {"__name__": "docs_autograd"}
    grad_mode = trainkit.is_grad_enabled()
    try:
        for block in blocks:
            failure = _run_block(block, globs)
            if failure is not None:
                pytest.fail(
                    f"section {title!r}: the block at {DOCS.name} line {block.line} failed.\n"
                    f"--- block ---\n{block.code}--- failure ---\n{failure}",
                    pytrace=False,
                )
    finally:
        trainkit.set_grad_enabled(grad_mode)  # a block that failed midway must not leave grad mode changed


def _modules() -> list[str]:
    names = [trainkit.__name__]
    for info in pkgutil.walk_packages(trainkit.__path__, trainkit.__name__ + "."):
        names.append(info.name)
    return names


@pytest.mark.parametrize("module_name", _modules())
def test_module_doctests(module_name: str):
    module = importlib.import_module(module_name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, module_name)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    grad_mode = trainkit.is_grad_enabled()
    try:
        for test in sorted(tests, key=lambda t: t.name):
            runner.run(test, out=out.write)
    finally:
        trainkit.set_grad_enabled(grad_mode)
    if runner.failures:
        pytest.fail(
            f"{runner.failures} of {runner.tries} docstring examples failed in {module_name}:\n{out.getvalue()}",
            pytrace=False,
        )


def test_architecture_page_example():
    """The ```python blocks of docs/architecture.md run as doctests and print what the page says."""
    page = DOCS.parent / "architecture.md"
    blocks = [
        Block(m.group(1), page.read_text().count("\n", 0, m.start(1)) + 1) for m in FENCE.finditer(page.read_text())
    ]
    assert blocks and all(block.is_doctest for block in blocks)
    globs: dict = {"__name__": "docs_architecture"}
    for block in blocks:
        test = doctest.DocTestParser().get_doctest(
            block.code, globs, f"{page.name}:{block.line}", str(page), block.line - 1
        )
        out = io.StringIO()
        result = doctest.DocTestRunner(optionflags=OPTIONFLAGS).run(test, out=out.write)
        assert not result.failed, out.getvalue()


def test_readme_examples_run(capsys, tmp_path, monkeypatch):  # capsys keeps the printed summary out of the report
    """Each ```python block of README.md runs as a script without raising (in an empty folder: they write files)."""
    monkeypatch.chdir(tmp_path)
    text = (DOCS.parent.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_says_how_to_get_the_cpu_build_of_the_torch_the_tests_pin():
    """The README's CPU-build command installs exactly the torch the test extra pins, and comes before a reader
    would run the test command (so that pip does not fetch the CUDA build first)."""
    readme = (DOCS.parent.parent / "README.md").read_text()
    pyproject = (DOCS.parent.parent / "pyproject.toml").read_text()
    pinned = re.search(r'"torch==([\d.]+)"', pyproject).group(1)
    cpu = f"pip install torch=={pinned} --index-url https://download.pytorch.org/whl/cpu"
    assert cpu in readme
    assert cpu in "\n".join(readme.splitlines()[:25])  # beside the set-up commands at the top
