// Browser timings of the web app for docs/BENCHMARKS.md, in Debian's
// Chromium through playwright-core. `tests/src/bin/bench-web.rs` starts the
// app and runs this file; it prints one JSON line per run.
//
// Each run opens a fresh browser context (an empty cache, no cookie) and
// measures, on the page's own clock (performance.now() from navigation
// start):
// - first_paint: the first contentful paint of `/`;
// then, on the test's clock:
// - sign_in_screen: from the navigation to the sign-in heading (the page
//   first asks GET /session whether a cookie is already signed in);
// - signed_in_chat: from pressing Enter on the key to the chat heading;
// - first_reply: from sending "thanks!" to the end of its /chat stream
//   (the social exit: no model call);
// - warm_reload: a reload of the signed-in app until the chat heading is
//   back (every asset revalidated by ETag, answered 304).
//
// Environment: MNEME_URL, MNEME_API_KEY, RUNS (default 20), CHROMIUM.

import { chromium } from "playwright-core";

const URL_ = process.env.MNEME_URL;
const KEY = process.env.MNEME_API_KEY;
if (!URL_ || !KEY) throw new Error("set MNEME_URL and MNEME_API_KEY");
const RUNS = Number(process.env.RUNS || 20);
const WAIT = { timeout: 30_000 };

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  for (let i = 0; i < RUNS; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    let t = performance.now();
    await page.goto(URL_ + "/");
    await page.getByRole("heading", { name: "Sign in to Mneme" }).waitFor(WAIT);
    const signInScreen = performance.now() - t;
    const firstPaint = await page.evaluate(() => performance.getEntriesByName("first-contentful-paint")[0]?.startTime ?? null);
    await page.getByLabel("API key").fill(KEY);
    t = performance.now();
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Chat", exact: true }).waitFor(WAIT);
    const signedIn = performance.now() - t;
    await page.getByLabel("Message").fill("thanks!");
    const chat = page.waitForResponse((r) => new URL(r.url()).pathname === "/chat", WAIT);
    t = performance.now();
    await page.keyboard.press("Enter");
    // The stream has ended (its `done` event read) when the body is in.
    await (await chat).finished();
    const reply = performance.now() - t;
    t = performance.now();
    await page.reload();
    await page.getByRole("heading", { name: "Chat", exact: true }).waitFor(WAIT);
    const reload = performance.now() - t;
    console.log(
      JSON.stringify({
        run: i,
        first_paint: firstPaint,
        sign_in_screen: signInScreen,
        signed_in_chat: signedIn,
        first_reply: reply,
        warm_reload: reload,
      }),
    );
    await context.close();
  }
} finally {
  await browser.close();
}
