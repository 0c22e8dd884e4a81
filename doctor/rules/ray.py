"""Ray: state left on this machine (sessions, cluster address, temp root), protobuf, import and smoke."""

from __future__ import annotations

import datetime as _dt

from packaging.requirements import InvalidRequirement, Requirement

from doctor import knowledge
from doctor.findings import make
from doctor.rules.registry import rule
from doctor.rules.registry import cannot_look
from doctor.dists import installed, satisfies
from doctor.rules.failures import grouped_failure_evidence, import_failures
from doctor.signatures import cause_of, classify
from doctor.units import human_bytes

MAX_LISTED = 10
PROTOBUF_ID = "ray.protobuf-incompatible"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "unknown age"
    s = float(seconds)
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{s / n:.1f} {unit}"
    return f"{s:.0f} s"


def _when(ts: float | None) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "unknown"


def _size(info: dict) -> str:
    size = info.get("size") or {}
    text = human_bytes(size.get("bytes", 0))
    return text if size.get("complete", True) else f"at least {text}"


@rule("no stale Ray sessions", "ray", needs=("ray_state",), emits=("ray.stale-session",))
def stale_sessions(facts, ctx):
    st = facts["ray_state"]
    stale = [s for s in st.get("sessions") or [] if s.get("kind") in ("dir", "symlink") and not s.get("dangling")
             and not s.get("live")]
    if not stale:
        return
    stale.sort(key=lambda s: -(s.get("age_s") or 0))
    evidence = []
    for s in stale[:MAX_LISTED]:
        raylet = any(p.get("comm") == "raylet" for p in s.get("processes") or [])
        why = "its raylet socket refuses connections" if raylet else \
            "no raylet process names it, no process holds a file in it"
        sock = (s.get("raylet_socket") or {}).get("error")
        evidence.append(f"{s['path']}: age {_age(s.get('age_s'))}, {_size(s)}, owner {s.get('owner')}; {why}"
                        + (f" (sockets/raylet: {sock})" if sock else ""))
    if len(stale) > MAX_LISTED:
        evidence.append(f"… and {len(stale) - MAX_LISTED} more")
    latest = st.get("session_latest") or {}
    if latest.get("dangling"):
        evidence.append(f"session_latest → {latest.get('target')} (missing)")
    elif latest.get("session") in {s["name"] for s in stale}:
        evidence.append(f"session_latest → {latest.get('session')} (stale)")
    total = sum((s.get("size") or {}).get("bytes", 0) for s in stale)
    yield make("ray.stale-session", evidence, count=len(stale), size=human_bytes(total), ray_dir=st["ray_dir"],
               oldest=stale[0]["path"], python=ctx.python)


@rule("live Ray sessions on this machine", "ray", needs=("ray_state",), emits=("ray.live-session",))
def live_sessions(facts, ctx):
    st = facts["ray_state"]
    live = [s for s in st.get("sessions") or [] if s.get("live")]
    if not live:
        return
    evidence, users = [], []
    for s in live:
        procs = s.get("processes") or []
        users += [p.get("user") for p in procs if p.get("user")]
        who = ", ".join(f"{p['comm']} pid {p['pid']} (user {p.get('user', '?')}, since {_when(p.get('started'))})"
                        for p in procs)
        evidence.append(f"{s['path']}: {'head' if s.get('head') else 'worker node'}; {who}")
    yield make("ray.live-session", evidence, count=len(live), users=", ".join(dict.fromkeys(users)) or "?",
               ray_dir=st["ray_dir"], python=ctx.python)


@rule("the Ray head named by ray_current_cluster / RAY_ADDRESS answers", "ray", needs=("ray_state",), emits=("ray.dead-cluster-address",))
def dead_cluster_address(facts, ctx):
    st = facts["ray_state"]
    dead = []  # RAY_ADDRESS first: ray.init() reads it before ray_current_cluster
    ra = st.get("ray_address")
    if ra and ra.get("answers") is False:
        dead.append(("RAY_ADDRESS", ra))
    cc = st.get("current_cluster")
    if cc and cc.get("answers") is False:
        dead.append(("ray_current_cluster", cc))
    elif cc and cc.get("parsed") is False:
        dead.append(("ray_current_cluster", {**cc, "error": "not a host:port address"}))
    if not dead:
        return
    evidence = []
    for what, info in dead:
        where = f" ({info['path']})" if info.get("path") else ""
        evidence.append(f"{what}{where} names {info.get('address')!r}: {info.get('error', 'no answer')}")
    address_file = (cc or {}).get("path") or f"{st['ray_dir']}/ray_current_cluster"
    yield make("ray.dead-cluster-address", evidence, source=dead[0][0], address=dead[0][1].get("address"),
               address_file=address_file, python=ctx.python)


