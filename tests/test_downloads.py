"""MNIST(download=True) against a local HTTP server on 127.0.0.1 (nothing outside is contacted): files come from the
first mirror that answers, are checked against their MD5, a broken transfer resumes where it stopped, and a file
with the wrong checksum is never kept."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from trainkit.datasets import MNIST
from trainkit.datasets.download import DownloadError, download


def _idx(array: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; honours Range; can cut a transfer short once per file (``cut``) to test resuming."""

    cut: set = set()
    requests: list = []

    def log_message(self, *args):  # keep the test output quiet
        pass

    def do_GET(self):  # noqa: N802  (http.server's name)
        path = Path(self.translate_path(self.path))
        self.requests.append((self.path, self.headers.get("Range")))
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if path.name in self.cut:
            self.cut.discard(path.name)
            self.wfile.write(data[start : start + (len(data) - start) // 2])  # half, then the connection drops
            self.close_connection = True
            return
        self.wfile.write(data[start:])


@pytest.fixture
def server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    Handler.cut, Handler.requests = set(), []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _mnist_files(folder: Path, n: int = 12) -> list[tuple[str, str]]:
    rng = np.random.default_rng(0)
    resources = []
    for prefix in ("train", "t10k"):
        for name, array in (
            (f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)),
            (f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, n, dtype=np.uint8)),
        ):
            data = gzip.compress(_idx(array))
            (folder / name).write_bytes(data)
            resources.append((name, hashlib.md5(data).hexdigest()))
    return resources


def test_download_from_the_first_mirror_that_answers(server, tmp_path, monkeypatch):
    served, url = server
    resources = _mnist_files(served)
    monkeypatch.setattr(MNIST, "mirrors", [url + "missing/", url])
    monkeypatch.setattr(MNIST, "resources", resources)
    train = MNIST(tmp_path / "data", download=True)
    assert len(train) == 12 and tuple(train[0][0].shape) == (1, 28, 28)
    assert sorted(p.name for p in (tmp_path / "data" / "MNIST" / "raw").iterdir()) == sorted(n for n, _ in resources)
    assert len(MNIST(tmp_path / "data", train=False, download=True)) == 12
    asked = len(Handler.requests)
    MNIST(tmp_path / "data", download=True)  # all there: nothing is asked for again
    assert len(Handler.requests) == asked


def test_a_broken_transfer_resumes_where_it_stopped(server, tmp_path):
    served, url = server
    data = gzip.compress(np.arange(100000, dtype=np.uint32).tobytes())
    (served / "big.gz").write_bytes(data)
    Handler.cut = {"big.gz"}
    path = download("big.gz", tmp_path, hashlib.md5(data).hexdigest(), [url], progress=False)
    assert path.read_bytes() == data and not (tmp_path / "big.gz.part").exists()
    ranges = [r for p, r in Handler.requests if p == "/big.gz"]
    assert ranges[0] is None and ranges[1] == f"bytes={len(data) // 2}-"


def test_a_wrong_checksum_is_never_kept(server, tmp_path):
    served, url = server
    (served / "f.gz").write_bytes(b"not what was published")
    with pytest.raises(DownloadError, match=r"f.gz: .*f.gz: the file's MD5 is [0-9a-f]{32}, not 0{32}"):
        download("f.gz", tmp_path, "0" * 32, [url], progress=False)
    assert not (tmp_path / "f.gz").exists() and not (tmp_path / "f.gz.part").exists()
    with pytest.raises(DownloadError, match="404"):
        download("absent.gz", tmp_path, "0" * 32, [url], progress=False)


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """A mirror that misbehaves as its path says: /trickle/ sends a byte every 0.1 s, /endless/ sends zeros without
    end and without Content-Length, /announce/ announces 1 TB, /silent/ sends headers and then nothing."""

    sent: dict = {}

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802  (http.server's name)
        kind = self.path.strip("/").split("/")[0]
        self.send_response(200)
        if kind == "announce":
            self.send_header("Content-Length", str(10**12))
        elif kind == "trickle":
            self.send_header("Content-Length", "1000")
        self.end_headers()
        self.sent[kind] = 0
        try:
            if kind == "trickle":
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    self.sent[kind] += 1
                    time.sleep(0.1)
            elif kind in ("endless", "announce"):
                block = bytes(1 << 16)
                while self.sent[kind] < 1 << 30:  # stops at 1 GiB if the client never does
                    self.wfile.write(block)
                    self.sent[kind] += len(block)
            elif kind == "silent":
                time.sleep(5)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
            pass


@pytest.fixture
def bad_mirror():
    Misbehaving.sent = {}
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def test_a_trickling_mirror_is_given_up_under_the_low_speed_limit_and_the_next_one_used(bad_mirror, server, tmp_path):
    served, good = server
    data = b"the published file"
    (served / "f.gz").write_bytes(data)
    started = time.monotonic()
    path = download(
        "f.gz",
        tmp_path,
        hashlib.md5(data).hexdigest(),
        [bad_mirror + "trickle/", good],
        progress=False,
        low_speed_limit=100,
        low_speed_time=1.0,
    )
    assert path.read_bytes() == data
    assert time.monotonic() - started < 10  # about one second on the trickle, not the 100 s it would take
    assert Misbehaving.sent["trickle"] < 100


def test_the_error_names_each_mirror_and_what_it_did(bad_mirror, tmp_path):
    with pytest.raises(DownloadError) as err:
        download(
            "f.gz",
            tmp_path,
            "0" * 32,
            [bad_mirror + "trickle/", bad_mirror + "announce/", bad_mirror + "silent/"],
            progress=False,
            size=1000,
            timeout=1.0,
            low_speed_limit=100,
            low_speed_time=1.0,
        )
    message = str(err.value)
    assert f"{bad_mirror}trickle/f.gz: sent " in message and "slower than 100 bytes/s for 1 s; gave up" in message
    assert f"{bad_mirror}announce/f.gz: announced 1000000000000 bytes, but f.gz has 1000 bytes; nothing read" in message
    assert f"{bad_mirror}silent/f.gz: " in message and "timed out" in message
    assert not (tmp_path / "f.gz").exists()


@pytest.mark.parametrize("size", [100_000, None])
def test_an_endless_body_stops_at_the_declared_size(bad_mirror, tmp_path, monkeypatch, size):
    monkeypatch.setattr("trainkit.datasets.download.MAX_UNDECLARED", 1 << 20)  # the 4 GiB default, made small
    with pytest.raises(DownloadError, match=r"endless/f.gz: sent more than \d+ bytes, but .*; gave up"):
        download("f.gz", tmp_path, "0" * 32, [bad_mirror + "endless/"], progress=False, size=size)
    assert not (tmp_path / "f.gz.part").exists()  # not the published file: nothing kept
    # stopped at the cap (plus what the kernel's socket buffers took in meanwhile), not at the server's 1 GiB
    assert Misbehaving.sent["endless"] < 64 << 20


def test_mnist_declares_the_published_sizes():
    assert sum(MNIST.sizes.values()) == 9912422 + 28881 + 1648877 + 4542
    assert set(MNIST.sizes) == {name for name, _ in MNIST.resources}
