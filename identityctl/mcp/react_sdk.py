"""svc_integrate_react_sdk: how a React app signs users in and up with THIS deployment.

identityctl has no React SDK of its own. Mode 1 (redirect to the hosted sign-in page,
authorization code + PKCE) uses `react-oidc-context` over `oidc-client-ts`, both maintained
npm packages; the snippets follow their real API (AuthProvider props are oidc-client-ts
`UserManagerSettings` plus `onSigninCallback`; `useAuth()` gives `isLoading`, `error`,
`isAuthenticated`, `user`, `signinRedirect`, `removeUser`). Mode 2 (the app draws its own
sign-in) and app-native sign-up drive POST /flow/execute and the WebAuthn browser calls with
plain fetch, so they need no package at all.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from identityctl.errors import InvalidField
from identityctl.mcp.schemas import GuideSection, ReactIntegrationGuide

PACKAGES = ["react-oidc-context", "oidc-client-ts"]

_REDIRECT_LOGIN = """\
The user is sent to the hosted sign-in page of {{SERVICE_URL}} and comes back to your app
with an authorization code, which oidc-client-ts exchanges (with PKCE S256, which it adds by
itself) for tokens. Passkeys, passwords and sign-up (when the application allows it) are all
handled by the hosted page.

1. Create the application: svc_get_application_templates (take `SPA`), svc_list_themes (put a
   real theme id in `themeId`), set `redirectUris` to your app's callback, e.g.
   `http://localhost:5173/callback`, then svc_create_application. Use its `clientId` below. An
   SPA is a public client: there is no secret to ship.
2. `npm install react-oidc-context oidc-client-ts`

```jsx
// src/main.jsx
import React from "react";
import { createRoot } from "react-dom/client";
import { AuthProvider } from "react-oidc-context";
import App from "./App";

const oidcConfig = {
  authority: "{{AUTHORITY}}",
  client_id: "<CLIENT_ID>",
  redirect_uri: `${window.location.origin}/callback`, // exactly as registered
  response_type: "code",
  scope: "openid profile email",
  // Drop ?code=&state= from the address bar once the tokens are in.
  onSigninCallback: () => {
    window.history.replaceState({}, document.title, window.location.pathname);
  },
};

createRoot(document.getElementById("root")).render(
  <AuthProvider {...oidcConfig}>
    <App />
  </AuthProvider>,
);
```

```jsx
// src/App.jsx
import { useAuth } from "react-oidc-context";

export default function App() {
  const auth = useAuth();
  if (auth.isLoading) return <p>Loading…</p>;
  if (auth.error) return <p>Sign-in failed: {auth.error.message}</p>;
  if (!auth.isAuthenticated) {
    return <button onClick={() => auth.signinRedirect()}>Sign in</button>;
  }
  return (
    <>
      <p>Signed in as {auth.user?.profile.sub}</p>
      <button onClick={() => auth.removeUser()}>Sign out</button>
    </>
  );
}
```

Call your API with `Authorization: Bearer ${auth.user?.access_token}`; the API verifies the
JWT against the `jwks_uri` of {{AUTHORITY}}/.well-known/openid-configuration (issuer
{{AUTHORITY}}, expiry, audience).
"""

_FLOW_CLIENT = """\
Your app draws the sign-in screens itself and drives the flow engine at
{{SERVICE_URL}}/flow/execute; the passkey session stays on the server, the app only carries
`executionId` and `action`. Needs no npm package.

Before you start:
- Create the application (svc_create_application, an SPA works) and note its `id`.
- The page's origin must be in the deployment's `passkey.allowed_origins` and its host must
  be the RP ID (`passkey.rp_id`) or a subdomain of it; https, except on http://localhost.
  Browse to `localhost`, never `127.0.0.1` (an IP address cannot be an RP ID).
- That same setting lets your page call {{SERVICE_URL}}/flow/execute across origins: the
  service answers the CORS preflight and the calls of origins listed there (and only
  those), without cookies. A same-origin proxy is not needed.

