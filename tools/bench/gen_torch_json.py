#!/usr/bin/env python3
"""Writes a synthetic torch.profiler (Kineto) JSON trace of about SIZE megabytes, for the
analyze and stats speed benchmark (tools/bench/analyze_bench.sh).

    tools/bench/gen_torch_json.py OUT.json [SIZE_MB]

Its shape follows a real Kineto trace: ProfilerStep#N ranges, nested cpu_op events, a
cudaLaunchKernel per kernel with the ac2g flow to its kernel, kernels on a few streams with
their usual args, a memcpy now and then, process and thread metadata. Deterministic."""
import json
import random
import sys


def main():
    out = sys.argv[1]
    target = int(float(sys.argv[2]) * 1e6) if len(sys.argv) > 2 else 100 * 1000 * 1000
    rnd = random.Random(26)
    pid, tid = 4242, 4242
    kernels = ["void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
               "ampere_sgemm_128x64_tn", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>",
               "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
               "void cunn_SoftMaxForward<4, float, float, float>"]
    ops = ["aten::linear", "aten::addmm", "aten::relu", "aten::softmax", "aten::add_"]
    size = 0
    t = 1700000000000000 * 1000  # ns (written in us, like Kineto)
    corr = 1
    ext = 1
    step = 0
    with open(out, "w") as f:
        def us(ns):
            # Kineto's form: microseconds with three decimals. Times are kept as integer ns:
            # a float of ~1.7e15 us resolves only a quarter of a microsecond.
            return "%d.%03d" % (ns // 1000, ns % 1000)

        def put(ev):
            nonlocal size
            for k in ("ts", "dur"):
                if k in ev:
                    ev[k] = "@%s@" % us(int(ev[k]))
            s = json.dumps(ev, separators=(", ", ": "))
            s = s.replace('"@', "").replace('@"', "")
            f.write("  " + s + ",\n")
            size += len(s) + 4

        f.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": '
                '"NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912}],\n'
                '  "traceEvents": [\n')
        put({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
             "args": {"name": "python3"}})
        put({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
             "args": {"name": "thread 4242 (python3)"}})
        for s in (7, 13, 17):
            put({"ph": "M", "name": "thread_name", "pid": 0, "tid": s,
                 "args": {"name": "stream %d" % s}})
        gpu_t = t
        while size < target:
            step_start = t
            nops = 400
            put_later = []
            t += 5000
            for i in range(nops):
                op = ops[i % len(ops)]
                op_start = t
                t += 2000
                nk = 1 + (i % 3)
                inner = []
                for k in range(nk):
                    launch = t
                    t += 6000 + rnd.randrange(2000)
                    name = kernels[(i + k) % len(kernels)]
                    stream = (7, 13, 17)[(i + k) % 3]
                    gpu_t = max(gpu_t, launch + 4000) + 500
                    kdur = 3000 + rnd.randrange(20000)
                    inner.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                                  "pid": pid, "tid": tid, "ts": launch, "dur": 5000,
                                  "args": {"External id": ext, "cbid": 211,
                                           "correlation": corr}})
                    inner.append({"ph": "s", "id": corr, "pid": pid, "tid": tid,
                                  "ts": launch, "cat": "ac2g", "name": "ac2g"})
                    inner.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0,
                                  "tid": stream, "ts": gpu_t, "dur": kdur,
                                  "args": {"External id": ext, "queued": 0, "device": 0,
                                           "context": 1, "stream": stream,
                                           "correlation": corr, "registers per thread": 32,
                                           "shared memory": 0, "blocks per SM": 1.5,
                                           "warps per SM": 12.0, "grid": [1024, 1, 1],
                                           "block": [256, 1, 1],
                                           "est. achieved occupancy %": 50}})
                    inner.append({"ph": "f", "id": corr, "pid": 0, "tid": stream,
                                  "ts": gpu_t, "cat": "ac2g", "name": "ac2g",
                                  "bp": "e"})
                    gpu_t += kdur
                    corr += 1
                t += 2000
                put({"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": tid,
                     "ts": op_start, "dur": t - op_start,
                     "args": {"External id": ext, "Record function id": 0,
                              "Sequence number": ext, "Fwd thread id": 0,
                              "Ev Idx": ext}})
                ext += 1
                for e in inner:
                    put(e)
            put_later.append({"ph": "X", "cat": "user_annotation",
                              "name": "ProfilerStep#%d" % step, "pid": pid, "tid": tid,
                              "ts": step_start, "dur": t - step_start,
                              "args": {"External id": ext}})
            ext += 1
            for e in put_later:
                put(e)
            step += 1
            t = max(t, gpu_t) + 50000
        f.write('  {"ph": "M", "name": "process_sort_index", "pid": %d, "tid": 0, '
                '"args": {"sort_index": 0}}\n  ],\n  "traceName": "gen"\n}\n' % pid)


if __name__ == "__main__":
    main()
