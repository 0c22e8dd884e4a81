"""docs/findings.md, generated from knowledge/findings.yaml and the stacks' constraints.
Regenerate: `python -m doctor.report.findings_doc > docs/findings.md` (CI checks it matches)."""

from __future__ import annotations

from doctor import knowledge
from doctor.findings import is_automatic
from doctor.rules import reported_by


def render() -> str:
    out = ["# Findings", "",
           "Generated from `doctor/knowledge/findings.yaml` and `doctor/knowledge/stacks/*.yaml` by",
           "`python -m doctor.report.findings_doc`; CI fails when this file and the data differ.",
           "`doctor explain ID` prints the same text.", ""]
    out.append("| ID | severity | area | title |")
    out.append("|---|---|---|---|")
    defs = knowledge.load("findings")
    for d in defs:
        out.append(f"| `{d['id']}` | {d['severity']} | {d['area']} | {d['title'].replace('|', '/')} |")
    for d in defs:
        out += ["", f"## `{d['id']}`", "",
                f"**Severity:** {d['severity']} · **area:** {d['area']} · **scope:** {d['scope']}", "",
                f"**What it means.** {d['meaning']}", "", f"**Why it happens.** {d['why']}", "",
                f"**Fix** ({'automatic with `doctor fix`' if is_automatic(d) else 'manual'}): {d['fix']['summary']}"]
        if d["fix"].get("commands"):
            out += ["", "```bash", *d["fix"]["commands"], "```"]
        out += ["", "**Reported by:**", *[f"- {who}" for who in reported_by(d["id"])]]
        if d["id"] == "version.*":
            out += ["", "Known-good ranges (one `version.<dist>` ID per distribution):", "",
                    "| stack | dist | range | severity | reason | source |", "|---|---|---|---|---|---|"]
            for s in knowledge.stacks().values():
                for c in s["constraints"]:
                    only = f" (only with {c['when']['dist']}`{c['when']['spec']}`)" if c.get("when") else ""
                    out.append(f"| {s['name']} | {c['dist']} | `{c['spec']}`{only} | {c['severity']} | {c['reason']} | {c['source']} |")
        else:
            out += ["", "**Sources:**", *[f"- {s}" for s in d.get("sources", [])]]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
