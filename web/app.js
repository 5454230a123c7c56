// Mneme's web app: sign-in, chat, the recommendations inbox, knowledge and
// tasks, over the same API every other client uses. No framework: views are
// functions that build DOM nodes; nothing from the server is ever parsed as
// HTML. The session is an HttpOnly cookie (D-CL2), so the API key is sent
// once, in a POST body, and never kept by the page.

import { splitFrontmatter, frontmatterPairs, renderMarkdown } from "./md.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const live = document.getElementById("live");
const toast = document.getElementById("toast");

// ------------------------------------------------------------ helpers

/** Builds an element: h("button", {type: "submit", onclick}, "Send"). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, v);
  }
  return put(el, ...children);
}

/** Appends children to `el`, flattening arrays and skipping null, undefined and false. */
function put(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false || c === "") continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

let fieldSeq = 0;
/** A labelled control: the label's `for` points at the control. */
function field(label, control, hint) {
  const id = control.id || `f${++fieldSeq}`;
  control.id = id;
  const hintEl = hint ? h("div", { class: "muted", id: `${id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "grow" }, h("label", { for: id }, label), control, hintEl);
}

function say(message, ok = false) {
  toast.className = ok ? "toast ok" : "toast";
  toast.textContent = message;
  clearTimeout(say.timer);
  say.timer = setTimeout(() => (toast.textContent = ""), ok ? 3000 : 8000);
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** What to tell the principal about a failed request. */
function explain(e) {
  if (!(e instanceof ApiError)) return `The app could not be reached (${e.message}). Check that Mneme is running, then try again.`;
  if (e.status === 401) return "Your session has ended. Sign in again.";
  if (e.status === 503) return `${e.message} (the server is missing a setting or a service; see the README).`;
  if (e.status >= 500) return `${e.message}. Try again in a moment.`;
  return e.message;
}

/** Calls the API with the session cookie; JSON in, JSON out. */
async function api(method, path, body) {
  const headers = {};
  if (method !== "GET") headers["X-Mneme-CSRF"] = "1";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const type = res.headers.get("content-type") || "";
  const data = type.includes("json") ? await res.json().catch(() => null) : await res.text();
  if (!res.ok) {
    const err = data && data.error ? data.error : { code: "http-" + res.status, message: res.statusText };
    // A 401 on the principal's own credentials ends the session here.
    if (res.status === 401 && path !== "/session") signedOut();
    throw new ApiError(res.status, err.code, err.message);
  }
  return data;
}

const pct = (x) => (typeof x === "number" ? `${Math.round(x * 100)}%` : "–");
const num = (x, d = 3) => (typeof x === "number" ? x.toFixed(d) : "–");
const when = (ms) => (ms ? new Date(ms).toLocaleString() : "");

/** Reads a text/event-stream body, calling onEvent(name, data) per event. */
async function readSse(res, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let cut;
    while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut).replace(/^\r?\n\r?\n/, "");
      let name = "message";
      const data = [];
      for (const line of frame.split(/\r?\n/)) {
        if (line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const k = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (k === "event") name = v;
        else if (k === "data") data.push(v);
      }
      if (data.length) {
        let parsed;
        try {
          parsed = JSON.parse(data.join("\n"));
        } catch {
          parsed = data.join("\n");
        }
        onEvent(name, parsed);
      }
    }
  }
}

// ------------------------------------------------------------ session

let session = null;

function signedOut() {
  session = null;
  stopEvents();
  nav.hidden = true;
  live.textContent = "";
  if (location.hash !== "#/signin") location.hash = "#/signin";
  else render();
}

/** The session, or null when signed out; a failure to reach the app throws. */
async function checkSession() {
  try {
    session = await api("GET", "/session");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) session = null;
    else throw e;
  }
  return session;
}

function signInView() {
  const key = h("input", { type: "password", name: "api_key", autocomplete: "current-password", required: true });
  const error = h("div", { role: "alert" });
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    { class: "card sign-in", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "Sign in to Mneme"),
    field("API key", key, "The key ./scripts/up.sh printed when it started Mneme (it is kept in .spin/secrets.env). This page sends it once and never stores it."),
    h("p", {}, submit),
    error,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    error.className = "";
    submit.disabled = true;
    try {
      await api("POST", "/session", { api_key: key.value });
      key.value = "";
      await checkSession();
      startEvents();
      const wanted = /^#\/(?!signin)[a-z]/.test(location.hash) ? location.hash : "#/chat";
      if (location.hash === wanted) render();
      else location.hash = wanted;
    } catch (e) {
      error.className = "error";
      error.textContent = e.status === 401 ? "That API key is not valid." : explain(e);
      key.focus();
    } finally {
      submit.disabled = false;
    }
  });
  setTimeout(() => key.focus(), 0);
  return form;
}

// ------------------------------------------------------------ proactive events

const feed = []; // the newest last, at most 50
let lastEventId = 0;
let source = null;
let retryTimer = null;
let retryDelay = 1000;

function eventText(ev) {
  const p = ev.payload || {};
  return p.text || p.message || p.summary || p.content || p.goal || JSON.stringify(p);
}

function onProactive(msg) {
  let ev;
  try {
    ev = JSON.parse(msg.data);
  } catch {
    return;
  }
  // A reopened source replays the backlog: keep only what is new.
  if (typeof ev.id === "number") {
    if (ev.id <= lastEventId) return;
    lastEventId = ev.id;
  }
  // A tool reply whose chat stream stopped waiting fills its place in the chat.
  if (ev.type === "tool_result" && ev.payload?.request_id) {
    const pending = document.querySelector(`.msg.them[data-request-id="${CSS.escape(ev.payload.request_id)}"]`);
    if (pending) {
      pending.querySelector(".text").textContent = ev.payload.text || "";
      pending.querySelector(".meta").textContent = modeLine(ev.payload.mode, ev.payload.confidence, ev.payload.topic ? `topic ${ev.payload.topic}` : "");
      pending.dataset.mode = ev.payload.mode || "";
    }
  }
  feed.push(ev);
  if (feed.length > 50) feed.shift();
  const list = document.getElementById("events");
  if (list) {
    list.prepend(eventItem(ev));
    while (list.children.length > 50) list.lastElementChild.remove();
  }
  live.textContent = `New ${eventName(ev.type).toLowerCase()}: ${eventText(ev).slice(0, 80)}`;
}

// An event's type in words: "tool_result" reads "Tool result".
function eventName(type) {
  const words = String(type || "event").replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function eventItem(ev) {
  return h(
    "li",
    { "data-type": ev.type },
    h("strong", {}, eventName(ev.type)),
    " ",
    h("span", { class: "muted" }, when(ev.created_ms)),
    h("div", {}, eventText(ev)),
  );
}

function startEvents() {
  if (source) return;
  clearTimeout(retryTimer);
  // A new source resumes after the last event this page showed; the
  // browser's own reconnects send Last-Event-ID.
  source = new EventSource(lastEventId ? `/events?after=${lastEventId}` : "/events", { withCredentials: true });
  for (const type of ["drift", "task", "reminder", "notification", "tool", "tool_result"]) source.addEventListener(type, onProactive);
  source.addEventListener("open", () => {
    retryDelay = 1000;
    document.getElementById("events-state")?.replaceChildren("Live");
  });
  source.addEventListener("error", async () => {
    // The server ends each stream after a while and the browser reconnects
    // with Last-Event-ID by itself; a closed source (a 401, a restart) is
    // reopened here after a check that the session still holds.
    document.getElementById("events-state")?.replaceChildren("Reconnecting…");
    if (source && source.readyState === EventSource.CLOSED) {
      source = null;
      retryTimer = setTimeout(async () => {
        try {
          if (await checkSession()) startEvents();
          else signedOut();
        } catch {
          // The app is unreachable for now: keep trying.
          source = null;
          startEvents();
        }
      }, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30000);
    }
  });
}

function stopEvents() {
  clearTimeout(retryTimer);
  if (source) source.close();
  source = null;
}

// ------------------------------------------------------------ chat

function messageItem(who, text) {
  const body = h("div", { class: "text" }, text);
  const meta = h("div", { class: "meta" });
  const progress = h("ol", { class: "progress", "aria-label": "Progress" });
  const li = h("li", { class: `msg ${who}` }, h("span", { class: "visually-hidden" }, who === "me" ? "You said:" : "Mneme said:"), body, progress, meta);
  return { li, body, meta, progress };
}

// What Mneme did with a message, in words (the router's modes).
// What each of the ACT loop's innate actions does, as a step reads.
const ACTION_WORDS = {
  recall: "searched memory",
  memorize: "noted it",
  introspect: "looked at its own state",
  associate: "followed related ideas",
  schedule: "reminders",
  list: "lists",
  focus: "set a focus",
  persistent_task: "background tasks",
};

const MODE_WORDS = {
  RESPOND: "answered",
  CLARIFY: "asked to clarify",
  ACT: "acted",
  ACKNOWLEDGE: "acknowledged",
  IGNORE: "let it pass",
  CANCEL: "cancelled",
};

function modeLine(mode, confidence, extra) {
  const parts = [];
  if (mode) parts.push(MODE_WORDS[mode] || mode.toLowerCase());
  if (typeof confidence === "number") parts.push(`confidence ${Math.round(confidence * 100)}%`);
  if (extra) parts.push(extra);
  return parts.join(" · ");
}

const STAGES = {
  processing: "Reading your message…",
  thinking: "Thinking…",
  tools: "Asking the tools…",
  deferred: "The tools are still working; the reply will appear here when it is ready.",
  still_working: "Still working…",
};

function chatView() {
  const log = h("ol", { class: "log", "aria-label": "Conversation", "aria-live": "polite" });
  const text = h("textarea", { rows: 3, name: "text", required: true, maxlength: 32000 });
  const send = h("button", { type: "submit" }, "Send");
  const form = h("form", { class: "composer" }, field("Message", text, "Enter sends; Shift+Enter starts a new line."), h("p", { class: "row" }, send));
  const events = h("ol", { class: "events", id: "events", "aria-label": "Proactive events" });
  for (const ev of [...feed].reverse()) events.append(eventItem(ev));
  let threadId = null;

  (async () => {
    try {
      const recent = await api("GET", "/conversation/recent?limit=30");
      threadId = recent.thread_id;
      for (const ex of recent.exchanges) {
        log.append(messageItem("me", ex.prompt).li);
        const m = messageItem("them", ex.response);
        m.meta.textContent = modeLine(ex.mode, ex.confidence, when(ex.timestamp));
        log.append(m.li);
      }
      log.lastElementChild?.scrollIntoView({ block: "end" });
    } catch (e) {
      log.append(h("li", { class: "error" }, explain(e)));
    }
  })();

  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });

  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const said = text.value.trim();
    if (!said) return;
    send.disabled = true;
    log.append(messageItem("me", said).li);
    const reply = messageItem("them", "");
    reply.li.setAttribute("aria-busy", "true");
    log.append(reply.li);
    reply.meta.textContent = "Sending…";
    text.value = "";
    reply.li.scrollIntoView({ block: "end" });
    let streamed = "";
    let finished = false;
    try {
      const res = await fetch("/chat", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Mneme-CSRF": "1", Accept: "text/event-stream" },
        body: JSON.stringify(threadId ? { text: said, thread_id: threadId } : { text: said }),
        credentials: "same-origin",
      });
      if (!res.ok) {
        const data = await res.json().catch(() => ({ error: { code: "http", message: res.statusText } }));
        if (res.status === 401) signedOut();
        throw new ApiError(res.status, data.error.code, data.error.message);
      }
      reply.li.dataset.requestId = res.headers.get("x-request-id") || "";
      await readSse(res, (name, data) => {
        if (name === "status") {
          if (data.stage === "tools") {
            reply.meta.textContent = `Asking ${(data.tools || []).join(", ")}…`;
          } else if (data.stage === "acting") {
            const did = [...new Set((data.actions || []).map((a) => ACTION_WORDS[a] || a.replace(/_/g, " ")))];
            reply.progress.append(h("li", { "data-actions": (data.actions || []).join(" ") }, `Step ${data.iteration}: ${did.join(", ") || "nothing to do"}`));
          } else {
            reply.meta.textContent = STAGES[data.stage] || data.stage;
          }
        } else if (name === "token") {
          streamed += data.text;
          reply.body.textContent = streamed;
        } else if (name === "message") {
          reply.body.textContent = data.text;
          reply.meta.textContent = modeLine(data.mode, data.confidence, data.topic ? `topic ${data.topic}` : "");
          reply.li.dataset.mode = data.mode;
        } else if (name === "error") {
          reply.li.append(h("div", { class: "error", role: "alert" }, data.message, data.recoverable ? " — send the message again to retry." : ""));
        } else if (name === "done") {
          finished = true;
          reply.li.removeAttribute("aria-busy");
          if (typeof data.duration_ms === "number") reply.meta.append(` · ${(data.duration_ms / 1000).toFixed(1)} s`);
        }
      });
      if (!finished) {
        reply.li.append(h("div", { class: "error", role: "alert" }, "The connection dropped before the answer was complete. Send the message again."));
      }
    } catch (e) {
      reply.li.append(h("div", { class: "error", role: "alert" }, explain(e)));
      reply.meta.textContent = "";
    } finally {
      reply.li.removeAttribute("aria-busy");
      send.disabled = false;
      text.focus();
      reply.li.scrollIntoView({ block: "end" });
    }
  });

  setTimeout(() => text.focus(), 0);
  // First sign-in with no model: one short note, until it is dismissed.
  const setup = h("div", {});
  if (!localStorage.getItem("mneme.setup-note-dismissed")) {
    fetch("/health").then((r) => r.json()).then((hl) => {
      if (hl?.dependencies?.model?.configured !== false) return;
      const close = h("button", { type: "button", class: "link" }, "Dismiss");
      close.addEventListener("click", () => {
        localStorage.setItem("mneme.setup-note-dismissed", "1");
        setup.replaceChildren();
      });
      setup.replaceChildren(
        h("aside", { class: "card note", "aria-label": "Setting up" },
          h("p", {}, h("strong", {}, "No language model is connected yet. "),
            "Mneme still remembers what you tell it, sets reminders, keeps lists, finds what you gave it and runs recommendations; questions that need a model get a short note instead of an answer. ",
            "Start Mneme with ", h("code", {}, "./scripts/up.sh --local-model"), " to run a small model on this computer, or ",
            h("a", { href: "#/status" }, "see Status"), " for how to connect one."),
          h("p", {}, close)),
      );
    }).catch(() => {});
  }
  return h(
    "div",
    { class: "split" },
    h("section", { "aria-labelledby": "chat-title" }, h("h1", { id: "chat-title" }, "Chat"), setup, log, form),
    h(
      "aside",
      { "aria-labelledby": "events-title" },
      h("h2", { id: "events-title" }, "Activity ", h("span", { class: "muted", id: "events-state" }, source && source.readyState === 1 ? "Live" : "Connecting…")),
      h("p", { class: "muted" }, "Drift thoughts, task progress and reminders arrive here as they happen."),
      events,
    ),
  );
}

// ------------------------------------------------------------ charts

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

/** Line styles told apart by dash as well as colour (never colour alone). */
const LINE_STYLES = [
  { stroke: "var(--accent)", dash: "" },
  { stroke: "var(--ok)", dash: "6 3" },
  { stroke: "var(--warn)", dash: "2 3" },
  { stroke: "var(--bad)", dash: "8 3 2 3" },
  { stroke: "var(--muted)", dash: "1 4" },
];

/**
 * A small line chart as inline SVG: `series` is [{name, values}] over the
 * same `dates` (YYYY-MM-DD); a null value breaks its line. `threshold`
 * draws a dashed rule with its label. The chart is an image whose label
 * says the latest values, and the legend repeats them in text.
 */
function lineChart({ title, dates, series, yMax, threshold, summary }) {
  const W = 320, H = 120, L = 30, R = 8, T = 8, B = 20;
  const max = yMax ?? Math.max(1, ...series.flatMap((s) => s.values.filter((v) => v !== null)));
  const x = (i) => L + (dates.length > 1 ? (i * (W - L - R)) / (dates.length - 1) : 0);
  const y = (v) => T + (H - T - B) * (1 - Math.min(v, max) / max);
  const paths = series.map((s, n) => {
    const st = LINE_STYLES[n % LINE_STYLES.length];
    let d = "";
    s.values.forEach((v, i) => {
      if (v === null || v === undefined) return;
      d += `${d && s.values[i - 1] !== null && s.values[i - 1] !== undefined ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    });
    return svg("path", { d, fill: "none", stroke: st.stroke, "stroke-width": 2, "stroke-dasharray": st.dash || undefined, "data-series": s.name });
  });
  const integers = series.every((s) => s.values.every((v) => v === null || v === undefined || Number.isInteger(v)));
  const fmt = (v) => (integers ? String(Math.round(v)) : v.toFixed(2));
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": `${title}: ${summary}` },
    svg("line", { x1: L, y1: y(0), x2: W - R, y2: y(0), class: "axis" }),
    svg("line", { x1: L, y1: T, x2: L, y2: y(0), class: "axis" }),
    svg("text", { x: L - 4, y: y(max) + 4, "text-anchor": "end", class: "tick" }, fmt(max)),
    svg("text", { x: L - 4, y: y(0), "text-anchor": "end", class: "tick" }, "0"),
    svg("text", { x: L, y: H - 4, class: "tick" }, dates[0]?.slice(5) || ""),
    svg("text", { x: W - R, y: H - 4, "text-anchor": "end", class: "tick" }, dates[dates.length - 1]?.slice(5) || ""),
    threshold !== undefined
      ? [svg("line", { x1: L, y1: y(threshold), x2: W - R, y2: y(threshold), class: "threshold", "data-threshold": threshold }),
         svg("text", { x: L + 4, y: y(threshold) - 3, class: "tick" }, `fires at ${threshold}`)]
      : null,
    paths,
  );
  const legend = series.length > 1
    ? h("ul", { class: "legend", role: "list" }, series.map((s, n) => {
        const st = LINE_STYLES[n % LINE_STYLES.length];
        const last = [...s.values].reverse().find((v) => v !== null && v !== undefined);
        return h("li", {}, svg("svg", { viewBox: "0 0 24 8", width: 24, height: 8, "aria-hidden": "true" }, svg("line", { x1: 0, y1: 4, x2: 24, y2: 4, stroke: st.stroke, "stroke-width": 2, "stroke-dasharray": st.dash || undefined })), ` ${s.name}${last !== undefined ? ` (${fmt(last)})` : ""}`);
      }))
    : null;
  return h("figure", { class: "chart-box" }, h("figcaption", {}, title), chart, legend);
}

