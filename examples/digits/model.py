"""A small convolutional classifier for 8x8 digit images."""

from trainkit import nn


class SmallCNN(nn.Module):
    """Conv(1->16, 3x3) - ReLU - MaxPool 2 - Conv(16->32, 3x3) - ReLU - Flatten - Linear(32*4*4 -> classes)."""

    def __init__(self, channels: int = 16, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
        )
        self.classify = nn.Sequential(nn.Flatten(), nn.Linear(2 * channels * 4 * 4, classes))

    def forward(self, x):
        return self.classify(self.features(x))
