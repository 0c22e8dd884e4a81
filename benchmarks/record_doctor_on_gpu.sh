#!/usr/bin/env bash
# Run on a lent GPU machine (the device tool): the doctor's own check under several device
# selections, idle and with a process holding GPU memory; each --json is a recording that
# tests/rules/test_gpu_recorded.py replays with `doctor check --facts`. The machine cannot install
# the stack, so the target is its own Python (torch only); the kernels probe reads its torch.
# Needs: devdeps/ (rich, pyyaml, packaging for that Python) carried beside the checkout.
set -u
export PYTHONPATH="$PWD/devdeps:$PWD"
OUT="${OUT:-/tmp/out}"
PY="${PY:-$(command -v python3)}"
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
skip="--skip-probe imports --skip-probe registry --skip-probe ray_smoke"
run() {  # name, then env assignments
  local name=$1; shift
  env "$@" "$PY" -m doctor check --json --no-cache $skip --python "$PY" > "$OUT/h200-$name.json" 2> "$OUT/h200-$name.err"
  echo "$name exit $?"
}
run cvd-unset
run cvd-0 CUDA_VISIBLE_DEVICES=0
run cvd-uuid CUDA_VISIBLE_DEVICES="$uuid"
run cvd-dup CUDA_VISIBLE_DEVICES=0,0
run cvd-1 CUDA_VISIBLE_DEVICES=1
run cvd-0-1 CUDA_VISIBLE_DEVICES=0,1
run cvd-empty CUDA_VISIBLE_DEVICES=
compat=$(ls -d /usr/local/cuda*/compat 2>/dev/null | tail -1)
[ -n "$compat" ] && run compat-first LD_LIBRARY_PATH="$compat:${LD_LIBRARY_PATH-}"
"$PY" -c 'import torch,time; x=torch.empty(20*2**30, dtype=torch.uint8, device="cuda"); print("held", flush=True); time.sleep(60)' &
holder=$!
sleep 12
run held
kill $holder 2>/dev/null
wait
