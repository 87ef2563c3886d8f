/** The version of this build, reported by GET /node/version and used as the virtual code identity. */
import { readFileSync } from 'node:fs';

function readPackageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export const COVENANT_VERSION = readPackageVersion();
