#!/usr/bin/env python3
"""optim_reference.py - an independent reference for the optimizer kernels of src/lib/kernels/optim.h.

Reads a file of initial parameters and per-step gradients, runs the same steps with
torch.optim (SGD with momentum / weight decay, Adagrad, Adam) when `import torch` works, or
with straightforward pure-Python double-precision loops (all four, SMORMS3 always: torch has
none), and prints the final parameters, one per line, on stdout. It shares no code with the C
kernels and is not used by the C tests.

Usage
  optim_reference.py --generate FILE [--n 1003] [--steps 100] [--seed 1] [--text]
  optim_reference.py FILE --optim {sgd,adagrad,adam,smorms3} [--impl auto|torch|pure]
                     [--lr F] [--beta1 F] [--beta2 F] [--eps F] [--eps-placement inside|outside]
                     [--momentum F] [--weight-decay F] [--initial-accumulator F]
                     [--dtype float32|float64] [--exact-hyper]

File format (either; the binary one is recognised by its magic)
  binary, little-endian:
    8 bytes   magic b"OPTREF1\\n"
    uint32    n       number of parameters
    uint32    steps   number of steps
    float32   p0[n]           initial parameters
    float32   g[steps][n]     the averaged gradient of step t = 1 .. steps, row by row
  text: '#' starts a comment; whitespace-separated numbers: n, steps, then the n initial
    parameters, then steps * n gradients (step 1 first); each value is rounded to float32 on
    reading (write them with %.9g and they round-trip exactly).

Implementations (--impl)
  torch  torch.optim.SGD / Adagrad / Adam (foreach=False, i.e. the single-tensor code, when the
         installed torch accepts it), on float32 tensors by default (--dtype). torch puts eps
         outside the square root only, so Adagrad and Adam need --eps-placement outside. If
         torch cannot be imported, a "torch not available" line goes to stderr and the script
         exits 0 without output.
  pure   pure-Python floats (IEEE double), the formulas of optim.h, both eps placements:
           g' = g + wd*p (if wd != 0)
           SGD      buf = g' (t = 1) or momentum*buf + g'; p -= lr*buf   (p -= lr*g' if no momentum)
           Adagrad  acc += g'^2; p -= lr*g'/D; D = sqrt(acc+eps) | sqrt(acc)+eps
           Adam     m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2; mh = m/(1-b1^t); vh = v/(1-b2^t);
                    p -= lr*mh/D; D = sqrt(vh+eps) | sqrt(vh)+eps
           SMORMS3  (the paper's Algorithm 4; mem starts at 1, so rho_1 = 1/2)
                    rho = 1/(mem+1); m = (1-rho) m + rho g'; v = (1-rho) v + rho g'^2;
                    x = m^2/(v+eps); p -= min(lr, x)/D * g'; D = sqrt(v+eps) | sqrt(v)+eps;
                    mem = 1 + (1-x) mem
  auto   (default) torch for sgd, adagrad and adam; pure for smorms3.

The default eps placement is "outside" for the torch implementation (the only one it has) and
"inside" (the paper's) for the pure one. Hyperparameters are rounded to float32 first, as the C
config holds them (so both sides use the same numbers); --exact-hyper keeps them as given.
Defaults match OPTIM_CONFIG_INIT: lr 0.01, beta1 0.9, beta2 0.999, eps 1e-8, no momentum, no
weight decay, initial accumulator 0.

Output: the final parameters on stdout, one per line (%.9g for float32, %.17g for float64); a
one-line summary of what ran on stderr. Exit status 0 on success (and when torch is missing),
2 on a usage or file error.
"""

import argparse
import math
import random
import struct
import sys

MAGIC = b"OPTREF1\n"


