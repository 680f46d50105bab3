"""The tutorial regression model: one hidden layer of 10 units fitting y = x^2."""

from trainkit import nn


class Net(nn.Module):
    """x -> Linear(n_feature, n_hidden) -> ReLU -> Linear(n_hidden, n_output)."""

    def __init__(self, n_feature: int = 1, n_hidden: int = 10, n_output: int = 1):
        super().__init__()
        self.hidden = nn.Linear(n_feature, n_hidden)
        self.predict = nn.Linear(n_hidden, n_output)

    def forward(self, x):
        return self.predict(self.hidden(x).relu())
