/**
 * The egress policy of a workflow's HTTP calls (`call: http`, and both requests of `call: openapi`),
 * enforced where each connection is made: an undici Agent whose connector refuses an origin the
 * `allow` list does not name, an IP-literal host that is private or special-purpose, and a name
 * whose resolved addresses include one (origins.ts says which) — unless `privateNetworks`. The
 * address checked is the one connected to (the lookup is the connection's own), so a name that
 * resolves differently between a check and the connection (DNS rebinding) cannot pass. calls.ts
 * follows no redirect (a 3xx is the call's answer or its error), and any connection this fetch
 * made for one would be checked the same way. Calls go through undici's fetch with this Agent
 * (never the global fetch, whose bundled undici may be another version); the caller's `redirect`
 * option is passed through.
 *
 * A refusal is an EgressRefused error, the fetch failure's cause; calls.ts raises it as the DSL's
 * authorization error (403).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import { EgressRefused, originMatches, originPatterns, originText, specialAddress } from '../../contract/origins.js';

export interface EgressPolicy {
  /** The origins calls may reach (origins.ts: the pattern syntax); absent: any origin. */
  allow?: readonly string[];
  /** Whether private and special-purpose addresses may be reached (default false). */
  privateNetworks?: boolean;
}

export interface EgressOptions extends EgressPolicy {
  /** Resolves names (dns.lookup by default; tests resolve a name of their own to loopback). */
  lookup?: LookupFunction;
}

const privateRule = 'the egress policy refuses those (privateNetworks is off)';

/** A fetch under the policy, and how to close its connections (once; again is the same). */
export interface EgressFetch {
  fetch: typeof fetch;
  close(): Promise<void>;
}

export function egressFetch(options: EgressOptions): EgressFetch {
  const patterns = options.allow === undefined ? undefined : originPatterns(options.allow, 'allow');
  const privateNetworks = options.privateNetworks === true;
  const resolve = options.lookup ?? (dnsLookup as LookupFunction);
  // Every address a name resolves to is checked, and only those are connected to.
  const lookup: LookupFunction = (hostname, lookupOptions, callback) =>
    resolve(hostname, { ...lookupOptions, all: true }, (error, found) => {
      if (error) return callback(error, '', 0);
      const addresses = (Array.isArray(found) ? found : [{ address: found, family: isIP(found) }]) as LookupAddress[];
      if (!privateNetworks && addresses.some((entry) => specialAddress(entry.address) !== undefined))
        return callback(new EgressRefused(`${hostname} resolves to a private or special-purpose address: ${privateRule}`), '', 0);
      const first = addresses[0];
      if (lookupOptions.all) callback(null, addresses);
      else if (first) callback(null, first.address, first.family);
      else callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
    });
  const connector = buildConnector({ lookup });
  const connect: buildConnector.connector = (target, callback) => {
    const origin = originText(target.protocol, target.hostname, target.port);
    if (patterns && !originMatches(patterns, target.protocol, target.hostname, target.port))
      return callback(new EgressRefused(`${origin} is not in the egress policy's allow list`), null);
    // An IP address is connected to without a lookup: judged here (one net.connect reads as an address, whatever its form).
    const kind = privateNetworks || isIP(target.hostname) === 0 ? undefined : specialAddress(target.hostname);
    if (kind !== undefined) return callback(new EgressRefused(`${origin} is a private or special-purpose address (${kind}): ${privateRule}`), null);
    connector(target, callback);
  };
  const agent = new Agent({ connect });
  const call = (input: Parameters<typeof fetch>[0], init?: RequestInit) =>
    undiciFetch(input as Parameters<typeof undiciFetch>[0], { ...(init as Parameters<typeof undiciFetch>[1]), dispatcher: agent });
  let closed: Promise<void> | undefined;
  return { fetch: call as unknown as typeof fetch, close: () => (closed ??= agent.close()) };
}
