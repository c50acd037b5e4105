"""What stop() returns: the file written, its counts, and the CLI's analyses as dicts.

summary() and analyze() run `cuptrace stats --json` / `cuptrace analyze --json` (the command
beside the library, else on PATH) on the file, once each (cached), so the numbers are exactly
the command's. Nothing here uploads anything: open_in_perfetto() hands the bytes to a browser tab
of ui.perfetto.dev, which opens them locally, and only when the user clicks.
"""
from __future__ import annotations

import base64
import html
import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Optional

from .errors import CuptraceError

# Above this, the notebook link would put too much into the notebook itself (base64 in HTML).
PERFETTO_INLINE_MAX = 64 << 20
PERFETTO_UI = "https://ui.perfetto.dev"


def find_cli(library: Optional[str] = None) -> Optional[str]:
    """The `cuptrace` command: beside the library (build tree: <build>/cuptrace beside
    <build>/libcuptrace.so; installed: <prefix>/bin beside <prefix>/lib[/<multiarch>]), else
    on PATH."""
    if library and os.sep in library:
        d = os.path.dirname(os.path.realpath(library))
        for c in (os.path.join(d, "cuptrace"), os.path.join(d, "..", "bin", "cuptrace"),
                  os.path.join(d, "..", "..", "bin", "cuptrace")):
            if os.path.isfile(c) and os.access(c, os.X_OK):
                return os.path.normpath(c)
    return shutil.which("cuptrace")


