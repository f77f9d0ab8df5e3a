#!/usr/bin/env python3
"""ncu_lines.py: where a kernel's warps wait, by source line, from an Nsight Compute report.

Two steps, because ncu runs on the GPU machine and the reading happens here:

  dump REPORT OUTDIR  (GPU machine; the python3 there, with ncu's own ncu_report module, which
      this script finds under /opt/nvidia/nsight-compute/*/extras/python): for every kernel of
      the report (by demangled name, its launches summed) the per-instruction metrics of ncu's
      SourceCounters section -- the warp-state samples by stall reason (smsp__pcsamp_*), the
      instructions executed -- with each instruction's SASS and source line, one gzip'd JSON a
      kernel (kNN.json.gz, small enough to come back from the device tool) and index.txt.
  report FILE.json.gz [--top N] [--instr] (here, no GPU): the kernel's samples by stall reason,
      then its source lines by share of the samples (each with its top reasons, SASS count and
      instructions executed); --instr also the N busiest instructions.

The samples say where the warps stood when sampled: a line's share of them is its share of the
warps' time, and the reason says what it waited for (long_scoreboard: a global or local load;
wait: a fixed-latency dependency; barrier; imc_miss / no_instructions: instruction fetch;
selected: issuing), and which distinct instructions ran at all (the code a launch fetches).
The source lines need a build with line tables: `bazel build -c opt
--define loom_lineinfo=1 ...` (tools/bazel/cuda.bzl adds nvcc -lineinfo, which leaves the
SASS as it is). The run, on the device (each kernel runs alone and replayed, caches flushed
between passes, so a kernel's first loads wait longer than in the replayed decode step, where
dependent launch overlaps them with the kernel before; bench/NOTES.md 7, session 29):

  ncu --clock-control none --graph-profiling node --section SourceCounters \\
      --section WarpStateStats -k regex:'^gemv_mma_q4k' --launch-skip 54 --launch-count 56 \\
      -o /tmp/prof loom bench MODEL.gguf -p 512 -n 2 -r 1 --backend cuda
  python3 tools/gpu/ncu_lines.py dump /tmp/prof.ncu-rep $OUT/pc

(--launch-skip passes the prefill's launches of the same kernels: 54 of gemv_mma_q4k after a
512-token prompt on the 4B Q4_K_M shape.)
"""
import argparse
import collections
import glob
import gzip
import json
import os
import sys

STALL = "smsp__pcsamp_warps_issue_stalled_"


def fail(msg):
    sys.stderr.write("ncu_lines: %s\n" % msg)
    sys.exit(1)


def action_name(ncu_report, act):
    for base in ("NameBase_DEMANGLED", "NameBase_MANGLED"):
        try:
            return act.name(getattr(ncu_report.IAction, base))
        except Exception:
            pass
    return act.name()


def dump(report, outdir):
    for d in glob.glob("/opt/nvidia/nsight-compute/*/extras/python") + \
            glob.glob("/usr/local/cuda*/nsight-compute*/extras/python"):
        sys.path.insert(0, d)
    try:
        import ncu_report
    except ImportError:
        fail("no ncu_report module (Nsight Compute's extras/python): run this on the GPU machine")
    if not os.path.isfile(report):
        fail("no such report: %s" % report)
    ctx = ncu_report.load_report(report)
    kernels = collections.OrderedDict()  # name -> {launches, pcs: {pc: {metric: sum}}, sass, src}
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for i in range(rng.num_actions()):
            act = rng.action_by_idx(i)
            k = kernels.setdefault(action_name(ncu_report, act),
                                   {"launches": 0, "pcs": {}, "sass": {}, "src": {}})
            k["launches"] += 1
            for mn in act.metric_names():
                if not (mn.startswith("smsp__pcsamp_") or mn == "inst_executed"):
                    continue
                met = act.metric_by_name(mn)
                if not met.has_correlation_ids():
                    continue
                ids = met.correlation_ids()
                for j in range(met.num_instances()):
                    pc = ids.as_uint64(j)
                    row = k["pcs"].setdefault(pc, {})
                    row[mn] = row.get(mn, 0.0) + met.as_double(j)
                    if pc not in k["sass"]:
                        k["sass"][pc] = act.sass_by_pc(pc)
                        si = act.source_info(pc)
                        k["src"][pc] = [si.file_name(), si.line()] if si else None
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "index.txt"), "w") as idx:
        for n, (name, k) in enumerate(kernels.items()):
            rows = [{"pc": pc, "sass": k["sass"].get(pc), "src": k["src"].get(pc), "m": m}
                    for pc, m in sorted(k["pcs"].items())]
            with gzip.open(os.path.join(outdir, "k%02d.json.gz" % n), "wt") as f:
                json.dump({"name": name, "launches": k["launches"], "rows": rows}, f)
            idx.write("k%02d\t%d launches\t%d instructions\t%s\n" % (n, k["launches"], len(rows), name))
    print("ncu_lines: %d kernels into %s" % (len(kernels), outdir))


