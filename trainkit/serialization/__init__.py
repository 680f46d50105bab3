"""Files on disk: ``save`` / ``load`` as ``torch.save`` / ``torch.load`` (PyTorch's zip format), trainkit's own
``.npz`` archives, safetensors, and the atomic write that all of them share.

- ``save_load``: ``trainkit.save`` / ``trainkit.load`` (the format chosen by the name);
- ``torch_pickle``: reading ``torch.save`` files, through an allowlist unless ``weights_only=False``;
- ``torch_writer``: writing what ``torch.save`` writes (``save_torch_file``);
- ``allowlist``: ``add_safe_globals``, ``get_safe_globals``, ``clear_safe_globals``, ``safe_globals``;
- ``locations``: ``map_location`` (a device, a string, a dict or a callable);
- ``files``: a temporary name beside a target, renamed over it once the write is complete.

>>> import io, trainkit
>>> buffer = io.BytesIO()
>>> trainkit.serialization.save({"step": 3}, buffer)
>>> _ = buffer.seek(0)
>>> trainkit.serialization.load(buffer)
{'step': 3}
"""

from .allowlist import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from .files import temporary_beside
from .save_load import DEFAULT_PROTOCOL, FileFormatError, load, save
from .torch_pickle import TorchFileError, UnsafeGlobalError, get_unsafe_globals_in_checkpoint, load_torch_file
from .torch_writer import save_torch_file

__all__ = [
    "DEFAULT_PROTOCOL",
    "FileFormatError",
    "TorchFileError",
    "UnsafeGlobalError",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "get_unsafe_globals_in_checkpoint",
    "load",
    "load_torch_file",
    "safe_globals",
    "save",
    "save_torch_file",
    "temporary_beside",
]
