/**
 * An application bundle as governance stores it (set_js_app): `{metadata: <app.json>, modules:
 * [{name, module}]}`, in CCF's app.json shape so that a CCF application ports by renaming `ccf`
 * to `covenant`. This file checks the shape; src/apps/js/engine.ts checks that it compiles.
 */
import { z } from 'zod';
import { BUNDLE_ENDPOINTS_MAX, BUNDLE_INDEXES_MAX, BUNDLE_MODULES_MAX, BUNDLE_NAME_CHARS_MAX } from './limits.js';

export const AUTHN_POLICIES = ['user_cert', 'member_cert', 'any_cert', 'jwt', 'no_auth'] as const;
export type AuthnPolicy = (typeof AUTHN_POLICIES)[number];
export const ENDPOINT_MODES = ['readwrite', 'readonly', 'historical'] as const;
export type EndpointMode = (typeof ENDPOINT_MODES)[number];
/** app.json names methods in lower case; the server serves these. */
export const ENDPOINT_METHODS = ['get', 'post', 'put', 'delete'] as const;
export type EndpointMethod = (typeof ENDPOINT_METHODS)[number];

/** Paths the service keeps for itself under /app whatever the bundle says. */
export const BUILT_IN_APP_PATHS: ReadonlySet<string> = new Set(['/tx', '/commit', '/caller']);

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const TEMPLATE_PARAMETER = /\{([^}]*)\}/g;

const endpointSchema = z
  .object({
    js_module: z.string().min(1).max(BUNDLE_NAME_CHARS_MAX),
    js_function: z.string().regex(IDENTIFIER, 'must be a JavaScript identifier'),
    authn_policies: z.array(z.enum(AUTHN_POLICIES)).max(AUTHN_POLICIES.length),
    mode: z.enum(ENDPOINT_MODES).default('readwrite'),
    openapi: z.record(z.string(), z.unknown()).optional(),
    // CCF's other endpoint properties, accepted so that its bundles load; Covenant decides these itself.
    forwarding_required: z.enum(['always', 'sometimes', 'never']).optional(),
    redirection_strategy: z.string().optional(),
    interpreter_reuse: z.unknown().optional(),
    openapi_hidden: z.boolean().optional(),
  })
  .strict();

const methodsSchema = z.record(z.string(), endpointSchema);

/** An indexing strategy: `seqnos_by_key` over one map (docs/apps.md "Indexing strategies"). */
const indexSchema = z.object({ strategy: z.literal('seqnos_by_key'), map: z.string().min(1).max(BUNDLE_NAME_CHARS_MAX) }).strict();

const metadataSchema = z
  .object({
    endpoints: z.record(z.string(), methodsSchema),
    indexes: z.record(z.string().regex(IDENTIFIER, 'an index name is a JavaScript identifier'), indexSchema).optional(),
  })
  .strict();

const moduleSchema = z.object({ name: z.string().min(1).max(BUNDLE_NAME_CHARS_MAX), module: z.string() }).strict();

const bundleSchema = z
  .object({
    metadata: metadataSchema,
    modules: z.array(moduleSchema).min(1).max(BUNDLE_MODULES_MAX),
  })
  .strict();

export type EndpointProperties = z.infer<typeof endpointSchema>;

/** An index the bundle declares. */
export interface AppIndex {
  readonly name: string;
  readonly strategy: 'seqnos_by_key';
  readonly map: string;
}

/** One endpoint of a bundle, as the frontend serves it. */
export interface AppEndpoint {
  /** The bundle's path template, e.g. `/records/{id}` (served as `/app/records/{id}`). */
  readonly path: string;
  readonly method: Uppercase<EndpointMethod>;
  readonly properties: EndpointProperties;
}

export interface AppBundle {
  readonly endpoints: readonly AppEndpoint[];
  /** Module name (normalised: no leading `/` or `./`) → source text. */
  readonly modules: ReadonlyMap<string, string>;
  /** The indexes the node maintains for the application (app.json `indexes`). */
  readonly indexes: readonly AppIndex[];
}

/** A bundle that cannot be installed; the message names the key, module or function at fault. */
export class BundleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BundleError';
  }
}

/** The canonical name of a module: `./lib/a.js`, `/lib/a.js` and `lib/a.js` are one module. */
export function normaliseModuleName(name: string): string {
  const parts: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) throw new BundleError(`module name "${name}" goes above the bundle's root`);
      parts.pop();
      continue;
    }
    parts.push(part);
  }
  if (parts.length === 0) throw new BundleError(`module name "${name}" names no file`);
  return parts.join('/');
}

/** The module that `requested` (an import specifier) names from inside `base`. */
export function resolveImport(base: string, requested: string): string {
  if (requested.startsWith('./') || requested.startsWith('../')) {
    const dir = base.includes('/') ? base.slice(0, base.lastIndexOf('/') + 1) : '';
    return normaliseModuleName(dir + requested);
  }
  return normaliseModuleName(requested);
}