```js
// src/identity.js — flow API and WebAuthn JSON helpers (plain fetch, no dependencies)
const SERVICE_URL = "{{SERVICE_URL}}";
const APPLICATION_ID = "<APPLICATION_ID>";

async function executeFlow(body) {
  const response = await fetch(`${SERVICE_URL}/flow/execute`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const result = await response.json();
  // Errors are {code, message, description}.
  if (!response.ok) throw new Error(result.description || result.message);
  // {executionId, flowStatus: INCOMPLETE|COMPLETE|ERROR, type, data: {inputs, actions,
  //  additionalData}, assertion (on COMPLETE), failureReason}
  return result;
}

export const startFlow = (flowType) =>
  executeFlow({ applicationId: APPLICATION_ID, flowType }); // AUTHENTICATION | REGISTRATION

export const continueFlow = (executionId, action, inputs) =>
  executeFlow({ executionId, action, inputs });

const fromBase64url = (text) => {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
  const padded = base64.padEnd(Math.ceil(base64.length / 4) * 4, "=");
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0)).buffer;
};
const toBase64url = (buffer) =>
  btoa(String.fromCharCode(...new Uint8Array(buffer)))
    .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
const withIds = (list) => (list || []).map((c) => ({ ...c, id: fromBase64url(c.id) }));

// additionalData carries the WebAuthn options as JSON text with Base64URL values.
function parseOptions(json) {
  const options = JSON.parse(json);
  return options.publicKey || options;
}

export async function getPasskey(passkeyChallenge) {
  const options = parseOptions(passkeyChallenge);
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON
    ? PublicKeyCredential.parseRequestOptionsFromJSON(options)
    : { ...options, challenge: fromBase64url(options.challenge),
        allowCredentials: withIds(options.allowCredentials) };
  const credential = await navigator.credentials.get({ publicKey });
  const { response } = credential;
  return {
    credentialId: credential.id,
    clientDataJSON: toBase64url(response.clientDataJSON),
    authenticatorData: toBase64url(response.authenticatorData),
    signature: toBase64url(response.signature),
    userHandle: response.userHandle ? toBase64url(response.userHandle) : "",
  };
}

export async function createPasskey(passkeyCreationOptions, credentialName) {
  const options = parseOptions(passkeyCreationOptions);
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON
    ? PublicKeyCredential.parseCreationOptionsFromJSON(options)
    : { ...options, challenge: fromBase64url(options.challenge),
        user: { ...options.user, id: fromBase64url(options.user.id) },
        excludeCredentials: withIds(options.excludeCredentials) };
  const credential = await navigator.credentials.create({ publicKey });
  return {
    credentialId: credential.id,
    clientDataJSON: toBase64url(credential.response.clientDataJSON),
    attestationObject: toBase64url(credential.response.attestationObject),
    transports: (credential.response.getTransports?.() || []).join(","),
    credentialName,
  };
}
```

```jsx
// src/FlowForm.jsx — renders whatever step the flow is at; used for sign-in and sign-up
import { useEffect, useState } from "react";
import { continueFlow, createPasskey, getPasskey, startFlow } from "./identity";

export default function FlowForm({ flowType, onComplete }) {
  const [step, setStep] = useState(null);
  const [values, setValues] = useState({});
  const [error, setError] = useState("");

  useEffect(() => {
    startFlow(flowType).then(setStep, (e) => setError(e.message));
  }, [flowType]);

  async function submit(action) {
    setError("");
    try {
      const extra = step.data?.additionalData || {};
      let inputs = { ...values };
      // Only the action that takes the passkey's result runs the ceremony ("use a password
      // instead" must not).
      const takesPasskey = (action.inputs || []).includes("credentialId");
      if (takesPasskey && extra.passkeyChallenge) {
        inputs = { ...inputs, ...(await getPasskey(extra.passkeyChallenge)) };
      } else if (takesPasskey && extra.passkeyCreationOptions) {
        const passkey = await createPasskey(extra.passkeyCreationOptions, "My passkey");
        inputs = { ...inputs, ...passkey };
      }
      const next = await continueFlow(step.executionId, action.ref, inputs);
      if (next.flowStatus === "COMPLETE") return onComplete(next);
      if (next.flowStatus === "ERROR") return setError(next.failureReason || "Failed");
      setStep(next);
      setValues({});
      if (next.failureReason) setError(next.failureReason);
    } catch (e) {
      // NotAllowedError: the user cancelled or user verification failed.
      setError(e.message);
    }
  }

  if (!step) return <p>{error || "Loading…"}</p>;
  const fields = (step.data?.inputs || []).filter((input) => input.type !== "HIDDEN");
  // "given_name" -> "Given name": what a person reads when the flow gives no label.
  const humanize = (id) => id.replace(/[_-]+/g, " ").replace(/^./, (c) => c.toUpperCase());
  return (
    <form onSubmit={(e) => e.preventDefault()}>
      {fields.map((input) => (
        <label key={input.identifier} className="field">
          {input.label || humanize(input.identifier)}
          <input
            name={input.identifier}
            type={input.type === "PASSWORD_INPUT" ? "password" : "text"}
            autoComplete={input.type === "PASSWORD_INPUT" ? "current-password" : "username"}
            required={input.required}
            value={values[input.identifier] || ""}
            onChange={(e) => setValues({ ...values, [input.identifier]: e.target.value })}
          />
        </label>
      ))}
      {(step.data?.actions || []).map((action) => (
        <button key={action.ref} type="submit" onClick={() => submit(action)}>
          {action.label || humanize(action.ref)}
        </button>
      ))}
      {error && <p role="alert">{error}</p>}
    </form>
  );
}
```

