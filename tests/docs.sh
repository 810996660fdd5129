#!/usr/bin/env bash
# docs.sh - the documents a user reads stay true to the code:
#   - every flag table of a command (a table whose first header cell is "flag of `inagg CMD`",
#     e.g. docs/OPERATIONS.md's for `inagg switch`, docs/TRAINING.md's for `inagg train`) names
#     exactly the options of `inagg CMD --help`: each flag of the table is in the help, each
#     option of the help is in the table (or in ALLOWED below, with the reason);
#   - every relative link of README.md and docs/**/*.md points to a file that exists, and a
#     `#anchor` to a heading of that file (GitHub's anchors: lower case, punctuation dropped,
#     spaces to dashes);
#   - docs/PERFORMANCE.md stays short (at most 350 lines) and every row of its headline table
#     (under "## Headline") ends with the command that reproduces it, whose flags exist: an
#     `./build/inagg ...` command's in that subcommand's --help, a `bash bench/...` script's in
#     the script;
#   - every `inagg CMD ... --flag` that README.md and docs/*.md write is an option of CMD
#     (docs/perf-log/ is left as recorded: its commands are those of their day).
# One check per table, per file (links; commands) and per headline row; prints each failure
# with what is wrong, then "N passed, N failed".
#
#   bash tests/docs.sh [ROOT]    (ROOT: the tree to check, default this one; its build/inagg)
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
if [ ! -x "$root/build/inagg" ]; then
    echo "FAIL $root/build/inagg is not built (make)"
    echo "0 passed, 1 failed"
    exit 1
fi
python3 - "$root" <<'PY'
import glob, os, re, subprocess, sys

root = sys.argv[1]
inagg = os.path.join(root, "build", "inagg")
passed = failed = 0

# Options of --help that a command's flag table need not list, and why.
ALLOWED = {
    "--help": "every command has it (and -h); its table is the help itself",
}


def check(name, problems):
    global passed, failed
    if problems:
        failed += 1
        print(f"FAIL {name}")
        for p in problems:
            print(f"    {p}")
    else:
        passed += 1
        print(f"ok   {name}")


def help_text(cmd):
    r = subprocess.run([inagg] + cmd.split() + ["--help"], capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def help_options(text):
    """The options a --help lists: the flags in the first column of its option lines (indented
    1-4 spaces, starting with a dash), e.g. "  --rank R --world W   and world ..." gives both."""
    opts = set()
    for line in text.splitlines():
        if not re.match(r"^ {1,4}-", line):
            continue
        first = re.split(r"\s{2,}", line.strip())[0]
        opts.update(re.findall(r"--[a-z0-9][a-z0-9-]*", first))
    return opts


def cells(line):
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def doc_lines(path):
    """(number, line) of a markdown file outside its fenced code blocks."""
    fence = False
    for i, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield i, line.rstrip("\n")


docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))

# 1. Flag tables against --help.
tables = 0
for path in docs:
    rel = os.path.relpath(path, root)
    lines = list(doc_lines(path))
    for k, (n, line) in enumerate(lines):
        m = re.match(r"^\|\s*flag of `inagg ([a-z ]+)`\s*\|", line)
        if not m:
            continue
        tables += 1
        cmd = m.group(1).strip()
        table = set()
        for _, row in lines[k + 2:]:
            if not row.startswith("|"):
                break
            first = cells(row)[0] if cells(row) else ""
            table.update(re.findall(r"--[a-z0-9][a-z0-9-]*", first))
        helped = help_options(help_text(cmd))
        problems = [f"{f}: in the table, not in `inagg {cmd} --help`" for f in sorted(table - helped)]
        problems += [f"{f}: in `inagg {cmd} --help`, not in the table" for f in sorted(helped - table - set(ALLOWED))]
        if not helped:
            problems.append(f"`inagg {cmd} --help` lists no options")
        check(f"{rel}:{n}: the flags of `inagg {cmd}` are those of its --help", problems)
if tables < 2:
    check("flag tables found", [f"only {tables} table(s) headed 'flag of `inagg CMD`' in the docs"])


# 2. Relative links and anchors.
def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().rstrip("#").strip())
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


anchors_of = {}


