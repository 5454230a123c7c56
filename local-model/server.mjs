// Mneme's local model server: an OpenAI-compatible endpoint on loopback over
// node-llama-cpp's prebuilt CPU runtime, for a GGUF model that
// scripts/install-model.sh put in place. `mneme up --mneme-local-model`
// starts and stops it with the app; plain Spin users run it themselves and
// point `llm_url` at it.
//
//   node server.mjs --model FILE [--listen 127.0.0.1:8722] [--name ID]
//                   [--threads 2] [--context 8192] [--sequences 3] [--log]
//
// What it serves:
//   GET  /v1/models             the one model, under --name
//   GET  /health                200 once the model is loaded
//   POST /v1/chat/completions   messages, max_tokens, temperature, stream,
//                               response_format (json_object, json_schema)
//
// Requests run one at a time (the CPU has no room for two). Each runs on the
// context sequence whose evaluated tokens share the longest prefix with its
// prompt, so a prompt that starts as an earlier one did (the soul, the
// identity, the instructions) skips prefilling that part; `usage` says how
// many prompt tokens were served that way (`prompt_tokens_details.
// cached_tokens`). A constrained answer is sampled under a grammar, so it is
// valid JSON (of the schema, when one is given) or cut short by max_tokens.

import http from "node:http";
import { getLlama, LlamaCompletion, resolveChatWrapper } from "node-llama-cpp";
import { schemaGrammar } from "./grammar.mjs";

function parseArgs(argv) {
  const opts = { listen: "127.0.0.1:8722", threads: 2, context: 8192, sequences: 3, name: "", queue: 64, log: process.env.MNEME_LOCAL_MODEL_LOG === "1" };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split("=", 2);
    const value = () => (inline !== undefined ? inline : argv[++i]);
    switch (flag) {
      case "--model": opts.model = value(); break;
      case "--listen": opts.listen = value(); break;
      case "--name": opts.name = value(); break;
      case "--threads": opts.threads = Number(value()); break;
      case "--context": opts.context = Number(value()); break;
      case "--sequences": opts.sequences = Number(value()); break;
      case "--queue": opts.queue = Number(value()); break;
      case "--log": opts.log = true; break;
      default: fail(`unknown argument ${argv[i]}`);
    }
  }
  if (!opts.model) fail("--model FILE is required");
  for (const k of ["threads", "context", "sequences", "queue"]) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) fail(`--${k} must be a positive integer`);
  }
  if (!opts.name) opts.name = opts.model.split("/").pop().replace(/\.gguf$/i, "");
  return opts;
}

