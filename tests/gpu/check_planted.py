"""Judges one `cuptrace analyze --json` of a tests/gpu_planted_test.sh run and prints its row of
the table in README ("Why is it slow: checked on real runs"):

  check_planted.py CASE MODE ANALYSIS.json

What each case must give (tests/gpu/planted.py, planted_ddp.py and trainers.py say why):
  - steps found (any source), and start-up never severe;
  - the planted finding is the top severe one and no other finding is severe (clean loops,
    the CUDA-graph loop and the slow-step cases: none severe but the gap a slow step's stall
    leaves); the third-party trainers are not ours to judge (Lightning's loader does copy from
    pageable memory): their steps must be found (most of their 40 optimizer steps) and their
    start-up (model build, compile) kept out, their findings are only listed;
  - slowhost / slowgpu: the slow step is the only outlier, about 80 / 60 ms longer than the
    median, and its cause is named (host / GPU);
  - ddp: rank 1 is named the straggler, in the steps it was slow in.
Exit 1 with the reason on stderr when the run is judged wrong.
"""
import json
import sys

case, mode, path = sys.argv[1], sys.argv[2], sys.argv[3]
j = json.load(open(path))
MS = 1_000_000

# The finding that each case plants: the top severe finding must be one of these.
PLANTED = {
    "pageable": {"pageable_copy"},
    "item": {"item_copy"},
    "tiny": {"tiny_kernels"},
    "alloc": {"alloc_steady"},
    "loader": {"host_idle", "gpu_gap"},
    "cpuprep": {"host_idle", "gpu_gap"},
}
# Cases in which one 60-80 ms stall may be (or not be) a severe gap of its own.
STALL_OK = {"slowhost": {"host_idle", "gpu_gap"}, "ddp": {"straggler", "collective_wait",
                                                          "host_idle", "gpu_gap"}}

steps = j.get("steps", {})
rows = steps.get("rows", [])
findings = j.get("findings", [])
severe = [f["id"] for f in findings if f.get("severe")]
problems = []
if not rows:
    problems.append("no steps found")
if any(f["id"] in ("startup", "outside_steady") and f.get("severe") for f in findings):
    problems.append("start-up is severe")
# Nor is start-up inside a severe finding: each of its worst instances is in the steady state.
ss = j.get("steady_state", {})
for f in findings:
    if f.get("severe") and f["id"] != "straggler":
        early = [w for w in f.get("worst", []) if w["start_ns"] + w["dur_ns"] < ss.get("start_ns", 0)]
        if early:
            problems.append(f"{f['id']} counts start-up: {len(early)} of its worst before the "
                            f"steady state")

TRAINERS = {"gpt2", "lightning", "timm"}
if case in TRAINERS:
    if len(rows) < 30:
        problems.append(f"{len(rows)} steps found, want most of the 40 optimizer steps")
elif case in PLANTED:
    if not severe or severe[0] not in PLANTED[case]:
        problems.append(f"top severe finding {severe[:1]}, want one of {sorted(PLANTED[case])}")
    elif len(severe) > 1:
        problems.append(f"other severe findings: {severe[1:]}")
else:
    extra = [s for s in severe if s not in STALL_OK.get(case, set())]
    if extra:
        problems.append(f"severe findings {extra} in a run with none planted")


def period(r):
    return r.get("period_ns", r.get("dur_ns", 0))


outliers = [r for r in rows if r.get("outlier")]
if case in ("slowhost", "slowgpu"):
    med = steps.get("median_ns", 0)
    if len(outliers) != 1:
        problems.append(f"{len(outliers)} outliers, want 1: "
                        f"{[(r.get('number'), period(r) // 1000) for r in outliers][:8]}")
    else:
        o = outliers[0]
        extra = period(o) - med
        want = 80 * MS if case == "slowhost" else 60 * MS
        if not (want * 0.6 <= extra <= want * 1.6):
            problems.append(f"the outlier is {extra / MS:.1f} ms over the median, want ~{want // MS}")
        cause = json.dumps(o.get("cause", o.get("causes", "")))
        if ("host" if case == "slowhost" else "gpu") not in cause.lower():
            problems.append(f"the outlier's cause {cause} does not name the "
                            f"{'host' if case == 'slowhost' else 'GPU work'}")
# Elsewhere outliers are listed, not judged: a real run has slow steps of its own (in one run
# of `item`, 10 steps whose host took 4-7 ms longer, the GPU idle meanwhile: analyze was right).

if case == "ddp":
    st = [f for f in findings if f["id"] == "straggler"]
    text = json.dumps(st)
    if not st:
        problems.append("no straggler finding")
    elif '"rank": 1' not in text and "rank 1" not in text:
        problems.append(f"straggler does not name rank 1: {text[:300]}")

src = steps.get("source")
row = (f"| {case} | {mode} | {src} | {len(rows)} | {steps.get('median_ns', 0) / MS:.2f} ms | "
       f"{', '.join(severe) or 'none'} | {len(outliers)} | "
       f"{'ok' if not problems else 'WRONG: ' + '; '.join(problems)} |")
print(row)
if problems:
    print(f"{case} {mode}: " + "; ".join(problems), file=sys.stderr)
    sys.exit(1)