Sign in with `<FlowForm flowType="AUTHENTICATION" onComplete={({ assertion }) => ...} />`. On
COMPLETE the response carries `assertion`, a JWT signed by {{AUTHORITY}}: send it to your
backend, which verifies it against the `jwks_uri` of
{{AUTHORITY}}/.well-known/openid-configuration (signature, issuer, expiry) before it trusts the
user id in `sub`. Never trust it in the browser alone.
"""

_SIGN_UP = """\
Sign-up inside your app runs the application's REGISTRATION flow with the same `FlowForm`
(Mode 2 above):

1. Allow it: svc_update_application with `isRegistrationFlowEnabled: true` and a
   `registrationFlowId` (svc_list_flows with flow_type REGISTRATION); the user type new users
   get must allow self-registration (svc_list_user_types, `allowSelfRegistration`).
2. Render `<FlowForm flowType="REGISTRATION" onComplete={...} />`. The prompts collect the
   attributes the flow asks for (username, email, ...); a provisioning step creates the user;
   only then does the flow send `data.additionalData.passkeyCreationOptions`, and `FlowForm`
   runs `navigator.credentials.create()` and posts `credentialId`, `clientDataJSON`,
   `attestationObject`, `transports` and `credentialName` with the step's action. The
   response reports the new credential (`passkeyCredentialID` in `additionalData`) or the
   next step.

With Mode 1 no code is needed: once registration is enabled for the application, the hosted
page at {{SERVICE_URL}} offers sign-up itself.
"""


def integration_guide(*, service_url: str, issuer: str) -> ReactIntegrationGuide:
    """The guide with ``service_url`` substituted; ``issuer`` is the OIDC authority."""
    parts = urlsplit(service_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidField("service_url", f"must be an absolute http(s) URL, got {service_url!r}")
    base, issuer = service_url.rstrip("/"), issuer.rstrip("/")

    def fill(text: str) -> str:
        return text.replace("{{SERVICE_URL}}", base).replace("{{AUTHORITY}}", issuer)

    return ReactIntegrationGuide(
        service_url=base,
        authority=issuer,
        packages=PACKAGES,
        endpoints={
            "discovery": f"{issuer}/.well-known/openid-configuration",
            "authorize": f"{base}/oauth2/authorize",
            "token": f"{base}/oauth2/token",
            "flow_execute": f"{base}/flow/execute",
        },
        sections=[
            GuideSection(title="Mode 1: redirect-based login (react-oidc-context, PKCE)",
                         markdown=fill(_REDIRECT_LOGIN)),
            GuideSection(title="Mode 2: self-hosted login (POST /flow/execute + WebAuthn)",
                         markdown=fill(_FLOW_CLIENT)),
            GuideSection(title="App-native sign-up (REGISTRATION flow)", markdown=fill(_SIGN_UP)),
        ],
    )