function fail(message) {
  process.stderr.write(`local-model: ${message}\n`);
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));
const [host, portText] = opts.listen.includes(":") ? opts.listen.split(/:(?=[^:]*$)/) : ["127.0.0.1", opts.listen];
const port = Number(portText);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--listen ${opts.listen}: not HOST:PORT`);

const started = Date.now();
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: opts.model, useMmap: false });
const context = await model.createContext({
  contextSize: opts.context,
  sequences: opts.sequences,
  threads: opts.threads,
  batchSize: 512,
});
const wrapper = resolveChatWrapper(model);
const slots = [];
for (let i = 0; i < opts.sequences; i++) {
  const sequence = context.getSequence();
  slots.push({ sequence, completion: new LlamaCompletion({ contextSequence: sequence }), used: 0 });
}
const jsonGrammar = await llama.getGrammarFor("json");
const schemaGrammars = new Map();

// One generation at a time, in arrival order; a bounded wait list.
let tail = Promise.resolve();
let waiting = 0;
function serially(job) {
  waiting++;
  const run = tail.then(() => { waiting--; return job(); });
  tail = run.catch(() => {});
  return run;
}

function chatHistory(messages) {
  const history = [];
  for (const m of messages) {
    const text = typeof m.content === "string" ? m.content
      : Array.isArray(m.content) ? m.content.filter((p) => p && p.type === "text").map((p) => p.text).join("") : "";
    if (m.role === "system" || m.role === "developer") history.push({ type: "system", text });
    else if (m.role === "assistant") history.push({ type: "model", response: [text] });
    else history.push({ type: "user", text });
  }
  history.push({ type: "model", response: [] });
  return history;
}

async function grammarFor(format) {
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return jsonGrammar;
  if (format.type === "json_schema") {
    const schema = format.json_schema && format.json_schema.schema;
    if (!schema || typeof schema !== "object") throw badRequest("response_format.json_schema.schema must be an object");
    const key = JSON.stringify(schema);
    if (!schemaGrammars.has(key)) {
      try {
        schemaGrammars.set(key, await schemaGrammar(llama, schema));
      } catch (e) {
        throw badRequest(`response_format.json_schema.schema is not supported: ${e.message}`);
      }
    }
    return schemaGrammars.get(key);
  }
  throw badRequest(`response_format.type ${JSON.stringify(format.type)} is not supported`);
}

function badRequest(message) {
  const e = new Error(message);
  e.status = 400;
  return e;
}

/**
 * The slot whose state shares the longest prefix with `tokens`; the least
 * recently used on a tie. A prefix shorter than MIN_SHARED (the chat
 * template's opening, which every prompt shares) counts as none: otherwise
 * a reply's prompt lands on the sequence that holds triage's prompt and
 * evicts it, and every triage prefills from the start (measured: all 14 of
 * the model's triage calls in an eval run ran out of their 6 s).
 */
const MIN_SHARED = 64;
function pickSlot(tokens) {
  let best = slots[0];
  let bestShared = -1;
  for (const s of slots) {
    const found = s.sequence.compareContextTokens(tokens).firstDifferentIndex;
    const shared = found >= MIN_SHARED ? found : 0;
    if (shared > bestShared || (shared === bestShared && s.used < best.used)) {
      best = s;
      bestShared = shared;
    }
  }
  return { slot: best, shared: Math.max(0, bestShared) };
}

async function complete(body, onText, signal) {
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw badRequest("messages must be a non-empty array");
  const grammar = await grammarFor(body.response_format);
  const state = wrapper.generateContextState({ chatHistory: chatHistory(body.messages) });
  const tokens = state.contextText.tokenize(model.tokenizer);
  const maxTokens = Number.isInteger(body.max_tokens) && body.max_tokens > 0 ? body.max_tokens : 1024;
  if (tokens.length + maxTokens > opts.context) {
    throw badRequest(`the prompt (${tokens.length} tokens) and max_tokens (${maxTokens}) exceed the context of ${opts.context}`);
  }
  return serially(async () => {
    if (signal.aborted) {
      if (opts.log) process.stderr.write("local-model: skipped a request whose client went away while it waited\n");
      throw Object.assign(new Error("the client went away"), { status: 499 });
    }
    const { slot, shared } = pickSlot(tokens);
    slot.used = Date.now();
    const t0 = performance.now();
    let first = null;
    let out = 0;
    const meta = await slot.completion.generateCompletionWithMeta(tokens, {
      maxTokens,
      temperature: typeof body.temperature === "number" ? body.temperature : 0.7,
      seed: Number.isInteger(body.seed) ? body.seed : undefined,
      grammar,
      customStopTriggers: state.stopGenerationTriggers,
      signal,
      stopOnAbortSignal: true,
      onToken: (t) => { out += t.length; },
      onTextChunk: (text) => {
        if (first === null) first = performance.now();
        onText(text);
      },
    });
    const done = performance.now();
    if (opts.log) {
      process.stderr.write(`local-model: ${tokens.length} prompt tokens (${shared} cached), ${out} generated, first token ${Math.round((first ?? done) - t0)} ms, ${Math.round(done - t0)} ms${signal.aborted ? ", aborted" : ""}${grammar ? ", constrained" : ""}\n`);
    }
    return {
      text: meta.response,
      finish: meta.metadata.stopReason === "maxTokens" ? "length" : "stop",
      usage: {
        prompt_tokens: tokens.length,
        completion_tokens: out,
        total_tokens: tokens.length + out,
        prompt_tokens_details: { cached_tokens: Math.min(shared, tokens.length) },
      },
      timings: { first_token_ms: Math.round((first ?? done) - t0), total_ms: Math.round(done - t0) },
    };
  });
}

function send(res, status, value, headers = {}) {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

function readBody(req, limit = 8 << 20) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > limit) { reject(badRequest("the request body is too large")); req.destroy(); } else parts.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

let served = 0;
const server = http.createServer(async (req, res) => {
  const path = (req.url || "/").split("?")[0].replace(/\/+$/, "");
  try {
    if (req.method === "GET" && (path === "/v1/models" || path === "/models")) {
      return send(res, 200, { object: "list", data: [{ id: opts.name, object: "model", created: Math.floor(started / 1000), owned_by: "local" }] });
    }
    if (req.method === "GET" && path === "/health") {
      return send(res, 200, { status: "ok", model: opts.name, served, waiting });
    }
    if (req.method !== "POST" || !(path === "/v1/chat/completions" || path === "/chat/completions")) {
      return send(res, 404, { error: { message: `no route ${req.method} ${path}`, type: "not_found" } });
    }
    if (waiting >= opts.queue) {
      return send(res, 503, { error: { message: "the model is busy", type: "overloaded" } }, { "retry-after": "5" });
    }
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch (e) {
      throw e.status ? e : badRequest(`the body is not JSON: ${e.message}`);
    }
    const abort = new AbortController();
    res.on("close", () => { if (!res.writableFinished) abort.abort(); });
    const id = `chatcmpl-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const created = Math.floor(Date.now() / 1000);
    if (body.stream) {
      let opened = false;
      const open = () => {
        if (!opened) {
          opened = true;
          res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        }
      };
      const chunk = (delta, finish = null, extra = {}) => {
        open();
        res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: opts.name, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
      };
      try {
        const r = await complete(body, (text) => chunk({ content: text }), abort.signal);
        chunk({}, r.finish, { usage: r.usage, timings: r.timings });
        res.end("data: [DONE]\n\n");
      } catch (e) {
        if (!opened) throw e;
        res.end(`data: ${JSON.stringify({ error: { message: e.message } })}\n\n`);
      }
      served++;
      return;
    }
    const r = await complete(body, () => {}, abort.signal);
    served++;
    return send(res, 200, {
      id, object: "chat.completion", created, model: opts.name,
      choices: [{ index: 0, message: { role: "assistant", content: r.text }, finish_reason: r.finish }],
      usage: r.usage, timings: r.timings,
    });
  } catch (e) {
    const status = e.status && e.status < 500 ? e.status : 500;
    if (status >= 500) process.stderr.write(`local-model: ${e.stack || e}\n`);
    if (!res.headersSent) send(res, status, { error: { message: e.message, type: status === 400 ? "invalid_request_error" : "server_error" } });
    else res.end();
  }
});

server.listen(port, host, () => {
  const { port: bound } = server.address();
  const loaded = ((Date.now() - started) / 1000).toFixed(1);
  // The one line a supervisor waits for.
  process.stdout.write(`local-model: serving ${opts.name} at http://${host}:${bound}/v1 (loaded in ${loaded} s, ${opts.threads} threads, ${opts.sequences} sequences of ${opts.context} tokens)\n`);
});

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, async () => {
    server.close();
    await context.dispose();
    await model.dispose();
    process.exit(0);
  });
}