@rule("Ray's socket paths fit the AF_UNIX limit", "ray", needs=("ray_state",), emits=("ray.tmpdir-too-long",))
def tmpdir_too_long(facts, ctx):
    sock = facts["ray_state"].get("socket") or {}
    if not sock.get("too_long"):
        return
    tr = facts["ray_state"].get("temp_root") or {}
    yield make("ray.tmpdir-too-long",
               [f"temp root {sock['root']!r} ({sock['root_bytes']} bytes) comes from "
                f"{tr.get('source') if tr.get('source') != 'default' else 'the default'}",
                f"longest socket path: {sock['bytes']} bytes > {sock['max_bytes']}: {sock['example']}"],
               length=sock["bytes"], max=sock["max_bytes"], root=sock["root"], source=tr.get("source"),
               room=sock["max_bytes"] - (sock["bytes"] - sock["root_bytes"]), python=ctx.python)


def _ray_protobuf_spec(facts: dict) -> tuple[str | None, str]:
    """protobuf range the installed Ray declares (its metadata), else the knowledge fallback."""
    ray = facts["distributions"].get("ray") or {}
    env = dict(facts.get("markers") or {}, extra="")
    for req in ray.get("requires") or []:
        try:
            r = Requirement(req)
        except InvalidRequirement:
            continue
        if r.name.lower() != "protobuf":
            continue
        try:
            if r.marker and not r.marker.evaluate(env):
                continue
        except Exception:  # noqa: BLE001 - an odd marker: take the requirement
            pass
        return str(r.specifier) or None, f"ray {ray.get('version')} metadata (Requires-Dist: {req})"
    for fb in knowledge.load("ray")["protobuf"]["fallback_ranges"]:
        if ray.get("version") and satisfies(ray["version"], fb["ray"]):
            return fb["spec"], fb["source"]
    return None, ""


def _ray_import_failures(facts: dict) -> list[tuple[str, dict]]:
    mods = knowledge.load("ray")["imports"]["modules"]
    out = [(m, i) for m, i in ((facts.get("imports") or {}).get("modules") or {}).items()
           if m in mods and not i.get("ok")]
    smoke = facts.get("ray_smoke") or {}
    if smoke and not smoke.get("ok") and smoke.get("stage") == "import" and smoke.get("error"):
        if not any(i.get("message") == smoke["error"].get("message") for _, i in out):
            out.append(("ray (smoke test)", smoke["error"]))
    return out


@rule("protobuf fits Ray's generated modules and declared range", "ray", needs=("distributions",), requires=("ray",),
    emits=("ray.protobuf-incompatible",))
def protobuf_incompatible(facts, ctx):
    ray_v = installed(facts, "ray")
    pb = installed(facts, "protobuf")
    evidence = []
    spec, spec_source = _ray_protobuf_spec(facts) if ray_v else (None, "")
    if pb and spec and not satisfies(pb, spec):
        evidence.append(f"protobuf=={pb} is outside Ray {ray_v}'s declared range protobuf{spec} ({spec_source})")
    for g in knowledge.load("ray")["protobuf"].get("gencode_ranges") or []:
        if pb and ray_v and satisfies(ray_v, g["ray"]) and not satisfies(pb, g["spec"]):
            spec = f"{spec},{g['spec']}" if spec else g["spec"]
            evidence.append(f"protobuf=={pb}: Ray {ray_v}'s generated modules need protobuf{g['spec']} ({g['source']})")
    failures = [(m, i) for m, i, fid in import_failures(facts) if fid == PROTOBUF_ID]
    failures += [(m, i) for m, i in _ray_import_failures(facts)
                 if m not in dict(failures) and classify(i.get("message", "")) == PROTOBUF_ID]
    evidence += grouped_failure_evidence(failures, unlisted=("(smoke test)",))
    if evidence:
        yield make(PROTOBUF_ID, evidence, ray=ray_v or "not installed", protobuf=pb or "not installed",
                   spec=spec or "?", module=failures[0][0] if failures else "ray", python=ctx.python)


