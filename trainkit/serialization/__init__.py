"""Files on disk: trainkit's own ``save`` / ``load`` archives, PyTorch's ``.pt`` files read and written without
running pickled code, safetensors, and the atomic write that all of them share.

- ``save_load``: ``trainkit.save`` / ``trainkit.load`` (``.npz`` archives; ``.pt`` and ``.safetensors`` by suffix);
- ``torch_pickle``: reading ``torch.save`` files through an allowlist (``load_torch_file``);
- ``torch_writer``: writing files that ``torch.load(weights_only=True)`` reads (``save_torch_file``);
- ``files``: a temporary name beside a target, renamed over it once the write is complete.

>>> import io, trainkit
>>> buffer = io.BytesIO()
>>> trainkit.serialization.save({"step": 3}, buffer)
>>> _ = buffer.seek(0)
>>> trainkit.serialization.load(buffer)
{'step': 3}
"""

from .files import temporary_beside
from .save_load import FileFormatError, load, save
from .torch_pickle import TorchFileError, UnsafeGlobalError, load_torch_file
from .torch_writer import save_torch_file

__all__ = [
    "FileFormatError",
    "TorchFileError",
    "UnsafeGlobalError",
    "load",
    "load_torch_file",
    "save",
    "save_torch_file",
    "temporary_beside",
]
