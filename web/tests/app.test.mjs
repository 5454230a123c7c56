// The web app in Debian's Chromium, driven by playwright-core, against an
// app the runner started (tests/tests/web.rs starts it with a scripted
// model and seeded signals, then runs this file). Every step asserts what
// the principal would see. Screenshots go to $MNEME_SCREENSHOTS.
//
// Environment: MNEME_URL, MNEME_API_KEY, MNEME_CRON_TOKEN,
// MNEME_SCREENSHOTS (a directory), CHROMIUM (default /usr/bin/chromium).

import assert from "node:assert/strict";
import { WAIT, assertLabelled, need, run, shooter, step } from "./lib.mjs";

const URL_ = need("MNEME_URL");
const KEY = need("MNEME_API_KEY");
const CRON = need("MNEME_CRON_TOKEN");
const shot = shooter(need("MNEME_SCREENSHOTS"));

/** The cron's tick of `job`, at `atMs` on the test clock. */
async function tick(job, atMs) {
  const r = await fetch(`${URL_}/tick/${job}`, {
    method: "POST",
    headers: { authorization: `Bearer ${CRON}`, "x-mneme-clock": String(atMs) },
  });
  assert.equal(r.status, 200, await r.text());
}

await run(shot, async (page, context) => {
  const consoleErrors = [];
  page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  const urls = [];
  const replays = [];
  page.on("request", async (r) => {
    urls.push(r.url());
    const url = new URL(r.url());
    // allHeaders() includes what the network stack adds, Last-Event-ID among them.
    const last = (await r.allHeaders().catch(() => ({})))["last-event-id"] || url.searchParams.get("after");
    if (url.pathname === "/events" && last) replays.push(Number(last));
  });

  step("the sign-in screen refuses a wrong key, then signs in by keyboard alone");
  await page.goto(URL_ + "/");
  await page.getByRole("heading", { name: "Sign in to Mneme" }).waitFor(WAIT);
  await assertLabelled(page, "sign-in");
  await shot(page, "sign-in");
  await page.getByLabel("API key").fill("not-the-key");
  await page.keyboard.press("Enter");
  await page.getByText("That API key is not valid.").waitFor(WAIT);
  await page.getByLabel("API key").fill(KEY);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Chat", exact: true }).waitFor(WAIT);
  assert.equal(await page.evaluate(() => document.cookie.includes("mneme_session")), false, "the session cookie is HttpOnly");
  assert.ok(!urls.some((u) => u.includes(KEY)), "the key never lands in a URL");
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "mneme_session");
  assert.ok(session && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
  assert.ok(!session.value.includes(KEY), "the cookie does not carry the key");

  step("a message streams its answer token by token, with mode, confidence and the ACT loop's steps");
  await page.locator("#events-state", { hasText: "Live" }).waitFor(WAIT);
  await assertLabelled(page, "chat");
  // Record every text the reply shows while it streams.
  await page.evaluate(() => {
    window.__seen = [];
    new MutationObserver(() => {
      const t = document.querySelector(".msg.them:last-of-type .text")?.textContent;
      if (t && window.__seen[window.__seen.length - 1] !== t) window.__seen.push(t);
    }).observe(document.querySelector(".log"), { subtree: true, childList: true, characterData: true });
  });
  await page.getByLabel("Message").fill("remind me to stretch in 1 minute");
  await page.keyboard.press("Enter");
  const reply = page.locator(".msg.them").last();
  await reply.locator(".meta", { hasText: "confidence" }).waitFor(WAIT);
  await reply.locator(".meta", { hasText: /· \d+\.\d s$/ }).waitFor(WAIT);
  const seen = await page.evaluate(() => window.__seen);
  const final = await reply.locator(".text").textContent();
  assert.match(final, /set that reminder/);
  assert.ok(seen.filter((t) => t.length < final.length).length >= 3, `partial texts before the whole: ${JSON.stringify(seen)}`);
  assert.match(await reply.locator(".meta").textContent(), /^(answered|asked to clarify|acted|acknowledged|let it pass|cancelled) · confidence \d{1,3}%/);
  assert.match(await reply.locator(".progress").textContent(), /^Step 1: [a-z ,]*reminders/);
  assert.match(await reply.locator(".progress li").first().getAttribute("data-actions"), /\bschedule\b/);

  step("a proactive event arrives live");
  await tick("reminders", Date.now() + 3_600_000);
  await page.locator("#events li[data-type=reminder]", { hasText: "stretch" }).waitFor(WAIT);
  await shot(page, "chat");

  step("a dropped connection reconnects and replays what was missed");
  await context.setOffline(true);
  await page.locator("#events-state", { hasText: "Reconnecting" }).waitFor(WAIT);
  const body = JSON.stringify({ text: "remind me to drink water in 1 minute" });
  const r = await fetch(`${URL_}/chat`, { method: "POST", headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" }, body });
  assert.equal(r.status, 200);
  await r.text();
  await tick("reminders", Date.now() + 7_200_000);
  await context.setOffline(false);
  await page.locator("#events li[data-type=reminder]", { hasText: "drink water" }).waitFor({ timeout: 60_000 });
  assert.equal(await page.locator("#events li[data-type=reminder]", { hasText: "stretch" }).count(), 1, "no event twice");
  assert.ok(replays.length > 0 && replays.every((id) => id > 0), `reconnects resume after the last event: ${JSON.stringify(replays)}`);

  step("a tool's reply that takes longer than the chat waits fills in from /events");
  await page.getByLabel("Message").fill("When is the next train to Leeds?");
  await page.keyboard.press("Enter");
  const waiting = page.locator(".msg.them").last();
  await waiting.locator(".meta", { hasText: "The tools are still working" }).waitFor(WAIT);
  assert.ok(await waiting.getAttribute("data-request-id"), "the reply waits under its request id");
  const held = await waiting.elementHandle();
  await page.waitForFunction((el) => el.dataset.mode === "RESPOND", held, { timeout: 60_000 });
  assert.match(await held.evaluate((el) => el.querySelector(".text").textContent), /Tea keeps best/);
  assert.match(await held.evaluate((el) => el.querySelector(".meta").textContent), /^answered · confidence \d{1,3}%/);
  await page.locator("#events li[data-type=tool_result]").first().waitFor(WAIT);

  step("the inbox runs a door, shows the step trace, and a rec is snoozed then acted on");
  await page.getByRole("link", { name: "Inbox" }).click();
  await page.getByRole("heading", { name: "Recommendations", exact: true }).waitFor(WAIT);
  const fitness = page.locator(".door", { has: page.getByRole("heading", { name: /Fitness/ }) });
  assert.equal(await fitness.locator("[data-rec-count]").textContent(), "0 recommendations");
  // The door's drift over 28 days, read as each day stood, with the fire threshold.
  const drift = fitness.locator("figure.chart-box", { hasText: "Drift, last 28 days" });
  await drift.waitFor(WAIT);
  assert.equal(await drift.locator("line.threshold").getAttribute("data-threshold"), "0.5");
  assert.match(await drift.locator("path[data-series=drift]").getAttribute("d"), /^M[\d.]+,[\d.]+(L[\d.]+,[\d.]+){27}$/);
  const signalsChart = fitness.locator("figure.chart-box", { hasText: "Its signals" });
  assert.match(await signalsChart.locator("ul.legend").textContent(), /session pace/);
  assert.match(await signalsChart.locator("svg.chart").getAttribute("aria-label"), /session pace \d\.\d\d/);
  await page.getByRole("button", { name: "Run fitness" }).click();
  await page.getByText("New recommendation:").waitFor(WAIT);
  // A toast only tells: a click on what it covers reaches that (CI once lost a click to one).
  const covered = await page.evaluate(() => {
    const t = document.getElementById("toast").getBoundingClientRect();
    const hit = document.elementFromPoint(t.x + t.width / 2, t.y + t.height / 2);
    return hit && hit.id !== "toast" && !hit.closest("#toast");
  });
  assert.equal(covered, true, "the toast must not take clicks meant for what lies under it");
  // The door redraws itself under the run: no refresh, no stale "Nothing here yet.".
  const recLink = fitness.locator(".recs a").first();
  await recLink.waitFor(WAIT);
  assert.equal(await fitness.locator("[data-rec-count]").textContent(), "1 recommendation");
  assert.equal(await fitness.getByText("Nothing here yet.").count(), 0);
  await shot(page, "inbox-run");
  await page.locator("summary", { hasText: "Steps of the run" }).click();
  const trace = page.getByRole("table");
  await trace.waitFor(WAIT);
  const steps = await trace.locator("tbody tr td:first-child").allTextContents();
  assert.deepEqual(steps.map((s) => s.split(" ")[0]), ["0.5", "0.7", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"]);
  await recLink.click();
  await page.locator("section.counter").waitFor(WAIT);
  assert.match(await page.locator("section.counter").textContent(), /Reject if/);
  const driving = page.locator("figure.chart-box", { hasText: "Driving signal:" });
  await driving.waitFor(WAIT);
  assert.equal(await driving.locator("line.threshold").count(), 1);
  assert.equal(await driving.locator("path").first().getAttribute("d") !== "", true);
  await assertLabelled(page, "rec");
  await page.getByLabel("Snooze for").selectOption("3");
  await page.getByRole("button", { name: "Snooze" }).click();
  await page.locator(".badge.status", { hasText: "snoozed" }).waitFor(WAIT);
  await page.locator("figure.chart-box", { hasText: "Driving signal:" }).waitFor(WAIT);
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, "rec");
  // Back in the inbox, the rec reads as snoozed without a reload.
  const recUrl = page.url();
  await page.getByRole("link", { name: "← Inbox" }).click();
  const inboxRec = page.locator(".door .recs li").first();
  await inboxRec.locator(".badge.status", { hasText: "snoozed" }).waitFor(WAIT);
  await inboxRec.getByRole("link").click();
  await page.waitForURL(recUrl);
  await page.getByLabel("Fit (1–5)").selectOption("4");
  await page.getByRole("button", { name: "Acted" }).click();
  await page.getByText("it cannot change any more").waitFor(WAIT);
  await page.getByRole("link", { name: "← Inbox" }).click();
  await page.locator(".door .recs li").first().locator(".badge.status", { hasText: "acted" }).waitFor(WAIT);
  assert.equal(await fitness.locator("[data-rec-count]").textContent(), "1 recommendation, none open");
  await page.goBack();
  await page.getByText("it cannot change any more").waitFor(WAIT);
  const rec = await page.evaluate(async () => {
    const id = decodeURIComponent(location.hash.split("/")[2]);
    return (await fetch(`/v1/rx/recs/${id}`)).json();
  });
  assert.equal(rec.status, "acted");
  assert.equal(rec.subjective_fit_1_5, 4);
  assert.equal(rec.snooze_count, 1);

  step("a transcript ingested from the page becomes an entry that search finds, with both scores");
  await page.getByRole("link", { name: "Knowledge" }).click();
  await page.getByRole("heading", { name: "Knowledge", exact: true }).waitFor(WAIT);
  await assertLabelled(page, "knowledge");
  await page.getByLabel("Transcript").fill("We decided to keep the ledger in Postgres because it gives us transactions.");
  await page.getByLabel("Source", { exact: true }).selectOption("meeting");
  assert.equal(await page.getByLabel("Ingest token").count(), 0, "the signed-in principal ingests with their session");
  await page.getByRole("button", { name: "Ingest" }).click();
  await page.locator("[data-job-status=done]").waitFor({ timeout: 60_000 });
  const jobLine = await page.locator("p", { has: page.locator("[data-job-status=done]") }).textContent();
  assert.match(jobLine, / · read by \S/, "the job says what read the transcript");
  assert.doesNotMatch(jobLine, /extractor/);
  assert.match(await page.locator(".card", { hasText: "Ingest a transcript" }).textContent(), /kept KE-\d{4}/);
  // The chart of entries per type redraws with the new entry.
  const growth = page.locator("figure.chart-box", { hasText: "Entries by type" });
  await growth.waitFor(WAIT);
  assert.match(await growth.locator("svg.chart").getAttribute("aria-label"), /1 decision/);
  assert.match(await growth.locator("path[data-series=decision]").getAttribute("d"), /^M[\d.]+,[\d.]+(L[\d.]+,[\d.]+)+$/);
  assert.match(await growth.locator("ul.legend").textContent(), /decision \(1\)/);
  await page.getByLabel("Search your judgement").fill("where does the ledger live");
  await page.getByRole("button", { name: "Search" }).click();
  const hit = page.locator("[aria-label='Search results'] li").first();
  await hit.getByText("Ledger storage").waitFor(WAIT);
  assert.match(await hit.textContent(), /decision · \w+ confidence · \d{1,3}% match/);
  assert.match(await hit.locator(".score").getAttribute("title"), /^relevance 0\.\d{3}, ranked by 0\.\d{3} \(/);
  await shot(page, "knowledge");
  await hit.getByRole("link").click();
  await page.getByText("Times corroborated").waitFor(WAIT);
  assert.match(await page.locator("dl.fields").textContent(), /Reasoningit gives us transactions/);
  for (const name of await page.locator("dl.fields dt").allTextContents()) assert.doesNotMatch(name, /_/, "field names in words, not keys");
  await shot(page, "entry");

  step("a task is created with its plan, then cancelled");
  await page.getByRole("link", { name: "Tasks" }).click();
  await page.getByRole("heading", { name: "Tasks", exact: true }).waitFor(WAIT);
  await assertLabelled(page, "tasks");
  await page.getByLabel("New task").fill("Compare three standing desks for the home office");
  await page.getByRole("button", { name: "Create" }).click();
  const task = page.locator("li.card", { hasText: "Compare three standing desks" });
  await task.getByRole("list", { name: "Plan" }).waitFor(WAIT);
  assert.match(await task.textContent(), /accepted · priority 5 · 0% covered · not worked on yet/);
  await shot(page, "tasks");
  await task.getByRole("button", { name: /Cancel/ }).click();
  await page.locator("li.card", { hasText: "cancelled" }).waitFor(WAIT);

  step("the status screen says what is connected, loaded and running");
  await page.getByRole("link", { name: "Status" }).click();
  await page.getByRole("heading", { name: "Status", exact: true }).waitFor(WAIT);
  assert.match(await page.getByRole("heading", { name: /Language model/ }).textContent(), /Connected/);
  assert.match(await page.getByRole("heading", { name: /Search model/ }).textContent(), /Loaded/);
  assert.match(await page.locator("section.card", { has: page.getByRole("heading", { name: /Search model/ }) }).textContent(), /all-minilm-l6-v2, 384 dimensions/);
  assert.match(await page.getByRole("heading", { name: /Storage/ }).textContent(), /Answering/);
  assert.match(await page.locator("tr[data-job=reminders]").textContent(), /ago.*OK/);
  assert.match(await page.locator("[data-queue=ingest]").textContent(), /^\d+$/);
  assert.equal(await page.getByText("No language model is connected yet.").count(), 0);
  await shot(page, "status");

  step("on a phone-width screen nothing scrolls sideways");
  await page.setViewportSize({ width: 390, height: 844 });
  for (const view of ["chat", "inbox", "knowledge", "tasks", "status"]) {
    await page.getByRole("link", { name: view[0].toUpperCase() + view.slice(1) }).click();
    await page.waitForFunction(() => !document.querySelector("main[aria-busy]"));
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `${view} is ${width}px wide on a 390px screen`);
  }
  await page.getByRole("link", { name: "Chat" }).click();
  await page.locator(".msg.them").first().waitFor(WAIT);
  await shot(page, "chat-phone");

  step("signing out ends the session");
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in to Mneme" }).waitFor(WAIT);
  assert.equal(await page.evaluate(async () => (await fetch("/session")).status), 401);
  // Expected: the wrong key's 401, the final /session 401, and the offline step's failed loads.
  const expected = /status of 401|net::ERR_INTERNET_DISCONNECTED|EventSource's response has a MIME type/;
  assert.deepEqual(consoleErrors.filter((e) => !expected.test(e)), [], "no script errors");
});
