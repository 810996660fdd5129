#!/usr/bin/env python3
"""torch_worker.py - torch.optim as a worker's local optimizer, for `inagg bench optimizer`'s
baseline "allreduce + torch.optim on every worker".

The worker process (C) shares one memory region with this helper: n float32 parameters followed
by n float32 gradients. After each allreduce it writes the averaged gradient there and sends one
byte on our stdin; we run one torch.optim step on the parameters in place (zero copies: both
tensors are views of the shared memory) and answer one byte on stdout. 'q' or end of input
stops. The first byte we write ('r') says torch is imported and the optimizer built.

Usage: torch_worker.py FD N sgd|adagrad|adam LR BETA1 BETA2 EPS
  FD: an inherited file descriptor of at least 8*N bytes (a memfd), N: parameters.
Exit status 3 if torch cannot be imported (the caller then falls back to its own kernels).
"""
import mmap
import sys


def main():
    try:
        import torch
    except ImportError:
        sys.stderr.write("torch_worker.py: torch is not available\n")
        return 3
    fd, n, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    lr, beta1, beta2, eps = (float(x) for x in sys.argv[4:8])
    torch.set_num_threads(1)
    region = mmap.mmap(fd, 8 * n)
    params = torch.frombuffer(region, dtype=torch.float32, count=n, offset=0)
    grads = torch.frombuffer(region, dtype=torch.float32, count=n, offset=4 * n)
    params.requires_grad_(True)
    params.grad = grads
    if kind == "sgd":
        opt = torch.optim.SGD([params], lr=lr)
    elif kind == "adagrad":
        opt = torch.optim.Adagrad([params], lr=lr, eps=eps)
    elif kind == "adam":
        opt = torch.optim.Adam([params], lr=lr, betas=(beta1, beta2), eps=eps)
    else:
        sys.stderr.write("torch_worker.py: torch.optim has no %s\n" % kind)
        return 2
    out, inp = sys.stdout.buffer, sys.stdin.buffer
    out.write(b"r")
    out.flush()
    while True:
        c = inp.read(1)
        if not c or c == b"q":
            return 0
        opt.step()
        out.write(b"d")
        out.flush()


if __name__ == "__main__":
    sys.exit(main())
