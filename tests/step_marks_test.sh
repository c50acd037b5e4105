#!/bin/sh
# record's default optimizer.step() marks (src/inject/python/sitecustomize.py), no GPU needed: a
# stand-in torch package here records the NVTX calls its binding gets and runs the global
# optimizer hooks as torch.optim does (pre-hooks, the step, post-hooks). Under `cuptrace record`
# every optimizer.step() is one "optimizer.step" push and pop around the step's own calls, nested
# steps nest, the benchmark's off/on switch works; --no-step-marks and CUPTRACE_STEP_MARKS=0 leave
# the program's steps alone (the hook's folder stays on PYTHONPATH, for `import cuptrace`, but
# marks nothing); a program without torch runs as it would.
set -u
ct=$CUPTRACE_BIN
tmp=$(mktemp -d "${CUPTRACE_TMP:-/tmp}/marks.XXXXXX")
fail=0 n=0
ok() { n=$((n + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not found"
	exit 77
fi
mkdir -p "$tmp/fake/torch/_C" "$tmp/fake/torch/optim"
cat >"$tmp/fake/torch/__init__.py" <<'PY'
from . import _C, optim
PY
cat >"$tmp/fake/torch/_C/__init__.py" <<'PY'
from . import _nvtx
PY
cat >"$tmp/fake/torch/_C/_nvtx.py" <<'PY'
calls = []
def rangePushA(name):
    calls.append("push " + name)
    return 0
def rangePop():
    calls.append("pop")
    return 0
PY
cat >"$tmp/fake/torch/optim/__init__.py" <<'PY'
from .optimizer import Optimizer
PY
cat >"$tmp/fake/torch/optim/optimizer.py" <<'PY'
# What torch.optim.optimizer does with global hooks: pre-hooks, the step, post-hooks.
_pre, _post, _n = {}, {}, [0]
class _Handle:
    def __init__(self, d, k):
        self.d, self.k = d, k
    def remove(self):
        self.d.pop(self.k, None)
def _add(d, h):
    _n[0] += 1
    d[_n[0]] = h
    return _Handle(d, _n[0])
def register_optimizer_step_pre_hook(h):
    return _add(_pre, h)
def register_optimizer_step_post_hook(h):
    return _add(_post, h)
class Optimizer:
    def __init__(self, inner=None):
        self.inner = inner
    def step(self):
        for h in list(_pre.values()):
            h(self, (), {})
        from torch._C import _nvtx
        _nvtx.calls.append("work")
        if self.inner:
            self.inner.step()
        for h in list(_post.values()):
            h(self, (), {})
PY
cat >"$tmp/prog.py" <<'PY'
import sys
import torch
from torch._C import _nvtx
opt = torch.optim.Optimizer()
for _ in range(3):
    opt.step()
torch.optim.Optimizer(inner=torch.optim.Optimizer()).step()
print(" ".join(c.replace(" ", "_") for c in _nvtx.calls))
site = sys.modules.get("_cuptrace_site")
if site:  # the benchmark's switch
    del _nvtx.calls[:]
    site._marks_off()
    opt.step()
    site._marks_on(torch)
    opt.step()
    print("switch " + " ".join(c.replace(" ", "_") for c in _nvtx.calls))
PY
rec() { # out-file [options]: record prog.py with the stand-in torch on PYTHONPATH
	out=$1
	shift
	PYTHONPATH="$tmp/fake" "$ct" record --no-check --no-summary -o "$tmp/x.pftrace" "$@" -- \
		python3 "$tmp/prog.py" >"$tmp/$out" 2>"$tmp/$out.err"
}
step="push_optimizer.step work pop"
rec on.txt
want="$step $step $step push_optimizer.step work push_optimizer.step work pop pop"
[ "$(head -1 "$tmp/on.txt")" = "$want" ] && ok ||
	bad "marks: '$(head -1 "$tmp/on.txt")', want '$want'; $(cat "$tmp/on.txt.err")"
[ "$(sed -n 2p "$tmp/on.txt")" = "switch work $step" ] && ok ||
	bad "off/on switch: '$(sed -n 2p "$tmp/on.txt")'"
rec off.txt --no-step-marks
[ "$(head -1 "$tmp/off.txt")" = "work work work work work" ] && ok ||
	bad "--no-step-marks: '$(cat "$tmp/off.txt")'"
CUPTRACE_STEP_MARKS=0 rec env.txt
[ "$(head -1 "$tmp/env.txt")" = "work work work work work" ] && ok ||
	bad "CUPTRACE_STEP_MARKS=0: '$(cat "$tmp/env.txt")'"
# --pytorch keeps the marks (one hook, one sitecustomize on the path).
rec pt.txt --pytorch
grep -q "^$want" "$tmp/pt.txt" && ok || bad "marks with --pytorch: '$(head -1 "$tmp/pt.txt")'"
# No torch: the program runs as it would (stdout, exit status; nothing from the hook).
out=$("$ct" record --no-check --no-summary -o "$tmp/y.pftrace" -- python3 -c \
	'import sys; print("plain"); sys.exit(3)' 2>"$tmp/plain.err")
st=$?
[ "$out" = "plain" ] && [ $st -eq 3 ] && ! grep -q "Traceback\|cuptrace:" "$tmp/plain.err" && ok ||
	bad "a program without torch changed (out '$out', exit $st): $(cat "$tmp/plain.err")"
rm -rf "$tmp"
echo "step_marks_test: $n passed, $fail failed"
[ $fail -eq 0 ]
