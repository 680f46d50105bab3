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