function issuesText(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length ? `"${issue.path.join('.')}"` : 'the bundle'}: ${issue.message}`)
    .join('; ');
}

function checkPath(path: string): void {
  const where = `metadata.endpoints."${path}"`;
  if (!path.startsWith('/')) throw new BundleError(`${where}: a path starts with "/"`);
  if (path.length > BUNDLE_NAME_CHARS_MAX) throw new BundleError(`${where}: a path has at most ${BUNDLE_NAME_CHARS_MAX} characters`);
  if (/[?#\s]/.test(path)) throw new BundleError(`${where}: a path has no query, fragment or white space`);
  const seen = new Set<string>();
  for (const m of path.matchAll(TEMPLATE_PARAMETER)) {
    const name = m[1]!;
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name)) throw new BundleError(`${where}: template parameter "{${name}}" must be a name (letters, digits, _)`);
    if (seen.has(name)) throw new BundleError(`${where}: template parameter "{${name}}" appears twice`);
    seen.add(name);
  }
  if (path.replace(TEMPLATE_PARAMETER, '').includes('{') || path.replace(TEMPLATE_PARAMETER, '').includes('}')) {
    throw new BundleError(`${where}: unbalanced "{" or "}"`);
  }
  if (BUILT_IN_APP_PATHS.has(path)) throw new BundleError(`${where}: /app${path} is built into the service and cannot be replaced`);
}

/** Static `import ... from "x"`, `export ... from "x"`, `import "x"` and `import("x")` specifiers of a module. */
const IMPORT_SPECIFIER = /(?:\bimport\s*(?:[\w*${}\s,]+\s*from\s*)?|\bexport\s*[\w*{}\s,]*\s*from\s*|\bimport\s*\(\s*)(['"])([^'"]+)\1/g;

/** Every module a module imports must be in the bundle. */
function checkImports(name: string, source: string, modules: ReadonlyMap<string, string>): void {
  for (const m of source.matchAll(IMPORT_SPECIFIER)) {
    const requested = m[2]!;
    let resolved: string;
    try {
      resolved = resolveImport(name, requested);
    } catch (e) {
      throw new BundleError(`module "${name}" imports "${requested}": ${(e as Error).message}`);
    }
    if (!modules.has(resolved)) throw new BundleError(`module "${name}" imports "${requested}", and module "${resolved}" is not in the bundle`);
  }
}

/**
 * Checks the shape of a bundle and that every endpoint names a module of the bundle; returns it
 * in the form the engine uses. Does not compile anything (see AppEngine.checkBundle).
 */
export function parseBundle(value: unknown): AppBundle {
  const parsed = bundleSchema.safeParse(value);
  if (!parsed.success) throw new BundleError(`malformed bundle: ${issuesText(parsed.error)}`);
  const modules = new Map<string, string>();
  for (const [i, m] of parsed.data.modules.entries()) {
    const name = normaliseModuleName(m.name);
    if (modules.has(name)) throw new BundleError(`modules[${i}]: module "${m.name}" appears twice`);
    modules.set(name, m.module);
  }
  for (const [name, source] of modules) checkImports(name, source, modules);
  const endpoints: AppEndpoint[] = [];
  for (const [path, methods] of Object.entries(parsed.data.metadata.endpoints)) {
    checkPath(path);
    for (const [method, properties] of Object.entries(methods)) {
      const where = `metadata.endpoints."${path}".${method}`;
      if (!(ENDPOINT_METHODS as readonly string[]).includes(method)) {
        throw new BundleError(`${where}: method "${method}" is not one of ${ENDPOINT_METHODS.join(', ')}`);
      }
      let moduleName: string;
      try {
        moduleName = normaliseModuleName(properties.js_module);
      } catch (e) {
        throw new BundleError(`${where}.js_module: ${(e as Error).message}`);
      }
      if (!modules.has(moduleName)) throw new BundleError(`${where}.js_module: module "${properties.js_module}" is not in the bundle`);
      endpoints.push({ path, method: method.toUpperCase() as Uppercase<EndpointMethod>, properties: { ...properties, js_module: moduleName } });
      if (endpoints.length > BUNDLE_ENDPOINTS_MAX) throw new BundleError(`the bundle has more than ${BUNDLE_ENDPOINTS_MAX} endpoints`);
    }
  }
  const indexes = Object.entries(parsed.data.metadata.indexes ?? {}).map(([name, index]) => ({ name, strategy: index.strategy, map: index.map }));
  if (indexes.length > BUNDLE_INDEXES_MAX) throw new BundleError(`metadata.indexes: at most ${BUNDLE_INDEXES_MAX} indexes`);
  for (const index of indexes) {
    if (index.map.startsWith('svc.')) throw new BundleError(`metadata.indexes.${index.name}.map: map "${index.map}" is private to the service`);
  }
  return { endpoints, modules, indexes };
}