// ------------------------------------------------------------ inbox

function badges(rec) {
  const f = rec.flags || {};
  return [
    h("span", { class: "badge status" }, rec.status),
    f.forced_decision && h("span", { class: "badge forced", title: "Snoozed twice: decide now" }, "forced decision"),
    f.aging && h("span", { class: "badge aging", title: "Older than 14 days" }, "aging"),
    f.auto_revived && h("span", { class: "badge revived", title: "Its snooze ended" }, "back from snooze"),
  ];
}

function traceTable(trace) {
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      h("caption", { class: "visually-hidden" }, "Steps of the run"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Step"), h("th", { scope: "col" }, "Took"), h("th", { scope: "col" }, "Outcome"))),
      h("tbody", {}, trace.map((t) => h("tr", {}, h("td", {}, `${t.step} ${t.name || ""}`), h("td", { class: "score" }, `${num(t.took_ms, 1)} ms`), h("td", {}, t.outcome)))),
    ),
  );
}

/** The rec cards of one door, or a line saying there are none. */
function recList(recs) {
  return recs.length
    ? h("ul", { class: "recs", role: "list" }, recs.map((r) =>
        h("li", { class: "card" }, h("a", { href: `#/rec/${encodeURIComponent(r.id)}` }, r.tldr), h("div", {}, badges(r), h("span", { class: "muted" }, ` drift ${pct(r.drift_score)} · ${new Date(r.created_at).toLocaleDateString()}${snoozed(r.snooze_count)}`))),
      ))
    : h("p", { class: "muted" }, "Nothing here yet.");
}

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
/** " · snoozed once", " · snoozed twice", …; nothing when never snoozed. */
const snoozed = (n) => (n > 0 ? ` · snoozed ${n === 1 ? "once" : n === 2 ? "twice" : `${n} times`}` : "");

