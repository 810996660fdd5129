"""inagg.models - the two Fashion-MNIST networks `inagg bench train` trains.

  cnn    two 3x3 convolutions (32 and 64 channels, each followed by 2x2 max pooling) and two
         fully connected layers: 421,642 parameters (1.7 MB of float32 gradients); reaches
         about 90% test accuracy in two epochs of the 60,000 training images.
  large  a wide multilayer perceptron 784-2048-1024-10: 3,716,106 parameters (14.9 MB of
         float32 gradients per step), so at 100 Mbit/s the allreduce, not the arithmetic,
         takes most of a step.

Both take a float tensor (N, 1, 28, 28) of normalised pixels and return (N, 10) logits.
"""
import torch
from torch import nn

__all__ = ["MODELS", "build", "grad_bytes", "DEFAULT_THRESHOLD", "DEFAULT_LR"]


def _cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def _large():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 1024), nn.ReLU(),
        nn.Linear(1024, 10))


MODELS = {"cnn": _cnn, "large": _large}

# Test accuracy a run counts as "trained" for time-to-accuracy, per model (what each reaches
# within a few epochs of the whole training set; `--target-accuracy` overrides it).
DEFAULT_THRESHOLD = {"cnn": 0.89, "large": 0.85}

# Adam's learning rate per model.
DEFAULT_LR = {"cnn": 1e-3, "large": 5e-4}


def build(name, seed):
    """The model `name` with its weights drawn from `seed` (every rank draws the same)."""
    if name not in MODELS:
        raise ValueError("unknown model %r (one of %s)" % (name, ", ".join(sorted(MODELS))))
    torch.manual_seed(seed)
    return MODELS[name]()


def grad_bytes(model):
    """Bytes of float32 gradient one step of `model` produces (what DDP allreduces)."""
    return 4 * sum(p.numel() for p in model.parameters() if p.requires_grad)
