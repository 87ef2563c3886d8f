/**
 * Applications deployed by governance: JavaScript bundles in CCF's app.json shape, run by a
 * QuickJS engine on the node's thread and served under /app (docs/apps.md).
 */
import type { Logger } from '../../base/log.js';
import type { Caller } from '../../http/route.js';
import { TableDefs } from '../../node/tables.js';
import type { AuthnRequest } from './authn.js';
import { AppEngine } from './engine.js';
import { JsAppFrontend, type JsAppNode } from './frontend.js';

export { AppEngine } from './engine.js';
export { JsAppFrontend } from './frontend.js';
export { parseBundle, BundleError, type AppBundle } from './bundle.js';

export interface JsApplicationOptions {
  readonly node: JsAppNode & { isUser(id: string): boolean };
  readonly logger: Logger;
  /** The service's bearer-token check (a 401 CovenantError when the token is refused). */
  readonly bearer: (request: AuthnRequest) => Caller | Promise<Caller>;
  /** The historical cache's bounds (configuration `historical_cache`). */
  readonly historicalCache: { readonly max_entries: number; readonly max_size: number };
}


/** Loads the engine (once per process) and makes the frontend of one node. */
export async function createJsApplication(options: JsApplicationOptions): Promise<JsAppFrontend> {
  return jsApplicationOn(await AppEngine.load(), options);
}

/** The frontend of one node on an engine already loaded (the simulator's nodes share one). */
export function jsApplicationOn(engine: AppEngine, options: JsApplicationOptions): JsAppFrontend {
  const { node } = options;
  return new JsAppFrontend(
    node,
    engine,
    {
      isUser: (id) => node.isUser(id),
      isMember: (id) => node.executeRead((tx) => tx.table(TableDefs.membersCerts).has(id)),
      bearer: options.bearer,
    },
    options.logger,
    { entriesMax: options.historicalCache.max_entries, bytesMax: options.historicalCache.max_size },
  );
}
