// A small markdown renderer for the artifacts and entries Mneme writes:
// YAML frontmatter, headings, paragraphs, lists, fenced code, emphasis,
// inline code and links. It builds DOM nodes and never parses HTML, so
// nothing in a document can run as script.

/** Splits `---\n…\n---\n` frontmatter from the body. */
export function splitFrontmatter(text) {
  const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(text);
  return m ? { front: m[1], body: text.slice(m[0].length) } : { front: "", body: text };
}

/** Top-level `key: value` pairs of simple YAML (nested lines stay with their key). */
export function frontmatterPairs(front) {
  const pairs = [];
  for (const line of front.split(/\r?\n/)) {
    const m = /^([A-Za-z_][\w-]*):\s?(.*)$/.exec(line);
    if (m) pairs.push([m[1], m[2]]);
    else if (pairs.length && line.trim()) pairs[pairs.length - 1][1] += "\n" + line;
  }
  return pairs;
}

/** Whether a link may be followed: http(s) anywhere, or a path on this origin. */
function safeUrl(url) {
  if (url.startsWith("//")) return false;
  if (/^(\/|#|\.\.?\/)/.test(url)) return true;
  try {
    return ["http:", "https:"].includes(new URL(url).protocol);
  } catch {
    return false;
  }
}

/** Inline markdown into `parent`: `code`, **strong**, *em*, [text](url). */
function inline(parent, text) {
  const re = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*|(?<![\w])_[^_\s][^_]*_(?![\w]))|(\[[^\]]+\]\([^)\s]+\))/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    const t = m[0];
    let node;
    if (m[1]) {
      node = document.createElement("code");
      node.textContent = t.slice(1, -1);
    } else if (m[2]) {
      node = document.createElement("strong");
      inline(node, t.slice(2, -2));
    } else if (m[3]) {
      node = document.createElement("em");
      inline(node, t.slice(1, -1));
    } else {
      const [, label, url] = /^\[([^\]]+)\]\(([^)\s]+)\)$/.exec(t);
      if (safeUrl(url)) {
        node = document.createElement("a");
        node.href = url;
        if (/^https?:/i.test(url)) node.rel = "noopener noreferrer";
        node.textContent = label;
      } else {
        node = document.createTextNode(label);
      }
    }
    parent.append(node);
    last = m.index + t.length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

/** A pipe table: a header row, a `|---|` rule, then body rows. */
function table(rows) {
  const cells = (row) => row.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  const hasRule = rows.length > 1 && /^[\s|:-]+$/.test(rows[1]);
  const wrap = document.createElement("div");
  wrap.className = "scroll";
  const t = document.createElement("table");
  wrap.append(t);
  const row = (parent, values, tag) => {
    const tr = document.createElement("tr");
    for (const v of values) {
      const c = document.createElement(tag);
      if (tag === "th") c.scope = "col";
      inline(c, v);
      tr.append(c);
    }
    parent.append(tr);
  };
  if (hasRule) row(t.createTHead(), cells(rows[0]), "th");
  const body = t.createTBody();
  for (const r of rows.slice(hasRule ? 2 : 0)) row(body, cells(r), "td");
  return wrap;
}

/** Renders a markdown body (no frontmatter) into a fragment. */
export function renderMarkdown(body) {
  const frag = document.createDocumentFragment();
  const lines = body.split(/\r?\n/);
  let para = [];
  let list = null;
  const flush = () => {
    if (para.length) {
      const p = document.createElement("p");
      inline(p, para.join(" "));
      frag.append(p);
      para = [];
    }
  };
  const endList = () => {
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (/^```/.test(line)) {
      flush();
      endList();
      const code = [];
      for (i++; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
      const pre = document.createElement("pre");
      const c = document.createElement("code");
      c.textContent = code.join("\n");
      pre.append(c);
      frag.append(pre);
      continue;
    }
    if (/^\s*\|/.test(line)) {
      flush();
      endList();
      const rows = [];
      for (; i < lines.length && /^\s*\|/.test(lines[i]); i++) rows.push(lines[i]);
      i--;
      frag.append(table(rows));
      continue;
    }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) {
      flush();
      endList();
      // Documents start at h2 inside the page, whose own title is the h1.
      const el = document.createElement("h" + Math.min(6, h[1].length + 1));
      inline(el, h[2]);
      frag.append(el);
      continue;
    }
    const li = /^\s*(?:([-*+])|(\d+)[.)])\s+(.*)$/.exec(line);
    if (li) {
      flush();
      const tag = li[1] ? "ul" : "ol";
      if (!list || list.tagName.toLowerCase() !== tag) {
        list = document.createElement(tag);
        frag.append(list);
      }
      const item = document.createElement("li");
      inline(item, li[3]);
      list.append(item);
      continue;
    }
    if (!line.trim()) {
      flush();
      endList();
      continue;
    }
    if (list && /^\s+\S/.test(line)) {
      list.lastChild.append(" ");
      inline(list.lastChild, line.trim());
      continue;
    }
    endList();
    para.push(line.trim());
  }
  flush();
  return frag;
}
