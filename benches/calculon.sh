#!/usr/bin/env bash
# Search speed of trainplan against Calculon on one problem: Llama 3 70B (hidden 8192, FFN
# 28672, 64 heads of 128, 80 blocks, 8,192-token sequences) on H100 80 GB (NVLink 8), GPUS
# GPUs, global batch BATCH sequences. Measured: configurations per CPU-second (user + sys).
#
#   CALCULON_DIR=/path/to/calculon/checkout benches/calculon.sh [GPUS] [BATCH]   # 2048 2048
#
# Calculon is not a package on the registries (PyPI's `calculon` is another project): it must
# be a checkout of https://github.com/calculon-ai/calculon; measured at commit caa4b11f8fe1
# ("Add inputs/output to stats", 2024-02-22). It needs psutil, numpy and pandas; set
# CALCULON_PYTHON to a python that has them (e.g. a venv's bin/python; default python3).
# Without CALCULON_DIR only trainplan's half runs (`cargo bench --bench calculon`).
#
# Calculon runs `loe ... float16 ... -m -t 5` (bfloat16 is refused by its systems; float16 is
# the same size) on its systems/h100_80g_nvl8.json with mem2 at 0 GiB (no offload searched).
# It runs in modes named by CALCULON_MODES (default "shipped silenced"):
#   shipped   bin/calculon as it is. Each configuration builds a fresh logging.Logger('sub')
#             with no parent and level NOTSET, so its ~1,300 debug calls per configuration
#             (46 a layer) each build a LogRecord (and walk the stack) before Python's
#             last-resort handler drops it: -v WARNING cannot reach that logger.
#   silenced  the same bin/calculon run by `python -c` after logging.disable(logging.DEBUG),
#             which every logger checks first (forked workers inherit it). INFO still prints.
# A full 2,048-GPU run takes about 15 minutes on 2 cores as shipped and 2.5 silenced;
# CALCULON_MODES=silenced skips the slow one. CALCULON_CPUS sets its worker processes
# (default: nproc).
set -euo pipefail

gpus=${1:-2048}
batch=${2:-2048}
repo=$(cd "$(dirname "$0")/.." && pwd)
py=${CALCULON_PYTHON:-python3}
cpus=${CALCULON_CPUS:-$(nproc)}
modes=${CALCULON_MODES:-shipped silenced}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
results=$tmp/results # lines: tool  configurations  CPU-s  rate  [graded rate]

# trainplan's half, its rows named with SUFFIX: "trainplan decided N configurations, graded M, in
# S CPU-s: R decided/CPU-s, ..."
run_trainplan() {
    local suffix=$1
    echo "trainplan: cargo bench --bench calculon -- $gpus $batch"
    (cd "$repo" && cargo bench --bench calculon -- "$gpus" "$batch") | tee "$tmp/trainplan.log"
    python3 - "$tmp/trainplan.log" "$suffix" >>"$results" <<'EOF'
import re, sys
text = open(sys.argv[1]).read().replace(",", "")
suffix = sys.argv[2]
m = re.search(r"trainplan decided (\d+) configurations graded (\d+) in ([\d.e+-]+) CPU-s:"
              r" ([\d.e+-]+) decided/CPU-s ([\d.e+-]+) graded/CPU-s", text)
if not m:
    sys.exit("no 'trainplan decided ...' line in the bench output")
decided, graded, cpu, rate, graded_rate = m.groups()
print(f"trainplan-decided{suffix} {decided} {cpu} {rate}")
print(f"trainplan-graded{suffix} {graded} {cpu} {graded_rate}")
EOF
}

# With Calculon, trainplan's half runs before it and after it: this machine's speed drifts by
# up to 1.5x over minutes, so the two bracket Calculon's run.
if [[ -z ${CALCULON_DIR:-} || ! -d ${CALCULON_DIR:-} ]]; then
    echo "Calculon skipped: it is not on the registries; set CALCULON_DIR to a checkout of" \
        "github.com/calculon-ai/calculon (CALCULON_DIR='${CALCULON_DIR:-}')."
    run_trainplan ""
