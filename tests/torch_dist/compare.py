#!/usr/bin/env python3
"""compare.py - pass/skip/fail counts of run_distributed_test.py -v logs, side by side, and
every test that passed in the first log but in none of the others (a regression).

    compare.py gloo.log inagg.log                    exit 1 when inagg has a regression
    compare.py gloo.log inagg.log inagg-asgloo.log   the others are runs of one backend that
                                                     cover different tests (INAGG_GLOO_TESTS=1
                                                     runs the tests the base names Gloo in)
"""
import re
import sys
from collections import Counter


def results(path):
    """{test name: ok | skip | FAIL | ?}: unittest's verdict follows each test's header line,
    often after the ranks' log lines."""
    text = open(path, errors="replace").read()
    # "test_x (__main__.Class.test_x) ... ", or with a docstring: its first line on the next
    # line, before the " ... "
    heads = list(re.finditer(r"^(test_\w+) \(__main__[^)]*\)(?:\n[^\n]*?)? \.\.\. ", text, re.M))
    out = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        verdict = "?"
        for line in text[m.end():end].splitlines():
            line = line.strip()
            if line.startswith("skipped"):
                verdict = "skip"
            elif line == "ok" or (line.endswith(" ok") and "INFO" not in line):
                verdict = "ok"
            # unittest's verdict word ends its line; a profiler's "ERROR:2026-... failed with
            # code 35" (torch 2.x without a GPU) is a log line
            elif re.fullmatch(r"(?:.*\s)?(?:FAIL|ERROR)", line):
                verdict = "FAIL"
            else:
                continue
            break
        out[m.group(1)] = verdict
    return out


def main():
    runs = [(p, results(p)) for p in sys.argv[1:]]
    for path, res in runs:
        c = Counter(res.values())
        print("%-40s %3d tests: %3d passed, %3d skipped, %3d failed, %d unknown"
              % (path, len(res), c["ok"], c["skip"], c["FAIL"], c["?"]))
    bad = 0
    if len(runs) >= 2:
        first = runs[0][1]
        others = [res for _, res in runs[1:]]
        for name in sorted(first):
            if first[name] == "ok" and not any(res.get(name) == "ok" for res in others):
                print("  passed in the first, %s in the others: %s"
                      % ("/".join(str(res.get(name)) for res in others), name))
                bad += 1
        print("%d test(s) passed in the first and in none of the others" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
