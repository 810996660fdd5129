#!/usr/bin/python3
"""gen_textlike.py - a seeded LIBSVM dataset shaped like a bag-of-words text set (news20 /
real-sim style), scaled and sparse unlike a9a: Zipf-distributed feature frequencies, term
counts times an idf weight (values about 0.5..40, rows of 10..300 terms, row norms spread over
two orders of magnitude, no normalisation), labels from a hidden sparse linear model plus noise
(10% flipped). Used to check the trainer's default step size on data that is not a9a.

Usage: tools/gen_textlike.py OUT [--rows N] [--features D] [--seed S]
Deterministic for (rows, features, seed) with the standard library only.
"""
import argparse
import math
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=40000)
    ap.add_argument("--features", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    D = a.features
    # Zipf(1.1) term frequencies: cumulative weights for sampling terms.
    weights = [1.0 / (r + 1) ** 1.1 for r in range(D)]
    cum, acc = [], 0.0
    for w in weights:
        acc += w
        cum.append(acc)
    # idf grows with rarity: log(1 + rank) + 0.5
    idf = [math.log(2.0 + r) + 0.5 for r in range(D)]
    # hidden model: 5% of the terms matter
    hidden = {}
    for r in rng.sample(range(D), max(1, D // 20)):
        hidden[r] = rng.gauss(0.0, 1.0)
    rows = []
    zs = []
    for _ in range(a.rows):
        length = int(math.exp(rng.uniform(math.log(10), math.log(300))))
        counts = {}
        for t in rng.choices(range(D), cum_weights=cum, k=length):
            counts[t] = counts.get(t, 0) + 1
        feats = sorted((t, c * idf[t]) for t, c in counts.items())
        z = sum(v * hidden.get(t, 0.0) for t, v in feats) / math.sqrt(length)
        rows.append(feats)
        zs.append(z)
    med = sorted(zs)[len(zs) // 2]
    with open(a.out, "w") as f:
        for feats, z in zip(rows, zs):
            y = 1 if z > med else -1
            if rng.random() < 0.1:
                y = -y
            f.write("%+d %s\n" % (y, " ".join("%d:%.4g" % (t + 1, v) for t, v in feats)))


if __name__ == "__main__":
    main()
