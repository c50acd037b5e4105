#!/usr/bin/env python3
"""How the text reports read, independent of what they say (tests/golden_text_test.sh):
 - a table is a header line, a line of dash runs, then rows up to a blank line; in every row the
   two-space gaps between the dash runs are blank and no row is longer than the dash line, so
   every column starts (left-aligned) or ends (right-aligned) at the same offset in every row;
 - no line is longer than 100 columns, except a legend line "[k] full name", a diagnostic line
   of stderr ("cuptrace merge: ...") and a line that is a single word (a name, a path);
 - no share is above 100: a cell of a column whose header ends in "%" (changes aside: "Change %",
   "Avg %"), and a "N.N%" in prose that is not a signed change;
 - no "?" standing for a missing value (a cell "?" or ": ?")."""
import re
import sys

WIDTH = 100
bad = []


def width(s):
    return len(s)  # the files are UTF-8 decoded: one column per code point


def check(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, l in enumerate(lines):
        where = f"{path}:{i + 1}"
        # A diagnostic on stderr ("cuptrace merge: ...") stays one line, so that it can be
        # searched for; a report's own lines wrap.
        if width(l) > WIDTH and not re.match(r"^(- )?\[\d+\] |cuptrace \w+: ", l) and " " in l.strip():
            bad.append(f"{where}: {width(l)} columns: {l[:120]}")
        if re.search(r"(^|[\s:|])\?($|[\s|,;])", l) and "?" not in re.sub(r"\?", "", l, 1):
            bad.append(f"{where}: a '?' placeholder: {l}")
        for m in re.finditer(r"(?<![+\-\d.])(\d+(?:\.\d+)?)%", l):
            if float(m.group(1)) > 100 and not re.search(r"(grew|Change|more than)", l):
                bad.append(f"{where}: a share above 100%: {l}")
        if i + 1 < len(lines) and re.fullmatch(r"-+( {2}-+)*", lines[i + 1]) and l.strip():
            table(path, lines, i)


def table(path, lines, h):
    dashes = lines[h + 1]
    cols = [(m.start(), m.end()) for m in re.finditer(r"-+", dashes)]
    head = lines[h]
    rows = [head]
    for l in lines[h + 2:]:
        if not l.strip():
            break
        rows.append(l)
    for k, r in enumerate(rows):
        where = f"{path}:{h + 1 + (k and k + 1)}"
        if len(r) > len(dashes):
            bad.append(f"{where}: a row longer than its table's dash line: {r}")
            continue
        for (a, b), (c, _) in zip(cols, cols[1:]):
            if r[b:c].strip():
                bad.append(f"{where}: text in the gap between columns {b}-{c}: {r}")
    for ci, (a, b) in enumerate(cols):
        name = head[a:b].strip()
        if not name.endswith("%") or name.startswith(("Change", "Avg")):
            continue
        for r in rows[1:]:
            cell = r[a:b].strip()
            try:
                if float(cell) > 100:
                    bad.append(f"{path}: column {name!r} holds {cell} (above 100): {r}")
            except ValueError:
                pass
        cells = [r[a:b].strip() for r in rows[1:]]
    for r in rows[1:]:
        for a, b in cols:
            if r[a:b].strip() == "?":
                bad.append(f"{path}: a cell '?': {r}")


for p in sys.argv[1:]:
    check(p)
if bad:
    print("\n".join(bad[:40]))
    print(f"{len(bad)} problems")
    sys.exit(1)
print(f"text_check: {len(sys.argv) - 1} files read well")
