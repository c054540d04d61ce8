#!/usr/bin/env bash
# Cutline's CPU backend against llama.cpp on the same GGUF files, side by side, in paired rounds:
# batch-1 decode, batch-8 decode and prefill 512, each as a ratio Cutline / llama.cpp.
#   LLAMA_CPP_BIN=/tmp/llama.cpp/build/bin tests/bench/run_llama_cpp_compare.sh \
#     [--types F16,Q8_0,Q4_K_M] [--rounds 2] [--repeats 1] [--threads 2] [--layers 10]
# LLAMA_CPP_BIN is a directory with llama.cpp's llama-bench, llama-batched-bench and
# llama-quantize, built by you (nothing is fetched here). The F16 model is a TinyLlama-width Llama
# (dim 2048, ffn 5632, 16 heads / 4 KV heads, vocab 32000) written by `cutline model synth`; every
# other type is quantized from it by llama.cpp's own llama-quantize, so both engines read the very
# same bytes. The files stay in $BENCH_DIR and are reused.
#
# Each round runs, per type, Cutline's decode_bench (--model FILE) and then llama.cpp on the same
# file with the same thread count:
#   batch 1 and batch 8: llama-batched-bench -npp 16 -ntg 32 -npl 1,8 (token generation speed);
#     batch 1 also against llama-bench tg16, in brackets;
#   prefill 512: llama-bench pp512 (-r 2: the mean of two runs; decode_bench also times two).
# decode_bench's batch-8 figure is its decode row; its aggregate run (--batches 8) is in brackets.
# With --repeats N the two engines alternate N times per type within a round and each figure is
# the median of its N runs, so that one busy moment on a shared machine does not decide a ratio.
# These machines are noisy: read the ratios of one round, not absolute figures across rounds. The
# summary gives each ratio's range over the rounds and how many rounds reach 1.2.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
BENCH_DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/cutline-llama-cpp-compare}
types=F16,Q8_0,Q4_K_M rounds=2 repeats=1 threads=2 layers=10
while [[ $# -gt 0 ]]; do
  case $1 in
    --types) types=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    *) echo "usage: LLAMA_CPP_BIN=DIR $0 [--types F16,Q8_0,Q4_K_M] [--rounds N] [--repeats N] [--threads N] [--layers N]" >&2
       exit 2 ;;
  esac
done
bin=${LLAMA_CPP_BIN:-}
for tool in llama-bench llama-batched-bench llama-quantize; do
  if [[ -z "$bin" || ! -x "$bin/$tool" ]]; then
    echo "run_llama_cpp_compare.sh: set LLAMA_CPP_BIN to a directory holding llama.cpp's $tool" >&2
    exit 1
  fi
done
mkdir -p "$BENCH_DIR"
cmake --build "$BUILD" --target decode_bench cutline >/dev/null

f16="$BENCH_DIR/compare-F16-L$layers.gguf"
if [[ ! -s "$f16" ]]; then
  "$BUILD/tools/cutline" model synth -o "$f16" --layers "$layers" --dim 2048 --heads 16 \
    --kv-heads 4 --ffn 5632 --vocab 32000 --context 4096 --type f16 >"$f16.log" 2>&1 ||
    { echo "cutline model synth failed, see $f16.log" >&2; exit 1; }
fi
model_for() {  # model_for TYPE: the file of that type, quantized by llama-quantize once
  local t=$1 f="$BENCH_DIR/compare-$1-L$layers.gguf"
  if [[ $t == F16 ]]; then echo "$f16"; return; fi
  if [[ ! -s "$f" ]]; then
    "$bin/llama-quantize" "$f16" "$f.part" "$t" "$threads" >"$f.log" 2>&1 ||
      { echo "llama-quantize $t failed, see $f.log" >&2; exit 1; }
    mv "$f.part" "$f"
  fi
  echo "$f"
}