/** A door's component labels by name, from its configuration. */
function labels(config) {
  return Object.fromEntries((config?.components || []).map((c) => [c.name, c.label || c.name.replace(/_/g, " ")]));
}

/**
 * A door's drift over the last 28 days, read as each day stood: the
 * composite with the fire threshold, and each normalised component.
 */
async function doorCharts(door, config, into) {
  try {
    const hist = await api("GET", `/rx/${encodeURIComponent(door)}/history?days=28`);
    if (!hist.dates.length) {
      into.replaceChildren(h("p", { class: "muted" }, hist.note || "No history yet."));
      return;
    }
    const names = labels(config);
    const last = (v) => [...v].reverse().find((x) => x !== null && x !== undefined);
    const comps = Object.entries(hist.components);
    into.replaceChildren(
      lineChart({
        title: "Drift, last 28 days",
        dates: hist.dates,
        series: [{ name: "drift", values: hist.composite }],
        yMax: 1,
        threshold: hist.fire_threshold,
        summary: `today ${num(last(hist.composite), 2)}, fires at ${hist.fire_threshold}`,
      }),
      lineChart({
        title: "Its signals (0 on track, 1 far off)",
        dates: hist.dates,
        series: comps.map(([n, v]) => ({ name: names[n] || n, values: v })),
        yMax: 1,
        threshold: hist.fire_threshold,
        summary: comps.map(([n, v]) => `${names[n] || n} ${num(last(v) ?? null, 2)}`).join(", "),
      }),
    );
  } catch (e) {
    into.replaceChildren(h("p", { class: "error" }, explain(e)));
  }
}

