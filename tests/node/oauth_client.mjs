// One step of an OAuth client, done by panva's openid-client (a real client library nobody
// here wrote): reads {issuer, clientId, auth, dpop?, step, ...} as JSON on standard input and
// prints the step's result, or {"error": {...}} when the library or the server refused, as JSON.
// Keys come in as JWKs from the Python test (tests/support/openid_client.py), so a DPoP key
// or a client key lives across steps.
import * as client from 'openid-client'

const input = JSON.parse(await new Promise((resolve) => {
  let text = ''
  process.stdin.on('data', (chunk) => { text += chunk })
  process.stdin.on('end', () => resolve(text))
}))

const ALGORITHMS = {
  EC: { name: 'ECDSA', namedCurve: 'P-256' },
  RSA: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
}

async function privateKey (jwk) {
  return crypto.subtle.importKey('jwk', jwk, ALGORITHMS[jwk.kty], false, ['sign'])
}

async function keyPair (jwk) {
  const { d, ...publicJwk } = jwk
  return {
    privateKey: await privateKey(jwk),
    publicKey: await crypto.subtle.importKey('jwk', publicJwk, ALGORITHMS[jwk.kty], true, ['verify']),
  }
}

async function clientAuthentication (auth) {
  switch (auth.method) {
    case 'private_key_jwt':
      return client.PrivateKeyJwt({ key: await privateKey(auth.jwk), kid: auth.jwk.kid },
        auth.audience ? { [client.modifyAssertion]: (header, payload) => { payload.aud = auth.audience } } : {})
    case 'client_secret_basic':
      return client.ClientSecretBasic(auth.secret)
    default:
      return client.None()
  }
}

function parameters (values) {
  const search = new URLSearchParams()
  for (const [name, value] of Object.entries(values || {})) {
    for (const item of Array.isArray(value) ? value : [value]) search.append(name, item)
  }
  return search
}

function tokens (result) {
  return { ...result, claims: result.id_token ? result.claims() : undefined }
}

async function run () {
  if (input.step === 'register') { // RFC 7591 at the issuer's registration_endpoint
    const registered = await client.dynamicClientRegistration(new URL(input.issuer),
      input.metadata, await clientAuthentication(input.auth || {}),
      { execute: [client.allowInsecureRequests] })
    return registered.clientMetadata()
  }
  const config = await client.discovery(new URL(input.issuer), input.clientId, {},
    await clientAuthentication(input.auth || {}), { execute: [client.allowInsecureRequests] })
  const options = input.dpop ? { DPoP: client.getDPoPHandle(config, await keyPair(input.dpop)) } : {}
  switch (input.step) {
    case 'client_credentials':
      return tokens(await client.clientCredentialsGrant(config, parameters(input.parameters), options))
    case 'par': {
      const verifier = client.randomPKCECodeVerifier()
      const state = client.randomState()
      const nonce = client.randomNonce()
      const url = await client.buildAuthorizationUrlWithPAR(config, parameters({
        redirect_uri: input.redirectUri, scope: input.scope || 'openid', state, nonce,
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256', ...input.parameters,
      }), options)
      return { url: url.href, verifier, state, nonce }
    }
    case 'code':
      return tokens(await client.authorizationCodeGrant(config, new URL(input.callback), {
        pkceCodeVerifier: input.verifier, expectedState: input.state, expectedNonce: input.nonce,
      }, undefined, options))
    case 'refresh':
      return tokens(await client.refreshTokenGrant(config, input.refreshToken, undefined, options))
    case 'userinfo':
      return await client.fetchUserInfo(config, input.accessToken, client.skipSubjectCheck, options)
    case 'token_exchange':
      return tokens(await client.genericGrantRequest(config,
        'urn:ietf:params:oauth:grant-type:token-exchange', parameters(input.parameters), options))
    case 'device_start':
      return await client.initiateDeviceAuthorization(config, parameters(input.parameters))
    case 'device_poll':
      return tokens(await client.pollDeviceAuthorizationGrant(config, input.authorization, undefined, {
        ...options, signal: AbortSignal.timeout((input.seconds || 60) * 1000),
      }))
    default:
      throw new Error(`unknown step ${input.step}`)
  }
}

try {
  process.stdout.write(JSON.stringify(await run()))
} catch (failure) {
  process.stdout.write(JSON.stringify({
    error: {
      name: failure.name, code: failure.code, message: failure.message,
      error: failure.error, error_description: failure.error_description, status: failure.status,
      cause: failure.cause instanceof Error ? failure.cause.message : undefined,
    },
  }))
}
