// node oidc-provider configured as bench/peers.py's peer: one client_credentials client
// (client_secret_basic) whose access tokens are JWTs signed with ES256, like identityctl's,
// at identityctl's token path (/oauth2/token), so one client drives both. Keys live in
// memory; JWT access tokens are not stored; nothing is logged per request.
//
//   node bench/peers/oidc-provider.js PORT CLIENT_ID CLIENT_SECRET
//
// It prints "listening on http://127.0.0.1:PORT" once it answers.
import { generateKeyPairSync } from 'node:crypto';

import Provider from 'oidc-provider';

const [port, clientId, clientSecret] = process.argv.slice(2);
if (!port || !clientId || !clientSecret) {
  console.error('usage: node oidc-provider.js PORT CLIENT_ID CLIENT_SECRET');
  process.exit(2);
}

const issuer = `http://127.0.0.1:${port}`;
const resource = `${issuer}/api`;
const signingKey = {
  ...generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }),
  alg: 'ES256',
  use: 'sig',
};

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'ES256',
  }],
  routes: { token: '/oauth2/token' },
  jwks: { keys: [signingKey] },
  enabledJWA: { idTokenSigningAlgValues: ['ES256'] },
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: 'api',
        audience: resource,
        accessTokenTTL: 600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
});

provider.listen(Number(port), '127.0.0.1', () => {
  console.log(`listening on ${issuer}`);
});
