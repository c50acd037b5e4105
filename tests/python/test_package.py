"""CPU tests of the cuptrace Python package against tests/cuptrace_stub.c (no CUDA).

Run by tests/py_package_test.sh, which builds nothing itself: it passes the stubs, the CLI and a
real small trace in the environment (STUB, STUB_NEXT, CUPTRACE_CLI_DIR, TRACE). The stub writes
down every call and the CUPTRACE_* variables it saw at start; the tests read that log back and
compare it with what record's option table (include/cuptrace.h) says, and compare results with
the CLI run here directly, not through the package.
"""
import base64
import ctypes
import errno
import html.parser
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import unittest
from contextlib import redirect_stdout

import cuptrace
from cuptrace import _lib, _session, _torch
from cuptrace.callbacks import StepWindow

STUB = os.environ["STUB"]
STUB_NEXT = os.environ["STUB_NEXT"]
CLI = os.path.join(os.environ["CUPTRACE_CLI_DIR"], "cuptrace")
TRACE = os.environ["TRACE"]  # a real .pftrace (tests/data converted by the CLI)


def cli_json(*args):
    return json.loads(subprocess.run([CLI] + list(args), check=True, stdout=subprocess.PIPE).stdout)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cuptrace-py-")
        self.log = os.path.join(self.tmp, "calls.log")
        self.saved_env = dict(os.environ)
        for k in list(os.environ):
            if k.startswith("CUPTRACE_") and k != "CUPTRACE_CLI_DIR" or k == \
                    "CUDA_INJECTION64_PATH":
                del os.environ[k]
        os.environ["CUPTRACE_STUB_LOG"] = self.log
        os.environ["CUPTRACE_STUB_TRACE"] = TRACE
        os.environ["CUPTRACE_LIB"] = STUB
        os.environ["PATH"] = os.environ["CUPTRACE_CLI_DIR"] + os.pathsep + os.environ["PATH"]
        _lib._reset_for_tests()
        self.saved_modules = set(sys.modules)

    def tearDown(self):
        if cuptrace.is_tracing():
            try:
                cuptrace.stop()
            except cuptrace.CuptraceError:
                pass
        _torch.guard_off()
        for stub in (STUB, STUB_NEXT):
            ctypes.CDLL(stub).cuptrace_stub_reset()
        if "torch" not in self.saved_modules:
            sys.modules.pop("torch", None)
        os.environ.clear()
        os.environ.update(self.saved_env)
        _lib._reset_for_tests()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def calls(self):
        try:
            with open(self.log, encoding="utf-8") as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def env_seen(self):
        return dict(line[4:].split("=", 1) for line in self.calls() if line.startswith("env "))


