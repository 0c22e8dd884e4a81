"""Test double for `python -m verl.trainer.main_ppo`: replays a real verl console log from
tests/data/logs at speed, injected into `recipes run` through VERL_DOCTOR_TRAINER_CMD.

It takes the trainer's Hydra overrides as arguments (and honours trainer.total_training_steps=N:
it stops after N step lines, like verl does). Knobs, all environment variables:
  REPLAY_LOG        the log to replay (default: the Qwen2.5-0.5B GSM8K PPO run)
  REPLAY_STEP_DELAY seconds to wait before each step line (default 0.02); other lines go at once
  REPLAY_FAIL_AT    after this many step lines, print a CUDA OOM traceback and exit 1
  REPLAY_HANG       after the last line, keep running (sleep) until killed
  REPLAY_PIDFILE    write "trainer_pid child_pid" here; the child is a `sleep` started like a Ray
                    worker (same process group), so a test can see that the whole group died
  REPLAY_EXIT       exit code at the end (default 0)"""

import os
import subprocess
import sys
import time

LOG = os.environ.get("REPLAY_LOG", os.path.join(os.path.dirname(__file__), "..", "data", "logs",
                                                   "qwen2.5-0.5b-gsm8k-ppo-prompt512-resp256.log"))


def main(argv):
    limit = None
    for a in argv:
        if a.startswith("trainer.total_training_steps="):
            limit = int(a.split("=", 1)[1])
    delay = float(os.environ.get("REPLAY_STEP_DELAY", "0.02"))
    fail_at = int(os.environ["REPLAY_FAIL_AT"]) if os.environ.get("REPLAY_FAIL_AT") else None
    child = subprocess.Popen(["sleep", "600"])  # a stand-in for a Ray worker: same process group
    if os.environ.get("REPLAY_PIDFILE"):
        with open(os.environ["REPLAY_PIDFILE"], "w") as fh:
            fh.write(f"{os.getpid()} {child.pid}\n")
    print(f"replay_trainer: {len(argv)} overrides, replaying {os.path.basename(LOG)}", flush=True)
    if limit:
        print(f"Total training steps: {limit}", flush=True)
    steps = 0
    with open(LOG, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            is_step = "step:" in line and " - " in line
            if is_step:
                if limit is not None and steps >= limit:
                    break
                time.sleep(delay)
            sys.stdout.write(line)
            sys.stdout.flush()
            if is_step:
                steps += 1
                if fail_at is not None and steps >= fail_at:
                    print("Traceback (most recent call last):\n  File \"verl/workers/fsdp_workers.py\", line 520, "
                          "in update_actor\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                          "GPU 0 has a total capacity of 79.14 GiB of which 1.06 GiB is free.", flush=True)
                    child.kill()
                    return 1
    if os.environ.get("REPLAY_HANG") == "1":
        time.sleep(600)
    child.kill()
    return int(os.environ.get("REPLAY_EXIT", "0"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