@rule("Ray imports", "ray", needs=("distributions",), requires=("ray",), emits=("ray.import-failed",))
def import_failed(facts, ctx):
    bad = [(m, i) for m, i in _ray_import_failures(facts) if classify(i.get("message", "")) is None]
    if not bad:
        return
    # Modules that fail with the same (unexplained) error fail because of Ray: list them here, since
    # the imports rule leaves an unexplained Ray failure to this rule.
    msgs = {i.get("message") for _, i in bad}
    seen = {m for m, _ in bad}
    bad += [(m, i) for m, i, fid in import_failures(facts) if fid is None and m not in seen and i.get("message") in msgs]
    evidence = grouped_failure_evidence(bad, unlisted=("(smoke test)",))
    info = bad[0][1]
    yield make("ray.import-failed", evidence, module=bad[0][0], message=info.get("message"),
               ray=installed(facts, "ray"), dist=info.get("missing_module") or "ray", python=ctx.python)


@rule("a private Ray instance starts and runs a task", "ray", needs=("ray_smoke",), requires=("ray",),
      emits=("ray.smoke-failed", "signature:log"))
def smoke_failed(facts, ctx):
    smoke = facts["ray_smoke"]
    if smoke.get("ok") or smoke.get("stage") == "import":  # import failures: ray.import-failed / protobuf
        return
    err = smoke.get("error") or {}
    evidence = [f"stage {smoke.get('stage')}: {err.get('message')}",
                f"temp dir {smoke.get('temp_dir')} (removed: {smoke.get('temp_removed')})"]
    for name, lines in (smoke.get("logs") or {}).items():
        evidence.append(f"{name} (last {len(lines)} lines):\n  " + "\n  ".join(lines))
    if smoke.get("killed_leftovers"):
        evidence.append(f"leftover processes of the smoke test killed: {smoke['killed_leftovers']}")
    surfaced = make("ray.smoke-failed", evidence, stage=smoke.get("stage"), message=err.get("message"),
                    ray=smoke.get("ray_version") or installed(facts, "ray"), python=ctx.python)
    text = "\n".join([err.get("text") or err.get("message") or ""] + [ln for lines in (smoke.get("logs") or {}).values()
                                                                    for ln in lines])
    cause = cause_of(text, ctx.python, facts if isinstance(facts.get("distributions"), dict) else None)
    if cause is not None:
        surfaced.caused_by = cause.id
        yield cause
    yield surfaced


@rule("stack versions agree across the Ray cluster's nodes (--cluster)", "ray", needs=("ray_cluster",),
      applies=lambda ctx: None if ctx.cluster else "no --cluster given", emits=("ray.cluster-unreachable", "ray.version-drift"))
def version_drift(facts, ctx):
    cl = facts["ray_cluster"]
    reach = cl.get("reachable") or {}
    if reach.get("answers") is False:
        yield make("ray.cluster-unreachable", [f"TCP connect to {reach.get('host')}:{reach.get('port')}: "
                                               f"{reach.get('error')} ({reach.get('seconds')} s)"],
                   address=cl.get("address"), python=ctx.python)
        return
    nodes = [n for n in cl.get("nodes") or [] if "versions" in n]
    if not cl.get("ok"):
        err = (cl.get("error") or {}).get("message") or "the cluster probe did not finish"
        raise cannot_look("ray_cluster", f"could not read the cluster's nodes: {err}")
    if len(nodes) < 2:
        raise cannot_look("ray_cluster", f"{len(nodes)} node(s) answered: nothing to compare")
    names = list(dict.fromkeys(k for n in nodes for k in n["versions"]))
    drift = [d for d in names if len({n["versions"].get(d) for n in nodes}) > 1]
    if not drift:
        return
    rows = [["node", *drift, "python"]]
    for n in nodes:
        rows.append([f"{n.get('ip')} {n['node_id'][:8]}{' (head)' if n.get('head') else ''}",
                     *(str(n["versions"].get(d) or "-") for d in drift), str(n.get("python"))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    evidence = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for n in cl.get("nodes") or []:
        if "error" in n:
            evidence.append(f"node {n.get('ip')} {n.get('node_id', '')[:8]}: could not run the version task: "
                            f"{n['error'].get('message')}")
    yield make("ray.version-drift", evidence, dists=", ".join(drift), count=len(nodes), address=cl.get("address"),
               python=ctx.python)
