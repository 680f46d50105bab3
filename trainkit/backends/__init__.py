"""``trainkit.backends`` (``torch.backends``): PyTorch's backend switches, accepted so programs run unchanged.

trainkit computes with NumPy (CPU) or CuPy (GPU) and has no cuDNN, MKL-DNN, MPS or TF32 switches of its own: the
flags are settable attributes with PyTorch's defaults that programs may read and write, and they change nothing in
how trainkit computes (see each module). ``is_available()`` tells what PyTorch's CPU build tells.

>>> import trainkit
>>> trainkit.backends.cudnn.benchmark = True  # accepted; trainkit's kernels stay as they are
>>> trainkit.backends.cudnn.benchmark = False
>>> trainkit.backends.cuda.matmul.allow_tf32
False
>>> trainkit.backends.mps.is_available()
False
"""

from . import cuda, cudnn, mkl, mkldnn, mps, opt_einsum

__all__ = ["cuda", "cudnn", "mkl", "mkldnn", "mps", "opt_einsum"]
