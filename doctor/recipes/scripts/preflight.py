# Runs INSIDE the target interpreter (prepended with probes/scripts/_prelude.py): the parts of a
# recipe's preflight that need the target's own libraries.
# argv[1]: JSON {"model_path": str|null, "files": {"train": path, "val": path}, "columns": [...]}.
# Reports: {"tokenizer": {ok, class, vocab, error}, "data": {name: {ok, rows, columns, missing, error}}}.
_req = _json.loads(_sys.argv[1])
_out = {"tokenizer": None, "data": {}}

if _req.get("model_path"):
    try:
        from transformers import AutoTokenizer as _AT
        _tok = _AT.from_pretrained(_req["model_path"], local_files_only=True)
        _out["tokenizer"] = {"ok": True, "class": type(_tok).__name__, "vocab": len(_tok)}
    except Exception as exc:
        _out["tokenizer"] = {"ok": False, "error": describe_exception(exc)["type"] + ": " + describe_exception(exc)["message"]}

try:
    import pyarrow.parquet as _pq
except Exception as exc:
    _pq = None
    _pa_err = describe_exception(exc)["message"]
for _name, _path in (_req.get("files") or {}).items():
    if _pq is None:
        _out["data"][_name] = {"ok": False, "error": "pyarrow does not import in the target: " + _pa_err}
        continue
    try:
        _meta = _pq.ParquetFile(_path)
        _cols = list(_meta.schema_arrow.names)
        _missing = [c for c in _req["columns"] if c not in _cols]
        _out["data"][_name] = {"ok": not _missing, "rows": _meta.metadata.num_rows, "columns": _cols, "missing": _missing}
    except Exception as exc:
        _out["data"][_name] = {"ok": False, "error": describe_exception(exc)["type"] + ": " + describe_exception(exc)["message"]}
emit(_out)
