"""``trainkit run-torch SCRIPT``: PyTorch programs run unmodified, in a subprocess, as ``python SCRIPT`` runs them."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TRAIN = """
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

torch.backends.cudnn.benchmark = True


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = x.sum(dim=1, keepdim=True)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total / len(loader):.6f}")


if __name__ == "__main__":
    main()
"""


def run_torch(script: Path, *args, cwd: Path, module: bool = False) -> subprocess.CompletedProcess:
    launcher = ["-m", "trainkit.torch_run"] if module else ["-m", "trainkit.cli", "run-torch"]
    return subprocess.run(
        [sys.executable, *launcher, str(script), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_pytorch_training_script_runs_and_its_loss_falls(tmp_path):
    script = write(tmp_path, "train.py", TRAIN)
    result = run_torch(script, "--epochs", 2, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    losses = [float(x) for x in re.findall(r"epoch \d+ loss ([0-9.]+)", result.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0], result.stdout


def test_python_dash_m_torch_run_is_the_same_launcher(tmp_path):
    script = write(tmp_path, "train.py", TRAIN)
    result = run_torch(script, "--epochs", 1, cwd=tmp_path, module=True)
    assert result.returncode == 0, result.stderr
    assert "epoch 0 loss" in result.stdout


def test_imports_are_trainkit_modules_under_both_names(tmp_path):
    script = write(
        tmp_path,
        "names.py",
        """
        import sys
        import pickle
        import torch
        import torch.nn.modules.rnn
        from torch.utils.data.dataloader import DataLoader
        from torch.nn.modules.rnn import LSTM
        import trainkit

        assert torch is trainkit
        assert sys.modules["torch.nn"] is sys.modules["trainkit.nn"]
        assert sys.modules["torch.nn.modules.rnn"] is sys.modules["trainkit.nn.modules.rnn"]
        assert LSTM is trainkit.nn.LSTM and DataLoader is trainkit.utils.data.DataLoader
        assert isinstance(torch.nn.Linear(2, 2), trainkit.nn.Module)
        layer = pickle.loads(pickle.dumps(torch.nn.Linear(2, 3)))
        assert isinstance(layer, torch.nn.Linear)
        print("ok")
        """,
    )
    result = run_torch(script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_argv_file_name_path_and_exit_code_are_pythons(tmp_path):
    folder = tmp_path / "prog"
    folder.mkdir()
    write(folder, "helper_mod.py", "VALUE = 7\n")
    write(
        folder,
        "main.py",
        """
        import sys
        import helper_mod  # the script's folder comes first on sys.path

        print(sys.argv)
        print(__name__, __file__)
        print(sys.path[0])
        print(helper_mod.VALUE)
        sys.exit(int(sys.argv[-1]))
        """,
    )
    args = ["--epochs", "2", "-h", "--", "5"]
    python = subprocess.run(
        [sys.executable, "prog/main.py", *args], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    ours = run_torch(Path("prog/main.py"), *args, cwd=tmp_path)
    assert (ours.returncode, ours.stdout, ours.stderr) == (python.returncode, python.stdout, python.stderr)
    assert ours.returncode == 5


def test_uncaught_exception_prints_pythons_traceback_and_exits_1(tmp_path):
    script = write(tmp_path, "fails.py", "def f():\n    raise ValueError('bad value')\n\nf()\n")
    python = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    ours = run_torch(script, cwd=tmp_path)
    assert ours.returncode == python.returncode == 1
    assert ours.stderr == python.stderr


def test_syntax_error_and_builtins_are_pythons(tmp_path):
    broken = write(tmp_path, "broken.py", "x = (1,\n")
    python = subprocess.run([sys.executable, str(broken)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    ours = run_torch(broken, cwd=tmp_path)
    assert (ours.returncode, ours.stderr) == (python.returncode, python.stderr)
    script = write(tmp_path, "names.py", "print(type(__builtins__).__name__, __loader__.name, __spec__, __doc__)\n")
    assert run_torch(script, cwd=tmp_path).stdout == "module __main__ None None\n"


def test_string_exit_and_missing_script_are_pythons(tmp_path):
    script = write(tmp_path, "bye.py", "import sys\nsys.exit('goodbye')\n")
    ours = run_torch(script, cwd=tmp_path)
    assert (ours.returncode, ours.stderr) == (1, "goodbye\n")
    missing = run_torch(Path("nope.py"), cwd=tmp_path)
    assert missing.returncode == 2
    assert "can't open file" in missing.stderr and "nope.py" in missing.stderr


def test_ctrl_c_prints_the_traceback_and_exits_130(tmp_path):
    script = write(tmp_path, "interrupted.py", "raise KeyboardInterrupt\n")
    result = run_torch(script, cwd=tmp_path)
    assert result.returncode == 130
    assert result.stderr.startswith("Traceback (most recent call last):") and "KeyboardInterrupt" in result.stderr


def test_missing_name_points_at_the_surface_document(tmp_path):
    script = write(tmp_path, "missing.py", "import torch\nfrom torch.nn import NoSuchLayer\n")
    result = run_torch(script, cwd=tmp_path)
    assert result.returncode == 1
    assert "torch.nn.NoSuchLayer" in result.stderr and "docs/pytorch-surface.md" in result.stderr


def test_missing_module_and_attribute_are_import_and_attribute_errors(tmp_path):
    script = write(
        tmp_path,
        "probe.py",
        """
        import torch

        try:
            import torch.no_such_module
        except ImportError as err:
            assert isinstance(err, ModuleNotFoundError)
            print("module:", err)
        try:
            from torch.nn import NoSuchLayer
        except ImportError as err:
            print("name:", err)
        from torch.nn import Linear, modules  # present names and submodules still import
        from torch import *  # noqa: F403
        assert not hasattr(torch.nn, "NoSuchLayer")
        try:
            torch.nn.NoSuchLayer
        except AttributeError as err:
            print("attribute:", err)
        import torch.no_such_module
        """,
    )
    result = run_torch(script, cwd=tmp_path)
    assert result.returncode == 1
    assert "module: No module named 'torch.no_such_module'" in result.stdout
    assert "attribute: module 'torch.nn' has no attribute 'NoSuchLayer'" in result.stdout
    assert "name: cannot import name 'NoSuchLayer' from 'torch.nn': trainkit does not provide" in result.stdout
    assert result.stdout.count("docs/pytorch-surface.md") == 3
    assert result.stderr.splitlines()[-1].startswith("trainkit.torch_alias.TorchModuleNotFoundError: No module named")
    assert "torch_alias.py" not in result.stderr  # the import hook's frames stay out of the traceback


def test_run_torch_is_listed_in_the_command_help():
    result = subprocess.run(
        [sys.executable, "-m", "trainkit.cli", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert "run-torch" in result.stdout
