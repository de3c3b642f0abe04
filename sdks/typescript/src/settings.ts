/** Connection settings: options given in code win over the environment. */

export interface ClientOptions {
  /** Runtime URL. Default: ORBIT_SERVER, then http://127.0.0.1:7233. */
  server?: string | undefined;
  /** Bearer token. Default: ORBIT_WORKER_TOKEN, then ORBIT_TOKEN. An empty string sends none. */
  token?: string | undefined;
  /** Path of a PEM client certificate for mutual TLS. Default: ORBIT_CLIENT_CERT. */
  clientCert?: string | undefined;
  /** Path of the PEM private key. Default: ORBIT_CLIENT_KEY, then the certificate file. */
  clientKey?: string | undefined;
}

export interface Settings {
  server: string;
  token: string | undefined;
  clientCert: string | undefined;
  clientKey: string | undefined;
  /** Only consulted on the client-certificate path (see transport.ts). */
  caCert: string | undefined;
}

export const DEFAULT_SERVER = "http://127.0.0.1:7233";

type Env = Readonly<Record<string, string | undefined>>;

export function resolveSettings(options: ClientOptions, env: Env = process.env): Settings {
  // An empty variable counts as unset; an empty option is a deliberate choice.
  const read = (name: string): string | undefined => env[name] || undefined;
  const server = options.server || read("ORBIT_SERVER") || DEFAULT_SERVER;
  const token = options.token ?? read("ORBIT_WORKER_TOKEN") ?? read("ORBIT_TOKEN");
  const clientCert = options.clientCert ?? read("ORBIT_CLIENT_CERT");
  return {
    server: server.replace(/\/+$/, ""),
    token: token || undefined,
    clientCert: clientCert || undefined,
    clientKey: (options.clientKey ?? read("ORBIT_CLIENT_KEY") ?? clientCert) || undefined,
    caCert: read("ORBIT_CA_CERT"),
  };
}