def f32(x):
    """Round a Python float to the nearest float32 value."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- file I/O ----

def write_file(path, p0, grads, text):
    n, steps = len(p0), len(grads)
    if text:
        with open(path, "w") as f:
            f.write("# optim_reference.py input: n steps, p0[n], then g[step][n]\n")
            f.write("%d %d\n" % (n, steps))
            f.write(" ".join("%.9g" % v for v in p0) + "\n")
            for row in grads:
                f.write(" ".join("%.9g" % v for v in row) + "\n")
    else:
        with open(path, "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<II", n, steps))
            f.write(struct.pack("<%df" % n, *p0))
            for row in grads:
                f.write(struct.pack("<%df" % n, *row))


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(MAGIC):
        off = len(MAGIC)
        if len(data) < off + 8:
            raise ValueError("truncated header")
        n, steps = struct.unpack_from("<II", data, off)
        off += 8
        want = off + 4 * n * (steps + 1)
        if len(data) != want:
            raise ValueError("size %d, expected %d for n=%d steps=%d" % (len(data), want, n, steps))
        p0 = list(struct.unpack_from("<%df" % n, data, off))
        off += 4 * n
        grads = []
        for _ in range(steps):
            grads.append(list(struct.unpack_from("<%df" % n, data, off)))
            off += 4 * n
        return p0, grads
    words = []
    for line in data.decode("ascii").splitlines():
        words.extend(line.split("#", 1)[0].split())
    if len(words) < 2:
        raise ValueError("no header (n steps)")
    n, steps = int(words[0]), int(words[1])
    vals = [f32(float(w)) for w in words[2:]]  # float32 values, as in the binary format
    if len(vals) != n * (steps + 1):
        raise ValueError("%d numbers, expected %d for n=%d steps=%d" % (len(vals), n * (steps + 1), n, steps))
    p0 = vals[:n]
    grads = [vals[n * (t + 1):n * (t + 2)] for t in range(steps)]
    return p0, grads


def generate(n, steps, seed):
    """Seeded data like tests/test_optim.c's: magnitudes over four decades, a drift on every
    third element. Every value is a float32."""
    rng = random.Random(seed)
    p0 = [f32(rng.uniform(-1.0, 1.0)) for _ in range(n)]
    grads = []
    for _ in range(steps):
        row = []
        for i in range(n):
            scale = 10.0 ** rng.uniform(-3.0, 1.0)
            drift = 0.5 if i % 3 == 0 else 0.0
            row.append(f32(scale * (drift + rng.uniform(-1.0, 1.0))))
        grads.append(row)
    return p0, grads


# ---- pure Python (double precision) ----

def run_pure(h, p0, grads):
    n = len(p0)
    p = [float(v) for v in p0]
    lr, eps, wd = h["lr"], h["eps"], h["weight_decay"]
    inside = h["eps_placement"] == "inside"

    def denom(v):
        return math.sqrt(v + eps) if inside else math.sqrt(v) + eps

    kind = h["optim"]
    if kind == "sgd":
        buf = [0.0] * n
    elif kind == "adagrad":
        acc = [h["initial_accumulator"]] * n
    elif kind == "adam":
        m, v = [0.0] * n, [0.0] * n
    else:
        mem, m, v = [1.0] * n, [0.0] * n, [0.0] * n
    b1, b2, mom = h["beta1"], h["beta2"], h["momentum"]
    for t, g in enumerate(grads, start=1):
        if kind == "adam":
            bc1 = 1.0 - b1 ** t
            bc2 = 1.0 - b2 ** t
        for i in range(n):
            gi = g[i] + wd * p[i] if wd != 0.0 else g[i]
            if kind == "sgd":
                if mom != 0.0:
                    buf[i] = gi if t == 1 else mom * buf[i] + gi
                    gi = buf[i]
                p[i] -= lr * gi
            elif kind == "adagrad":
                acc[i] += gi * gi
                p[i] -= lr * gi / denom(acc[i])
            elif kind == "adam":
                m[i] = b1 * m[i] + (1.0 - b1) * gi
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi
                p[i] -= lr * (m[i] / bc1) / denom(v[i] / bc2)
            else:  # smorms3, the paper's Algorithm 4
                rho = 1.0 / (mem[i] + 1.0)
                m[i] = (1.0 - rho) * m[i] + rho * gi
                v[i] = (1.0 - rho) * v[i] + rho * gi * gi
                x = m[i] * m[i] / (v[i] + eps)
                p[i] -= min(lr, x) / denom(v[i]) * gi
                mem[i] = 1.0 + (1.0 - x) * mem[i]
    return p


# ---- torch.optim ----

def run_torch(torch, h, p0, grads, dtype):
    tdtype = torch.float32 if dtype == "float32" else torch.float64
    p = torch.tensor(p0, dtype=tdtype, requires_grad=True)
    params = [p]
    kind = h["optim"]
    if kind == "sgd":
        cls = torch.optim.SGD
        kw = dict(lr=h["lr"], momentum=h["momentum"], dampening=0.0,
                  weight_decay=h["weight_decay"], nesterov=False)
    elif kind == "adagrad":
        cls = torch.optim.Adagrad
        kw = dict(lr=h["lr"], lr_decay=0.0, weight_decay=h["weight_decay"],
                  initial_accumulator_value=h["initial_accumulator"], eps=h["eps"])
    else:
        cls = torch.optim.Adam
        kw = dict(lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                  weight_decay=h["weight_decay"], amsgrad=False)
    try:
        opt = cls(params, foreach=False, **kw)
    except TypeError:  # a torch older than the foreach argument
        opt = cls(params, **kw)
    with torch.no_grad():
        for g in grads:
            p.grad = torch.tensor(g, dtype=tdtype)
            opt.step()
    return [float(v) for v in p.detach().tolist()]


# ---- command line ----

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("file")
    ap.add_argument("--generate", action="store_true", help="write a seeded input FILE and exit")
    ap.add_argument("--n", type=int, default=1003)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--text", action="store_true", help="with --generate: the text format")
    ap.add_argument("--optim", choices=["sgd", "adagrad", "adam", "smorms3"])
    ap.add_argument("--impl", choices=["auto", "torch", "pure"], default="auto")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--eps-placement", choices=["inside", "outside"])
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--initial-accumulator", type=float, default=0.0)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                    help="torch tensors' dtype (pure is always double)")
    ap.add_argument("--exact-hyper", action="store_true",
                    help="do not round hyperparameters to float32")
    a = ap.parse_args(argv)

    if a.generate:
        if a.n < 0 or a.steps < 0:
            ap.error("--n and --steps must be >= 0")
        p0, grads = generate(a.n, a.steps, a.seed)
        write_file(a.file, p0, grads, a.text)
        return 0
    if a.optim is None:
        ap.error("--optim is required")
    impl = a.impl
    if impl == "auto":
        impl = "pure" if a.optim == "smorms3" else "torch"
    if impl == "torch" and a.optim == "smorms3":
        ap.error("torch has no SMORMS3; use --impl pure (or auto)")
    placement = a.eps_placement or ("outside" if impl == "torch" else "inside")
    if impl == "torch" and a.optim in ("adagrad", "adam") and placement != "outside":
        ap.error("torch.optim.%s puts eps outside the square root; use --eps-placement outside, "
                 "or --impl pure for the paper's eps-inside variant" % a.optim.capitalize())

    rnd = (lambda x: x) if a.exact_hyper else f32
    h = dict(optim=a.optim, lr=rnd(a.lr), beta1=rnd(a.beta1), beta2=rnd(a.beta2), eps=rnd(a.eps),
             eps_placement=placement, momentum=rnd(a.momentum),
             weight_decay=rnd(a.weight_decay), initial_accumulator=rnd(a.initial_accumulator))
    try:
        p0, grads = read_file(a.file)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        print("optim_reference.py: %s: %s" % (a.file, e), file=sys.stderr)
        return 2

    if impl == "torch":
        try:
            import torch
        except ImportError as e:
            print("optim_reference.py: torch not available (%s); no torch.optim reference for %s"
                  % (e, a.optim), file=sys.stderr)
            return 0
        out = run_torch(torch, h, p0, grads, a.dtype)
        fmt = "%.9g" if a.dtype == "float32" else "%.17g"
        what = "torch %s %s" % (torch.__version__, a.dtype)
    else:
        out = run_pure(h, p0, grads)
        fmt = "%.17g"
        what = "pure-python double"
    print("optim_reference.py: %s via %s, eps %s, n=%d steps=%d" %
          (a.optim, what, placement, len(p0), len(grads)), file=sys.stderr)
    sys.stdout.write("".join(fmt % v + "\n" for v in out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