def where(src):
    return "%s:%d" % (os.path.basename(src[0]), src[1]) if src else "?"


def report(path, top, instr):
    try:
        with gzip.open(path, "rt") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))
    try:
        name, launches = d["name"], int(d["launches"])
        rows = [r for r in d["rows"] if r["sass"]]
        for r in rows:
            src = r["src"]
            if not isinstance(r["sass"], str) or not isinstance(r["pc"], int) or \
                    not isinstance(r["m"], dict) or \
                    not all(isinstance(v, (int, float)) for v in r["m"].values()) or not \
                    (src is None or (isinstance(src[0], str) and isinstance(src[1], int))):
                raise TypeError("row")
    except (KeyError, TypeError, IndexError, ValueError):
        fail("%s: not a kernel file of `ncu_lines.py dump` (name, launches, rows)" % path)
    stalls = lambda r: {k[len(STALL):]: v for k, v in r["m"].items()
                        if k.startswith(STALL) and not k.endswith("_not_issued") and v}
    total = collections.Counter()
    lines = collections.defaultdict(collections.Counter)
    nsass, executed = collections.Counter(), collections.Counter()
    for r in rows:
        s = stalls(r)
        total.update(s)
        w = where(r["src"])
        lines[w].update(s)
        nsass[w] += 1
        executed[w] += r["m"].get("inst_executed", 0)
    n = sum(total.values())
    if not n:
        fail("%s: no warp-state samples (was the SourceCounters section collected?)" % path)
    pct = lambda v, t: 100.0 * v / t
    print("%s: %d launches, %d instructions, %d samples" % (name, launches, len(rows), n))
    # The code the launches ran: each instruction executed at least once is 16 bytes (sm_70+)
    # that instruction fetch brought in (a launch's first run of its code is slow: bench/NOTES.md
    # 7, sessions 30-31).
    ran = [r for r in rows if r["m"].get("inst_executed", 0) > 0]
    print("  code executed: %d distinct instructions (%.1f KB of SASS)" %
          (len(ran), 16 * len(ran) / 1024.0))
    print("  " + ", ".join("%s %.1f%%" % (k, pct(v, n)) for k, v in total.most_common(10)))
    print("%-30s %6s  %-44s %6s %12s" % ("source line", "share", "top reasons (% of the line)",
                                          "SASS", "executed"))
    for w in sorted(lines, key=lambda w: -sum(lines[w].values()))[:top]:
        c, t = lines[w], sum(lines[w].values())
        why = ", ".join("%s %.0f" % (k, pct(v, t)) for k, v in c.most_common(3))
        print("%-30s %5.1f%%  %-44s %6d %12.0f" % (w, pct(t, n), why, nsass[w], executed[w]))
    if instr:
        print("-- the busiest instructions")
        for r in sorted(rows, key=lambda r: -sum(stalls(r).values()))[:top]:
            s = stalls(r)
            print("%8x %-44s %-26s %5.2f%% %s" % (r["pc"], r["sass"][:44], where(r["src"]),
                                                   pct(sum(s.values()), n),
                                                   ", ".join("%s %.0f" % kv for kv in
                                                             collections.Counter(s).most_common(3))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("dump")
    a.add_argument("report")
    a.add_argument("outdir")
    b = sub.add_parser("report")
    b.add_argument("file")
    b.add_argument("--top", type=int, default=25)
    b.add_argument("--instr", action="store_true")
    args = ap.parse_args()
    if args.cmd == "dump":
        dump(args.report, args.outdir)
    else:
        report(args.file, args.top, args.instr)


if __name__ == "__main__":
    main()
