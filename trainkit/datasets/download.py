"""Downloading data set files: from the first mirror that answers, resumed where an earlier try stopped, shown with
a tqdm bar, and kept only when their MD5 checksum is right."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

CHUNK = 1 << 16


class DownloadError(RuntimeError):
    """No mirror gave the file with the right checksum; the message lists what each one answered."""


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)  # MD5 is how the published files are identified, not a security check
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(url: str, part: Path, timeout: float, progress: bool) -> None:
    """Append ``url``'s bytes to ``part``, asking only for those beyond what it holds (HTTP Range)."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http(s) mirrors only)
        if have and response.status != 206:  # the server sent the whole file: start again
            have = 0
        size = response.headers.get("Content-Length")
        total = have + int(size) if size is not None else None
        with (
            open(part, "ab" if have else "wb") as out,
            tqdm(
                total=total,
                initial=have,
                unit="B",
                unit_scale=True,
                desc=part.name.removesuffix(".part"),
                disable=not progress,
            ) as bar,
        ):
            for block in iter(lambda: response.read(CHUNK), b""):
                out.write(block)
                bar.update(len(block))
    got = part.stat().st_size
    if total is not None and got < total:  # the connection dropped: the caller resumes from here
        raise OSError(f"the transfer stopped at {got} of {total} bytes")


def download(
    filename: str,
    folder: str | os.PathLike,
    md5: str,
    mirrors: Sequence[str],
    timeout: float = 60.0,
    progress: bool = True,
) -> Path:
    """``folder/filename`` from the first of ``mirrors`` (URL prefixes) that gives it with checksum ``md5``;
    nothing to do when it is there already. A broken transfer leaves ``filename.part``, which the next call
    resumes; a file with the wrong checksum is deleted and the next mirror tried.

    >>> download("t.gz", "/tmp", "0" * 32, [])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trainkit.datasets.download.DownloadError: t.gz: no mirror to download it from...
    """
    target = Path(folder) / filename
    if target.is_file() and md5_of(target) == md5:
        return target
    Path(folder).mkdir(parents=True, exist_ok=True)
    part = target.with_name(filename + ".part")
    if part.is_file() and md5_of(part) == md5:  # a transfer that ended before it was checked
        os.replace(part, target)
        return target
    answers = []
    for mirror in mirrors:
        url = mirror.rstrip("/") + "/" + filename
        fetched, answer = False, ""
        for _ in range(2):  # a second request resumes a transfer the first could not finish
            try:
                _fetch(url, part, timeout, progress)
                fetched = True
                break
            except urllib.error.HTTPError as err:  # the mirror answered: asking again would not help
                answer = f"{url}: HTTP {err.code} {err.reason}"
                break
            except (urllib.error.URLError, OSError, TimeoutError) as err:
                answer = f"{url}: {getattr(err, 'reason', err)}"
        if not fetched:
            answers.append(answer)
            continue
        if md5_of(part) == md5:
            os.replace(part, target)
            return target
        answers.append(f"{url}: the file's MD5 is {md5_of(part)}, not {md5}")
        part.unlink()
    tried = "; ".join(answers) if answers else "no mirror to download it from"
    raise DownloadError(f"{filename}: {tried}" + ("" if answers else f" (into {folder})"))