def anchors(path):
    if path not in anchors_of:
        seen, out = {}, set()
        for _, line in doc_lines(path):
            m = re.match(r"^#{1,6}\s+(.*)", line)
            if not m:
                continue
            s = slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
        anchors_of[path] = out
    return anchors_of[path]


link = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
for path in docs:
    rel = os.path.relpath(path, root)
    problems = []
    for n, line in doc_lines(path):
        for target in link.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                problems.append(f"line {n}: {target}: no file {os.path.relpath(dest, root)}")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"line {n}: {target}: no heading '#{anchor}' in {os.path.relpath(dest, root)}")
    check(f"{rel}: every relative link and anchor exists", problems)

# 3. PERFORMANCE.md: short, and a headline table whose every row says how to reproduce it.
perf = os.path.join(root, "docs", "PERFORMANCE.md")
count = sum(1 for _ in open(perf, encoding="utf-8"))
check(f"docs/PERFORMANCE.md is at most 350 lines ({count})", [] if count <= 350 else [f"{count} lines"])
rows, on = [], False
for n, line in doc_lines(perf):
    if re.match(r"^## Headline\b", line):
        on = True
        continue
    if on and line.startswith("## "):
        break
    if on and line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line):
        rows.append((n, cells(line)))
rows = rows[1:]  # the header
if len(rows) < 5:
    check("docs/PERFORMANCE.md has a headline table", [f"{len(rows)} rows under '## Headline'"])
for n, row in rows:
    spans = re.findall(r"`([^`]+)`", row[-1] if row else "")
    problems = []
    commands = [s for s in spans if re.match(r"^(\./build/inagg |bash bench/|bench/)", s)]
    if not commands:
        problems.append(f"its last cell has no `./build/inagg ...` or `bash bench/...` command: {row[-1] if row else ''}")
    known = None  # the flags of the row's first command, for the spans that add a flag to it
    for span in spans:
        for part in [p.strip() for p in span.split("&&")]:
            m = re.match(r"^\./build/inagg ((?:[a-z]+ ?)+)", part)
            if m:
                sub = m.group(1).strip()
                text = help_text(sub)
            elif re.match(r"^(bash )?bench/", part):
                script = os.path.join(root, part.split()[1] if part.startswith("bash ") else part.split()[0])
                if not os.path.exists(script):
                    problems.append(f"{part}: no script {os.path.relpath(script, root)}")
                    continue
                text = open(script, encoding="utf-8").read()
            elif part.startswith("--") and known is not None:
                text = known
            else:
                continue
            if known is None:
                known = text
            for flag in re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", part):
                if not re.search(re.escape(flag) + r"(?![a-z0-9-])", text):
                    problems.append(f"{flag} of `{part}` is not an option of that command")
    check(f"docs/PERFORMANCE.md:{n}: headline row reproducible ({row[0][:50] if row else ''})", problems)

# 4. Every `inagg CMD ... --flag` the docs write (README.md and docs/*.md; not docs/perf-log/,
# whose commands are those of their day) names an option of that command: what its --help says.
commands = ["bench allreduce", "bench latency", "bench optimizer", "bench udp", "bench mac",
            "bench compress", "bench train", "model calibrate", "model predict", "model validate",
            "switch", "train", "top"]
helps = {}
said = re.compile(r"\binagg ((?:bench|model) [a-z]+|switch|train|top)\b([^`|;]*)")
for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
    rel = os.path.relpath(path, root)
    problems = []
    text = open(path, encoding="utf-8").read().replace("\\\n", " ")  # a command continued
    for n, line in enumerate(text.split("\n"), 1):
        for m in said.finditer(line):
            cmd = m.group(1)
            if cmd not in commands:
                problems.append(f"line {n}: `inagg {cmd}` is not a command")
                continue
            if cmd not in helps:
                helps[cmd] = help_text(cmd)
            words = re.split(r"\binagg |&&|\|\||#", m.group(2))[0]  # up to the next command
            for flag in re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", words):
                if flag != "--help" and not re.search(re.escape(flag) + r"(?![a-z0-9-])", helps[cmd]):
                    problems.append(f"line {n}: `inagg {cmd} {flag}`: not an option of `inagg {cmd}`")
    check(f"{rel}: every `inagg CMD --flag` it writes is an option of CMD", problems)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