/** How often an open inbox looks for recommendations made elsewhere (a scheduled run, another tab). */
const INBOX_POLL_MS = 60_000;

async function inboxView() {
  const root = h("section", { "aria-labelledby": "inbox-title" }, h("h1", { id: "inbox-title" }, "Recommendations"));
  let doors = [];
  let recs = [];
  const load = async () => {
    [doors, recs] = await Promise.all([api("GET", "/rx/doors").then((d) => d.doors), api("GET", "/v1/rx/recs?limit=200").then((r) => r.recs)]);
  };
  try {
    await load();
  } catch (e) {
    put(root, h("p", { class: "error" }, explain(e)));
    return root;
  }
  // Each door's count and list are redrawn in place after a run and on a
  // timer, so the inbox never shows a stale "Nothing here yet." under the
  // run that has just made a recommendation (a run's own output stays).
  const sections = new Map();
  // Redrawn only when something changed, so a keyboard user's focus on a
  // rec link is not lost to a timer.
  let drawn = "";
  const redraw = () => {
    const now = JSON.stringify(recs.map((r) => [r.id, r.status, r.door, r.flags]));
    if (now === drawn) return;
    drawn = now;
    for (const [door, { count, list }] of sections) {
      const mine = recs.filter((r) => r.door === door);
      // Acted, skipped and dismissed recs stay listed; the count says how
      // many still wait for a decision.
      const open = mine.filter((r) => !["acted", "skipped", "dismissed"].includes(r.status)).length;
      count.textContent = plural(mine.length, "recommendation") + (open === mine.length ? "" : `, ${open || "none"} open`);
      list.replaceChildren(recList(mine));
    }
  };
  const refresh = async () => {
    try {
      await load();
      redraw();
    } catch {
      // The next run or tick tries again; the run's own outcome is shown.
    }
  };
  const names = [...new Set([...doors.map((d) => d.name), ...recs.map((r) => r.door)])];
  if (!names.length) put(root, h("p", {}, "No doors are configured."));
  for (const door of names) {
    const out = h("div", { "aria-live": "polite" });
    const run = h("button", { type: "button", class: "secondary" }, `Run ${door}`);
    const count = h("span", { class: "muted", "data-rec-count": door });
    const list = h("div", {});
    const charts = h("div", { class: "charts", "data-door-charts": door });
    sections.set(door, { count, list });
    doorCharts(door, doors.find((d) => d.name === door), charts);
    run.addEventListener("click", async () => {
      run.disabled = true;
      out.replaceChildren(h("p", { class: "muted" }, `Running ${door}…`));
      try {
        const r = await api("POST", `/rx/${encodeURIComponent(door)}`);
        out.replaceChildren(
          h("p", {}, h("strong", {}, r.status === "no-change" ? "No change: " : "New recommendation: "), r.tldr || "", ""),
          h("details", {}, h("summary", {}, "Steps of the run"), traceTable(r.trace || [])),
        );
        await refresh();
      } catch (e) {
        out.replaceChildren(h("p", { class: "error", role: "alert" }, explain(e)));
      } finally {
        run.disabled = false;
      }
    });
    put(root,
      h(
        "section",
        { class: "door", "aria-labelledby": `door-${door}` },
        h("h2", { id: `door-${door}` }, door[0].toUpperCase() + door.slice(1), " ", count),
        charts,
        h("p", {}, run),
        out,
        list,
      ),
    );
  }
  redraw();
  const timer = setInterval(() => (root.isConnected ? refresh() : clearInterval(timer)), INBOX_POLL_MS);
  const onVisible = () => {
    if (!root.isConnected) document.removeEventListener("visibilitychange", onVisible);
    else if (document.visibilityState === "visible") refresh();
  };
  document.addEventListener("visibilitychange", onVisible);
  return root;
}

