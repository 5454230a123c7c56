"""Mneme's /mcp driven by the official MCP Python SDK (`mcp` on PyPI), as
an agent would: list the tools, call every one, list and read resources.

    client.py URL KEY MODE [MNEME_BIN]

MODE is `legacy` (2025-11-25, with `initialize`), `2026-07-28` (stateless),
or `stdio` (through `MNEME_BIN mcp`, the stdio bridge, with its own
negotiation). Prints one JSON object: what each call returned, for the
Rust test to assert on. Exits non-zero on anything the SDK raised.
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def structured(result):
    return {
        "is_error": bool(result.is_error),
        "text": " ".join(c.text for c in result.content if getattr(c, "type", "") == "text"),
        "structured": result.structured_content,
    }


async def session(client, tag):
    out = {"protocol_version": str(client.protocol_version)}
    tools = await client.list_tools()
    out["tools"] = sorted(t.name for t in tools.tools)
    out["annotated"] = sorted(
        t.name for t in tools.tools
        if t.annotations is not None and t.annotations.read_only_hint is not None and t.output_schema is not None
    )
    calls = {}

    async def call(name, args):
        calls.setdefault(name, []).append(structured(await client.call_tool(name, args)))
        return calls[name][-1]

    doc = await call("remember", {"text": f"The {tag} umbrella stays by the door.", "title": "Umbrella"})
    await call("search", {"query": tag, "mode": "text"})
    await call("recall", {"topic": "umbrella"})
    job = await call("ingest_transcript", {"text": f"Ana: We always pack the umbrella ({tag}).", "principal": "Ana"})
    if not job["is_error"]:
        await call("ingest_status", {"job_id": job["structured"]["job_id"]})
    await call("retrieve_knowledge", {"query": "umbrella"})
    await call("create_reminder", {"message": f"check the umbrella {tag}", "due_at": "2031-05-01T09:00"})
    await call("list_reminders", {})
    task = await call("create_task", {"goal": f"Find a compact umbrella that survives wind ({tag})"})
    await call("list_tasks", {})
    if not task["is_error"]:
        await call("cancel_task", {"id": task["structured"]["task"]["id"]})
    await call("list_recommendations", {})
    await call("read_recommendation", {"id": "no-such-rec"})
    await call("decide_recommendation", {"id": "no-such-rec", "decision": "snoozed", "days": 9})
    await call("forget", {"scope": "topic", "topic": "umbrellas"})
    await call("forget", {"scope": "topic", "topic": "umbrellas", "confirm": True})
    out["calls"] = calls
    out["document"] = doc["structured"]
    resources = await client.list_resources()
    out["resources"] = [str(r.uri) for r in resources.resources]
    templates = await client.list_resource_templates()
    out["templates"] = sorted(t.uri_template for t in templates.resource_templates)
    return out


async def main():
    url, key, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "stdio":
        params = StdioServerParameters(
            command=sys.argv[4], args=["mcp", "--url", url], env={"MNEME_API_KEY": key}
        )
        async with Client(params, mode="legacy") as client:
            out = await session(client, "stdio")
    else:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
        async with http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
                out = await session(client, mode.replace("-", ""))
    print(json.dumps(out))


asyncio.run(main())
