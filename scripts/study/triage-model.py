#!/usr/bin/env python3
"""Triage by a model alone, outside the app (#49 item 3): asks an
OpenAI-compatible endpoint to triage every message of evals/triage.jsonl
with a given prompt and JSON Schema, and prints the share it routes as
labelled and how long each call took. The social items are left out: the
social exit answers them before triage.

    scripts/study/triage-model.py URL MODEL [--prompt full|short] [--runs N]

`seed` is the triage prompt as it stood at 5e3d91a (read from git), with the
JSON user message and every field the design lists; `short` is today's
prompts/cognitive-triage.md, the message as it is, and mode and skills only."""
import json, subprocess, time, urllib.request, argparse, pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SKILLS = ["recall", "memorize", "introspect", "associate", "schedule", "list", "focus", "persistent_task"]

def schema(kind):
    props = {"branch": {"enum": ["respond", "clarify", "act"]},
             "mode": {"enum": ["RESPOND", "CLARIFY", "ACT", "ACKNOWLEDGE"]},
             "tools": {"type": "array", "items": {"type": "string", "maxLength": 60}, "maxItems": 3},
             "skills": {"type": "array", "items": {"enum": SKILLS}, "maxItems": 3},
             "confidence_internal": {"type": "number"}, "confidence_tool_need": {"type": "number"},
             "freshness_risk": {"type": "number"}}
    if kind != "seed":
        props = {"mode": {"enum": ["RESPOND", "CLARIFY", "ACT"]},
                 "skills": {"type": "array", "items": {"enum": SKILLS}, "maxItems": 3}}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url"); ap.add_argument("model")
    ap.add_argument("--prompt", default="short", choices=["seed", "short"]); ap.add_argument("--limit", type=int, default=1000)
    a = ap.parse_args()
    if a.prompt == "seed":
        prompt = subprocess.run(["git", "-C", str(ROOT), "show", "5e3d91a:prompts/cognitive-triage.md"],
                                capture_output=True, text=True, check=True).stdout
    else:
        prompt = (ROOT / "prompts" / "cognitive-triage.md").read_text()
    items = [json.loads(l) for l in open(ROOT / "evals" / "triage.jsonl")]
    items = [i for i in items if i["mode"] in ("RESPOND", "CLARIFY", "ACT")][: a.limit]
    right, times, conf = 0, [], {}
    for it in items:
        user = json.dumps({"message": it["text"], "previous_mode": None, "previous_tools": [], "recent_turns": [],
                           "context_warmth": 0.0, "memory_confidence": 0.0, "gist_count": 0, "fact_count": 0,
                           "tools": [], "skills": SKILLS}) if a.prompt == "seed" else it["text"]
        body = {"model": a.model, "temperature": 0.1, "max_tokens": 120,
                "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": user}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema(a.prompt)}}}
        t = time.time()
        req = urllib.request.Request(a.url.rstrip("/") + "/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"})
        r = json.load(urllib.request.urlopen(req, timeout=300))
        times.append(time.time() - t)
        got = json.loads(r["choices"][0]["message"]["content"])["mode"]
        ok = got == it["mode"] or got in it.get("also", [])
        right += ok
        conf[(it["mode"], got)] = conf.get((it["mode"], got), 0) + 1
        print(f'{it["id"]} want {it["mode"]:8} got {got:8} {"ok " if ok else "BAD"} {times[-1]:.1f}s {it["text"][:60]}', flush=True)
    times.sort()
    print(f"accuracy {right}/{len(items)} = {right/len(items):.3f}; call p50 {times[len(times)//2]:.2f} s p95 {times[int(len(times)*0.95)]:.2f} s")
    print("confusion", {f"{k[0]}->{k[1]}": v for k, v in sorted(conf.items())})

main()
