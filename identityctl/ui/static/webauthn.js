// WebAuthn JSON <-> the browser's objects, for the hosted pages (gate.js, account.js and the
// console's admin*.js): the standard parse*OptionsFromJSON and toJSON where the browser has
// them, Base64URL by hand where it does not. Loaded before the page's own script.
"use strict";

(() => {
  // --- Base64URL <-> bytes, for browsers without the WebAuthn JSON helpers -----------------

  function bytesFromBase64url(text) {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
    const binary = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0)).buffer;
  }

  function base64urlFromBytes(buffer) {
    if (!buffer) return undefined;
    let binary = "";
    for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function withIds(list) {
    return (list || []).map((item) => ({ ...item, id: bytesFromBase64url(item.id) }));
  }

  function creationOptions(json) {
    if (PublicKeyCredential.parseCreationOptionsFromJSON) {
      return PublicKeyCredential.parseCreationOptionsFromJSON(json);
    }
    return { ...json, challenge: bytesFromBase64url(json.challenge),
      user: { ...json.user, id: bytesFromBase64url(json.user.id) },
      excludeCredentials: withIds(json.excludeCredentials) };
  }

  function requestOptions(json) {
    if (PublicKeyCredential.parseRequestOptionsFromJSON) {
      return PublicKeyCredential.parseRequestOptionsFromJSON(json);
    }
    return { ...json, challenge: bytesFromBase64url(json.challenge),
      allowCredentials: withIds(json.allowCredentials) };
  }

  function credentialJSON(credential) {
    if (typeof credential.toJSON === "function") return credential.toJSON();
    const response = credential.response;
    return { id: credential.id, rawId: base64urlFromBytes(credential.rawId),
      type: credential.type, response: {
        clientDataJSON: base64urlFromBytes(response.clientDataJSON),
        attestationObject: base64urlFromBytes(response.attestationObject),
        authenticatorData: base64urlFromBytes(response.authenticatorData),
        signature: base64urlFromBytes(response.signature),
        userHandle: base64urlFromBytes(response.userHandle),
        transports: response.getTransports ? response.getTransports() : undefined,
      } };
  }

  // The Signal API (WebAuthn L3 §5.1.10): tells the person's passkey provider what this
  // service knows, so it stops offering passkeys deleted here and shows current names. Only
  // where the browser has it; a refusal changes nothing the page does.
  function signal(name, options) {
    if (typeof window.PublicKeyCredential !== "function" ||
        typeof PublicKeyCredential[name] !== "function") return;
    PublicKeyCredential[name](options).catch(() => {});
  }

  window.identityctlWebAuthn = Object.freeze({ creationOptions, requestOptions, credentialJSON,
    signal });
})();
