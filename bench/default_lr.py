#!/usr/bin/python3
"""default_lr.py - does `inagg train` with no step-size flag reach liblinear's optimum? For each
LIBSVM file and each objective (logistic, squared, hinge) it solves the same problem with
liblinear-train (logistic: -s 0 -c 1; squared: -s 11 -p 0 -c 0.5, i.e. 1/2 sum r^2; all with
1/2 ||w||^2, which is the trainer's default l2 = 1/S scaled by S) and evaluates liblinear's
weights under the trainer's objective (mean loss + l2/2 ||w||^2). Hinge: liblinear's dual
solver (-s 3) stops at its iteration cap on badly scaled data and takes no larger budget, so
bench/hinge_dual.c (the same dual coordinate descent, built here with cc) runs until its
duality gap is below --hinge-gap (default 1e-3) and the reference is its DUAL objective, a
lower bound of the optimum (so the gap printed is an upper bound of the true one). Then it
runs `inagg train --mode single --objective O --data F --epochs 20 --json -` and prints the
gap (final / reference - 1). Exit 1 if any gap exceeds --tolerance (default 0.01) or a
reference solver stopped at its iteration cap (no reference then).

Usage: bench/default_lr.py [--inagg build/inagg] [--epochs 20] [--tolerance 0.01] FILE...
       extra trainer flags after --: bench/default_lr.py FILE -- --lr 3
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

SOLVERS = {"logistic": ["-s", "0", "-c", "1", "-e", "0.0001"],
           "squared": ["-s", "11", "-p", "0", "-c", "0.5", "-e", "0.0001"],
           "hinge": ["-s", "3", "-c", "1", "-e", "0.0001"]}


def load(path):
    ys, rows = [], []
    for line in open(path):
        p = line.split("#")[0].split()
        if not p:
            continue
        ys.append(float(p[0]))
        rows.append([(int(i) - 1, float(v)) for i, v in (t.split(":") for t in p[1:])])
    return np.array(ys), rows


def margins(rows, w):
    return np.array([sum(v * w[i] for i, v in r if i < len(w)) for r in rows])


def objective(kind, ys, rows, w):
    z = margins(rows, w)
    if kind == "logistic":
        m = ys * z
        loss = np.where(m > 0, np.log1p(np.exp(-np.abs(m))), -m + np.log1p(np.exp(-np.abs(m))))
    elif kind == "squared":
        loss = 0.5 * (z - ys) ** 2
    else:
        loss = np.maximum(0.0, 1.0 - ys * z)
    S = len(ys)
    return float(loss.mean() + 0.5 / S * float(np.dot(w, w)))


def hinge_dual(path, tmp, gap, passes):
    exe = os.path.join(tmp, "hinge_dual")
    if not os.path.exists(exe):
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hinge_dual.c")
        subprocess.run(["cc", "-O2", "-o", exe, src, "-lm"], check=True)
    run = subprocess.run([exe, path, str(gap), str(passes)], timeout=7200, capture_output=True,
                         text=True)
    if run.returncode not in (0, 1):
        raise SystemExit("hinge_dual failed: " + run.stderr)
    f = run.stdout.split()  # primal P dual D passes N gap G
    return float(f[3]), run.returncode == 0, "dual %s..primal %s after %s passes" % (
        f[3], f[1], f[5])


def liblinear(kind, path, ys, rows, tmp):
    model = os.path.join(tmp, "model")
    run = subprocess.run(["liblinear-train"] + SOLVERS[kind] + [path, model], check=True,
                         timeout=600, capture_output=True, text=True)
    converged = "reaching max number of iterations" not in run.stdout + run.stderr
    lines = open(model).read().split("\n")
    w = np.array([float(x.split()[0]) for x in lines[lines.index("w") + 1:] if x.strip()])
    if kind != "squared":
        labels = [l for l in lines if l.startswith("label")][0].split()[1:]
        if labels[0] != "1":
            w = -w
    return objective(kind, ys, rows, w), converged


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser()
    ap.add_argument("--inagg", default="build/inagg")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument("--objectives", default="logistic,squared,hinge")
    ap.add_argument("--hinge-gap", type=float, default=1e-3)
    ap.add_argument("--hinge-passes", type=int, default=100000)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    worst, unknown = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in a.files:
            ys, rows = load(path)
            for kind in a.objectives.split(","):
                bracket = ""
                if kind == "hinge":
                    ref, converged, bracket = hinge_dual(path, tmp, a.hinge_gap, a.hinge_passes)
                else:
                    ref, converged = liblinear(kind, path, ys, rows, tmp)
                out = subprocess.run([a.inagg, "train", "--mode", "single", "--objective", kind,
                                      "--data", path, "--epochs", str(a.epochs), "--json", "-"]
                                     + extra, check=True, capture_output=True, text=True,
                                     timeout=1200)
                d = json.loads(out.stdout)
                got = d["final_objective"]
                got = float("inf") if got is None else got  # diverged (NaN is null in JSON)
                gap = got / ref - 1
                note = ""
                if bracket:
                    note = "  (optimum in " + bracket + ")"
                if not converged:  # the solver stopped at its iteration cap: no optimum
                    note += "  (reference solver hit its iteration cap: not an optimum)"
                    unknown += 1
                else:
                    worst = max(worst, gap)
                print("%-24s %-8s lr %-10.4g reference %.6f inagg %.6f gap %+.3f%%%s"
                      % (os.path.basename(path), kind, d.get("lr", float("nan")), ref, got,
                         100 * gap, note), flush=True)
    print("worst gap %+.3f%% (tolerance %.2f%%), %d without a reference optimum"
          % (100 * worst, 100 * a.tolerance, unknown))
    return 0 if worst <= a.tolerance and unknown == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
