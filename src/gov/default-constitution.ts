/**
 * The default constitution: JavaScript (an ES module) stored in the constitution table and run in
 * the sandbox. It exports
 *
 *   validate(proposal: string) → { valid: boolean, description: string }
 *   resolve(proposal: string, proposerId: string, votes: {member_id, vote}[]) → "Open" | "Accepted" | "Rejected"
 *   apply(proposal: string, proposalId: string) → void
 *
 * and keeps its action table private. `svc` (see constitution-host.ts) is its only bridge to the
 * service: svc.kv.* reads (and, in apply, writes) public:svc.gov.* tables of the transaction;
 * svc.crypto.* parses certificates and keys; svc.node.triggerLedgerChunk() asks for a chunk end;
 * svc.network.renew*Certificate(pem, valid_from, days) re-issue certificates with the service key.
 * svc.jwt.* checks a JWKS and replaces or removes an issuer's signing keys.
 *
 * Rules: a strict majority of Active members accepts; a proposal is Rejected once a majority can no
 * longer be reached; every action's arguments are checked by name and type (unknown fields are
 * errors); changing the constitution or the trusted code (host data, join policy) drops the other
 * open proposals, since their votes were cast under different rules.
 */
import { GOV_SINGLETON_KEY, GovTables } from './tables.js';

const T = JSON.stringify(GovTables);

