#!/usr/bin/env bash
# Every command of a broad set, run with one binary, its standard output, standard error and
# exit status each written to a file of DIR. Two binaries behave alike where
# `diff -r DIR1 DIR2` prints nothing: how a change that moves code and not behaviour is shown
# to keep the outputs byte for byte (docs/development.md, "Moving code").
#
#   bash tests/outputs.sh target/release/trainplan /tmp/before
#   (change the code, build again)
#   bash tests/outputs.sh target/release/trainplan /tmp/after && diff -r /tmp/before /tmp/after
#
# The set: the README's and the guide's examples, plate and detailed searches as text and JSON,
# mixtures of experts, context parallelism and FP8, families, shards and merge, every export
# and `--from` reading it back, calibrate, a sample of refused inputs, and the server's API.
# Run from the repository's root; takes about two minutes on two cores.
set -uo pipefail
bin="$(realpath "${1:?usage: tests/outputs.sh BINARY DIR}")"
out="${2:?usage: tests/outputs.sh BINARY DIR}"
rm -rf "$out"
mkdir -p "$out/files"
out="$(realpath "$out")"
files="$out/files"
cd "$(dirname "$0")/.."
hf=tests/fixtures/hf
n=0

# run NAME ARGS...: the binary with ARGS, into NAME.out, NAME.err and NAME.rc.
run() {
  local name="$1"
  shift
  n=$((n + 1))
  RAYON_NUM_THREADS="${THREADS:-2}" "$bin" "$@" >"$out/$name.out" 2>"$out/$name.err"
  echo $? >"$out/$name.rc"
}

# The README's and the guide's examples.
run search-default search
run search-default-json search --json
run search-default-exact search --exact -q
run search-1536-detailed search --gpus 1536 --memory detailed --time detailed --models 70b --top 3 -q
run search-4096-sensitivity search --gpus 4096 --memory detailed --time detailed --top 3 --sensitivity -q
run export-megatron-flags export --format megatron --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1 -q
run check-70b-15t check --model 70b --tokens 15e12 --tp 1 --pp 1 --zero 0
run search-family-plate search --layers 40..160:4 --hidden 6144..20480:512 --ffn-ratio 3.0..4.0:0.25 --top 3 -q
run check-mixtral check --model-config $hf/mixtral-8x7b-v0.1/config.json --tokens 1e12 --gpus 256 --tp 2 --pp 4 --ep 8 --zero 1 --memory detailed --time detailed
run search-mixtral search --model-config $hf/mixtral-8x7b-v0.1/config.json --models 8b,70b --gpus 256 --max-days 30 --loss-law ludziejewski --loss-target 2.0 -q
run search-hf-configs search --model-config $hf/llama-3.1-70b/config.json --model-config $hf/qwen2.5-7b/config.json --gpus 512 -q
run brief-print-h200 brief --print --gpu h200
run brief-json brief --print --format json --gpu b200
run search-markdown search --format markdown --top 5
run search-csv search --format csv --top 7
run check-muennighoff check --model 8b --tokens 100e9 --tp 1 --pp 1 --zero 1 --loss-law muennighoff --unique-tokens 25e9 --loss-target 2.3
run check-405b-llama3 check --model 405b --tokens 15.6e12 --tp 8 --pp 16 --zero 2 --gpus 8192 --memory-cap-gb 80 --memory detailed --stages llama3 --recompute none --tp-comm-overlap off
run check-70b-interleaved check --model 70b --tokens 4e12 --tp 8 --pp 4 --zero 1 --memory detailed --schedule interleaved:2 --recompute selective --time detailed
run check-70b-interleaved-json check --model 70b --tokens 4e12 --tp 8 --pp 4 --zero 1 --memory detailed --schedule interleaved:2 --recompute selective --time detailed --json
run search-131k-cp search --gpus 16384 --seq-len 131072 --models 405b --memory detailed --time detailed --max-days 90 --top 3 -q
run search-fp8 search --models 70b,405b --memory detailed --time detailed --precisions bf16,fp8 --top 3 -q
run search-fp8-json search --models 70b --memory detailed --time detailed --precisions bf16,fp8 --top 4 --json
run check-sensitivity check --model 70b --tokens 4.96e12 --tp 8 --zero 3 --sensitivity
run check-sensitivity-json check --model 70b --tokens 4.96e12 --tp 8 --zero 3 --sensitivity --json
run check-70b-detailed-cost check --model 70b --tokens 4.96e12 --tp 1 --pp 1 --zero 3 --memory detailed --time detailed --price-per-gpu-hour 2.5 --gpu-power-w 700
run search-cost search --rank cost --price-per-gpu-hour 2.5 --max-cost 3e6 --gpu-power-w 700 --top 3 -q
run search-days search --models 70b,405b --rank days -q
run search-1024-json search --json --gpus 1024 --max-days 60 -q
run search-between search --gpus 1024 --max-days 21 --models 70b --loss-target 1.97 -q
run check-405b-detailed check --model 405b --tokens 1e12 --tp 8 --pp 8 --zero 1 --memory detailed --time detailed
run check-8b-json check --model 8b --tokens 1e12 --tp 1 --pp 1 --zero 1 --json
run check-stacks-eager check --model 70b --tokens 4.96e12 --tp 4 --pp 2 --zero 1 --memory detailed --time detailed --stack eager
run check-stacks-maxtext check --model 70b --tokens 4.96e12 --tp 4 --pp 2 --zero 1 --memory detailed --time detailed --stack maxtext
run check-stacks-torchtitan check --model 70b --tokens 4.96e12 --tp 8 --zero 3 --memory detailed --time detailed --stack torchtitan-compile
run check-cp-fp8 check --model 405b --tokens 2e12 --gpus 16384 --seq-len 131072 --tp 8 --cp 16 --pp 16 --zero 1 --memory detailed --time detailed --precision fp8
run check-h200 check --model 70b --tokens 4e12 --gpu h200 --tp 4 --zero 1 --memory detailed --time detailed
run check-deepseek check --model-config $hf/deepseek-v3/config.json --tokens 1e12 --tp 8 --pp 8 --zero 1
run check-qwen3-moe check --model-config $hf/qwen3-235b-a22b/config.json --tokens 1e12 --gpus 1024 --tp 4 --pp 8 --ep 16 --zero 1 --memory detailed --time detailed --json
run search-qwen3-moe search --model-config $hf/qwen3-30b-a3b/config.json --gpus 256 --memory detailed --time detailed --top 3 -q
run search-moe-family search --layers 24..32:8 --hidden 4096..4096:1024 --ffn-ratio 3.5..3.5:0.5 --experts 8..16:8 --top-k 1..2 --loss-law ludziejewski --loss-target 2.0 --memory detailed --time detailed --top 3 -q
run search-family-detailed search --layers 40..80:8 --hidden 8192..12288:2048 --ffn-ratio 3.5..3.5:0.5 --top 3 --memory detailed --time detailed -q
run search-family-json search --layers 40..80:20 --hidden 8192..8192:1024 --ffn-ratio 3.5..3.5:0.5 --top 3 --json -q
run search-all search --models 405b --all --format csv -q
run search-exact-json search --models 70b --exact --json -q
run search-distinct-shape search --distinct shape --memory detailed --time detailed -q
run search-micro search --models 70b --memory detailed --time detailed --micro-batches 1,2 --schedules 1f1b,interleaved:2 --cp 1,2 --top 5 -q