else
    run_trainplan "-before"
    cat >"$tmp/app.json" <<'EOF'
{"hidden": 8192, "feedforward": 28672, "seq_size": 8192, "attn_heads": 64, "attn_size": 128, "num_blocks": 80}
EOF
    python3 - "$CALCULON_DIR/systems/h100_80g_nvl8.json" "$tmp/system.json" <<'EOF'
import json, sys
system = json.load(open(sys.argv[1]))
system["mem2"]["GiB"] = 0
json.dump(system, open(sys.argv[2], "w"), indent=1)
EOF
    echo "Calculon $(git -C "$CALCULON_DIR" rev-parse --short=12 HEAD 2>/dev/null || echo '?')," \
        "$gpus GPUs, batch $batch, $cpus processes, python $py"
    for mode in $modes; do
        case $mode in
        shipped) run=("$py" bin/calculon) ;;
        silenced)
            run=("$py" -c 'import logging, runpy, sys
logging.disable(logging.DEBUG)
sys.argv = ["bin/calculon"] + sys.argv[1:]
runpy.run_path("bin/calculon", run_name="__main__")')
            ;;
        *) echo "unknown CALCULON_MODES entry: $mode" >&2 && exit 2 ;;
        esac
        (cd "$CALCULON_DIR" && PYTHONPATH=. /usr/bin/time -f '%e %U %S' -o "$tmp/time.$mode" \
            "${run[@]}" loe "$tmp/app.json" "$gpus" "$batch" float16 "$tmp/system.json" \
            "$tmp/out.$mode.json" -m -n -t 5 -c "$cpus" >"$tmp/log.$mode")
        # Calculon prints "Total executions: N" (graded), "Good executions: N" (fit memory),
        # "Bad executions: N" and writes its best -t configurations to the output JSON.
        python3 - "$mode" "$tmp/log.$mode" "$tmp/time.$mode" "$tmp/out.$mode.json" \
            >>"$results" <<'EOF'
import json, re, sys
mode, log, timing, out = sys.argv[1:]
text = open(log).read()
count = lambda what: int(re.search(what + r" executions: (\d+)", text).group(1))
total, good = count("Total"), count("Good")
wall, user, system = map(float, open(timing).read().split()[-3:])
cpu = user + system
best = json.load(open(out)).get("0")
if best:
    e, s = best["execution"], best["stats"]
    plan = (f"TP {e['tensor_par']} x PP {e['pipeline_par']} x DP {e['data_par']}, "
            f"micro-batch {e['microbatch_size']}, interleave {e['pipeline_interleaving']}, "
            f"recompute {e['activation_recompute']}, TP comm {e['tensor_par_comm_type']}, "
            f"optimizer sharded {e['optimizer_sharding']}: {s['total_time']:.3f} s a step")
else:
    plan = "none fits"
print(f"  {mode}: {total} graded, {good} fit memory, {wall:.1f} s wall, {cpu:.1f} CPU-s;"
      f" best {plan}", file=sys.stderr)
print(f"calculon-{mode} {total} {cpu:.2f} {total / cpu:.1f}")
EOF
    done
    run_trainplan "-after"
fi

echo
python3 - "$results" <<'EOF'
import sys
rows = [line.split() for line in open(sys.argv[1])]
print(f"{'':20} {'configurations':>14} {'CPU-s':>10} {'per CPU-s':>12}")
for name, n, cpu, rate in rows:
    print(f"{name:20} {int(n):>14,} {float(cpu):>10.4g} {float(rate):>12,.1f}")
rate = {name: float(r) for name, _, _, r in rows}
for c in (k for k in rate if k.startswith("calculon-")):
    for t in (k for k in rate if k.startswith("trainplan-")):
        print(f"{t} / {c}: {rate[t] / rate[c]:,.1f}x")
EOF
