/**
 * The OpenAPI 3 document of a route table, served at /node/api. It is derived from the same
 * Route objects that serve requests, so it cannot drift from what the node answers.
 */
import { z } from 'zod';
import type { Route } from './route.js';
import { routeMethods } from './route.js';

const ERROR_SCHEMA = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' } },
    },
  },
};

function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  try {
    const out = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
    delete out.$schema;
    return out;
  } catch {
    // A schema with transforms that JSON Schema cannot express is documented as free-form.
    return {};
  }
}

export function openApiDocument(routes: readonly Route[], info: { title: string; version: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const item = (paths[route.path] ??= {});
    const parameters: unknown[] = [];
    for (const m of route.path.matchAll(/\{([a-zA-Z_][a-zA-Z0-9_]*)\}/g)) {
      parameters.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    }
    if (route.query) {
      const schema = jsonSchemaOf(route.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, prop] of Object.entries(schema.properties ?? {})) {
        parameters.push({ name, in: 'query', required: (schema.required ?? []).includes(name), schema: prop });
      }
    }
    const responses: Record<string, unknown> = {};
    for (const [status, description] of Object.entries(route.responses ?? { 200: 'Success' })) {
      responses[status] = { description };
    }
    responses.default = { description: 'An error occurred', content: { 'application/json': { schema: ERROR_SCHEMA } } };
    for (const method of routeMethods(route)) {
      const operation: Record<string, unknown> = {
        summary: route.summary,
        operationId: `${method} ${route.path}`,
        parameters,
        responses,
      };
      if (route.auth && route.auth !== 'none') operation['x-covenant-authentication'] = route.auth;
      if (route.feature) operation['x-covenant-operator-feature'] = route.feature;
      if (route.body) {
        operation.requestBody = { required: true, content: { 'application/json': { schema: jsonSchemaOf(route.body) } } };
      }
      if (route.openapi) Object.assign(operation, route.openapi);
      item[method.toLowerCase()] = operation;
    }
  }
  return { openapi: '3.0.0', info, paths };
}
