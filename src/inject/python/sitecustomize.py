"""cuptrace record's Python hook: the end of every optimizer.step() as a mark (default), and
with --pytorch PyTorch's operators as NVTX ranges, with no change to the program; for --steps and
the flight recorder's slow steps, the end of every optimizer.step() told to the library.

`cuptrace record` puts this file's directory first on PYTHONPATH, so every Python process it
starts (and their children: torchrun workers, multiprocessing) imports it at start-up. It
imports nothing heavy and does nothing until the program itself imports torch (one string
comparison per module imported until then; a program that never imports torch pays that alone).
Then:
- step marks (CUPTRACE_STEP_MARKS=1, what record sets unless --no-step-marks): an NVTX range
  "optimizer.step" on the calling thread around every optimizer.step() (torch's global
  optimizer pre- and post-hooks), through torch's own NVTX binding, so it takes the path every
  NVTX range takes (CUPTI's NVTX records): in every output format, in captures, windows and the
  flight recorder alike. `cuptrace analyze` takes its steps from them;
- --pytorch: PyTorch's NVTX mode (what `torch.autograd.profiler.emit_nvtx()` does, minus the
  `torch.cuda.synchronize()` that would initialize CUDA at import time) and one NVTX range per
  nn.Module call. cuptrace records the ranges through CUPTI and cleans the op names (sequence
  numbers, op ids and shapes become arguments);
- --steps (CUPTRACE_STEP_HOOK=optimizer): the library's cuptrace_step() after each step.
Whatever goes wrong here is reported once on stderr and the program goes on untouched. Then
the sitecustomize this one shadows, if any, runs.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _warn(msg):
    try:
        sys.stderr.write("cuptrace: %s\n" % msg)
    except Exception:
        pass


def _module_ranges(torch):
    """One NVTX range per module call, named after the module's class."""
    from torch.nn.modules import module as nn_module

    push = torch._C._nvtx.rangePushA
    pop = torch._C._nvtx.rangePop
    names = {}

    def pre(mod, args):
        cls = type(mod)
        n = names.get(cls)
        if n is None:
            n = names[cls] = "nn.Module: " + cls.__name__
        push(n)

    def post(mod, args, out):
        pop()

    nn_module.register_module_forward_pre_hook(pre)
    try:
        # always_call: the range is closed even when forward raises.
        nn_module.register_module_forward_hook(post, always_call=True)
    except TypeError:
        nn_module.register_module_forward_hook(post)


def _step_hook(torch):
    """--steps, --ring-slow, trigger --steps: each optimizer.step() that returns ends a
    training step, told to the library through its C entry point cuptrace_step(). The library
    is the one the CUDA driver loaded (CUDA_INJECTION64_PATH): loading the same file again
    gives the same instance."""
    import ctypes

    path = os.environ.get("CUDA_INJECTION64_PATH")
    try:
        step = ctypes.CDLL(path).cuptrace_step
        step.restype = ctypes.c_int
        step.argtypes = []
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except Exception as e:
        _warn("cannot follow optimizer steps (%s: %s); --steps and slow steps see none"
              % (type(e).__name__, e))
        return

    def post(optimizer, args, kwargs):
        step()

    register_optimizer_step_post_hook(post)


# The step marks' hook handles while they are on (_marks_on / _marks_off: tools/bench's cost
# benchmark turns them on and off in one process).
_mark_handles = []


def _marks_on(torch):
    """An NVTX range "optimizer.step" around every optimizer.step(), on its thread. The
    post-hook is registered before --steps's, so the range is closed before a window that
    step ends closes. A step that raises leaves its range open (PyTorch calls no post-hook)."""
    if _mark_handles:
        return True
    try:
        push = torch._C._nvtx.rangePushA
        pop = torch._C._nvtx.rangePop
        from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                           register_optimizer_step_pre_hook)
    except Exception as e:
        _warn("cannot mark optimizer steps (%s: %s); analyze finds steps in the GPU work"
              % (type(e).__name__, e))
        return False

    def pre(optimizer, args, kwargs):
        push("optimizer.step")

    def post(optimizer, args, kwargs):
        pop()

    _mark_handles.append(register_optimizer_step_pre_hook(pre))
    _mark_handles.append(register_optimizer_step_post_hook(post))
    return True


def _marks_off():
    while _mark_handles:
        _mark_handles.pop().remove()


def _on_torch(torch):
    if os.environ.get("CUPTRACE_STEP_MARKS") == "1":
        _marks_on(torch)
    if os.environ.get("CUPTRACE_STEP_HOOK") == "optimizer":
        _step_hook(torch)
    if os.environ.get("CUPTRACE_PYTORCH"):
        _enable(torch)


def _enable(torch):
    shapes = os.environ.get("CUPTRACE_PYTORCH") == "shapes"
    try:
        from torch.autograd.profiler import _enable_profiler
        from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig

        cfg = ProfilerConfig(ProfilerState.NVTX, shapes, False, False, False, False,
                             _ExperimentalConfig())
        _enable_profiler(cfg, set())
    except Exception as e:  # an older or newer torch with another signature
        _warn("--pytorch cannot turn on PyTorch's NVTX op ranges (%s: %s); ops are not shown"
              % (type(e).__name__, e))
        return
    # Switched off again at exit (on this thread, which holds the profiler state), or PyTorch
    # warns about a leaked callback handle on the program's stderr.
    import atexit

    def _disable():
        try:
            torch.autograd._disable_profiler()
        except Exception as e:
            if os.environ.get("CUPTRACE_PYTORCH_DEBUG"):
                _warn("disabling the NVTX profiler at exit: %s: %s" % (type(e).__name__, e))

    atexit.register(_disable)
    if os.environ.get("CUPTRACE_PYTORCH_MODULES", "1") != "0":
        try:
            _module_ranges(torch)
        except Exception as e:
            _warn("cannot add nn.Module ranges (%s: %s)" % (type(e).__name__, e))


class _TorchImportHook:
    """A meta-path finder that only waits for `torch`: other imports pass through it at the
    cost of one string comparison, and it removes itself once torch is loaded."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        real_exec = spec.loader.exec_module
        hook = self

        def exec_module(module):
            real_exec(module)
            try:
                sys.meta_path.remove(hook)
            except ValueError:
                pass
            _on_torch(module)

        spec.loader.exec_module = exec_module
        return spec


def _chain():
    """Run the sitecustomize that ours shadows (Debian's, a virtualenv's), as Python would."""
    import importlib.machinery
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


# The benchmark (tools/bench/step_marks_bench.py) finds this module here: _chain() puts the
# sitecustomize it shadows under the name "sitecustomize".
sys.modules["_cuptrace_site"] = sys.modules[__name__]
if sys.version_info[0] >= 3 and (os.environ.get("CUPTRACE_PYTORCH") or
                                 os.environ.get("CUPTRACE_STEP_MARKS") == "1" or
                                 os.environ.get("CUPTRACE_STEP_HOOK") == "optimizer"):
    if "torch" in sys.modules:
        _on_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook())
if sys.version_info[0] >= 3:
    try:
        _chain()
    except Exception as e:
        _warn("the sitecustomize after cuptrace's failed (%s: %s)" % (type(e).__name__, e))
