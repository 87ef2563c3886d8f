/**
 * Which maps an application may read and write, shared by the host (which enforces it on every
 * read and every write it applies) and the prelude (which refuses a write where the handler makes
 * it, although the host applies it later: the handler sees the error at the call, as before).
 */

/** Service tables: `public:svc.*` may be read, never written; private `svc.*` (ledger secrets) is out of reach. */
export const SERVICE_PUBLIC_PREFIX = 'public:svc.';
export const SERVICE_PRIVATE_PREFIX = 'svc.';

/** Messages of a refused write; `{map}` is the map's name. */
export const SERVICE_TABLE_WRITE = 'map "{map}" is a service table: applications cannot write it';
export const READONLY_WRITE = 'map "{map}" cannot be written by a readonly endpoint';

export function refusal(template: string, name: string): string {
  return template.replace('{map}', () => name);
}