class Mapping(Base):
    # Each keyword with record's option name -> the variable and text record would pass
    # (include/cuptrace.h), written out here by hand.
    CASES = {
        "format": ("chrome", "CUPTRACE_FORMAT", "chrome"),
        "compress": ("gzip", "CUPTRACE_COMPRESS", "gzip"),
        "compress_level": (3, "CUPTRACE_COMPRESS_LEVEL", "3"),
        "driver": ("all", "CUPTRACE_DRIVER", "all"),
        "runtime": ("watch", "CUPTRACE_RUNTIME", "watch"),
        "sync_records": ("cupti", "CUPTRACE_SYNC_RECORDS", "cupti"),
        "cuda_graphs": ("node", "CUPTRACE_CUDA_GRAPHS", "node"),
        "stacks": ("python", "CUPTRACE_STACKS", "python"),
        "stacks_every": (4, "CUPTRACE_STACKS_EVERY", "4"),
        "buffer_size": (65536, "CUPTRACE_BUFFER_SIZE", "65536"),
        "flush_ms": (250, "CUPTRACE_FLUSH_MS", "250"),
        "no_summary": (True, "CUPTRACE_SUMMARY", "0"),
        "gpu_metrics": (["sm__a", "dram__b"], "CUPTRACE_GPU_METRICS", "sm__a,dram__b"),
        "gpu_metrics_rate": (500.5, "CUPTRACE_GPU_METRICS_RATE", "500.5"),
        "private": (True, "CUPTRACE_PRIVATE", "1"),
        "delay": (1.5, "CUPTRACE_DELAY", "1.5s"),
        "duration": ("2s", "CUPTRACE_DURATION", "2s"),
        "capture_range": ("range:train#2,3", "CUPTRACE_CAPTURE_RANGE", "range:train#2,3"),
        "steps": ((5, 3), "CUPTRACE_STEPS", "5,3"),
        "step_range": ("train_step", "CUPTRACE_STEP_RANGE", "train_step"),
        "capture_repeat": ("all", "CUPTRACE_CAPTURE_REPEAT", "all"),
        "on_demand": (True, "CUPTRACE_ON_DEMAND", "1"),
        "cupti_early": (True, "CUPTRACE_CUPTI_EARLY", "1"),
        "ring": ("10s", "CUPTRACE_RING", "10s"),
        "ring_slow": (3, "CUPTRACE_RING_SLOW", "3"),
        "ring_max": (1 << 21, "CUPTRACE_RING_MAX", str(1 << 21)),
        "otlp": ("http://127.0.0.1:4318", "CUPTRACE_OTLP_URL", "http://127.0.0.1:4318"),
        "service": ("svc", "CUPTRACE_OTLP_SERVICE", "svc"),
        "otlp_trace_per": ("step", "CUPTRACE_OTLP_TRACE_PER", "step"),
        "otlp_batch": (64, "CUPTRACE_OTLP_BATCH", "64"),
        "otlp_interval": (200, "CUPTRACE_OTLP_INTERVAL_MS", "200"),
        "otlp_window": (3000, "CUPTRACE_OTLP_WINDOW_MS", "3000"),
        "otlp_timeout": (900, "CUPTRACE_OTLP_TIMEOUT_MS", "900"),
    }

    def test_every_keyword_is_a_record_option(self):
        help_text = subprocess.run([CLI, "record", "--help"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT).stdout.decode()
        options = set(re.findall(r"--([a-z][a-z0-9-]*)", help_text))
        from cuptrace._options import OPTIONS, RECORD_ONLY
        for k in list(OPTIONS) + [k for k in RECORD_ONLY if k != "children"]:
            self.assertIn(k.replace("_", "-"), options, "%s is not a record option" % k)
        self.assertEqual(set(OPTIONS), set(self.CASES) | {"capture"})

    def test_keywords_reach_the_library_as_variables(self):
        path = os.path.join(self.tmp, "run.pftrace")
        cuptrace.start(path, **{k: v[0] for k, v in self.CASES.items()})
        seen = self.env_seen()
        self.assertEqual(self.calls()[0], "start " + path)
        for k, (_, var, text) in self.CASES.items():
            self.assertEqual(seen.get(var), text, k)
        cuptrace.stop()
        # The variables are put back as they were: none of them was set before.
        for _, var, _ in self.CASES.values():
            self.assertNotIn(var, os.environ)

    def test_capture_means_the_capture_format_and_old_values_come_back(self):
        os.environ["CUPTRACE_FORMAT"] = "perfetto"
        cuptrace.start(os.path.join(self.tmp, "a.cupti"), capture=True, steps=7)
        self.assertEqual(self.env_seen()["CUPTRACE_FORMAT"], "capture")
        self.assertEqual(self.env_seen()["CUPTRACE_STEPS"], "7")
        cuptrace.stop()
        self.assertEqual(os.environ["CUPTRACE_FORMAT"], "perfetto")

    def test_bad_types_are_refused_before_the_library(self):
        for kw in ({"steps": (1, 2, 3)}, {"on_demand": "yes"}, {"delay": -1},
                   {"buffer_size": True}, {"nonsense": 1}):
            with self.assertRaises(TypeError, msg=str(kw)):
                cuptrace.start(os.path.join(self.tmp, "x.pftrace"), **kw)
        self.assertEqual(self.calls(), [])


class Errors(Base):
    def test_record_only_options_are_refused(self):
        for k in ("pytorch", "pytorch_shapes", "no_step_marks", "no_check", "children"):
            with self.assertRaises(cuptrace.RecordOnlyOption) as cm:
                cuptrace.start(os.path.join(self.tmp, "x.pftrace"), **{k: True})
            self.assertIn("cuptrace record", str(cm.exception))
        self.assertEqual(self.calls(), [])
        self.assertFalse(cuptrace.is_tracing())

    def test_missing_library_names_where_it_looked(self):
        os.environ["CUPTRACE_LIB"] = os.path.join(self.tmp, "nowhere", "libcuptrace.so")
        with self.assertRaises(cuptrace.LibraryNotFound) as cm:
            cuptrace.start(os.path.join(self.tmp, "x.pftrace"))
        self.assertIn(os.environ["CUPTRACE_LIB"], str(cm.exception))
        self.assertIn("CUPTRACE_LIB", str(cm.exception))
        self.assertFalse(cuptrace.is_tracing())

    def test_range_without_the_symbol_or_nvtx_names_it(self):
        sys.modules["nvtx"] = None  # no `nvtx` package either (import fails), and no torch
        try:
            with self.assertRaises(cuptrace.MissingSymbol) as cm:
                with cuptrace.range("load batch"):
                    self.fail("the body must not run")
        finally:
            del sys.modules["nvtx"]
        self.assertIn("cuptrace_range_push", str(cm.exception))
        self.assertIn(STUB, str(cm.exception))

    def test_range_falls_back_to_torch_nvtx(self):
        # An older library (STUB): torch.cuda.nvtx's push/pop, where torch is imported.
        seen = []
        t = types.ModuleType("torch")
        t.cuda = types.SimpleNamespace(nvtx=types.SimpleNamespace(
            range_push=lambda n: seen.append("push " + n) or len(seen),
            range_pop=lambda: seen.append("pop") or 0))
        sys.modules["torch"] = t
        with cuptrace.range("load batch"):
            with cuptrace.range("inner"):
                pass
        self.assertEqual(seen, ["push load batch", "push inner", "pop", "pop"])
        self.assertEqual(self.calls(), [])  # nothing asked of the library

    def test_range_with_the_symbols(self):
        os.environ["CUPTRACE_LIB"] = STUB_NEXT
        sys.modules["torch"] = types.ModuleType("torch")  # present, but not used: no NVTX

        @cuptrace.range("decorated")
        def f():
            with cuptrace.range("load batch"):
                pass

        f()
        f()
        self.assertEqual(self.calls(), ["range_push decorated", "range_push load batch",
                                        "range_pop", "range_pop"] * 2)

    def test_range_pop_with_none_open(self):
        os.environ["CUPTRACE_LIB"] = STUB_NEXT
        r = cuptrace.range("half")
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            r.__exit__(None, None, None)  # an end without its beginning on this thread
        self.assertIn("no range open on this thread", str(cm.exception))
        self.assertIn("EINVAL", str(cm.exception))
        # Under an exception of the body, that one goes on, not ours.
        with self.assertRaises(KeyError):
            with cuptrace.range("a"):
                _lib.fn("cuptrace_range_pop")()  # the body popped it itself
                raise KeyError("the program's own")
        self.assertEqual(self.calls(), ["range_pop (none open)", "range_push a", "range_pop",
                                        "range_pop (none open)"])

    def test_range_names(self):
        for bad in ("", None, 3):
            with self.assertRaises(TypeError):
                cuptrace.range(bad)
        os.environ["CUPTRACE_LIB"] = STUB_NEXT
        with cuptrace.range("\u00e9t\u00e9 \u2713"):
            pass
        self.assertEqual(self.calls()[0], "range_push \u00e9t\u00e9 \u2713")

    def test_double_start(self):
        p = os.path.join(self.tmp, "x.pftrace")
        cuptrace.start(p)
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            cuptrace.start(p)
        self.assertIn("already running", str(cm.exception))
        self.assertEqual([c for c in self.calls() if c.startswith("start")], ["start " + p])
        cuptrace.stop()

    def test_library_refusals_carry_the_errno(self):
        for rc, word in ((-errno.EALREADY, "EALREADY"), (-errno.EIO, "EIO")):
            os.environ["CUPTRACE_STUB_START_RC"] = str(rc)
            with self.assertRaises(cuptrace.CuptraceError) as cm:
                cuptrace.start(os.path.join(self.tmp, "x.pftrace"), steps=3)
            self.assertIn(word, str(cm.exception))
            self.assertFalse(cuptrace.is_tracing())
            self.assertNotIn("CUPTRACE_STEPS", os.environ)  # put back on failure too

    def test_values_checked_by_the_library_table(self):
        os.environ["CUPTRACE_LIB"] = STUB_NEXT
        with self.assertRaises(ValueError) as cm:
            cuptrace.start(os.path.join(self.tmp, "x.pftrace"), driver="bad")
        self.assertIn("driver='bad': ", str(cm.exception))
        self.assertIn("CUPTRACE_DRIVER: 'bad' (stub says no)", str(cm.exception))
        self.assertEqual(self.calls(), [])
        self.assertNotIn("CUPTRACE_DRIVER", os.environ)
        # A variable the library does not read (-ENOENT) is left to it, not refused here.
        os.environ["CUPTRACE_STUB_UNKNOWN"] = "CUPTRACE_DRIVER"
        cuptrace.start(os.path.join(self.tmp, "x.pftrace"), driver="bad")
        self.assertEqual(self.env_seen()["CUPTRACE_DRIVER"], "bad")
        cuptrace.stop()

    def test_cupti_held_by_another_tool(self):
        os.environ["CUPTRACE_STUB_START_RC"] = str(-errno.EBUSY)
        with self.assertRaises(cuptrace.ProfilerConflict):
            cuptrace.start(os.path.join(self.tmp, "x.pftrace"))

    def test_stop_without_start(self):
        with self.assertRaises(cuptrace.CuptraceError):
            cuptrace.stop()

    def test_another_lib_after_loading_is_refused(self):
        cuptrace.step()
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            cuptrace.start(os.path.join(self.tmp, "x.pftrace"), lib=STUB_NEXT)
        self.assertIn("loaded already", str(cm.exception))

    def test_stacks_reports_enotsup(self):
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            cuptrace.stacks(False)
        self.assertIn("no call stacks", str(cm.exception))
        self.assertEqual(self.calls(), ["stacks 0"])

    def test_graph_mode_refused_once_cuda_is_loaded(self):
        from cuptrace import _options
        orig = _options.libcuda_loaded
        _options.libcuda_loaded = lambda: True
        try:
            with self.assertRaises(cuptrace.RecordOnlyOption):
                cuptrace.start(os.path.join(self.tmp, "x.pftrace"), cuda_graphs="graph")
        finally:
            _options.libcuda_loaded = orig


class Sessions(Base):
    def test_context_manager_stops_on_exception(self):
        p = os.path.join(self.tmp, "x.pftrace")
        with self.assertRaises(ValueError):
            with cuptrace.trace(p, flush_ms=100) as t:
                cuptrace.step()
                raise ValueError("the program's own error")
        self.assertEqual([c for c in self.calls() if not c.startswith("env ")],
                         ["start " + p, "step", "stop"])
        self.assertFalse(cuptrace.is_tracing())
        self.assertNotIn("CUPTRACE_FLUSH_MS", os.environ)
        self.assertEqual(t.result.path, p)
        self.assertTrue(os.path.isfile(p))

    def test_default_path_is_the_library_default(self):
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            cuptrace.start()
            r = cuptrace.stop()
        finally:
            os.chdir(cwd)
        self.assertEqual(self.calls()[0], "start (null)")
        self.assertEqual(r.path, os.path.join(self.tmp, "cuptrace-%d.pftrace" % os.getpid()))
        self.assertTrue(os.path.isfile(r.path))

    def test_windows_without_cuptrace_end(self):
        p = os.path.join(self.tmp, "w.pftrace")
        cuptrace.start(p, steps=(2, 1))
        r = cuptrace.stop()
        self.assertFalse(r.complete)
        self.assertIn("cuptrace_end", r.note)
        with self.assertRaises(cuptrace.CuptraceError):
            r.summary()

    def test_windows_with_cuptrace_end(self):
        os.environ["CUPTRACE_LIB"] = STUB_NEXT
        p = os.path.join(self.tmp, "w.pftrace")
        cuptrace.start(p, on_demand=True)
        with cuptrace.window():
            pass
        r = cuptrace.stop()
        # The window closed at the block's end; stop() ends the session (no cuptrace_stop).
        self.assertEqual([c for c in self.calls() if not c.startswith("env ")],
                         ["start " + p, "start (null)", "stop", "end"])
        self.assertTrue(r.complete)
        self.assertIsNone(r.note)
        self.assertTrue(os.path.isfile(p))

    def test_stop_and_trace_end_the_session(self):
        os.environ["CUPTRACE_LIB"] = STUB_NEXT
        p = os.path.join(self.tmp, "e.pftrace")
        with cuptrace.trace(p) as t:
            cuptrace.step()
        self.assertEqual([c for c in self.calls() if not c.startswith("env ")],
                         ["start " + p, "step", "end"])
        self.assertTrue(t.result.complete)
        self.assertTrue(os.path.isfile(p))
        with self.assertRaises(ValueError):
            with cuptrace.trace(p):
                raise ValueError("the program's own error")
        self.assertEqual(self.calls()[-1], "end")
        self.assertFalse(cuptrace.is_tracing())

    def test_session_ended_elsewhere(self):
        os.environ["CUPTRACE_LIB"] = STUB_NEXT
        cuptrace.start(os.path.join(self.tmp, "x.pftrace"))
        self.assertEqual(_lib.fn("cuptrace_end")(), 0)  # the C API, behind the package's back
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            cuptrace.stop()
        self.assertIn("ended already", str(cm.exception))
        self.assertFalse(cuptrace.is_tracing())

    def test_window_needs_windows(self):
        cuptrace.start(os.path.join(self.tmp, "x.pftrace"))
        with self.assertRaises(cuptrace.CuptraceError):
            with cuptrace.window():
                pass

    def test_under_record(self):
        # record sets CUDA_INJECTION64_PATH: that file is loaded, whatever CUPTRACE_LIB says.
        os.environ["CUDA_INJECTION64_PATH"] = STUB_NEXT
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            cuptrace.start()
        self.assertIn("whole run", str(cm.exception))
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            cuptrace.start(os.path.join(self.tmp, "x.pftrace"))
        self.assertIn("record's", str(cm.exception))
        os.environ["CUPTRACE_ON_DEMAND"] = "1"
        os.environ["CUPTRACE_OUTPUT"] = os.path.join(self.tmp, "rec-%p.pftrace")
        cuptrace.start()
        r = cuptrace.stop()
        self.assertEqual(_lib.loaded_path(), STUB_NEXT)
        self.assertEqual(r.path, os.path.join(self.tmp, "rec-%d.pftrace" % os.getpid()))
        self.assertFalse(r.complete)
        self.assertIn("record", r.note)
        self.assertEqual(self.calls()[0], "start (null)")
        # A window open already (a trigger opened it): start() goes on, as the library does.
        os.environ["CUPTRACE_STUB_START_RC"] = str(-errno.EALREADY)
        cuptrace.start()
        self.assertTrue(cuptrace.is_tracing())
        cuptrace.stop()

    def test_step_window_callback_logic(self):
        p = os.path.join(self.tmp, "s.pftrace")
        w = StepWindow(p, steps=(3, 2), no_summary=True)
        marks = []
        for i in range(1, 7):
            w.begin()
            marks.append("begin %d" % i)
            w.end()
        w.finish()
        calls = [c for c in self.calls() if not c.startswith("env ")]
        self.assertEqual(calls, ["start " + p, "step", "step", "stop"])
        self.assertEqual(self.env_seen()["CUPTRACE_SUMMARY"], "0")
        self.assertEqual(w.result.path, p)

    def test_step_window_stops_at_train_end(self):
        w = StepWindow(os.path.join(self.tmp, "s.pftrace"), steps=(1, 10))
        for _ in range(3):
            w.begin()
            w.end()
        w.finish()
        self.assertEqual(self.calls()[-1], "stop")
        self.assertTrue(w.result.complete)

    def test_callbacks_need_their_libraries(self):
        import cuptrace.callbacks as cb
        for name, lib in (("LightningCallback", "lightning"),
                          ("TransformersCallback", "transformers")):
            try:
                __import__(lib)
                continue  # present: the GPU test uses it
            except ImportError:
                pass
            with self.assertRaises(ImportError) as cm:
                getattr(cb, name)
            self.assertIn(lib, str(cm.exception))
        self.assertNotIn("lightning", sys.modules)


class Results(Base):
    def result(self):
        p = os.path.join(self.tmp, "run.pftrace")
        cuptrace.start(p)
        return cuptrace.stop()

    def test_summary_and_analyze_are_the_clis(self):
        r = self.result()
        self.assertEqual(r.summary(), cli_json("stats", "--json", r.path))
        self.assertEqual(r.analyze(), cli_json("analyze", "--json", r.path))
        # Three counts of the kernels from three places: the recording's own (metadata),
        # stats' slices and analyze's.
        meta = int(r.summary()["metadata"]["kernels"])
        self.assertGreater(meta, 0)
        self.assertEqual(r.counts["kernel"], meta)
        self.assertEqual(r.analyze()["counts"]["kernels"], meta)
        self.assertEqual(r.counts["dropped"], 0)

    def test_repr_and_html(self):
        r = self.result()
        text = repr(r)
        self.assertIn(r.path, text)
        findings = cli_json("analyze", "--json", r.path)["findings"]
        stats = cli_json("stats", "--json", r.path)
        for c in stats["categories"]:
            self.assertIn("%s %d" % (c["category"], c["slices"]), text)
        self.assertIn(findings[0]["id"], text)

        class Tables(html.parser.HTMLParser):
            def __init__(self):
                super().__init__()
                self.tables, self.cells = [], None

            def handle_starttag(self, tag, attrs):
                if tag == "table":
                    self.tables.append([])
                elif tag == "tr":
                    self.tables[-1].append([])
                elif tag in ("td", "th"):
                    self.cells = self.tables[-1][-1]
                    self.cells.append("")

            def handle_data(self, data):
                if self.cells is not None:
                    self.cells[-1] += data

            def handle_endtag(self, tag):
                if tag in ("td", "th"):
                    self.cells = None

        t = Tables()
        t.feed(r._repr_html_())
        counts, finds = t.tables
        self.assertEqual({row[0]: int(row[1]) for row in counts[1:]},
                         dict({c["category"]: c["slices"] for c in stats["categories"]},
                              dropped=0))
        self.assertEqual(len(finds) - 1, min(5, len(findings)))
        self.assertTrue(finds[1][0].endswith(findings[0]["title"]))
        self.assertAlmostEqual(float(finds[1][1]), findings[0]["total_ns"] / 1e6, places=3)

    def test_no_cli(self):
        r = self.result()
        os.environ["PATH"] = self.tmp  # no cuptrace there, and none beside the stub
        with self.assertRaises(cuptrace.CuptraceError) as cm:
            r.summary()
        self.assertIn("`cuptrace` command", str(cm.exception))
        self.assertIn("<cuptrace.TraceResult", repr(r))  # repr still works, without numbers

    def test_open_in_perfetto(self):
        r = self.result()
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertIsNone(r.open_in_perfetto())  # not a notebook
        self.assertIn(r.path, out.getvalue())
        self.assertIn("https://ui.perfetto.dev", out.getvalue())
        page = cuptrace.PerfettoLink(r.path)._repr_html_()
        b64 = re.search(r'var b64 = "([A-Za-z0-9+/=]*)"', page).group(1)
        with open(r.path, "rb") as f:
            self.assertEqual(base64.b64decode(b64), f.read())
        for needed in ('window.open("https://ui.perfetto.dev")', '"PING"', '"PONG"',
                       "perfetto: {buffer: bytes.buffer"):
            self.assertIn(needed, page)
        for never in ("fetch(", "XMLHttpRequest", "sendBeacon"):
            self.assertNotIn(never, page)
        small = cuptrace.PerfettoLink(r.path, max_bytes=16)._repr_html_()
        self.assertNotIn("<script>", small)

    def test_open_in_perfetto_in_a_notebook(self):
        try:
            import IPython
        except ImportError:
            self.skipTest("IPython is not installed")
        r = self.result()
        orig = IPython.get_ipython
        IPython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
        try:
            with redirect_stdout(io.StringIO()):
                link = r.open_in_perfetto()
        finally:
            IPython.get_ipython = orig
        self.assertIsInstance(link, cuptrace.PerfettoLink)
        self.assertEqual(link.path, r.path)


class Torch(Base):
    def fake_torch(self, kineto_running):
        t = types.ModuleType("torch")
        kineto = object()
        t._C = types.SimpleNamespace(
            _autograd=types.SimpleNamespace(
                _profiler_type=lambda: kineto if kineto_running else None),
            _profiler=types.SimpleNamespace(ActiveProfilerType=types.SimpleNamespace(
                KINETO=kineto)))
        cuda = object()

        class KinetoProfile:
            def __init__(self, activities):
                self.activities = activities

            def prepare_trace(self):
                return "prepared"

        class LegacyProfile:
            use_device = "cuda"

            def __enter__(self):
                return self

        t.profiler = types.SimpleNamespace(
            ProfilerActivity=types.SimpleNamespace(CUDA=cuda, CPU=object()),
            profiler=types.SimpleNamespace(_KinetoProfile=KinetoProfile))
        t.autograd = types.SimpleNamespace(profiler=types.SimpleNamespace(profile=LegacyProfile))
        sys.modules["torch"] = t
        return t, KinetoProfile, cuda

    def test_refused_while_torch_profiler_runs(self):
        self.fake_torch(kineto_running=True)
        with self.assertRaises(cuptrace.ProfilerConflict):
            cuptrace.start(os.path.join(self.tmp, "x.pftrace"))
        self.assertEqual(self.calls(), [])

    def test_torch_profiler_refused_while_tracing(self):
        t, KP, cuda = self.fake_torch(kineto_running=False)
        cuptrace.start(os.path.join(self.tmp, "x.pftrace"))
        with self.assertRaises(cuptrace.ProfilerConflict):
            KP([cuda]).prepare_trace()
        with self.assertRaises(cuptrace.ProfilerConflict):
            t.autograd.profiler.profile().__enter__()
        self.assertEqual(KP([t.profiler.ProfilerActivity.CPU]).prepare_trace(), "prepared")
        cuptrace.stop()
        self.assertEqual(KP([cuda]).prepare_trace(), "prepared")


class RealLibrary(Base):
    """The built libcuptrace.so (REAL_LIB), where python can load it (a sanitized build cannot
    be): its C API outside a session, and every keyword's text through its settings table, the
    one `record` parses its options with (src/common/options.c)."""

    loadable = None  # whether python can load REAL_LIB (a sanitized one aborts the process)

    @classmethod
    def setUpClass(cls):
        real = os.environ.get("REAL_LIB")
        if real and cls.loadable is None:
            p = subprocess.run([sys.executable, "-c", "import ctypes, sys; "
                                "ctypes.CDLL(sys.argv[1])", real],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            cls.loadable = p.returncode == 0
            if not cls.loadable:
                print("SKIP RealLibrary: %s does not load into python here (%s)"
                      % (real, p.stdout.decode(errors="replace").strip()[:200]))

    def setUp(self):
        super().setUp()
        if not os.environ.get("REAL_LIB"):
            self.skipTest("REAL_LIB not given")
        if not self.loadable:
            self.skipTest("the library does not load into python (a sanitized build)")
        os.environ["CUPTRACE_LIB"] = os.environ["REAL_LIB"]

    def test_c_api_outside_a_session(self):
        end = _lib.fn("cuptrace_end")
        self.assertEqual(end(), -errno.EINVAL)
        push, pop = _lib.fn("cuptrace_range_push"), _lib.fn("cuptrace_range_pop")
        self.assertEqual(pop(), -errno.EINVAL)
        self.assertEqual(push(b"a"), 0)
        self.assertEqual(push(None), -errno.EINVAL)
        self.assertEqual(pop(), 0)
        self.assertEqual(pop(), -errno.EINVAL)
        with cuptrace.range("outside"):  # a no-op while nothing traces
            pass

    def test_every_keyword_passes_the_library_table(self):
        from cuptrace import _options
        for k, (v, var, text) in Mapping.CASES.items():
            env = _options.to_env({k: v})
            _session._check_values(env, {k: v})  # raises ValueError if refused

    def test_bad_values_are_refused_as_record_refuses_them(self):
        # keyword, value, record's option: the library's reason must be record's, word for word.
        otlp = ["--otlp", "http://127.0.0.1:4318"]
        for k, v, opt, more in (("driver", "some", "--driver", []),
                                ("compress_level", 99, "--compress-level", []),
                                ("delay", "soon", "--delay", []),
                                ("runtime", "half", "--runtime", []),
                                ("otlp_batch", 0, "--otlp-batch", otlp)):
            with self.assertRaises(ValueError, msg=k) as cm:
                cuptrace.start(os.path.join(self.tmp, "x.pftrace"), **{k: v})
            said = str(cm.exception)
            self.assertIn("%s=%r" % (k, v), said)
            rec = subprocess.run([CLI, "record", "--no-check"] + more + [opt, str(v), "--",
                                                                          "true"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            self.assertEqual(rec.returncode, 2, rec.stdout)
            why = re.search(r"\((.*)\)", said)
            self.assertIsNotNone(why, said)
            self.assertIn(why.group(1), rec.stdout.decode(), (said, rec.stdout))
        self.assertFalse(cuptrace.is_tracing())


class Misc(Base):
    def test_import_costs_no_library(self):
        code = ("import cuptrace, cuptrace._lib as l, sys; "
                "print(l.loaded_path(), 'torch' in sys.modules)")
        env = dict(os.environ, CUPTRACE_LIB="/nonexistent/libcuptrace.so")
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             stdout=subprocess.PIPE).stdout.decode().split()
        self.assertEqual(out, ["None", "False"])

    def test_typed(self):
        pkg = os.path.dirname(cuptrace.__file__)
        self.assertTrue(os.path.isfile(os.path.join(pkg, "py.typed")))
        for name in cuptrace.__all__:
            obj = getattr(cuptrace, name)
            if callable(obj):
                self.assertTrue(obj.__doc__, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
