#!/usr/bin/env python3
"""Checks the repository's markdown (no GPU needed), for readme_links_test.sh.

md_links.py ROOT [MD...]: every relative link of every markdown file (the tracked *.md, or the
files given) must resolve: the file or folder it names exists in the repository (tracked, where
ROOT is a git checkout: a link to a build output would pass on one machine only), it does not
lead out of ROOT, and a #anchor names a heading (or an <a id/name>) of the target markdown, made
into an anchor as GitHub does (github-slugger: lower case; every character that is not a letter,
digit, space, '-' or '_' removed; spaces to '-'; a repeated anchor gets -1, -2, ...). Links in
fenced code blocks and in `code spans` are not links. URLs with a scheme (https:, mailto:) are
not checked: this test runs offline. Prints one line per bad link, exits 1 if any.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)=\"([^\"]+)\"", re.I)


def strip_code_spans(line):
    # `x` and ``x`` spans hold no links; their text still counts for headings (see slug).
    return re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML goes
    text = text.replace("*", "")  # emphasis markers (underscores stay, as on GitHub)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    seen = {}
    out = set()
    for _, line in prose_lines(text):
        for a in HTML_ANCHOR.findall(line):
            out.add(a)
        m = HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(2))
        k = seen.get(s, 0)
        seen[s] = k + 1
        out.add(s if k == 0 else "%s-%d" % (s, k))
    return out


def tracked_paths(root):
    """Tracked files and their folders, or None where ROOT is not a git checkout."""
    try:
        files = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                               capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        return None
    paths = set()
    for f in filter(None, files):
        paths.add(f)
        d = os.path.dirname(f)
        while d:
            paths.add(d)
            d = os.path.dirname(d)
    return paths


def main():
    root = os.path.realpath(sys.argv[1])
    tracked = tracked_paths(root)
    if len(sys.argv) > 2:
        mds = [os.path.relpath(os.path.realpath(p), root) for p in sys.argv[2:]]
    elif tracked is not None:
        mds = sorted(p for p in tracked if p.endswith(".md"))
    else:
        mds = sorted(os.path.relpath(os.path.join(d, f), root)
                     for d, _, fs in os.walk(root) for f in fs if f.endswith(".md"))
    cache = {}
    anchor_cache = {}

    def anchors_of(rel):
        if rel not in anchor_cache:
            anchor_cache[rel] = anchors(text_of(rel))
        return anchor_cache[rel]

    def text_of(rel):
        if rel not in cache:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                cache[rel] = f.read()
        return cache[rel]

    bad = 0
    links = 0
    for md in mds:
        for n, line in prose_lines(text_of(md)):
            for m in LINK.finditer(strip_code_spans(line)):
                target = m.group(2)
                if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                    continue
                links += 1
                where = "%s:%d: %s" % (md, n, target)
                path, _, anchor = target.partition("#")
                if path.startswith("/"):
                    print("%s: an absolute path (links are relative to the file)" % where)
                    bad += 1
                    continue
                rel = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
                    print("%s: points outside the repository" % where)
                    bad += 1
                    continue
                full = os.path.join(root, rel)
                exists = os.path.exists(full) if tracked is None else (rel in tracked or rel == ".")
                if not exists:
                    print("%s: no such file in the repository (%s)" % (where, rel))
                    bad += 1
                    continue
                if anchor:
                    if not rel.endswith(".md"):
                        print("%s: an anchor into a file that is not markdown" % where)
                        bad += 1
                    elif anchor not in anchors_of(rel):
                        print("%s: no heading in %s gives the anchor #%s" % (where, rel, anchor))
                        bad += 1
    print("md_links: %d markdown files, %d relative links, %d bad" % (len(mds), links, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