# Files: a Pareto front, plots, shards and merge.
run search-pareto search --pareto "$files/front.json" -q
run search-pareto-csv search --pareto "$files/front.csv" --pareto-format csv -q
run search-plot search --plot "$files/search.svg" -q
run check-plot check --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1 --plot "$files/memory.svg"
run check-plot-detailed check --model 405b --tokens 1e12 --tp 8 --pp 8 --zero 1 --memory detailed --time detailed --plot "$files/memory-detailed.svg"
for i in 1 2 3; do
  run "shard-$i" search --layers 40..80:8 --hidden 8192..12288:2048 --ffn-ratio 3.5..3.5:0.5 --memory detailed --time detailed --shard "$i/3" -q
  cp "$out/shard-$i.out" "$files/part-$i.json"
done
run merge merge "$files/part-1.json" "$files/part-2.json" "$files/part-3.json" -q
run merge-json merge "$files/part-1.json" "$files/part-2.json" "$files/part-3.json" --json -q
for i in 1 2; do
  run "shard-exact-$i" search --models 70b,405b --exact --shard "$i/2" -q
  cp "$out/shard-exact-$i.out" "$files/exact-$i.json"
done
run merge-exact merge "$files/exact-1.json" "$files/exact-2.json" --pareto "$files/merged-front.json" -q

# Exports, from flags and from a plan file, and each read back by check --from.
run plans-json search --models 70b --memory detailed --time detailed --top 3 --json -q
cp "$out/plans-json.out" "$files/plans.json"
for format in megatron deepspeed torchtitan; do
  run "export-$format" export --format "$format" --model 70b --tokens 4.96e12 --tp 8 --pp 8 --zero 1 -q
  run "export-plan-$format" export --plan "$files/plans.json" --format "$format" --model-config $hf/llama-3.1-70b/config.json -q
