/**
 * Path matching for the route table. Static paths are found in one Map lookup (the hot path of
 * application writes); templated paths are compiled to anchored regular expressions once.
 */
import { CovenantError } from '../base/errors.js';
import type { HttpMethod, Route } from './route.js';
import { routeMethods } from './route.js';

interface CompiledTemplate {
  readonly route: Route;
  readonly regex: RegExp;
  readonly paramNames: readonly string[];
}

export interface RouteMatch {
  readonly route: Route;
  readonly params: Record<string, string>;
}

export type MatchResult =
  | { readonly kind: 'found'; readonly match: RouteMatch }
  | { readonly kind: 'method-not-allowed'; readonly allowed: readonly HttpMethod[] }
  | { readonly kind: 'not-found' };

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function compileTemplate(route: Route): CompiledTemplate {
  const paramNames: string[] = [];
  let pattern = '';
  let last = 0;
  const placeholder = /\{([a-zA-Z_][a-zA-Z0-9_]*)\}/g;
  for (let m = placeholder.exec(route.path); m !== null; m = placeholder.exec(route.path)) {
    pattern += escapeRegex(route.path.slice(last, m.index));
    // A parameter never spans a '/' and stops before a ':action' suffix.
    pattern += '([^/:]+)';
    paramNames.push(m[1]!);
    last = m.index + m[0].length;
  }
  pattern += escapeRegex(route.path.slice(last));
  return { route, regex: new RegExp(`^${pattern}$`), paramNames };
}

/**
 * Routes that change while the node runs (an application bundle installed by governance): asked
 * before the fixed table; undefined leaves the path to the fixed table.
 */
export type RouteOverlay = (method: HttpMethod, path: string) => MatchResult | undefined;

export class Router {
  private readonly staticRoutes = new Map<string, Map<HttpMethod, Route>>();
  private readonly templates: CompiledTemplate[] = [];
  readonly routes: readonly Route[];

  constructor(
    routes: readonly Route[],
    private readonly overlay?: RouteOverlay,
  ) {
    this.routes = routes;
    for (const route of routes) {
      if (route.path.includes('{')) {
        this.templates.push(compileTemplate(route));
        continue;
      }
      let byMethod = this.staticRoutes.get(route.path);
      if (!byMethod) this.staticRoutes.set(route.path, (byMethod = new Map()));
      for (const method of routeMethods(route)) {
        if (byMethod.has(method)) throw new Error(`duplicate route ${method} ${route.path}`);
        byMethod.set(method, route);
      }
    }
  }

  /**
   * HEAD is served wherever GET is (RFC 9110 section 9.3.2): by the GET route, whose handler sees
   * method HEAD, and the server sends its headers without the body.
   */
  match(method: HttpMethod, path: string): MatchResult {
    const overlaid = this.overlay?.(method, path);
    if (overlaid !== undefined) return overlaid;
    const allowed = new Set<HttpMethod>();
    const byMethod = this.staticRoutes.get(path);
    if (byMethod) {
      const route = byMethod.get(method) ?? (method === 'HEAD' ? byMethod.get('GET') : undefined);
      if (route) return { kind: 'found', match: { route, params: {} } };
      for (const m of byMethod.keys()) addAllowed(allowed, m);
    }
    for (const template of this.templates) {
      const m = template.regex.exec(path);
      if (!m) continue;
      const methods = routeMethods(template.route);
      if (!methods.includes(method) && !(method === 'HEAD' && methods.includes('GET'))) {
        for (const x of methods) addAllowed(allowed, x);
        continue;
      }
      const params: Record<string, string> = {};
      template.paramNames.forEach((name, i) => {
        params[name] = decodePathParameter(name, m[i + 1]!);
      });
      return { kind: 'found', match: { route: template.route, params } };
    }
    if (allowed.size > 0) return { kind: 'method-not-allowed', allowed: [...allowed] };
    return { kind: 'not-found' };
  }
}

function addAllowed(allowed: Set<HttpMethod>, method: HttpMethod): void {
  allowed.add(method);
  if (method === 'GET') allowed.add('HEAD');
}

/** A %-decoded path parameter; a malformed escape (`%zz`) is the client's error, not ours. */
function decodePathParameter(name: string, raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new CovenantError('InvalidPathParameter', `path parameter ${name} "${raw.slice(0, 100)}" is not validly %-encoded`, 400);
  }
}
