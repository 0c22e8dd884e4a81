"""`doctor bundle`: one redacted file with what verl's maintainers ask for, readable back by
`doctor check --facts` and `doctor triage`. Real inputs: the doctor's own env, a real failure
excerpt (tests/data/logs/failures) with a secret and the user's home in it."""

from __future__ import annotations

import json

from conftest import DATA, run_doctor


def test_a_bundle_is_redacted_and_reads_back(tmp_path):
    home = tmp_path / "home" / "alice"
    home.mkdir(parents=True)
    log = home / "run.log"
    real = (DATA / "logs" / "failures" / "verl-245_vllm_0.6.3.post1_not_supported.log").read_text()
    log.write_text(f"export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456\n"
                   f"python3 -m verl.trainer.main_ppo data.train_files={home}/data/train.parquet\n" + real)
    out = tmp_path / "bundle.json"
    env = {"HOME": str(home)}
    proc = run_doctor("bundle", "--fast", "--no-gpu", "--log", str(log), "--recipe", "gsm8k-smoke-1gpu",
                      "--shorten-home", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "hf_abcdefghijklmnopqrstuvwxyz123456" not in text and str(home) not in text
    doc = json.loads(text)
    assert doc["kind"] == "verl-doctor-bundle" and doc["check"]["findings"] and doc["machine"]["gpu"] is not None
    assert doc["log"]["launch_command"] == "python3 -m verl.trainer.main_ppo data.train_files=~/data/train.parquet"
    assert doc["log"]["triage"]["failed"] and doc["run"]["recipe"] == "gsm8k-smoke-1gpu"
    again = run_doctor("check", "--facts", str(out), "--json")
    assert {f["id"] for f in json.loads(again.stdout)["findings"]} == {f["id"] for f in doc["check"]["findings"]}
    tri = run_doctor("triage", str(out), "--json")
    assert "stack.verl-rejects-vllm" in {f["id"] for f in json.loads(tri.stdout)["findings"]}
    # never over a file
    proc = run_doctor("bundle", "--fast", "--no-gpu", "--out", str(out))
    assert proc.returncode == 2 and "exists" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