export const DEFAULT_CONSTITUTION = `// Covenant default constitution.
const T = ${T};
const SINGLETON = ${JSON.stringify(GOV_SINGLETON_KEY)};

// ------------------------------------------------------------------ argument checks

class ArgumentError extends Error {}

function fail(message) {
  throw new ArgumentError(message);
}

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return 'a ' + typeof value;
}

function checkArgs(args, required, optional) {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) fail('args must be an object, not ' + describe(args));
  for (const name of Object.keys(args)) {
    if (!(name in required) && !(name in optional)) {
      const known = [...Object.keys(required), ...Object.keys(optional)];
      fail('unknown argument "' + name + '"' + (known.length ? ' (expected ' + known.join(', ') + ')' : ' (this action takes no arguments)'));
    }
  }
  for (const [name, check] of Object.entries(required)) {
    if (args[name] === undefined) fail('missing argument "' + name + '"');
    check(args[name], name);
  }
  for (const [name, check] of Object.entries(optional)) {
    if (args[name] !== undefined) check(args[name], name);
  }
}

const is = {
  string: (v, n) => { if (typeof v !== 'string') fail('"' + n + '" must be a string, not ' + describe(v)); },
  nonEmptyString: (v, n) => { if (typeof v !== 'string' || v.length === 0) fail('"' + n + '" must be a non-empty string'); },
  boolean: (v, n) => { if (typeof v !== 'boolean') fail('"' + n + '" must be a boolean, not ' + describe(v)); },
  any: () => {},
  object: (v, n) => { if (typeof v !== 'object' || v === null || Array.isArray(v)) fail('"' + n + '" must be an object, not ' + describe(v)); },
  id: (v, n) => { if (typeof v !== 'string' || !/^[0-9a-f]{64}$/.test(v)) fail('"' + n + '" must be 64 lower-case hex digits'); },
  integerIn: (lo, hi) => (v, n) => { if (!Number.isInteger(v) || v < lo || v > hi) fail('"' + n + '" must be an integer in [' + lo + ', ' + hi + ']'); },
  memberCert: (v, n) => {
    is.nonEmptyString(v, n);
    const c = svc.crypto.certificate(v);
    if (c.key_type !== 'ec' || (c.curve !== 'P-256' && c.curve !== 'P-384')) fail('"' + n + '": a member certificate needs an EC P-256 or P-384 key, not ' + c.key_type + ' ' + (c.curve || ''));
  },
  cert: (v, n) => { is.nonEmptyString(v, n); svc.crypto.certificate(v); },
  rsaPublicKey: (v, n) => { is.nonEmptyString(v, n); svc.crypto.rsaPublicKey(v); },
  certBundle: (v, n) => { is.nonEmptyString(v, n); svc.crypto.certificateBundle(v); },
  date: (v, n) => { if (typeof v !== 'string' || Number.isNaN(Date.parse(v))) fail('"' + n + '" must be a date string (e.g. 2025-01-01T00:00:00Z)'); },
  // ISO 8601 (2026-01-01T00:00:00Z) or the ASN.1 time CCF's tools write (20260101000000Z).
  validFrom: (v, n) => {
    if (typeof v !== 'string' || !(/^(\\d{12}|\\d{14})Z$/.test(v) || /^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,3})?)?(Z|[+-]\\d{2}:\\d{2}))?$/.test(v))) {
      fail('"' + n + '" must be a date and time: 2026-01-01T00:00:00Z, or 20260101000000Z');
    }
  },
  httpsUrl: (v, n) => { if (typeof v !== 'string' || !/^https:\\/\\/[^\\s/]+/.test(v)) fail('"' + n + '" must be an https:// URL'); },
  // The host checks a key set in one call (each key parsed, at most 256 keys): see src/gov/jwt-keys.ts.
  jwks: (v, n) => svc.jwt.checkJwks(v, n),
};

// ------------------------------------------------------------------ table helpers

function get(table, key) { return svc.kv.get(table, key); }
function put(table, key, value) { svc.kv.put(table, key, value); }
function remove(table, key) { return svc.kv.remove(table, key); }
function keys(table) { return svc.kv.keys(table); }

function activeMemberIds() {
  const out = new Set();
  for (const id of keys(T.membersInfo)) if (get(T.membersInfo, id).status === 'Active') out.add(id);
  return out;
}

function recoveryMemberCount() {
  return keys(T.membersEncryptionPublicKeys).length;
}

function serviceConfig() {
  return get(T.serviceConfig, SINGLETON) || {};
}

// ------------------------------------------------------------------ certificates

// The longest validity members may give a certificate, and the one a renewal without
// validity_period_days gets (CCF's default maximum, when the service configuration has none).
const DEFAULT_MAXIMUM_VALIDITY_DAYS = 365;

function renewalDays(a, maximumKey) {
  const max = serviceConfig()[maximumKey] ?? DEFAULT_MAXIMUM_VALIDITY_DAYS;
  if (a.validity_period_days === undefined) return max;
  if (a.validity_period_days > max) {
    throw new Error('validity_period_days ' + a.validity_period_days + ' is above ' + maximumKey + ' (' + max + ') of the service configuration');
  }
  return a.validity_period_days;
}

function renewNodeCertificate(nodeId, a) {
  const node = requireNode(nodeId);
  if (node.status !== 'Trusted') throw new Error('node ' + nodeId + ' is ' + node.status + ', not Trusted: only trusted nodes hold an endorsed certificate');
  const current = get(T.nodesEndorsedCertificates, nodeId);
  if (current === undefined) throw new Error('node ' + nodeId + ' has no endorsed certificate yet');
  const days = renewalDays(a, 'maximum_node_certificate_validity_days');
  put(T.nodesEndorsedCertificates, nodeId, svc.network.renewNodeCertificate(current, a.valid_from, days));
}

const CERTIFICATE_VALIDITY_ARGS = { validity_period_days: is.integerIn(1, 36500) };

function invalidateOtherOpenProposals(proposalId) {
  for (const id of keys(T.proposalsInfo)) {
    if (id === proposalId) continue;
    const info = get(T.proposalsInfo, id);
    if (info.state === 'Open') {
      info.state = 'Dropped';
      put(T.proposalsInfo, id, info);
    }
  }
}

function requireNode(nodeId) {
  const node = get(T.nodesInfo, nodeId);
  if (node === undefined) throw new Error('no node with id ' + nodeId);
  return node;
}

function requireMember(memberId) {
  const info = get(T.membersInfo, memberId);
  if (info === undefined) throw new Error('no member with id ' + memberId);
  return info;
}

function requireUser(userId) {
  if (!svc.kv.has(T.usersCerts, userId)) throw new Error('no user with id ' + userId);
}

// An issuer's keys are replaced or removed by the host in one call: one host call per key (and per
// kid of the table) cost more than a request's budget for an issuer of a few thousand keys.
function setJwtKeys(issuer, jwks) {
  svc.jwt.setIssuerKeys(issuer, jwks);
}

function removeJwtKeys(issuer) {
  svc.jwt.removeIssuerKeys(issuer);
}

// ------------------------------------------------------------------ actions

const actions = new Map([
  ['set_constitution', {
    validate: (a) => checkArgs(a, { constitution: is.nonEmptyString }, {}),
    apply: (a, proposalId) => {
      put(T.constitution, SINGLETON, a.constitution);
      invalidateOtherOpenProposals(proposalId);
    },
  }],
  ['transition_service_to_open', {
    validate: (a) => checkArgs(a, {}, { next_service_identity: is.nonEmptyString, previous_service_identity: is.nonEmptyString }),
    apply: (a) => {
      const info = get(T.serviceInfo, SINGLETON);
      if (info === undefined) throw new Error('the service record is missing');
      if (info.status === 'Open') throw new Error('the service is already open');
      if (info.status === 'WaitingForRecoveryShares') throw new Error('the service is already waiting for recovery shares');
      if (a.next_service_identity !== undefined && a.next_service_identity.trim() !== info.cert.trim()) {
        throw new Error('next_service_identity is not the current service certificate');
      }
      if (info.status === 'Recovering') {
        // A recovered service opens once members have submitted their recovery shares.
        const previous = get(T.previousServiceIdentity, SINGLETON);
        if (a.next_service_identity === undefined || a.previous_service_identity === undefined) {
          throw new Error('a recovering service opens with previous_service_identity and next_service_identity');
        }
        if (previous === undefined || a.previous_service_identity.trim() !== previous.trim()) {
          throw new Error('previous_service_identity is not the certificate of the service being recovered');
        }
        info.status = 'WaitingForRecoveryShares';
      } else {
        info.status = 'Open';
      }
      put(T.serviceInfo, SINGLETON, info);
    },
  }],
  ['set_member', {
    validate: (a) => checkArgs(a, { cert: is.memberCert }, { encryption_pub_key: is.rsaPublicKey, member_data: is.any }),
    apply: (a) => {
      const id = svc.crypto.certificate(a.cert).id;
      const existing = get(T.membersInfo, id);
      put(T.membersCerts, id, a.cert);
      put(T.membersInfo, id, { status: existing ? existing.status : 'Accepted', member_data: a.member_data === undefined ? null : a.member_data });
      if (a.encryption_pub_key !== undefined) put(T.membersEncryptionPublicKeys, id, a.encryption_pub_key);
      else remove(T.membersEncryptionPublicKeys, id);
    },
  }],
  ['remove_member', {
    validate: (a) => {
      checkArgs(a, {}, { member_id: is.id, cert: is.cert });
      if ((a.member_id === undefined) === (a.cert === undefined)) fail('give exactly one of "member_id" and "cert"');
    },
    apply: (a) => {
      const id = a.member_id !== undefined ? a.member_id : svc.crypto.certificate(a.cert).id;
      const info = requireMember(id);
      if (info.status === 'Active' && activeMemberIds().size === 1) throw new Error('cannot remove the last active member');
      if (svc.kv.has(T.membersEncryptionPublicKeys, id)) {
        const threshold = serviceConfig().recovery_threshold || 1;
        if (recoveryMemberCount() - 1 < threshold) {
          throw new Error('removing member ' + id + ' would leave fewer recovery members than the recovery threshold (' + threshold + ')');
        }
      }
      remove(T.membersCerts, id);
      remove(T.membersInfo, id);
      remove(T.membersEncryptionPublicKeys, id);
      remove(T.membersAcks, id);
    },
  }],
  ['set_member_data', {
    validate: (a) => checkArgs(a, { member_id: is.id, member_data: is.any }, {}),
    apply: (a) => {
      const info = requireMember(a.member_id);
      info.member_data = a.member_data;
      put(T.membersInfo, a.member_id, info);
    },
  }],
  ['set_user', {
    validate: (a) => checkArgs(a, { cert: is.cert }, { user_data: is.any }),
    apply: (a) => {
      const id = svc.crypto.certificate(a.cert).id;
      put(T.usersCerts, id, a.cert);
      put(T.usersInfo, id, { user_data: a.user_data === undefined ? null : a.user_data });
    },
  }],
  ['remove_user', {
    validate: (a) => checkArgs(a, { user_id: is.id }, {}),
    apply: (a) => {
      requireUser(a.user_id);
      remove(T.usersCerts, a.user_id);
      remove(T.usersInfo, a.user_id);
    },
  }],
  ['set_user_data', {
    validate: (a) => checkArgs(a, { user_id: is.id, user_data: is.any }, {}),
    apply: (a) => {
      requireUser(a.user_id);
      put(T.usersInfo, a.user_id, { user_data: a.user_data });
    },
  }],
  ['transition_node_to_trusted', {
    validate: (a) => checkArgs(a, { node_id: is.id }, { valid_from: is.validFrom, validity_period_days: is.integerIn(1, 36500) }),
    apply: (a) => {
      const node = requireNode(a.node_id);
      const max = serviceConfig().maximum_node_certificate_validity_days;
      if (a.validity_period_days !== undefined && max !== undefined && a.validity_period_days > max) {
        throw new Error('validity_period_days ' + a.validity_period_days + ' exceeds maximum_node_certificate_validity_days ' + max);
      }
      if (node.status === 'Retired') throw new Error('node ' + a.node_id + ' is retired and cannot be trusted again');
      if (node.status === 'Trusted') return;
      node.status = 'Trusted';
      if (a.valid_from !== undefined) node.certificate_valid_from = a.valid_from;
      if (a.validity_period_days !== undefined) node.certificate_validity_period_days = a.validity_period_days;
      put(T.nodesInfo, a.node_id, node);
    },
  }],
  ['set_node_certificate_validity', {
    validate: (a) => checkArgs(a, { node_id: is.id, valid_from: is.validFrom }, CERTIFICATE_VALIDITY_ARGS),
    apply: (a) => renewNodeCertificate(a.node_id, a),
  }],
  ['set_all_nodes_certificate_validity', {
    validate: (a) => checkArgs(a, { valid_from: is.validFrom }, CERTIFICATE_VALIDITY_ARGS),
    apply: (a) => {
      // A node trusted by a proposal is endorsed when it next asks to join: it has nothing to renew yet.
      for (const id of keys(T.nodesInfo)) {
        if (get(T.nodesInfo, id).status === 'Trusted' && svc.kv.has(T.nodesEndorsedCertificates, id)) renewNodeCertificate(id, a);
      }
    },
  }],
  ['set_service_certificate_validity', {
    validate: (a) => checkArgs(a, { valid_from: is.validFrom }, CERTIFICATE_VALIDITY_ARGS),
    apply: (a) => {
      const info = get(T.serviceInfo, SINGLETON);
      if (info === undefined) throw new Error('the service record is missing');
      const days = renewalDays(a, 'maximum_service_certificate_validity_days');
      info.cert = svc.network.renewServiceCertificate(info.cert, a.valid_from, days);
      put(T.serviceInfo, SINGLETON, info);
    },
  }],
  ['remove_node', {
    validate: (a) => checkArgs(a, { node_id: is.id }, {}),
    apply: (a) => {
      const node = requireNode(a.node_id);
      if (node.status === 'Pending') {
        remove(T.nodesInfo, a.node_id);
        remove(T.nodesEndorsedCertificates, a.node_id);
        return;
      }
      if (node.status === 'Retired') return;
      const trusted = keys(T.nodesInfo).filter((id) => get(T.nodesInfo, id).status === 'Trusted');
      if (trusted.length <= 1) throw new Error('cannot retire node ' + a.node_id + ': it is the last trusted node of the service');
      node.status = 'Retired';
      node.retired_committed = false;
      put(T.nodesInfo, a.node_id, node);
    },
  }],
  ['set_node_data', {
    validate: (a) => checkArgs(a, { node_id: is.id, node_data: is.any }, {}),
    apply: (a) => {
      const node = requireNode(a.node_id);
      node.node_data = a.node_data;
      put(T.nodesInfo, a.node_id, node);
    },
  }],
  ['set_recovery_threshold', {
    validate: (a) => checkArgs(a, { recovery_threshold: is.integerIn(1, 255) }, {}),
    apply: (a) => {
      const count = recoveryMemberCount();
      if (a.recovery_threshold > count) {
        throw new Error('recovery_threshold ' + a.recovery_threshold + ' is above the number of recovery members (' + count + ')');
      }
      put(T.serviceConfig, SINGLETON, { ...serviceConfig(), recovery_threshold: a.recovery_threshold });
    },
  }],
  ['set_service_configuration', {
    validate: (a) => {
      checkArgs(a, {}, {
        recovery_threshold: is.integerIn(1, 255),
        maximum_node_certificate_validity_days: is.integerIn(1, 36500),
        maximum_service_certificate_validity_days: is.integerIn(1, 36500),
        recent_cose_proposals_window_size: is.integerIn(1, 10000),
      });
      if (Object.keys(a).length === 0) fail('give at least one configuration entry');
    },
    apply: (a) => {
      if (a.recovery_threshold !== undefined && a.recovery_threshold > recoveryMemberCount()) {
        throw new Error('recovery_threshold ' + a.recovery_threshold + ' is above the number of recovery members (' + recoveryMemberCount() + ')');
      }
      put(T.serviceConfig, SINGLETON, { ...serviceConfig(), ...a });
    },
  }],
  ['set_ca_cert_bundle', {
    validate: (a) => checkArgs(a, { name: is.nonEmptyString, cert_bundle: is.certBundle }, {}),
    apply: (a) => put(T.caCertBundles, a.name, a.cert_bundle),
  }],
  ['remove_ca_cert_bundle', {
    validate: (a) => checkArgs(a, { name: is.nonEmptyString }, {}),
    apply: (a) => {
      if (!svc.kv.has(T.caCertBundles, a.name)) throw new Error('no CA certificate bundle named "' + a.name + '"');
      for (const issuer of keys(T.jwtIssuers)) {
        if (get(T.jwtIssuers, issuer).ca_cert_bundle_name === a.name) throw new Error('CA certificate bundle "' + a.name + '" is used by issuer ' + issuer);
      }
      remove(T.caCertBundles, a.name);
    },
  }],
  ['set_jwt_issuer', {
    validate: (a) => {
      checkArgs(a, { issuer: is.nonEmptyString }, { auto_refresh: is.boolean, ca_cert_bundle_name: is.nonEmptyString, jwks: is.jwks });
      if (a.auto_refresh === true) {
        if (a.ca_cert_bundle_name === undefined) fail('"ca_cert_bundle_name" is required with auto_refresh');
        is.httpsUrl(a.issuer, 'issuer');
      }
    },
    apply: (a) => {
      if (a.ca_cert_bundle_name !== undefined && !svc.kv.has(T.caCertBundles, a.ca_cert_bundle_name)) {
        throw new Error('no CA certificate bundle named "' + a.ca_cert_bundle_name + '" (set it with set_ca_cert_bundle first)');
      }
      const record = { auto_refresh: a.auto_refresh === true };
      if (a.ca_cert_bundle_name !== undefined) record.ca_cert_bundle_name = a.ca_cert_bundle_name;
      put(T.jwtIssuers, a.issuer, record);
      if (a.jwks !== undefined) setJwtKeys(a.issuer, a.jwks);
    },
  }],
  ['set_jwt_public_signing_keys', {
    validate: (a) => checkArgs(a, { issuer: is.nonEmptyString, jwks: is.jwks }, {}),
    apply: (a) => {
      if (!svc.kv.has(T.jwtIssuers, a.issuer)) throw new Error('no token issuer "' + a.issuer + '" (set it with set_jwt_issuer first)');
      setJwtKeys(a.issuer, a.jwks);
    },
  }],
  ['remove_jwt_issuer', {
    validate: (a) => checkArgs(a, { issuer: is.nonEmptyString }, {}),
    apply: (a) => {
      if (!svc.kv.has(T.jwtIssuers, a.issuer)) throw new Error('no token issuer "' + a.issuer + '"');
      remove(T.jwtIssuers, a.issuer);
      removeJwtKeys(a.issuer);
    },
  }],
  ['trigger_ledger_chunk', {
    validate: (a) => checkArgs(a, {}, {}),
    apply: () => svc.node.triggerLedgerChunk(),
  }],
  ['trigger_recovery_shares_refresh', {
    validate: (a) => checkArgs(a, {}, {}),
    apply: () => put(T.recoverySharesRefresh, SINGLETON, (get(T.recoverySharesRefresh, SINGLETON) || 0) + 1),
  }],
  ['trigger_ledger_rekey', {
    validate: (a) => checkArgs(a, {}, {}),
    apply: (a, proposalId) => {
      const info = get(T.serviceInfo, SINGLETON);
      if (info === undefined || (info.status !== 'Open' && info.status !== 'Opening')) {
        throw new Error('the ledger is rekeyed only while the service is opening or open');
      }
      put(T.ledgerRekeyRequests, SINGLETON, { proposal_id: proposalId });
    },
  }],
  ['trigger_snapshot', {
    validate: (a) => checkArgs(a, {}, {}),
    apply: (a, proposalId) => put(T.snapshotRequests, SINGLETON, { proposal_id: proposalId }),
  }],
  ['add_snp_host_data', {
    validate: (a) => checkArgs(a, { host_data: is.id }, { security_policy: is.string }),
    apply: (a, proposalId) => {
      put(T.hostData, a.host_data, { security_policy: a.security_policy === undefined ? '' : a.security_policy });
      invalidateOtherOpenProposals(proposalId);
    },
  }],
  ['remove_snp_host_data', {
    validate: (a) => checkArgs(a, { host_data: is.id }, {}),
    apply: (a, proposalId) => {
      if (!svc.kv.has(T.hostData, a.host_data)) throw new Error('host data ' + a.host_data + ' is not registered');
      remove(T.hostData, a.host_data);
      invalidateOtherOpenProposals(proposalId);
    },
  }],
  ['add_virtual_measurement', {
    validate: (a) => checkArgs(a, { measurement: is.id }, {}),
    apply: (a, proposalId) => {
      put(T.virtualMeasurements, a.measurement, {});
      invalidateOtherOpenProposals(proposalId);
    },
  }],
  ['remove_virtual_measurement', {
    validate: (a) => checkArgs(a, { measurement: is.id }, {}),
    apply: (a, proposalId) => {
      if (!svc.kv.has(T.virtualMeasurements, a.measurement)) throw new Error('measurement ' + a.measurement + ' is not registered');
      remove(T.virtualMeasurements, a.measurement);
      invalidateOtherOpenProposals(proposalId);
    },
  }],
  ['set_node_join_policy', {
    validate: (a) => checkArgs(a, { policy: is.nonEmptyString }, {}),
    apply: (a, proposalId) => {
      put(T.joinPolicy, SINGLETON, a.policy);
      invalidateOtherOpenProposals(proposalId);
    },
  }],
  ['set_js_app', {
    // The service checks the bundle itself (app.json, every module compiles, every endpoint's
    // module and function exist) before this runs; here only its outline.
    validate: (a) => {
      checkArgs(a, { bundle: is.object }, {});
      checkArgs(a.bundle, { metadata: is.object, modules: is.any }, {});
      if (!Array.isArray(a.bundle.modules) || a.bundle.modules.length === 0) fail('"bundle.modules" must be a non-empty array of {name, module}');
    },
    apply: (a) => put(T.jsApp, SINGLETON, a.bundle),
  }],
  ['remove_js_app', {
    validate: (a) => checkArgs(a, {}, {}),
    apply: () => {
      if (!svc.kv.has(T.jsApp, SINGLETON)) throw new Error('no application bundle is installed');
      remove(T.jsApp, SINGLETON);
    },
  }],
  ['set_js_runtime_options', {
    validate: (a) => {
      checkArgs(a, {}, {
        max_heap_bytes: is.integerIn(1048576, 268435456),
        max_stack_bytes: is.integerIn(65536, 1048576),
        max_execution_time_ms: is.integerIn(1, 1000),
        return_exception_details: is.boolean,
        log_exception_details: is.boolean,
      });
      if (Object.keys(a).length === 0) fail('give at least one runtime option');
    },
    apply: (a) => put(T.jsRuntimeOptions, SINGLETON, { ...(get(T.jsRuntimeOptions, SINGLETON) || {}), ...a }),
  }],
  ['remove_node_join_policy', {
    validate: (a) => checkArgs(a, {}, {}),
    apply: (a, proposalId) => {
      if (!svc.kv.has(T.joinPolicy, SINGLETON)) throw new Error('no join policy is set');
      remove(T.joinPolicy, SINGLETON);
      invalidateOtherOpenProposals(proposalId);
    },
  }],
]);

// ------------------------------------------------------------------ the three entry points

export function validate(input) {
  let proposal;
  try {
    proposal = JSON.parse(input);
  } catch (e) {
    return { valid: false, description: 'the proposal is not JSON' };
  }
  if (typeof proposal !== 'object' || proposal === null || !Array.isArray(proposal.actions)) {
    return { valid: false, description: 'a proposal is an object {"actions": [{"name", "args"}, ...]}' };
  }
  if (proposal.actions.length === 0) return { valid: false, description: 'a proposal needs at least one action' };
  const errors = [];
  proposal.actions.forEach((action, i) => {
    if (typeof action !== 'object' || action === null || typeof action.name !== 'string') {
      errors.push('actions[' + i + '] must be an object with a "name" string');
      return;
    }
    const definition = actions.get(action.name);
    if (definition === undefined) {
      errors.push('actions[' + i + ']: unknown action "' + action.name + '"');
      return;
    }
    try {
      definition.validate(action.args === undefined ? {} : action.args);
    } catch (e) {
      errors.push('actions[' + i + '] (' + action.name + '): ' + e.message);
    }
  });
  return errors.length > 0 ? { valid: false, description: errors.join('; ') } : { valid: true, description: 'OK' };
}

export function resolve(proposal, proposerId, votes) {
  const active = activeMemberIds();
  const needed = Math.floor(active.size / 2) + 1;
  let inFavour = 0;
  let against = 0;
  for (const v of votes) {
    if (!active.has(v.member_id)) continue;
    if (v.vote === true) inFavour++;
    else against++;
  }
  if (inFavour >= needed) return 'Accepted';
  if (active.size - against < needed) return 'Rejected';
  return 'Open';
}

export function apply(proposal, proposalId) {
  for (const action of JSON.parse(proposal).actions) {
    actions.get(action.name).apply(action.args === undefined ? {} : action.args, proposalId);
  }
}
`;