async function recView(id) {
  const root = h("article", { "aria-labelledby": "rec-title" }, h("p", {}, h("a", { href: "#/inbox" }, "← Inbox")));
  let rec;
  let md = "";
  try {
    rec = await api("GET", `/v1/rx/recs/${encodeURIComponent(id)}`);
    md = await api("GET", `/v1/rx/recs/${encodeURIComponent(id)}.md`);
  } catch (e) {
    put(root, h("p", { class: "error" }, explain(e)));
    return root;
  }
  const { front, body } = splitFrontmatter(typeof md === "string" ? md : rec.body_md || "");
  const doc = h("div", { class: "doc card" }, renderMarkdown(body));
  // The counter-thesis is the design's mandatory section: mark it out.
  for (const heading of doc.querySelectorAll("h2, h3")) {
    if (/counter-thesis/i.test(heading.textContent)) {
      const box = h("section", { class: "counter", "aria-label": "Counter-thesis" });
      heading.before(box);
      let n = heading;
      while (n && !(n !== heading && /^H[23]$/.test(n.tagName))) {
        const next = n.nextSibling;
        box.append(n);
        n = next;
      }
    }
  }
  const status = h("div", { role: "status", "aria-live": "polite" });
  const act = async (path, payload, done) => {
    status.textContent = "";
    try {
      await api("POST", `/v1/rx/recs/${encodeURIComponent(id)}/${path}`, payload);
      say(done, true);
      render();
    } catch (e) {
      status.replaceChildren(h("p", { class: "error", role: "alert" }, explain(e)));
    }
  };
  const terminal = rec.status === "acted" || rec.status === "dismissed";
  const fit = h("select", { name: "fit" }, ["1", "2", "3", "4", "5"].map((v) => h("option", { value: v, selected: v === "3" }, v)));
  const kind = h("select", { name: "kind" }, h("option", { value: "acted_as_prescribed" }, "as prescribed"), h("option", { value: "acted_modified" }, "modified"));
  const note = h("input", { type: "text", name: "note", maxlength: 4000 });
  const days = h("select", { name: "days" }, [1, 2, 3, 4, 5, 6, 7].map((d) => h("option", { value: String(d), selected: d === 3 }, `${d} day${d > 1 ? "s" : ""}`)));
  const actions = terminal
    ? h("p", { class: "muted" }, `This recommendation is ${rec.status}${rec.acted_disposition ? ` (${rec.acted_disposition})` : ""}; it cannot change any more.`)
    : h(
        "div",
        {},
        h(
          "fieldset",
          {},
          h("legend", {}, "Act on it"),
          h("div", { class: "row" }, field("How", kind), field("Fit (1–5)", fit), field("Outcome note", note),
            h("button", { type: "button", onclick: () => act("disposition", { disposition: kind.value, subjective_fit_1_5: Number(fit.value), outcome_note: note.value || undefined }, "Marked as acted.") }, "Acted")),
        ),
        h(
          "fieldset",
          {},
          h("legend", {}, "Or"),
          h("div", { class: "row" },
            field("Snooze for", days),
            h("button", { type: "button", class: "secondary", disabled: rec.flags?.forced_decision, onclick: () => act("snooze", { days: Number(days.value) }, "Snoozed.") }, "Snooze"),
            h("button", { type: "button", class: "secondary", onclick: () => act("disposition", { disposition: "skipped" }, "Skipped.") }, "Skip"),
            h("button", { type: "button", class: "danger", onclick: () => act("disposition", { disposition: "dismissed" }, "Dismissed.") }, "Dismiss")),
          rec.flags?.forced_decision ? h("p", { class: "muted" }, "Snoozed twice already: this is a forced decision (act, skip or dismiss).") : null,
        ),
      );
  // The signal that drove this rec, over the last 28 days.
  const signal = h("div", { class: "charts", "data-driving-signal": rec.driving_signal || "" });
  if (rec.driving_signal) {
    api("GET", `/rx/${encodeURIComponent(rec.door)}/history?days=28`)
      .then(async (hist) => {
        const values = hist.components?.[rec.driving_signal];
        if (!values || !hist.dates.length) return;
        const config = (await api("GET", "/rx/doors")).doors.find((d) => d.name === rec.door);
        const label = labels(config)[rec.driving_signal] || rec.driving_signal;
        const last = [...values].reverse().find((x) => x !== null && x !== undefined);
        signal.replaceChildren(lineChart({
          title: `Driving signal: ${label}, last 28 days`,
          dates: hist.dates,
          series: [{ name: label, values }],
          yMax: 1,
          threshold: hist.fire_threshold,
          summary: `today ${num(last ?? null, 2)}, fires at ${hist.fire_threshold}`,
        }));
      })
      .catch(() => signal.replaceChildren(h("p", { class: "muted" }, "The signal's history could not be read.")));
  }
  put(root, 
    h("h1", { id: "rec-title" }, rec.tldr),
    h("div", {}, badges(rec), h("span", { class: "muted" }, ` ${rec.door} · drift ${pct(rec.drift_score)} · ${rec.confidence}% confidence${snoozed(rec.snooze_count)}`)),
    signal,
    actions,
    status,
    front ? h("details", {}, h("summary", {}, "Frontmatter"), h("dl", { class: "fields" }, frontmatterPairs(front).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))) : null,
    doc,
  );
  return root;
}

// ------------------------------------------------------------ knowledge

function entryCard(e) {
  return h(
    "li",
    { class: "card result" },
    h("a", { href: `#/entry/${encodeURIComponent(e.id)}` }, `${e.id} · ${e.topic}`),
    h("div", {}, e.position),
    h(
      "div",
      // How well it matched, in one number; the ranking's two scores stay
      // one hover away for whoever wants them.
      typeof e.relevance_score === "number"
        ? { class: "muted score", title: `relevance ${num(e.relevance_score)}, ranked by ${num(e.final_score)} (relevance, type, confidence and freshness together)` }
        : { class: "muted score" },
      `${e.type} · ${e.confidence} confidence`,
      typeof e.relevance_score === "number" ? ` · ${pct(e.relevance_score)} match` : "",
      e.corroboration_count > 1 ? ` · said ${e.corroboration_count} times` : "",
    ),
  );
}

