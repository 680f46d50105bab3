"""Downloading data set files: from the first mirror that answers, resumed where an earlier try stopped, shown with
a tqdm bar, and kept only when their MD5 checksum is right."""

from __future__ import annotations

import hashlib
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

CHUNK = 1 << 16
MAX_UNDECLARED = 4 << 30  # the most a file of unknown size may take: more than any data set we fetch


class DownloadError(RuntimeError):
    """No mirror gave the file with the right checksum; the message lists what each one answered."""


class MirrorGaveUp(OSError):
    """A mirror did something that asking it again would not mend: the next one is tried."""


class TooSlow(MirrorGaveUp):
    """Fewer bytes a second than the low-speed limit; what arrived is kept for the next mirror to resume."""


class TooLarge(MirrorGaveUp):
    """More bytes than the file has: not the published file, so what arrived is deleted."""


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)  # MD5 is how the published files are identified, not a security check
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Pace:
    """curl's --speed-limit/--speed-time: the transfer fails when fewer than ``limit`` bytes a second arrived over
    the last ``seconds`` seconds. A socket timeout alone never fires on a mirror that sends a byte now and then."""

    def __init__(self, limit: float, seconds: float):
        self.limit, self.seconds = limit, seconds
        self.since, self.got = time.monotonic(), 0

    def update(self, got: int) -> None:
        self.got += got
        elapsed = time.monotonic() - self.since
        if elapsed < self.seconds:
            return
        if self.got < self.limit * elapsed:
            raise TooSlow(
                f"sent {self.got} bytes in {elapsed:.0f} s, slower than {self.limit:g} bytes/s for "
                f"{self.seconds:g} s; gave up"
            )
        self.since, self.got = time.monotonic(), 0


def _fetch(url: str, part: Path, timeout: float, progress: bool, size: int | None, pace: _Pace) -> None:
    """Append ``url``'s bytes to ``part``, asking only for those beyond what it holds (HTTP Range), and never more
    than ``size`` bytes in all."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    # the socket's timeout bounds a silent mirror; the pace bounds a trickling one
    with urllib.request.urlopen(request, timeout=min(timeout, pace.seconds)) as response:  # noqa: S310 (http(s))
        if have and response.status != 206:  # the server sent the whole file: start again
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None and length.isdigit() else None
        name = part.name.removesuffix(".part")
        cap = size if size is not None else MAX_UNDECLARED
        holds = f"{name} has {size} bytes" if size is not None else f"a file of undeclared size may have {cap} bytes"
        if total is not None and total > cap:
            raise TooLarge(f"announced {total} bytes, but {holds}; nothing read")
        with (
            open(part, "ab" if have else "wb") as out,
            tqdm(
                total=total or size,
                initial=have,
                unit="B",
                unit_scale=True,
                desc=name,
                disable=not progress,
            ) as bar,
        ):
            got = have
            # read1: whatever has arrived, so that a trickle is measured instead of waited for
            for block in iter(lambda: response.read1(CHUNK), b""):
                got += len(block)
                if got > cap:
                    raise TooLarge(f"sent more than {cap} bytes, but {holds}; gave up")
                out.write(block)
                bar.update(len(block))
                pace.update(len(block))
    got = part.stat().st_size
    if total is not None and got < total:  # the connection dropped: the caller resumes from here
        raise OSError(f"the transfer stopped at {got} of {total} bytes")


def _transfer(
    url: str, part: Path, timeout: float, progress: bool, size: int | None, speed: float, seconds: float
) -> str | None:
    """Fetch ``url`` into ``part``, asking twice (the second request resumes a dropped transfer); None when it
    arrived whole, else what the mirror did."""
    answer = ""
    for _ in range(2):
        try:
            _fetch(url, part, timeout, progress, size, _Pace(speed, seconds))
            return None
        except urllib.error.HTTPError as err:  # the mirror answered: asking again would not help
            return f"HTTP {err.code} {err.reason}"
        except MirrorGaveUp as err:
            if isinstance(err, TooLarge):
                part.unlink(missing_ok=True)
            return str(err)
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            answer = str(getattr(err, "reason", err))
    return answer


def download(
    filename: str,
    folder: str | os.PathLike,
    md5: str,
    mirrors: Sequence[str],
    timeout: float = 60.0,
    progress: bool = True,
    size: int | None = None,
    low_speed_limit: float = 1024.0,
    low_speed_time: float = 30.0,
) -> Path:
    """``folder/filename`` from the first of ``mirrors`` (URL prefixes) that gives it with checksum ``md5``;
    nothing to do when it is there already. A broken transfer leaves ``filename.part``, which the next call
    resumes; a file with the wrong checksum is deleted and the next mirror tried.

    A mirror is given up (and the next one tried) when it sends fewer than ``low_speed_limit`` bytes a second over
    ``low_speed_time`` seconds (as curl's ``--speed-limit``/``--speed-time``), when it says nothing for ``timeout``
    seconds, or when it sends more than ``size`` bytes (the published file's size; 4 GiB when not given).

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
        inherited = part.is_file()  # bytes from an earlier call or another mirror, resumed rather than fetched again
        answer = _transfer(url, part, timeout, progress, size, low_speed_limit, low_speed_time)
        if answer is None and md5_of(part) != md5 and inherited:  # the bytes it continued were not its file's
            part.unlink()
            answer = _transfer(url, part, timeout, progress, size, low_speed_limit, low_speed_time)
        if answer is None and md5_of(part) == md5:
            os.replace(part, target)
            return target
        if answer is None:
            answer = f"the file's MD5 is {md5_of(part)}, not {md5}"
            part.unlink()
        answers.append(f"{url}: {answer}")
    tried = "; ".join(answers) if answers else "no mirror to download it from"
    raise DownloadError(f"{filename}: {tried}" + ("" if answers else f" (into {folder})"))