done
cp "$out/export-megatron.out" "$files/launch.sh"
cp "$out/export-deepspeed.out" "$files/ds.json"
cp "$out/export-torchtitan.out" "$files/titan.toml"
run from-megatron check --from "$files/launch.sh" --memory detailed --time detailed
run from-torchtitan check --from "$files/titan.toml" --model 70b --memory detailed --time detailed
run export-mixtral export --format megatron --model-config $hf/mixtral-8x7b-v0.1/config.json --tokens 1e12 --gpus 256 --tp 2 --pp 4 --ep 8 --zero 1 --memory detailed --time detailed -q
cp "$out/export-mixtral.out" "$files/mixtral.sh"
run from-mixtral check --from "$files/mixtral.sh" --model-config $hf/mixtral-8x7b-v0.1/config.json --tokens 1e12 --memory detailed --time detailed
run export-cp-fp8 export --format megatron --model 405b --tokens 2e12 --gpus 16384 --seq-len 131072 --tp 8 --cp 16 --pp 16 --zero 1 --memory detailed --time detailed --precision fp8 -q

# Calibration.
run calibrate calibrate data/published/runs.json -o "$files/fit.json"
run calibrate-moe calibrate data/published/moe-runs.json
run check-calibrated check --model 70b --tokens 4e12 --tp 8 --pp 4 --zero 1 --memory detailed --time detailed --calibration "$files/fit.json"

# Refused inputs: one line and exit 2.
run bad-tp check --model 70b --tokens 1e12 --tp 3
run bad-mfu search --mfu -0.4
run bad-model check --model 9b --tokens 1e12
run bad-gpu search --gpu z100
run bad-family search --layers 40..10:4
run bad-plan export --plan tests/outputs.sh --format megatron
run bad-from check --from Cargo.toml --tokens 1e12

# Completions.
run completions-bash completions bash

# The server's API.
"$bin" -q serve --port 0 >"$out/serve.addr" 2>"$out/serve.log" &
server=$!
for _ in $(seq 100); do
  grep -q http "$out/serve.addr" && break
  sleep 0.1
done
address="$(grep -o 'http://[0-9.:]*' "$out/serve.addr" | head -1)"
api() {
  local name="$1" path="$2" body="${3:-}"
  n=$((n + 1))
  if [ -z "$body" ]; then
    curl -s -o "$out/api-$name.out" -w '%{http_code}\n' "$address$path" >"$out/api-$name.rc"
  else
    curl -s -o "$out/api-$name.out" -w '%{http_code}\n' -H 'content-type: application/json' \
      --data "$body" "$address$path" >"$out/api-$name.rc"
  fi
}
api presets /api/presets
api page /
api check /api/check '{"model": "70b", "tokens": 4.96e12, "tp": 8, "pp": 1, "zero": 3}'
api check-sensitivity /api/check '{"model": "70b", "tokens": 4.96e12, "tp": 8, "pp": 1, "zero": 3, "sensitivity": true}'
api check-detailed /api/check '{"model": "405b", "tokens": 1e12, "tp": 8, "pp": 8, "zero": 1, "stack": "megatron-te", "cp": 1, "precision": "fp8"}'
api search /api/search '{"models": ["70b", "405b"], "top": 5, "rank": "loss"}'
api search-detailed /api/search '{"models": ["70b"], "top": 3, "stack": "megatron-te", "precisions": ["bf16", "fp8"]}'
api export /api/export '{"model": "70b", "tokens": 4.96e12, "tp": 8, "pp": 8, "zero": 1, "format": "megatron"}'
api export-titan /api/export '{"model": "70b", "tokens": 4.96e12, "tp": 8, "pp": 1, "zero": 3, "format": "torchtitan"}'
api bad /api/check '{"model": "70b", "tokens": 4.96e12, "tp": 3, "pp": 1, "zero": 3}'
api unknown /api/check '{"model": "70b", "tokens": 4.96e12, "tp": 8, "pp": 1, "zero": 3, "colour": 1}'
kill "$server"
wait "$server" 2>/dev/null
rm "$out/serve.addr" "$out/serve.log"

# Paths of this run's DIR, as the outputs name them, read OUT so two DIRs compare.
grep -rlF "$out" "$out" | while read -r f; do sed -i "s|$out|OUT|g" "$f"; done
echo "$n commands, their outputs in $out"
