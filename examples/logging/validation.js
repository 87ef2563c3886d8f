// Error answers in the service's shape: {"error": {"code", "message"}}.
export function error(statusCode, code, message) {
  return { statusCode, body: { error: { code, message } } };
}

export const badRequest = (code, message) => error(400, code, message);
export const notFound = (id) => error(404, 'ResourceNotFound', 'No record with id ' + id);

/** The `id` query parameter as a number, or the error answer. */
export function idOf(request) {
  const params = {};
  for (const part of request.query.split('&')) {
    if (part === '') continue;
    const [name, value = ''] = part.split('=');
    if (name in params) return badRequest('InvalidQueryParameterValue', 'query parameter "' + name + '" is given more than once');
    params[decodeURIComponent(name)] = decodeURIComponent(value);
  }
  for (const name of Object.keys(params)) {
    if (name !== 'id') return badRequest('InvalidQueryParameterValue', 'query parameter: unrecognized key "' + name + '"');
  }
  if (params.id === undefined) return badRequest('MissingRequiredQueryParameter', 'missing required query parameter "id"');
  if (!/^\d+$/.test(params.id) || !Number.isSafeInteger(Number(params.id))) {
    return badRequest('InvalidQueryParameterValue', 'query parameter "id": must be a non-negative integer');
  }
  return Number(params.id);
}