class TraceResult:
    """The outcome of one traced stretch.

    Attributes: `path` (the file, or None where only the library can expand its name: %h, %r,
    %n), `complete` (the file is finished now: not yet under record, or in a session of capture
    windows the library cannot end early), `note` (why not, if not), `library`.
    `counts` (kernels, memcpys, ... from summary()), `summary()`, `analyze()`,
    `open_in_perfetto()`."""

    def __init__(self, path: Optional[str], complete: bool = True, note: Optional[str] = None,
                 library: Optional[str] = None) -> None:
        self.path = path
        self.complete = complete
        self.note = note
        self.library = library
        self._summary: Optional[Dict[str, Any]] = None
        self._analysis: Optional[Dict[str, Any]] = None

    # -- the CLI --------------------------------------------------------------------------
    def _usable(self) -> str:
        if not self.path:
            raise CuptraceError("cuptrace: this result names no file (%s)"
                                % (self.note or "the library chose the name"))
        if not self.complete:
            raise CuptraceError("cuptrace: %s is not finished yet (%s)" % (self.path, self.note))
        if not os.path.isfile(self.path):
            raise CuptraceError("cuptrace: %s does not exist (was it moved?)" % self.path)
        return self.path

    def _run_json(self, args: List[str]) -> Dict[str, Any]:
        path = self._usable()
        cli = find_cli(self.library)
        if not cli:
            raise CuptraceError("cuptrace: the `cuptrace` command is neither beside %s nor on "
                                "PATH; summary() and analyze() run it" % (self.library or
                                                                          "the library"))
        p = subprocess.run([cli] + args + [path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, check=False)
        if p.returncode != 0:
            raise CuptraceError("cuptrace: `%s %s %s` failed (exit %d): %s"
                                % (cli, " ".join(args), path, p.returncode,
                                   p.stderr.decode(errors="replace").strip()))
        try:
            out = json.loads(p.stdout)
        except ValueError as e:
            raise CuptraceError("cuptrace: `%s %s` printed no JSON: %s" % (cli, args[0], e)) \
                from None
        if not isinstance(out, dict):
            raise CuptraceError("cuptrace: `%s %s` printed JSON that is not an object"
                                % (cli, args[0]))
        return out

    def summary(self) -> Dict[str, Any]:
        """`cuptrace stats --json FILE` as a dict (schema cuptrace-stats/1; README 'stats')."""
        if self._summary is None:
            self._summary = self._run_json(["stats", "--json"])
        return self._summary

    def analyze(self) -> Dict[str, Any]:
        """`cuptrace analyze --json FILE` as a dict (schema cuptrace-analyze/1): steps, GPU
        idle by cause, ops, and `findings` (what to change), most important first."""
        if self._analysis is None:
            self._analysis = self._run_json(["analyze", "--json"])
        return self._analysis

    @property
    def counts(self) -> Dict[str, int]:
        """Slices per category (kernel, memcpy, memset, sync, cuda_runtime, nvtx, ...) and the
        records dropped (`dropped`), from summary()."""
        s = self.summary()
        out = {c.get("category", "?"): int(c.get("slices", 0)) for c in s.get("categories", [])}
        out["dropped"] = int((s.get("header") or {}).get("dropped_records") or 0)
        return out

    # -- display ------------------------------------------------------------------------
    def _facts(self) -> Optional[Dict[str, Any]]:
        """summary and findings for display, or None where they cannot be had (no CLI)."""
        try:
            s = self.summary()
        except CuptraceError:
            return None
        try:
            findings = self.analyze().get("findings", [])
        except CuptraceError:
            findings = None
        return {"summary": s, "findings": findings}

    def __repr__(self) -> str:
        head = "<cuptrace.TraceResult %s%s" % (self.path or "(file named by the library)",
                                               "" if self.complete else " (not finished)")
        f = self._facts() if self.complete and self.path else None
        if not f:
            return head + (": %s>" % self.note if self.note else ">")
        lines = [head + ">"]
        span = (f["summary"].get("span") or {}).get("duration_ns")
        if span is not None:
            lines.append("  span %.3f ms, GPU busy %.3f ms" % (
                span / 1e6, (f["summary"].get("gpu_busy_ns") or 0) / 1e6))
        lines.append("  " + ", ".join("%s %d" % kv for kv in self.counts.items()))
        for x in (f["findings"] or [])[:5]:
            lines.append("  %s %s: %s" % ("!" if x.get("severe") else "-", x.get("id"),
                                          x.get("title")))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """The notebook's view: the file, the counts and the top findings as tables."""
        e = html.escape
        title = "<b>cuptrace</b> %s" % e(self.path or "(file named by the library)")
        f = self._facts() if self.complete and self.path else None
        if not f:
            return "<div>%s%s</div>" % (title, "<br><i>%s</i>" % e(self.note) if self.note
                                        else "")
        rows = "".join("<tr><td>%s</td><td style='text-align:right'>%d</td></tr>"
                       % (e(k), v) for k, v in self.counts.items())
        out = ["<div>", title, "<table><tr><th>category</th><th>slices</th></tr>", rows,
               "</table>"]
        findings = f["findings"]
        if findings:
            out.append("<table><tr><th>finding</th><th>total ms</th><th>advice</th></tr>")
            for x in findings[:5]:
                out.append("<tr><td>%s%s</td><td style='text-align:right'>%.3f</td><td>%s</td>"
                           "</tr>" % ("&#9888; " if x.get("severe") else "",
                                      e(str(x.get("title", x.get("id")))),
                                      (x.get("total_ns") or 0) / 1e6,
                                      e(str(x.get("advice", "")))))
            out.append("</table>")
        elif findings is None:
            out.append("<i>analyze() unavailable</i>")
        out.append("</div>")
        return "".join(out)

    # -- Perfetto -----------------------------------------------------------------------
    def open_in_perfetto(self) -> Optional["PerfettoLink"]:
        """Says how to open the trace; in a notebook (IPython present) also returns an object
        that displays a button which opens ui.perfetto.dev in a new tab and hands it the file
        through Perfetto's postMessage protocol (PING until PONG, then the bytes). Nothing is
        sent anywhere until the button is clicked, and then only to that browser tab."""
        path = self._usable()
        print("cuptrace: open %s at %s (Open trace file, or drag it onto the page); the trace "
              "is read in your browser, not uploaded" % (path, PERFETTO_UI))
        if not _in_notebook():
            return None
        return PerfettoLink(path)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # type: ignore[import-not-found]
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


class PerfettoLink:
    """A button (HTML and JavaScript for a notebook) that opens one trace in ui.perfetto.dev."""

    def __init__(self, path: str, max_bytes: int = PERFETTO_INLINE_MAX) -> None:
        self.path = path
        self.size = os.path.getsize(path)
        self.max_bytes = max_bytes

    def __repr__(self) -> str:
        return "<cuptrace.PerfettoLink %s>" % self.path

    def _repr_html_(self) -> str:
        e = html.escape
        name = os.path.basename(self.path)
        if self.size > self.max_bytes:
            return ("<div>%s is %d MiB, too large to put in the notebook: open it at "
                    "<a href='%s' target='_blank'>%s</a>.</div>"
                    % (e(name), self.size >> 20, PERFETTO_UI, PERFETTO_UI))
        with open(self.path, "rb") as f:
            b64 = base64.b64encode(f.read()).decode("ascii")
        uid = "cuptrace_%x" % (id(self) & 0xFFFFFFFF)
        # The documented embedding handshake (perfetto.dev, Deep linking to the Perfetto UI):
        # window.open, then 'PING' every 50 ms until the tab answers 'PONG', then one message
        # {perfetto: {buffer, title, fileName}} to that tab's origin only.
        js = """
(function() {
  var b64 = "%(b64)s";
  document.getElementById("%(uid)s").onclick = function() {
    var bytes = Uint8Array.from(atob(b64), function(c) { return c.charCodeAt(0); });
    var ui = window.open("%(ui)s");
    if (!ui) { alert("cuptrace: the browser blocked the new tab"); return; }
    var timer = setInterval(function() { ui.postMessage("PING", "%(ui)s"); }, 50);
    function onMessage(evt) {
      if (evt.source !== ui || evt.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      ui.postMessage({perfetto: {buffer: bytes.buffer, title: %(title)s,
                                 fileName: %(title)s}}, "%(ui)s");
    }
    window.addEventListener("message", onMessage);
  };
})();
""" % {"b64": b64, "uid": uid, "ui": PERFETTO_UI, "title": json.dumps(name).replace("<", "\\u003c")}
        return ("<div><button id='%s'>Open %s in Perfetto UI</button> "
                "<small>(%d KiB; opened in your browser, not uploaded)</small>"
                "<script>%s</script></div>" % (uid, e(name), (self.size + 1023) >> 10, js))