function knowledgeView() {
  const q = h("input", { type: "search", name: "query", required: true, maxlength: 2000 });
  const k = h("select", { name: "k" }, [5, 10, 20].map((n) => h("option", { value: String(n), selected: n === 10 }, String(n))));
  const results = h("ol", { class: "log", "aria-label": "Search results", "aria-live": "polite" });
  const search = h("form", { role: "search" }, h("div", { class: "row" }, field("Search your judgement", q), field("Results", k), h("button", { type: "submit" }, "Search")));
  search.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    results.replaceChildren(h("li", { class: "muted" }, "Searching…"));
    try {
      const r = await api("POST", "/retrieve", { query: q.value, k: Number(k.value) });
      results.replaceChildren(...(r.results.length ? r.results.map(entryCard) : [h("li", { class: "muted" }, "No active entry matches.")]));
    } catch (e) {
      results.replaceChildren(h("li", { class: "error" }, explain(e)));
    }
  });

  const text = h("textarea", { name: "text", rows: 6, required: true });
  const type = h("select", { name: "source_type" }, h("option", { value: "chat" }, "chat"), h("option", { value: "meeting" }, "meeting"));
  const date = h("input", { type: "date", name: "source_date", required: true, value: new Date().toISOString().slice(0, 10) });
  const channel = h("input", { type: "text", name: "source_channel", maxlength: 200 });
  const job = h("div", { "aria-live": "polite" });
  const ingest = h(
    "form",
    { class: "card" },
    h("h2", {}, "Ingest a transcript"),
    field("Transcript", text),
    h("div", { class: "row" }, field("Source", type), field("Date", date), field("Channel (optional)", channel)),
    h("p", {}, h("button", { type: "submit" }, "Ingest")),
    job,
  );
  ingest.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    job.replaceChildren(h("p", { class: "muted" }, "Sending…"));
    try {
      const body = { source_type: type.value, source_date: date.value, text: text.value };
      if (channel.value.trim()) body.source_channel = channel.value.trim();
      const { job_id } = await api("POST", "/knowledge/ingest", body);
      for (let i = 0; i < 120; i++) {
        const j = await api("GET", `/knowledge/jobs/${encodeURIComponent(job_id)}`);
        job.replaceChildren(jobView(j));
        if (j.status === "done" || j.status === "failed") {
          loadRecent();
          loadGrowth();
          return;
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
      job.append(h("p", { class: "muted" }, "Still queued after two minutes: the job goes on in the background; check back later."));
    } catch (e) {
      job.replaceChildren(h("p", { class: "error", role: "alert" }, explain(e)));
    }
  });

  let loadGrowth = () => {};
  const recent = h("ol", { class: "log", "aria-label": "Recent entries" });
  const loadRecent = () =>
    api("GET", "/knowledge/entries?limit=20")
      .then((r) => recent.replaceChildren(...(r.entries.length ? r.entries.map(entryCard) : [h("li", { class: "muted" }, "No entries yet.")])))
      .catch((e) => recent.replaceChildren(h("li", { class: "error" }, explain(e))));
  loadRecent();

  // Entries per type over the last 90 days, drawn from the store's counts;
  // redrawn when an ingest finishes.
  const chartHolder = h("div", {});
  const growth = h("section", { "aria-labelledby": "growth-title" }, h("h2", { id: "growth-title" }, "Entries over time"), chartHolder);
  loadGrowth = () =>
    api("GET", "/knowledge/timeline?days=90")
      .then((t) => {
        const kinds = Object.keys(t.series);
        const last = (k) => t.series[k][t.series[k].length - 1];
        chartHolder.replaceChildren(
          t.total
            ? lineChart({
                title: `Entries by type, last ${t.days} days`,
                dates: t.dates,
                series: kinds.map((k) => ({ name: k, values: t.series[k] })),
                summary: kinds.map((k) => `${last(k)} ${k}`).join(", "),
              })
            : h("p", { class: "muted" }, "No entries yet: ingest a transcript and they appear here by type."),
        );
      })
      .catch((e) => chartHolder.replaceChildren(h("p", { class: "error" }, explain(e))));
  loadGrowth();

  setTimeout(() => q.focus(), 0);
  return h(
    "div",
    {},
    h("h1", {}, "Knowledge"),
    search,
    results,
    h("div", { class: "split" }, h("section", {}, h("h2", {}, "Recent entries"), recent, growth), ingest),
  );
}

function jobView(j) {
  const link = (x) => h("a", { href: `#/entry/${encodeURIComponent(x)}` }, x);
  const rows = (j.outcomes || []).map((o) =>
    h(
      "li",
      {},
      `Candidate ${o.index + 1}: `,
      h("strong", {}, o.outcome),
      o.entry_id ? [" ", link(o.entry_id)] : "",
      o.into ? [" into ", link(o.into)] : "",
      o.supersedes && o.supersedes.length ? [", superseding ", o.supersedes.join(", ")] : "",
      o.reason ? ` — ${o.reason}` : "",
      o.detail ? ` (${o.detail})` : "",
    ),
  );
  return h(
    "div",
    {},
    h("p", {}, `Job ${j.id}: `, h("strong", { "data-job-status": j.status }, j.status), j.extractor ? ` · ${j.extractor === "rules" ? "read by the built-in rules (no model is set up)" : `read by ${j.extractor}`}` : "", j.error ? ` — ${j.error}` : ""),
    rows.length ? h("ul", {}, rows) : null,
  );
}

// An entry's fields as the page names them.
const ENTRY_FIELDS = [
  ["id", "Id"], ["type", "Type"], ["topic", "Topic"], ["position", "Position"], ["reasoning", "Reasoning"],
  ["reasoning_pattern", "Pattern of reasoning"], ["confidence", "Confidence"], ["stability", "Stability"],
  ["tier", "Tier"], ["tags", "Tags"], ["source_type", "Source"], ["source_channel", "Channel"],
  ["source_date", "Said on"], ["source_url", "Link"], ["corroboration_count", "Times corroborated"],
  ["last_corroborated_at", "Last corroborated"], ["superseded_by", "Replaced by"], ["created_at", "Recorded"],
  ["extractor", "Read by"],
];

async function entryView(id) {
  const root = h("article", {}, h("p", {}, h("a", { href: "#/knowledge" }, "← Knowledge")));
  let e;
  try {
    e = await api("GET", `/knowledge/entries/${encodeURIComponent(id)}`);
  } catch (err) {
    put(root, h("p", { class: "error" }, explain(err)));
    return root;
  }
  const link = (x) => h("a", { href: `#/entry/${encodeURIComponent(x)}` }, x);
  const value = (k) => {
    const v = e[k];
    if (v === null || v === undefined || v === "") return "—";
    if (k === "superseded_by") return link(v);
    return Array.isArray(v) ? v.join(", ") : String(v);
  };
  put(root, 
    h("h1", {}, `${e.id}: ${e.topic}`),
    h("p", {}, e.active ? h("span", { class: "badge revived" }, "active") : h("span", { class: "badge aging" }, "superseded")),
    h("dl", { class: "fields card" }, ENTRY_FIELDS.map(([k, label]) => [h("dt", {}, label), h("dd", {}, value(k))])),
    h("h2", {}, "History"),
    e.supersedes && e.supersedes.length
      ? h("p", {}, "Replaces ", e.supersedes.flatMap((x, i) => (i ? [", ", link(x)] : [link(x)])), ".")
      : h("p", { class: "muted" }, "It replaced no earlier entry."),
    e.superseded_by ? h("p", {}, "Replaced by ", link(e.superseded_by), "; it no longer appears in retrieval.") : null,
    h("p", {}, h("a", { href: `/knowledge/entries/${encodeURIComponent(e.id)}.md`, download: `${e.id}.md` }, "Download as markdown")),
  );
  return root;
}

