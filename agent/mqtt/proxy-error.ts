import { AgentError } from '../platform/errors.js';

/**
 * The proxy (mqtt.proxy) did not open the tunnel: it refused it (PROXY_REFUSED), did not answer in
 * time (PROXY_TIMEOUT) or could not be reached (PROXY_UNREACHABLE).
 */
export class ProxyError extends AgentError {}
