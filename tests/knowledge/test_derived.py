"""Data derived from a file's bytes is kept and reused (doctor/derived.py): a second start reads the
kept copy; an edit of the file recomputes; a broken file fails every time; no writable cache costs
only time."""

from __future__ import annotations

import os

import pytest

from doctor.derived import derived


def _counting(calls: list):
    def compute(raw: bytes):
        calls.append(raw)
        if raw.startswith(b"broken"):
            raise ValueError("broken file")
        return {"lines": raw.decode().split()}
    return compute


def test_kept_then_recomputed_after_an_edit(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "data.txt"
    src.write_text("a b")
    calls: list = []
    assert derived(src, "test", _counting(calls), code=(__file__,)) == {"lines": ["a", "b"]}
    assert derived(src, "test", _counting(calls), code=(__file__,)) == {"lines": ["a", "b"]}
    assert len(calls) == 1, "the second read computed again instead of reading the kept copy"
    src.write_text("a b c")
    assert derived(src, "test", _counting(calls), code=(__file__,)) == {"lines": ["a", "b", "c"]}
    assert len(calls) == 2
    kept = list((tmp_path / "cache" / "derived").glob("test-data-*.pickle"))
    assert len(kept) == 1, "the copy of the older bytes was not dropped"


def test_a_broken_file_fails_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "data.txt"
    src.write_text("broken")
    calls: list = []
    for _ in range(2):
        with pytest.raises(ValueError):
            derived(src, "test", _counting(calls), code=(__file__,))
    assert len(calls) == 2


def test_no_writable_cache_only_costs_time(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    monkeypatch.setenv("VERL_DOCTOR_CACHE_DIR", str(ro / "cache"))
    src = tmp_path / "data.txt"
    src.write_text("x y")
    calls: list = []
    try:
        for _ in range(2):
            assert derived(src, "test", _counting(calls), code=(__file__,)) == {"lines": ["x", "y"]}
    finally:
        os.chmod(ro, 0o700)
    assert len(calls) == (2 if os.geteuid() != 0 else 1)   # root writes anyway: then it is kept


def test_a_corrupt_kept_copy_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_DOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "data.txt"
    src.write_text("p q")
    calls: list = []
    derived(src, "test", _counting(calls), code=(__file__,))
    (kept,) = (tmp_path / "cache" / "derived").glob("test-data-*.pickle")
    kept.write_bytes(b"\x80not a pickle")
    assert derived(src, "test", _counting(calls), code=(__file__,)) == {"lines": ["p", "q"]}
    assert len(calls) == 2
