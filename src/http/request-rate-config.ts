/** An RPC interface's request-rate limits from its configuration, with the node's defaults (src/node/limits.ts). */
import type { RpcInterfaceConfig } from '../config/index.js';
import { requestBurstPerAddressFactor, requestRateAddressesMax, requestRateExemptAddressesDefault, requestsPerSecondPerAddressDefault } from '../node/node.js';
import type { RequestRateLimits } from './request-rate.js';

export function requestRateLimitsOf(
  iface: Pick<RpcInterfaceConfig, 'max_requests_per_second_per_address' | 'max_request_burst_per_address' | 'request_rate_exempt_addresses'>,
): RequestRateLimits {
  const perSecond = iface.max_requests_per_second_per_address ?? requestsPerSecondPerAddressDefault;
  return {
    perSecond,
    burst: iface.max_request_burst_per_address ?? Math.max(1, Math.ceil(perSecond * requestBurstPerAddressFactor)),
    addressesMax: requestRateAddressesMax,
    exemptAddresses: iface.request_rate_exempt_addresses ?? requestRateExemptAddressesDefault,
  };
}
