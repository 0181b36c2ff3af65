// Who may speak on the control plane: TLS (server and client certificates) and the shared token.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';

/** The metadata key a worker's token travels in. */
export const CONTROL_TOKEN_HEADER = 'authorization';

export interface ControlTls {
  /** PEM of the CA that signs the other side's certificate: the scheduler requires client certificates signed by it. */
  ca: Buffer | null;
  /** This side's certificate and key (PEM); a worker's are its client certificate. */
  cert: Buffer | null;
  key: Buffer | null;
  /** The name a worker expects in the scheduler's certificate, whatever address it dials (pod IPs). */
  serverName: string;
}

/** How one side authenticates the control channel; built once at start-up by `controlSecurityFromEnv`. */
export interface ControlSecurity {
  /** Tokens a scheduler accepts; a worker sends the first. Several during a rotation. */
  tokens: string[];
  /** null: plaintext, only where `TASKLINE_CONTROL_PLAINTEXT` says so. */
  tls: ControlTls | null;
}

/** A control-plane setting that cannot work; the message names the variables to set. */
export class ControlConfigError extends Error {
  readonly code = 'control_plane_misconfigured';
}

export interface ControlSecurityEnv {
  TASKLINE_CONTROL_TOKEN: string;
  TASKLINE_CONTROL_PLAINTEXT: boolean;
  TASKLINE_CONTROL_TLS_CA: string;
  TASKLINE_CONTROL_TLS_CERT: string;
  TASKLINE_CONTROL_TLS_KEY: string;
  TASKLINE_CONTROL_TLS_SERVER_NAME: string;
}

const read = (path: string): Buffer | null => (path ? readFileSync(path) : null);

/**
 * The control plane's security for `side`, refusing a channel anyone could join: a scheduler
 * needs a token or a CA for client certificates, a worker a token or a client certificate, and
 * plaintext only by `TASKLINE_CONTROL_PLAINTEXT=true`.
 */
export function controlSecurityFromEnv(
  env: ControlSecurityEnv,
  side: 'scheduler' | 'worker',
): ControlSecurity {
  const tokens = env.TASKLINE_CONTROL_TOKEN.split(',').filter(Boolean);
  const tls: ControlTls = {
    ca: read(env.TASKLINE_CONTROL_TLS_CA),
    cert: read(env.TASKLINE_CONTROL_TLS_CERT),
    key: read(env.TASKLINE_CONTROL_TLS_KEY),
    serverName: env.TASKLINE_CONTROL_TLS_SERVER_NAME,
  };
  if (!tls.cert !== !tls.key) {
    throw new ControlConfigError('TASKLINE_CONTROL_TLS_CERT and TASKLINE_CONTROL_TLS_KEY go together');
  }
  const clientCerts = side === 'scheduler' ? tls.ca !== null : tls.cert !== null;
  if (tokens.length === 0 && !(clientCerts && !env.TASKLINE_CONTROL_PLAINTEXT)) {
    throw new ControlConfigError(
      side === 'scheduler'
        ? 'the control plane authenticates workers: set TASKLINE_CONTROL_TOKEN, or TASKLINE_CONTROL_TLS_CA to require client certificates'
        : 'the control plane authenticates workers: set TASKLINE_CONTROL_TOKEN, or TASKLINE_CONTROL_TLS_CERT and _KEY (a client certificate)',
    );
  }
  if (env.TASKLINE_CONTROL_PLAINTEXT) return { tokens, tls: null };
  if (side === 'scheduler' && !tls.cert) {
    throw new ControlConfigError(
      'the control plane is TLS: set TASKLINE_CONTROL_TLS_CERT and TASKLINE_CONTROL_TLS_KEY, or TASKLINE_CONTROL_PLAINTEXT=true (a trusted network only)',
    );
  }
  return { tokens, tls };
}

/** The scheduler's listener credentials: TLS with client certificates required when a CA is given. */
export function serverCredentials(security: ControlSecurity): grpc.ServerCredentials {
  const { tls } = security;
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    tls.ca,
    [{ cert_chain: tls.cert!, private_key: tls.key! }],
    tls.ca !== null,
  );
}

/** A worker's channel credentials, and the channel option that names the scheduler's certificate. */
export function clientCredentials(security: ControlSecurity): {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
} {
  const { tls } = security;
  if (!tls) return { credentials: grpc.credentials.createInsecure(), options: {} };
  return {
    credentials: grpc.credentials.createSsl(tls.ca, tls.key, tls.cert),
    options: tls.serverName ? { 'grpc.ssl_target_name_override': tls.serverName } : {},
  };
}

/** The metadata a worker's `Connect` carries. */
export function tokenMetadata(security: ControlSecurity): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (security.tokens[0]) metadata.set(CONTROL_TOKEN_HEADER, `Bearer ${security.tokens[0]}`);
  return metadata;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Whether a caller's metadata carries an accepted token. Compared as digests in constant time, so
 * neither a token's bytes nor its length leak through timing. With no token configured, the TLS
 * layer has already required a client certificate.
 */
export function tokenAccepted(security: ControlSecurity, metadata: grpc.Metadata): boolean {
  if (security.tokens.length === 0) return true;
  const [sent] = metadata.get(CONTROL_TOKEN_HEADER);
  const given = digest(typeof sent === 'string' ? sent.replace(/^Bearer /, '') : '');
  let accepted = false;
  for (const token of security.tokens) accepted = timingSafeEqual(digest(token), given) || accepted;
  return accepted;
}
