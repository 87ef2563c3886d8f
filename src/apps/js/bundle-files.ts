/**
 * A bundle from a folder on disk: `app.json` (the metadata) and every `.js`/`.mjs` file under the
 * folder, named by its path relative to it (what `covenant app bundle` puts in a set_js_app proposal).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { BUNDLE_MODULES_MAX } from './limits.js';

export interface BundleJson {
  readonly metadata: unknown;
  readonly modules: { name: string; module: string }[];
}

export function readBundleDirectory(dir: string): BundleJson {
  let metadata: unknown;
  try {
    metadata = JSON.parse(readFileSync(join(dir, 'app.json'), 'utf8')) as unknown;
  } catch (e) {
    throw new Error(`${join(dir, 'app.json')}: ${(e as Error).message}`);
  }
  const modules: { name: string; module: string }[] = [];
  const visit = (folder: string) => {
    for (const entry of readdirSync(folder).sort()) {
      const path = join(folder, entry);
      if (entry === 'node_modules' || entry.startsWith('.')) continue;
      if (statSync(path).isDirectory()) visit(path);
      else if (/\.m?js$/.test(entry)) {
        if (modules.length >= BUNDLE_MODULES_MAX) throw new Error(`${dir} holds more than ${BUNDLE_MODULES_MAX} modules`);
        modules.push({ name: relative(dir, path).split(sep).join('/'), module: readFileSync(path, 'utf8') });
      }
    }
  };
  visit(dir);
  return { metadata, modules };
}
