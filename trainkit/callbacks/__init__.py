"""Callbacks for the Trainer: Keras-style hooks (``on_epoch_end(epoch, logs)`` ...) with logs as plain dicts.

>>> from trainkit.callbacks import EarlyStopping, History
>>> callbacks = [History(), EarlyStopping(patience=3)]
"""

from .activation_monitor import ActivationGradientMonitor
from .base import Callback, CallbackList
from .checkpoint import ModelCheckpoint
from .csv_logger import CSVLogger
from .early_stopping import EarlyStopping
from .gradient_monitor import GradientMonitor
from .history import History
from .lr_scheduler import LRSchedulerCallback
from .nan import TerminateOnNaN
from .plot import PlotCallback
from .progress import ProgressBar
from .tensorboard import TensorBoard
from .text_sample import TextSample

__all__ = [
    "ActivationGradientMonitor",
    "CSVLogger",
    "Callback",
    "CallbackList",
    "EarlyStopping",
    "GradientMonitor",
    "History",
    "LRSchedulerCallback",
    "ModelCheckpoint",
    "PlotCallback",
    "ProgressBar",
    "TensorBoard",
    "TerminateOnNaN",
    "TextSample",
]
