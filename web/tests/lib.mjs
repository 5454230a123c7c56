// What the browser tests share: their environment, a labelled-controls
// check, window-sized screenshots and Debian's Chromium.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

export const need = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`set ${name}`);
  return v;
};

export const step = (what) => console.log(`- ${what}`);
export const WAIT = { timeout: 30_000 };

/** Every form control on the page has a label (for, wrapping or aria). */
export async function assertLabelled(page, screen) {
  const unlabelled = await page.$$eval("input:not([type=hidden]), select, textarea", (els) =>
    els.filter((e) => !e.labels?.length && !e.getAttribute("aria-label") && !e.getAttribute("aria-labelledby")).map((e) => e.outerHTML),
  );
  assert.deepEqual(unlabelled, [], `${screen}: controls without a label`);
}

/** A screenshot taker into `dir`: what the principal sees in their window
 * (1280×860); a full-page capture would draw the sticky header across the
 * middle of a long page. */
export function shooter(dir) {
  mkdirSync(dir, { recursive: true });
  return (page, name) => page.screenshot({ path: join(dir, `${name}.png`) });
}

/** Debian's Chromium, headless, with nothing of its own on the network. */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/** Runs `body(page, context)` in a fresh window; on failure prints what the
 * page showed, saves `failure.png` and exits 1. */
export async function run(shot, body) {
  const browser = await launch();
  let page;
  let failed = false;
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    page = await context.newPage();
    await body(page, context);
  } catch (e) {
    failed = true;
    console.error(e);
    if (page) {
      console.error("--- the page showed:\n" + (await page.locator("body").innerText().catch(() => "(nothing)")));
      await shot(page, "failure").catch(() => {});
    }
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
}