median() { tr ' ' '\n' <<<"$*" | sort -g | awk 'NF { a[++n] = $1 } END {
  if (n == 0) print 0; else if (n % 2) print a[(n + 1) / 2]; else print (a[n / 2] + a[n / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "threads $threads, layers $layers, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
IFS=, read -ra type_list <<<"$types"
for t in "${type_list[@]}"; do model_for "$t" >/dev/null; done
for ((round = 1; round <= rounds; ++round)); do
  echo "== round $round ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
  for t in "${type_list[@]}"; do
    f=$(model_for "$t")
    label=$(basename "$f" .gguf)
    c1s= c8s= cps= c8aggs= l1s= l8s= lps= ltgs=
    for ((rep = 0; rep < repeats; ++rep)); do
      out=$("$BUILD/tests/bench/decode_bench" --model "$f" --threads "$threads" --batches 8)
      read -r c1 c8 cp < <(awk -v l="$label" '$1 == l && $2 != "aggregate" { print $6, $8, $10 }' <<<"$out")
      c8agg=$(awk -v l="$label" '$1 == l && $2 == "aggregate" { print $(NF - 4) }' <<<"$out")
      batched=$("$bin/llama-batched-bench" -m "$f" -c 2048 -b 512 -ub 512 -npp 16 -ntg 32 -npl 1,8 \
        -t "$threads" --output-format jsonl 2>&1 | grep '^{')
      l1=$(grep '"pl": 1,' <<<"$batched" | grep -o '"speed_tg": [0-9.]*' | awk '{ print $2 }')
      l8=$(grep '"pl": 8,' <<<"$batched" | grep -o '"speed_tg": [0-9.]*' | awk '{ print $2 }')
      bench=$("$bin/llama-bench" -m "$f" -p 512 -n 16 -t "$threads" -r 2 -o csv 2>/dev/null)
      if [[ -z "${commit:-}" ]]; then
        commit=$(awk -F'"' 'NR == 2 { print $2 }' <<<"$bench")
        echo "llama.cpp build $commit"
      fi
      # avg_ts is the next-to-last CSV column; n_prompt and n_gen tell the two tests apart.
      lp=$(awk -F'","' 'NR > 1 && $(NF - 6) == "512" { print $(NF - 1) }' <<<"$bench")
      ltg=$(awk -F'","' 'NR > 1 && $(NF - 5) == "16" { print $(NF - 1) }' <<<"$bench")
      c1s+=" $c1" c8s+=" $c8" cps+=" $cp" c8aggs+=" $c8agg" l1s+=" $l1" l8s+=" $l8" lps+=" $lp" ltgs+=" $ltg"
    done
    c1=$(median $c1s) c8=$(median $c8s) cp=$(median $cps) c8agg=$(median $c8aggs)
    l1=$(median $l1s) l8=$(median $l8s) lp=$(median $lps) ltg=$(median $ltgs)
    r1=$(ratio "$c1" "$l1") r1b=$(ratio "$c1" "$ltg") r8=$(ratio "$c8" "$l8")
    r8a=$(ratio "$c8agg" "$l8") rp=$(ratio "$cp" "$lp")
    printf '%-7s batch 1: %7.1f / %7.1f = %s (%s) | batch 8: %7.1f / %7.1f = %s (%s) | prefill 512: %7.1f / %7.1f = %s\n' \
      "$t" "$c1" "$l1" "$r1" "$r1b" "$c8" "$l8" "$r8" "$r8a" "$cp" "$lp" "$rp"
    echo "$t $r1 $r8 $rp" >>"$results"
  done
done
echo "== Cutline / llama.cpp over $rounds round(s) of $repeats run(s) each: range, and rounds at >= 1.2"
for t in "${type_list[@]}"; do
  awk -v t="$t" '$1 == t {
      for (i = 2; i <= 4; ++i) {
        if (n == 0 || $i < lo[i]) lo[i] = $i
        if (n == 0 || $i > hi[i]) hi[i] = $i
        if ($i >= 1.2) ok[i]++
      }
      ++n
    }
    END {
      printf "%-7s batch 1: %.2f-%.2f (%d/%d) | batch 8: %.2f-%.2f (%d/%d) | prefill 512: %.2f-%.2f (%d/%d)\n",
        t, lo[2], hi[2], ok[2], n, lo[3], hi[3], ok[3], n, lo[4], hi[4], ok[4], n
    }' "$results"
done
