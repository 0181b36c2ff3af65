import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/**
 * Debian's system chromium driven by playwright-core: nothing is downloaded at run time. Each
 * browser gets a fresh profile folder, removed when it closes.
 */
export const CHROMIUM = '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Where every console test leaves its screenshot (git-ignored; README "Operator console"). */
export const SCREENSHOTS = fileURLToPath(new URL('../../../.screenshots/console/', import.meta.url));

export interface Browser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

/** `enforceCsp`: the page's own policy applies (axe-core cannot be injected then). */
export async function openBrowser({ enforceCsp = false } = {}): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'taskline-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 900 },
    // Lets the test inject axe-core into a page whose policy runs only the console's own scripts.
    bypassCSP: !enforceCsp,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Runs axe-core in the page (injected from the npm package) and fails on serious or critical findings. */
export async function assertAccessible(page: Page, what: string): Promise<void> {
  await page.addScriptTag({ content: AXE });
  const violations = await page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: { run(): Promise<{ violations: { id: string; impact: string; nodes: unknown[] }[] }> };
      }
    ).axe;
    const { violations } = await axe.run();
    return violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
  });
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert.deepEqual(bad, [], `${what}: accessibility violations ${JSON.stringify(bad)}`);
}

export async function signIn(page: Page, base: string, key: string): Promise<void> {
  await page.goto(`${base}/console`);
  await page.getByLabel('Admin key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
}
