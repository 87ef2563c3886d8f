/** The names a node's certificate carries when node_certificate.subject_alt_names is not configured. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { subjectAltNamesOf } from '../../src/node/node.js';

test('published hosts become iPAddress or dNSName names, once each; wildcards name nothing', () => {
  assert.deepEqual(subjectAltNamesOf(['127.0.0.1:8000']), ['iPAddress:127.0.0.1']);
  assert.deepEqual(subjectAltNamesOf(['node1.example.com:443', '10.0.0.11:8001', 'node1.example.com:8002']), ['dNSName:node1.example.com', 'iPAddress:10.0.0.11']);
  assert.deepEqual(subjectAltNamesOf(['[::1]:443']), ['iPAddress:::1']);
  assert.deepEqual(subjectAltNamesOf(['0.0.0.0:443', 'vm:80']), ['dNSName:vm']);
  assert.deepEqual(subjectAltNamesOf(['0.0.0.0:443', '[::]:80']), ['iPAddress:127.0.0.1'], 'loopback when nothing is left');
});
