// A new user's first sign-in with no model connected, in Debian's
// Chromium (tests/tests/web.rs starts the app without a model, then runs
// this file): the chat shows a short setup note that leads to Status,
// a general question gets the honest no-model reply, and the Status screen
// says what to set. Screenshots go to $MNEME_SCREENSHOTS.
//
// Environment: MNEME_URL, MNEME_API_KEY, MNEME_SCREENSHOTS, CHROMIUM.

import assert from "node:assert/strict";
import { WAIT, assertLabelled, need, run, shooter, step } from "./lib.mjs";

const URL_ = need("MNEME_URL");
const KEY = need("MNEME_API_KEY");
const shot = shooter(need("MNEME_SCREENSHOTS"));

await run(shot, async (page) => {
  const consoleErrors = [];
  page.on("pageerror", (e) => consoleErrors.push(String(e)));

  step("the first sign-in without a model shows a short setup note");
  await page.goto(URL_ + "/");
  await page.getByLabel("API key").fill(KEY);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Chat", exact: true }).waitFor(WAIT);
  const note = page.getByRole("complementary", { name: "Setting up" });
  await note.waitFor(WAIT);
  assert.match(await note.textContent(), /No language model is connected yet\./);
  assert.match(await note.textContent(), /remembers what you tell it, sets reminders/);
  await assertLabelled(page, "chat");

  step("a clear question gets the honest no-model reply, not a question back");
  await page.getByLabel("Message").fill("What is the capital of Portugal?");
  await page.keyboard.press("Enter");
  const reply = page.locator(".msg.them").last();
  await reply.locator(".meta", { hasText: /· \d+\.\d s$/ }).waitFor(WAIT);
  const text = await reply.locator(".text").textContent();
  assert.match(text, /^\[rule-based reply: no model is configured\] I need a language model to answer that/);
  assert.match(text, /set llm_url/);
  assert.doesNotMatch(text, /llm_model|Could you say more/);
  assert.match(await reply.locator(".meta").textContent(), /^answered · confidence \d{1,3}%/);
  await shot(page, "first-sign-in");

  step("the note leads to Status, which says what is missing and what to set");
  await note.getByRole("link", { name: "see Status" }).click();
  await page.getByRole("heading", { name: "Status", exact: true }).waitFor(WAIT);
  const model = page.locator("section.card", { has: page.getByRole("heading", { name: /^Language model/ }) });
  assert.equal(await model.locator(".state.bad").textContent(), "Not connected");
  assert.match(await model.textContent(), /restart Mneme with one flag/);
  assert.equal(await model.locator("pre").first().textContent(), "./scripts/up.sh --local-model");
  assert.match(await model.textContent(), /Or set llm_url to an OpenAI-compatible endpoint/);
  assert.match(await model.locator("pre").nth(1).textContent(), /^SPIN_VARIABLE_LLM_URL=http:\/\/127\.0\.0\.1:11434\/v1 \.\/scripts\/up\.sh$/);
  const search = page.locator("section.card", { has: page.getByRole("heading", { name: /^Search model/ }) });
  assert.equal(await search.locator(".state.ok").textContent(), "Loaded");
  assert.match(await search.textContent(), /all-minilm-l6-v2, 384 dimensions/);
  await shot(page, "status-no-model");

  step("dismissed, the note stays away after a reload");
  await page.getByRole("link", { name: "Chat" }).click();
  await note.getByRole("button", { name: "Dismiss" }).click();
  assert.equal(await note.count(), 0);
  const asked = [];
  page.on("request", (r) => asked.push(new URL(r.url()).pathname));
  await page.reload();
  await page.getByRole("heading", { name: "Chat", exact: true }).waitFor(WAIT);
  await page.locator("#events-state", { hasText: "Live" }).waitFor(WAIT);
  // The chat view asks /health for the note only while it is not dismissed.
  assert.ok(asked.includes("/events") && !asked.includes("/health"), JSON.stringify(asked));
  assert.equal(await page.getByRole("complementary", { name: "Setting up" }).count(), 0, "dismissed for good");
  assert.deepEqual(consoleErrors, [], "no script errors");
  step("the first hour is done");
});
