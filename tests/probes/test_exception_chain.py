"""The imports probe keeps the whole exception chain (issue 24): a package that re-raises a generic
error from a specific one ("C extension not built" from "Please upgrade numpy to >= 9.0") is
reported by its specific line. A real probe run in a real interpreter (a bare venv of this Python,
with a package written for the test in its site-packages)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from doctor.probes import TARGET_PROBES, TargetProbe, run_target_probe
from doctor.rules.failures import failure_evidence, most_specific

PKG = '''
try:
    import chainpkg_missing_extension  # noqa: F401
except ImportError as exc:
    try:
        raise ValueError("Please upgrade numpy to >= 9.0 (found 1.26.4)") from exc
    except ValueError as why:
        raise ImportError("C extension not built") from why
'''


def test_the_probe_keeps_the_chain_and_the_finding_quotes_its_specific_line(tmp_path):
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "chainpkg").mkdir(parents=True)
    (Path(purelib) / "chainpkg" / "__init__.py").write_text(PKG)
    real = TARGET_PROBES["imports"]
    probe = TargetProbe("imports", real.scripts, budget_s=60, deep=True, args=lambda: ["chainpkg"])
    result = run_target_probe(probe, str(python))
    assert result.ok, result.error
    info = result.data["modules"]["chainpkg"]
    assert info["message"] == "ImportError: C extension not built"
    assert [c["link"] for c in info["causes"]] == ["cause", "cause"]
    assert info["causes"][0]["message"].startswith("ValueError: Please upgrade numpy")
    assert info["causes"][1]["type"] == "ModuleNotFoundError"
    assert "upgrade numpy" in most_specific(info)[1]
    ev = failure_evidence("chainpkg", info)
    assert "Please upgrade numpy to >= 9.0" in ev and "then: ImportError: C extension not built" in ev, ev
    assert not ev.count("ValueError: ValueError")
    assert sysconfig.get_paths()["purelib"] != purelib   # the test's package is not in the doctor's own env
