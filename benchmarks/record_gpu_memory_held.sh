#!/usr/bin/env bash
# Run on a lent GPU machine (the device tool): the doctor's gpu probe (NVML: memory and the compute
# processes that hold it) while a second process holds 0, 60 and 120 GiB through torch. Each reading
# is $OUT/h200-memory-held-<GiB>.json, replayed by tests/rules/test_gpu_job.py (issue 27: the
# rollout's claim against the memory another process holds). The machine cannot install the stack:
# devdeps/ (rich, pyyaml, packaging, nvidia-ml-py for its Python) is carried beside the checkout.
set -u
export PYTHONPATH="$PWD/devdeps:$PWD"
OUT="${OUT:-/tmp/out}"
PY="${PY:-$(command -v python3)}"
record() {
  "$PY" -c 'import json, sys; from doctor.probes.gpu import gpu_facts; json.dump(gpu_facts(), sys.stdout, indent=1)' \
    > "$OUT/h200-memory-held-$1.json"
  echo "held $1 GiB: exit $?"
}
record 0
for gib in 60 120; do
  "$PY" -c "import torch, time; x = torch.empty($gib * 2**30, dtype=torch.uint8, device='cuda'); print('held', flush=True); time.sleep(90)" &
  holder=$!
  for _ in $(seq 60); do
    used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
    [ "${used:-0}" -gt $(( gib * 1000 )) ] && break
    sleep 1
  done
  record "$gib"
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
done
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv > "$OUT/nvidia-smi.csv"
