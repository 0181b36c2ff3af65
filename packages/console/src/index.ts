// Mounts the operator console: the page at `/console` and the JSON API at `/admin/v1`.
import { readFileSync } from 'node:fs';
import express, { type Express } from 'express';
import type { ConsoleDeps } from './admin-context.js';
import { adminRouter } from './admin.js';

export type { ConsoleDeps } from './admin-context.js';
export { adminOpenApi } from './openapi.js';

/** The files the console is made of, built into this package: nothing is fetched from elsewhere. */
const ASSETS: Record<string, { file: URL; type: string }> = {
  'console.js': { file: new URL('./web/app.js', import.meta.url), type: 'text/javascript' },
  'views.js': { file: new URL('./web/views.js', import.meta.url), type: 'text/javascript' },
  'charts.js': { file: new URL('./web/charts.js', import.meta.url), type: 'text/javascript' },
  'client.js': { file: new URL('./web/client.js', import.meta.url), type: 'text/javascript' },
  'task.js': { file: new URL('./web/task.js', import.meta.url), type: 'text/javascript' },
  'webhooks.js': { file: new URL('./web/webhooks.js', import.meta.url), type: 'text/javascript' },
  'console.css': { file: new URL('../web/static/console.css', import.meta.url), type: 'text/css' },
};
const PAGE = new URL('../web/static/index.html', import.meta.url);

/**
 * Mounts the operator console: the page at `/console` (every path under it is the same
 * single-page app, but an asset it does not have: 404) and its JSON API at `/admin/v1`. Both
 * refuse tenant credentials: the API needs an operator on every route; the page holds no data,
 * and is refused to any request that presents a credential which is not an operator's.
 */
export function mountConsole(app: Express, deps: ConsoleDeps): void {
  const files = new Map(
    Object.entries(ASSETS).map(([name, a]) => [name, { body: readFileSync(a.file), type: a.type }]),
  );
  const page = readFileSync(PAGE);
  app.use('/admin/v1', adminRouter(deps));

  const pages = express.Router({ caseSensitive: true });
  pages.use((req, res, next) => {
    if (!req.headers.authorization) return next();
    deps.operators.middleware(req, res, next);
  });
  pages.use((_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    // Only its own files: the page works offline and runs no script from anywhere else. No form
    // is ever submitted (the script handles each): one sent before the script ran would put the
    // admin key in a URL. base-uri and form-action do not fall back to default-src.
    res.setHeader(
      'Content-Security-Policy',
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    );
    res.setHeader('X-Content-Type-Options', 'nosniff');
    next();
  });
  pages.get('/assets/:name', (req, res, next) => {
    const file = files.get(String(req.params.name));
    // Out of the console's router to the api's 404: a stale page's asset is no HTML page.
    if (!file) return next('router');
    res.type(file.type).send(file.body);
  });
  pages.get(/.*/, (_req, res) => {
    res.type('html').send(page);
  });
  app.use('/console', pages);
}