// ------------------------------------------------------------ tasks

function tasksView() {
  const goal = h("input", { type: "text", name: "goal", required: true, maxlength: 2000 });
  const priority = h("input", { type: "number", name: "priority", min: 1, max: 10, value: 5 });
  const list = h("ol", { class: "log", "aria-label": "Tasks", "aria-live": "polite" });
  const load = async () => {
    try {
      const r = await api("GET", "/tasks?limit=100");
      list.replaceChildren(...(r.tasks.length ? r.tasks.map(taskItem) : [h("li", { class: "muted" }, "No tasks yet.")]));
    } catch (e) {
      list.replaceChildren(h("li", { class: "error" }, explain(e)));
    }
  };
  const taskItem = (t) => {
    const open = !["completed", "cancelled", "expired", "failed"].includes(t.status);
    const steps = t.plan?.steps || [];
    return h(
      "li",
      { class: "card" },
      h("strong", {}, t.goal),
      h("div", { class: "muted" }, `${t.status} · priority ${t.priority} · ${pct(t.coverage)} covered · ${!t.cycles ? "not worked on yet" : t.cycles === 1 ? "worked on once" : `worked on ${t.cycles} times`}`),
      h("progress", { max: 1, value: t.coverage || 0, "aria-label": `Coverage of ${t.goal}` }),
      steps.length
        ? h("ol", { class: "progress", "aria-label": "Plan" }, steps.map((s) => h("li", {}, `${s.description} — ${s.status}`)))
        : t.plan_note ? h("p", { class: "muted" }, t.plan_note) : null,
      t.plan_source ? h("div", { class: "muted" }, t.plan_source.startsWith("rules") ? "Planned by the built-in rules (no model is set up)" : `Planned by ${t.plan_source}`) : null,
      t.last_summary ? h("p", {}, t.last_summary) : null,
      open
        ? h("button", {
            type: "button",
            class: "danger",
            onclick: async () => {
              try {
                await api("DELETE", `/tasks/${encodeURIComponent(t.id)}`);
                say("Task cancelled.", true);
                load();
              } catch (e) {
                say(explain(e));
              }
            },
          }, "Cancel", h("span", { class: "visually-hidden" }, ` ${t.goal}`))
        : null,
    );
  };
  const form = h("form", { class: "card" }, h("div", { class: "row" }, field("New task", goal, "Mneme plans it and works on it in the background."), field("Priority (1 most urgent)", priority), h("button", { type: "submit" }, "Create")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      await api("POST", "/tasks", { goal: goal.value, priority: Number(priority.value) });
      goal.value = "";
      say("Task created.", true);
      load();
    } catch (e) {
      say(explain(e));
    }
  });
  load();
  return h("section", {}, h("h1", {}, "Tasks"), form, list);
}

// ------------------------------------------------------------ status

/** "3 minutes ago", "in 2 hours", from Unix ms. */
function ago(ms, now = Date.now()) {
  if (!ms) return "never";
  const s = Math.round((now - ms) / 1000);
  const abs = Math.abs(s);
  const [n, unit] = abs < 60 ? [abs, "second"] : abs < 3600 ? [Math.round(abs / 60), "minute"] : abs < 86400 ? [Math.round(abs / 3600), "hour"] : [Math.round(abs / 86400), "day"];
  const text = `${n} ${unit}${n === 1 ? "" : "s"}`;
  return s >= 0 ? `${text} ago` : `in ${text}`;
}

/** What each scheduled job does, in a user's words. */
const JOB_WHAT = {
  migrate: "Brings the database schema up to date",
  heartbeat: "Shows the scheduler is alive",
  reminders: "Sends reminders when they are due",
  knowledge: "Turns ingested transcripts into knowledge",
  consolidate: "Condenses conversations into memories",
  tasks: "Works on background tasks",
  tools: "Runs tool calls the chat handed off",
  drift: "Thinks between conversations",
  regulate: "Tunes the mode router once a day",
  reflect: "Reviews past routing decisions",
};

