"""trainkit.optim: optimizers and learning-rate schedulers with PyTorch's names, options and updates.

>>> import trainkit
>>> from trainkit import optim
>>> w = trainkit.tensor([3.0], requires_grad=True)
>>> opt = optim.SGD([w], lr=0.25)
>>> sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
>>> for _ in range(2):
...     opt.zero_grad()
...     (w * w).sum().backward()
...     opt.step()
...     sched.step()
>>> w, sched.get_last_lr()
(tensor([1.1250], requires_grad=True), [0.0625])
"""

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "LBFGS", "Optimizer", "RMSprop", "lr_scheduler"]