async function statusView() {
  const root = h("section", { "aria-labelledby": "status-title" }, h("h1", { id: "status-title" }, "Status"));
  let st;
  try {
    st = await api("GET", "/status");
  } catch (e) {
    put(root, h("p", { class: "error" }, explain(e)));
    return root;
  }
  const good = (ok, text) => h("span", { class: `state ${ok === true ? "ok" : ok === false ? "bad" : "unknown"}` }, text);
  const m = st.model;
  const modelState = !m.configured
    ? good(false, "Not connected")
    : m.reachable === true ? (m.primary ? good(true, "Connected") : good(false, "No model to use")) : m.reachable === false ? good(false, "Not answering") : good(null, "Served by the platform");
  const modelCard = h("section", { class: "card", "aria-labelledby": "st-model" },
    h("h2", { id: "st-model" }, "Language model ", modelState),
    m.configured
      ? h("dl", { class: "fields" },
          h("dt", {}, "Model"), h("dd", {}, m.primary ? m.primary + (m.light && m.light !== m.primary ? ` (quick answers: ${m.light})` : "") : m.error?.message || "–"),
          h("dt", {}, "Endpoint"), h("dd", {}, m.backend === "spin" ? "the platform's own models" : m.endpoint || "–"),
          h("dt", {}, "Checked"), h("dd", {}, m.reachable ? `answered in ${m.probe_ms} ms` : m.error ? m.error.message : "–"),
          h("dt", {}, "Last reply by the model"), h("dd", {}, ago(m.last_reply_ms)))
      : h("div", {},
          h("p", {}, "Without a model Mneme answers by rules: it remembers what you tell it, sets reminders, keeps lists, finds what you gave it and runs recommendations and background tasks, but it cannot answer general questions."),
          h("p", {}, "To run a small model on this computer's processor, restart Mneme with one flag; it downloads the model once (about 1.1 GB) and starts it with the app:"),
          h("pre", {}, "./scripts/up.sh --local-model"),
          h("p", {}, "Or set ", h("code", {}, "llm_url"), " to an OpenAI-compatible endpoint (for Ollama, ", h("code", {}, "http://127.0.0.1:11434/v1"), ") and restart Mneme; it uses the first model the endpoint lists, or the one ", h("code", {}, "llm_model"), " names. For example:"),
          h("pre", {}, "SPIN_VARIABLE_LLM_URL=http://127.0.0.1:11434/v1 ./scripts/up.sh"),
          m.error && m.backend === "spin" ? h("p", { class: "error" }, m.error.message) : null));
  const e = st.embeddings;
  const embedCard = h("section", { class: "card", "aria-labelledby": "st-embed" },
    h("h2", { id: "st-embed" }, "Search model ", e.loaded ? good(true, "Loaded") : good(false, "Not loaded")),
    e.loaded
      ? h("p", {}, `${e.model}, ${e.dimension} dimensions; a short text took ${num(e.took_ms, 1)} ms.`)
      : h("p", { class: "error" }, `${e.model} did not answer: ${e.error?.message || "unknown error"}. Search falls back to words only; run ./scripts/up.sh to install the model.`));
  const store = st.storage;
  const name = { sqlite: "SQLite file", postgres: "PostgreSQL", "key-value": "key-value file", redis: "Redis" };
  const storeCard = h("section", { class: "card", "aria-labelledby": "st-store" },
    h("h2", { id: "st-store" }, "Storage ", good(store.sql.ok && store.kv.ok, store.sql.ok && store.kv.ok ? "Answering" : "Not answering")),
    h("dl", { class: "fields" },
      h("dt", {}, "Memory"), h("dd", {}, `${name[store.sql.kind] || store.sql.kind}${store.sql.ok ? "" : ` (${store.sql.failure})`}`),
      h("dt", {}, "Cache"), h("dd", {}, `${name[store.kv.kind] || store.kv.kind}${store.kv.ok ? "" : ` (${store.kv.failure})`}`),
      h("dt", {}, "Schema"), h("dd", {}, st.schema.pending ? `version ${st.schema.version} of ${st.schema.latest}: an update is waiting` : `version ${st.schema.version}, up to date`),
      h("dt", {}, "Mneme"), h("dd", {}, `version ${st.version}`)));
  const now = st.checked_ms || Date.now();
  const jobs = st.jobs || [];
  const jobsCard = h("section", { class: "card", "aria-labelledby": "st-jobs" },
    h("h2", { id: "st-jobs" }, "Scheduled jobs"),
    st.jobs === null
      ? h("p", { class: "error" }, `The job history could not be read: ${st.storage.error?.message || "the store did not answer"}.`)
      : jobs.every((j) => !j.last_run_ms)
        ? h("p", { class: "error" }, "No scheduled job has run yet. mneme up runs them; under plain spin up, start mneme cron beside it.")
        : null,
    h("div", { class: "scroll" }, h("table", {},
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Job"), h("th", { scope: "col" }, "Last run"), h("th", { scope: "col" }, "Outcome"))),
      h("tbody", {}, jobs.map((j) => h("tr", { "data-job": j.job },
        h("td", {}, h("strong", {}, j.job), h("div", { class: "muted" }, JOB_WHAT[j.job] || "")),
        h("td", {}, ago(j.last_run_ms, now)),
        h("td", {}, j.last_run_ms ? good(j.ok, j.ok ? "OK" : "Failed") : good(null, "Not run"), j.ok === false ? h("div", { class: "muted" }, j.outcome, j.last_ok_ms ? ` · last success ${ago(j.last_ok_ms, now)}` : "") : null)))))));
  const q = st.queues;
  const queueCard = h("section", { class: "card", "aria-labelledby": "st-queues" },
    h("h2", { id: "st-queues" }, "Waiting work"),
    h("dl", { class: "fields" },
      h("dt", {}, "Transcripts to ingest"), h("dd", { "data-queue": "ingest" }, String(q.ingest ?? "–")),
      h("dt", {}, "Conversations to condense"), h("dd", { "data-queue": "consolidation" }, String(q.consolidation ?? "–")),
      h("dt", {}, "Tool calls"), h("dd", { "data-queue": "tools" }, String(q.tools ?? "–"))));
  put(root, h("p", { class: "muted" }, `Checked ${new Date(now).toLocaleTimeString()}. `, h("button", { type: "button", class: "link", onclick: () => render() }, "Check again")),
    modelCard, embedCard, storeCard, jobsCard, queueCard);
  return root;
}

// ------------------------------------------------------------ routing

const VIEWS = {
  chat: chatView,
  inbox: inboxView,
  rec: recView,
  knowledge: knowledgeView,
  entry: entryView,
  tasks: tasksView,
  status: statusView,
};
const NAV_OF = { rec: "inbox", entry: "knowledge" };

async function render() {
  const [, name = "chat", arg] = location.hash.match(/^#\/([a-z]+)(?:\/(.+))?$/) || [];
  if (!session || name === "signin") {
    if (session && name === "signin") {
      location.hash = "#/chat";
      return;
    }
    nav.hidden = true;
    main.replaceChildren(signInView());
    document.title = "Sign in · Mneme";
    return;
  }
  nav.hidden = false;
  const view = VIEWS[name] || chatView;
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.view === (NAV_OF[name] || name)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  main.setAttribute("aria-busy", "true");
  const token = (render.token = (render.token || 0) + 1);
  let decoded = arg;
  try {
    decoded = arg && decodeURIComponent(arg);
  } catch {
    // A malformed hash: show the view with the raw argument.
  }
  const node = await view(decoded);
  if (token !== render.token) return; // a later navigation won
  const hadFocus = main.contains(document.activeElement);
  main.replaceChildren(node);
  main.removeAttribute("aria-busy");
  // Keep keyboard users in the content when a view is redrawn.
  if (hadFocus || document.activeElement === document.body) {
    if (!main.contains(document.activeElement)) main.focus({ preventScroll: true });
  }
  document.title = `${(NAV_OF[name] || name).replace(/^./, (c) => c.toUpperCase())} · Mneme`;
}

document.getElementById("signout").addEventListener("click", async () => {
  try {
    await api("DELETE", "/session");
  } finally {
    signedOut();
  }
});
window.addEventListener("hashchange", () => {
  // Only `#/view` hashes are routes; the skip link's `#main` is not.
  if (!location.hash.startsWith("#/")) return;
  toast.textContent = "";
  render();
});
document.querySelector(".skip").addEventListener("click", (ev) => {
  ev.preventDefault();
  main.focus();
});

(async () => {
  try {
    if (await checkSession()) startEvents();
    render();
  } catch (e) {
    main.replaceChildren(h("p", { class: "error", role: "alert" }, explain(e), " ", h("button", { type: "button", class: "link", onclick: () => location.reload() }, "Try again")));
  }
})();
