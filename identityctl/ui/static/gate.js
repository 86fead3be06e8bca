// The hosted UI ("gate"). Renders any flow step from /flow/execute generically: inputs become
// labelled fields, actions become buttons, passkey steps run the browser's WebAuthn
// ceremony. When the flow completes, its assertion goes to /oauth2/auth/callback and the
// browser follows the redirect_uri it answers. No framework, no build step, no inline code.
"use strict";

(() => {
  const t = window.identityctlText;
  const root = document.getElementById("gate");
  if (!root) return;
  const page = root.dataset;
  const $ = (id) => document.getElementById(id);
  // A sign-in through another service (an identity provider) leaves this page and comes
  // back to /gate/federated; what the page needs to go on waits in this tab's storage.
  const FEDERATED = "identityctl.federated";
  const FEDERATED_INPUT = "idpId";

  function pendingFederation() {
    try {
      return JSON.parse(sessionStorage.getItem(FEDERATED) || "null");
    } catch (unavailable) {
      return null;
    }
  }

  if (page.mode === "federated") {  // back from the provider: hand its answer to the page
    const pending = pendingFederation();
    const params = new URLSearchParams(window.location.search);
    history.replaceState(null, "", window.location.pathname);  // the code leaves the address
    if (!pending) {
      const error = $("error");
      error.textContent = t("This sign-in was started in another browser or tab. Start " +
        "again from the application.");
      error.hidden = false;
      return;
    }
    const callback = {};
    for (const name of ["code", "state", "error", "error_description"]) {
      if (params.get(name)) callback[name] = params.get(name);
    }
    sessionStorage.setItem(FEDERATED, JSON.stringify({ ...pending, callback }));
    window.location.replace(pending.returnTo);
    return;
  }

  const form = $("step");
  const signingUp = page.mode === "signup";
  const recovering = page.mode === "recover";  // "Lost your passkey?": the RECOVERY flow
  const signingIn = !signingUp && !recovering;
  const newCredentials = signingUp || recovering;  // a password typed here is a new one
  const passkeysSupported = typeof window.PublicKeyCredential === "function" &&
    !!navigator.credentials;

  const PASSKEY_INPUTS = new Set(["credentialId", "clientDataJSON", "authenticatorData",
    "signature", "userHandle", "attestationObject", "transports", "credentialName"]);
  const INPUT_TYPES = {
    TEXT_INPUT: "text", PASSWORD_INPUT: "password", OTP_INPUT: "text", EMAIL_INPUT: "email",
  };
  const ERROR_TEXT = {
    invalid_credentials: "The username or password is not right. Try again.",
    authentication_failed: "That did not work. Check what you entered and try again.",
    execution_expired: "This sign-in took too long. Start again.",
    execution_not_found: "This sign-in has ended. Start again.",
    execution_completed: "This sign-in has already finished. Start again.",
    execution_conflict: "This sign-in is busy in another tab. Start again.",
    execution_other_browser: "This sign-in was started in another browser. Start again " +
      "here.",
    no_passkeys: "There is no passkey for this account yet. Use your password instead.",
    username_taken: "That username is taken. Choose another one.",
    weak_password:
      "Choose a longer or less common password (at least 8 characters, not your username).",
    registration_disabled: "This application does not offer sign-up.",
    authorization_request_invalid:
      "This sign-in request has expired or was already used. Return to the application " +
      "and sign in again.",
    too_many_attempts: "Too many attempts. Wait a few minutes, then try again.",
    origin_mismatch:
      "Passkeys cannot be used from this address: it is not one this service allows.",
    invalid_origin:
      "Passkeys cannot be used from this address: it is not one this service allows.",
    assertion_reused: "This sign-in was already used. Start again.",
    consent_invalid: "This approval has expired or was already answered. Start again.",
    missing_field: "A field this step needs is empty. Fill it in and try again.",
    invalid_field: "Check what you entered and try again.",
    invalid_email: "Enter one e-mail address, like name@example.com.",
    recovery_not_offered: "This application cannot recover accounts. Recover yours on " +
      "this service's account page, then sign in to the application again.",
    possible_clone: "This passkey could not be used safely. Use another way to sign in, or " +
      "ask an administrator to check it.",
    invalid_signature: "This passkey could not be checked. Try again, or use another way.",
    unknown_credential: "This passkey is not registered here. Use another one, or another " +
      "way to sign in.",
    challenge_mismatch: "This passkey request has expired. Try again.",
    user_verification_required: "Your device must confirm it is you (fingerprint, face or " +
      "screen lock). Try again.",
    network: "The service could not be reached. Check your connection and try again.",
    session_expired: "Your sign-in has ended. Sign in again.",
    invalid_code: "That code is not right. Check the e-mail and try again.",
    code_expired: "This code has expired. Ask for a new one.",
    too_many_codes: "No more codes can be sent for this try. Start again in a few minutes.",
    code_not_sent: "No code was sent yet. Ask for one.",
    email_not_configured: "This service cannot send e-mail. Use a recovery code, or ask " +
      "an administrator for help.",
    invalid_recovery_code: "That recovery code is not right, or was used already.",
    invalid_totp_code: "That code is not right, or was used already. Enter the code your " +
      "authenticator app shows now.",
    passwords_not_allowed: "Passwords are not used here. Sign in with a passkey.",
    user_not_identified: "This step needs you to be identified first. Start again.",
    federation_denied: "Signing in with the other service was cancelled or refused. " +
      "Choose another way to sign in.",
    federation_state_mismatch: "The other service's answer is not for this sign-in. " +
      "Start again.",
    federation_token_invalid: "The other service's answer could not be trusted. Try again, " +
      "or choose another way to sign in.",
    federation_failed: "Signing in with the other service did not work. Try again, or " +
      "choose another way to sign in.",
    federation_unreachable: "The other service could not be reached. Try again later, or " +
      "choose another way to sign in.",
    federated_link_required: "You already have an account with this e-mail address. Sign " +
      "in to it once here, and your account at the other service is connected to it.",
    provider_not_found: "This way to sign in is no longer offered. Choose another.",
    self_registration_disabled: "New accounts cannot be made here. Ask an administrator.",
    authenticator_not_allowed: "This security key is not allowed here. Use one of the keys " +
      "your organisation approved.",
  };
  // Reasons that need no words: the person is simply back at the choices.
  // (federated_link_confirm: the step itself asks, naming both accounts.)
  // (passkey_upgrade: the page offers the passkey itself, see upgrade().)
  const SILENT = new Set(["federation_cancelled", "federated_link_confirm", "passkey_upgrade"]);
  const CEREMONY_TEXT = {
    NotAllowedError:
      "The passkey request was cancelled or timed out, or this device has no passkey for " +
      "this site. Try again, or use another way to sign in.",
    AbortError: "The passkey request was cancelled.",
    InvalidStateError: "This device already has a passkey for this account.",
    SecurityError:
      "This page's address cannot use passkeys (it does not match the site's domain).",
    NotSupportedError: "This device's authenticator cannot make a passkey this site accepts.",
  };

  const { creationOptions, requestOptions, credentialJSON, signal } = window.identityctlWebAuthn;

  // What this browser can do for the automatic upgrade to a passkey after a sign-in
  // without one, said to the flow in the input "passkeyUpgrade": "conditional" (its
  // password manager creates one without a dialog: Conditional Create), "modal" (only the
  // dialog), or nothing (no passkeys here: the flow offers none).
  const UPGRADE_INPUT = "passkeyUpgrade";
  const upgradeAbility = (async () => {
    if (!passkeysSupported) return "";
    try {
      const capabilities = PublicKeyCredential.getClientCapabilities
        ? await PublicKeyCredential.getClientCapabilities() : {};
      return capabilities.conditionalCreate ? "conditional" : "modal";
    } catch (unanswered) {
      return "modal";
    }
  })();

  // --- talking to the service --------------------------------------------------------------

  class ServiceError extends Error {
    constructor(body, status) {
      super((body && (body.description || body.message)) || `HTTP ${status}`);
      this.code = (body && body.code) || "http_" + status;
    }
  }

  async function post(url, body) {
    let response;
    try {
      response = await fetch(url, { method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    } catch (failure) {
      throw new ServiceError({ code: "network", message: "The service could not be reached. " +
        "Check your connection and try again." }, 0);
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new ServiceError(data, response.status);
    return data;
  }

  // --- showing things ----------------------------------------------------------------------

  function show(element, text) {
    element.textContent = text || "";
    element.hidden = !text;
  }

  function showError(text) {
    show($("error"), text);
  }

  function setStatus(text) {
    $("status").textContent = text || "";
  }

  function busy(isBusy) {
    for (const control of form.querySelectorAll("button, input")) control.disabled = isBusy;
    root.setAttribute("aria-busy", String(isBusy));
  }

  // People read plain words, never a code or a field path: a code without its own text
  // gets the general one.
  const GENERAL = t("That did not work. Check what you entered and try again.");

  function textFor(code) {
    if (SILENT.has(code)) return "";
    return ERROR_TEXT[code] ? t(ERROR_TEXT[code]) : GENERAL;
  }

  function messageFor(failure) {
    if (failure instanceof ServiceError) return textFor(failure.code);
    const ceremonyText = CEREMONY_TEXT[failure && failure.name];
    return ceremonyText ? t(ceremonyText) :
      t("Something went wrong with the passkey. Try again, or use another way to sign in.");
  }

  function humanize(identifier) {
    const words = identifier.replace(/([a-z])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ");
    return words.charAt(0).toUpperCase() + words.slice(1).toLowerCase();
  }

  function autocompleteFor(input) {
    const name = (input.identifier || input.ref || "").toLowerCase();
    if (input.type === "PASSWORD_INPUT") {
      return newCredentials ? "new-password" : "current-password";
    }
    if (input.type === "OTP_INPUT") return "one-time-code";
    if (name.includes("email")) return "email";
    // "webauthn": the browser offers the person's passkeys in this field's suggestions.
    if (name.includes("user")) return signingIn ? "username webauthn" : "username";
    if (name.includes("given")) return "given-name";
    if (name.includes("family")) return "family-name";
    return "off";
  }

  // On sign-up, what may stay empty says so: an input no action requires and every action
  // takes. One only some actions take (the e-mail code: "Send a new code" does not) is
  // needed by those, so it gets no mark. (A sign-in's fields serve several ways in: no marks.)
  function optional(step, input) {
    const name = input.identifier || input.ref;
    return signingUp && !input.required && ownActions(step).every(
      (action) => !Array.isArray(action.inputs) || action.inputs.includes(name));
  }

  function field(input, index, markOptional) {
    const wrapper = document.createElement("div");
    wrapper.className = "field";
    const id = `input-${index}`;
    const label = document.createElement("label");
    label.htmlFor = id;
    const name = t(input.label || humanize(input.identifier || input.ref));
    label.textContent = name + (markOptional ? t(" (optional)") : "");
    const control = document.createElement("input");
    control.id = id;
    control.name = input.identifier || input.ref;
    control.type = INPUT_TYPES[input.type] || "text";
    control.required = !!input.required;
    control.autocomplete = autocompleteFor(input);
    control.dataset.label = name;
    if (input.type === "OTP_INPUT") control.inputMode = "numeric";
    // What is wrong with this field is said next to it (and read out when it appears).
    const problem = document.createElement("p");
    problem.className = "field-error";
    problem.id = `${id}-error`;
    problem.setAttribute("aria-live", "polite");
    problem.hidden = true;
    control.addEventListener("input", () => fieldProblem(control, ""));
    wrapper.append(label, control, problem);
    const described = [problem.id];
    if (newCredentials && input.type === "PASSWORD_INPUT") {  // the rules before a try
      const hint = document.createElement("p");
      hint.className = "hint";
      hint.id = `${id}-hint`;
      hint.textContent = t("At least 8 characters, not your username or a common password.");
      described.push(hint.id);
      wrapper.append(hint);
    }
    control.setAttribute("aria-describedby", described.join(" "));
    return wrapper;
  }

  function fieldProblem(control, text) {
    show($(`${control.id}-error`), text);
    if (text) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  }

  // The fields an action takes that are still empty: the ones marked required, or, after
  // the service named a missing field (``any``), every empty one it takes.
  function emptyFields(button, any) {
    const names = (button.dataset.inputs || "").split(" ").filter(Boolean);
    return names.map((name) => form.elements.namedItem(name)).filter((control) =>
      control instanceof HTMLInputElement && !control.value.trim() && (any || control.required));
  }

  // Says which field is missing, next to it, and puts the cursor there. False: none found.
  function askForMissing(button, any) {
    const [missing] = emptyFields(button, any);
    if (!missing) return false;
    fieldProblem(missing, t("{field} is missing.", { field: missing.dataset.label }));
    missing.focus();
    return true;
  }

  // --- one flow step -----------------------------------------------------------------------

  let executionId = page.executionId || "";

  function passkeyCeremony(step) {
    const extra = (step.data && step.data.additionalData) || {};
    if (extra.passkeyCreationOptions) return { kind: "create", options: extra.passkeyCreationOptions };
    if (extra.passkeyChallenge) return { kind: "get", options: extra.passkeyChallenge };
    return null;
  }

  function isFallback(action) {
    // The engine lists what each action takes: only the one taking the passkey's result runs
    // the ceremony. Older steps without that list: judge by the action's name.
    if (Array.isArray(action.inputs)) {
      return !action.inputs.includes("credentialId");
    }
    return /password|fallback|skip|other|cancel|back/i.test(`${action.ref} ${action.label || ""}`);
  }

  // --- one "Continue" (identifier first) -----------------------------------------------------
  // A sign-in step that offers a passkey path (an action taking at most the username) and a
  // password path shows the username and one Continue. Continue tries the passkey: the
  // service answers a passkey request for any name (decoy ids for a name without passkeys,
  // so nobody learns who has one), and the browser finds the passkey or says there is
  // none; then the password field appears. A name that signed in with its password on this
  // browser goes straight to the password (remembered here only, never sent).

  const PASSWORD_FIRST = "identityctl.passwordFirst";
  let passwordPhase = false;  // the password field is shown (chosen, or no passkey used)
  let codeSentTo = "";  // where sign-up sent its e-mail code
  let signedInWith = null;  // {username, method} of the way in that is finishing

  const isFederated = (action) => Array.isArray(action.inputs) &&
    action.inputs.includes(FEDERATED_INPUT);

  // The step's own actions: the ones signing in through a provider are the provider buttons.
  function ownActions(step) {
    return ((step.data && step.data.actions) || []).filter((action) => !isFederated(action));
  }

  function continuePaths(step) {
    const actions = ownActions(step);
    if (!signingIn || passkeyCeremony(step) || !actions.every((a) => Array.isArray(a.inputs))) {
      return null;
    }
    const password = actions.find((action) => action.inputs.includes("password"));
    const passkey = actions.find((action) => action !== password &&
      action.inputs.every((name) => name === "username"));
    return password && passkey && passkeysSupported ? { password, passkey } : null;
  }

  function passwordFirstNames() {
    try {
      return JSON.parse(localStorage.getItem(PASSWORD_FIRST) || "[]");
    } catch (unavailable) {
      return [];
    }
  }

  function rememberMethod(username, method) {
    if (!username) return;
    const names = passwordFirstNames().filter((name) => name !== username);
    if (method === "password") names.unshift(username);
    try {
      localStorage.setItem(PASSWORD_FIRST, JSON.stringify(names.slice(0, 20)));
    } catch (unavailable) { /* private mode: Continue tries the passkey each time */ }
  }

  // A submit button for ``value``, running the action that takes ``inputs`` (what Enter in
  // a field looks for).
  function actionButton(text, value, secondary, inputs) {
    const element = document.createElement("button");
    element.type = "submit";
    element.value = value;
    element.textContent = text;
    if (secondary) element.className = "secondary";
    element.dataset.ceremony = "";
    element.dataset.inputs = inputs.join(" ");
    return element;
  }

  function renderContinue(step, paths) {
    const inputs = (step.data.inputs || []).filter((input) => input.type !== "HIDDEN" &&
      (passwordPhase || (input.identifier || input.ref) !== "password"));
    inputs.forEach((input, index) => form.append(field(input, index, false)));
    if (passwordPhase) {
      for (const name of paths.password.inputs) {  // the password sign-in needs each of them
        const control = form.elements.namedItem(name);
        if (control instanceof HTMLInputElement) control.required = true;
      }
      const passkey = actionButton(t("Use a passkey instead"), paths.passkey.ref, true, []);
      passkey.dataset.continue = "passkey";
      form.append(actionButton(t("Sign in"), paths.password.ref, false, paths.password.inputs),
        passkey);
    } else {
      const next = actionButton(t("Continue"), paths.passkey.ref, false, ["username"]);
      next.dataset.continue = "auto";
      // Whatever Continue finds, the password is one press away.
      const password = actionButton(t("Use your password"), paths.password.ref, true, []);
      password.dataset.continue = "password";
      form.append(next, password);
    }
  }

  function usePassword() {
    passwordPhase = true;
    render(current);  // keeps the username; the cursor goes to the password
  }

  async function continueSignIn(choice) {
    const username = (visibleInputs().username || "").trim();
    if (choice === "password" ||
        (choice === "auto" && username && passwordFirstNames().includes(username))) {
      usePassword();
      return;
    }
    const paths = continuePaths(current);
    busy(true);
    showError("");
    show($("notice"), "");
    let challenged = null;
    try {
      setStatus(t("Checking…"));
      challenged = await post(page.flowUrl, { executionId, action: paths.passkey.ref,
        inputs: { username } });
      if (!passkeyCeremony(challenged)) {
        await advance(challenged);
        return;
      }
      current = challenged;
      const verify = challenged.data.actions.find((action) => !isFallback(action));
      const inputs = await runCeremony("get", passkeyCeremony(challenged).options,
        { username, offerPassword: true });
      setStatus(t("Checking…"));
      signedInWith = { username, method: "passkey" };
      await advance(await post(page.flowUrl, { executionId, action: verify.ref, inputs }));
    } catch (failure) {
      setStatus("");
      if (failure instanceof ServiceError) {
        showError(messageFor(failure));
        if (/^execution_/.test(failure.code)) offerRestart();
        return;
      }
      // No passkey used: back to the first step. The person's own choice on the page
      // ("Use your password", "Cancel") needs no explanation; the browser's "no" does.
      const back = challenged && challenged.data.actions.find(isFallback);
      if (!back) {
        showError(messageFor(failure));
        return;
      }
      const first = await post(page.flowUrl, { executionId, action: back.ref, inputs: {} })
        .catch((error) => error);
      if (first instanceof ServiceError) {
        showError(messageFor(first));
        return;
      }
      const chosen = failure && failure.chosen;
      passwordPhase = chosen !== "cancel";
      await advance(first);
      if (chosen === "cancel") {
        setStatus(t("The passkey request was cancelled."));
      } else if (!chosen && !username) {
        showError(messageFor(failure));
      } else if (!chosen) {
        show($("notice"), t("No passkey was used. Enter your password, or try your passkey " +
          "again."));
      }
    } finally {
      busy(false);
      afterCeremony();
      const empty = [...form.querySelectorAll("input")].find((control) => !control.value);
      if (empty) empty.focus();
    }
  }

  // "Continue with …": one button per provider the step offers.
  function renderProviders(step) {
    const federated = ((step.data && step.data.actions) || []).find(isFederated);
    let providers = [];
    try {
      providers = JSON.parse(((step.data || {}).additionalData || {}).identityProviders || "[]");
    } catch (unreadable) {
      providers = [];
    }
    if (!federated || !providers.length) return;
    const group = document.createElement("div");
    group.className = "providers";
    const or = document.createElement("p");
    or.className = "or";
    or.textContent = t("or");
    group.append(or);
    for (const provider of providers) {
      const button = document.createElement("button");
      button.type = "submit";
      button.value = federated.ref;
      button.className = `secondary provider provider-${provider.kind}`;
      button.dataset.idp = provider.id;
      button.dataset.ceremony = "";
      button.dataset.inputs = "";
      button.textContent = t("Continue with {provider}", { provider: provider.name });
      group.append(button);
    }
    form.append(group);
  }

  // The language switcher reloads the page, and a reloaded page begins its flow again: it is
  // offered on the opening step only (a refusal there keeps it), never where a later step,
  // a consent question or a half-made account would be lost.
  let openingPrompt = null;
  function offerLanguagesOn(step) {
    const prompt = step && JSON.stringify(((step.data || {}).actions || []).map((a) => a.ref));
    openingPrompt = openingPrompt === null ? prompt : openingPrompt;
    const switcher = document.querySelector("form.languages");
    if (switcher) switcher.hidden = prompt !== openingPrompt;
  }

  function render(step) {
    offerLanguagesOn(step);
    // What the person typed survives a refusal (a wrong password keeps the username;
    // secrets are typed again) and the way from the username to the password.
    const typed = step.failureReason || passwordPhase ? visibleInputs() : {};
    form.replaceChildren();
    show($("notice"), "");
    showError(step.failureReason ? textFor(step.failureReason) : "");
    const data = step.data || {};
    const paths = continuePaths(step);
    if (paths) renderContinue(step, paths);
    const visible = paths ? [] : (data.inputs || []).filter(
      (input) => input.type !== "HIDDEN" && !PASSKEY_INPUTS.has(input.identifier || input.ref));
    visible.forEach((input, index) => form.append(field(input, index, optional(step, input))));
    const ceremony = passkeyCeremony(step);
    const actions = paths ? [] : ownActions(step);
    let primaryShown = false;
    actions.forEach((action) => {
      const runsCeremony = ceremony && !isFallback(action);
      if (runsCeremony && !passkeysSupported) return;
      const button = document.createElement("button");
      button.type = "submit";
      button.value = action.ref;
      button.textContent = action.label ? t(action.label) :
        (runsCeremony ? (ceremony.kind === "create" ? t("Create a passkey") : t("Sign in with a passkey"))
          : humanize(action.ref));
      if (primaryShown) button.className = "secondary";
      primaryShown = true;
      button.dataset.ceremony = runsCeremony ? ceremony.kind : "";
      button.dataset.inputs = (action.inputs || []).join(" ");
      form.append(button);
    });
    renderProviders(step);
    if (ceremony && ceremony.kind === "create") {
      show($("notice"), t("A passkey lets you sign in with your fingerprint, face or screen " +
        "lock instead of a password. It stays on your device."));
    }
    const linking = (data.additionalData || {}).federatedLink;
    if (linking) {  // an upstream account waits: the person decides, knowing both names
      const names = JSON.parse(linking);
      show($("notice"), t("Connect the {provider} account {upstream} to your account " +
        "{account}? Only connect them if both are yours: whoever controls the {provider} " +
        "account can then sign in as {account}.", { provider: names.provider,
        upstream: names.upstreamAccount, account: names.account }));
    }
    if (visible.some((input) => input.identifier === "totpCode")) {
      show($("notice"), t("Enter the code your authenticator app shows for this account. " +
        "Lost your phone? Use one of your recovery codes instead."));
    } else if (visible.some((input) => input.type === "OTP_INPUT")) {
      // Sign-up sends the code to the address just typed (a wrong code keeps saying so);
      // recovery does not tell whether the account has one.
      codeSentTo = (data.additionalData || {}).emailSentTo || (signingUp ? codeSentTo : "");
      show($("notice"), codeSentTo
        ? t("We sent a code to {address}. It works for a few minutes.", { address: codeSentTo })
        : signingUp ? t("We sent a code to your e-mail address. It works for a few minutes.")
          : t("If the account has a confirmed e-mail address, we sent a code to it. It " +
            "works for a few minutes."));
    }
    for (const control of form.querySelectorAll("input")) {
      if (control.type !== "password" && typed[control.name]) control.value = typed[control.name];
    }
    if (ceremony && !passkeysSupported) {
      show($("notice"), t("This browser cannot use passkeys. ") + (actions.some(isFallback)
        ? t("Use another way to sign in below, or switch to a browser that supports passkeys.")
        : t("Switch to a browser that supports passkeys (a current Chrome, Edge, Firefox or Safari).")));
    }
    // Focus where the person goes on: the first empty field (the password after a wrong
    // one), else the first control.
    const empty = [...form.querySelectorAll("input")].find((control) => !control.value);
    const first = empty || form.querySelector("input, button");
    if (first) first.focus();
  }

  // Enter in a field runs the action that takes that field: in the password field, the
  // password sign-in, never the passkey button that comes first on the form.
  form.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || !(event.target instanceof HTMLInputElement)) return;
    const name = event.target.name;
    const takes = [...form.querySelectorAll("button[type=submit]")].filter(
      (button) => (button.dataset.inputs || "").split(" ").includes(name));
    const chosen = event.target.type === "password"
      ? takes.find((button) => !button.dataset.ceremony) : takes[0];
    if (chosen) {
      event.preventDefault();
      chosen.click();
    }
  });

  function visibleInputs() {
    const inputs = {};
    for (const control of form.querySelectorAll("input")) inputs[control.name] = control.value;
    return inputs;
  }

  // The browser's passkey request. While it runs, the page says what is happening and
  // offers the ways out: "Cancel" and, on a sign-in, "Use your password"; each aborts the
  // request (the failure then carries ``chosen``: "cancel" or "password").
  async function runCeremony(kind, optionsText, { username = "", offerPassword = false } = {}) {
    await stopAutofill();  // the browser runs one WebAuthn request at a time
    const options = JSON.parse(optionsText);
    const publicKey = options.publicKey || options;
    setStatus(kind === "create" ? t("Follow your device's prompt to create a passkey…")
      : username ? t("Your browser is asking for a passkey for {username}…", { username })
        : t("Your browser is asking for a passkey…"));
    const aborting = new AbortController();
    let chosen = "";
    const waiting = [...form.querySelectorAll("button")].filter((button) => !button.hidden);
    for (const button of waiting) button.hidden = true;  // only the ways out meanwhile
    const ways = document.createElement("div");
    ways.className = "ways-out";
    for (const [text, choice] of [...(offerPassword ? [[t("Use your password"), "password"]]
      : []), [t("Cancel"), "cancel"]]) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "secondary";
      button.textContent = text;
      button.addEventListener("click", () => {
        chosen = choice;
        aborting.abort();
      });
      ways.append(button);
    }
    form.append(ways);
    let credential;
    try {
      credential = kind === "create"
        ? await navigator.credentials.create({ publicKey: creationOptions(publicKey),
          signal: aborting.signal })
        : await navigator.credentials.get({ publicKey: requestOptions(publicKey),
          signal: aborting.signal });
    } catch (failure) {
      if (chosen) throw Object.assign(new Error("aborted"), { name: "AbortError", chosen });
      throw failure;
    } finally {
      ways.remove();
      for (const button of waiting) button.hidden = false;
    }
    if (!credential) throw Object.assign(new Error("no credential"), { name: "NotAllowedError" });
    return kind === "create" ? creationInputs(credential) : assertionInputs(credential, publicKey);
  }

  // A new passkey as a flow step's inputs (a button's ceremony and the upgrade alike).
  function creationInputs(credential) {
    const json = credentialJSON(credential);
    return { credentialId: json.id, clientDataJSON: json.response.clientDataJSON,
      attestationObject: json.response.attestationObject,
      // No name: the service names the passkey after its authenticator, in the page's
      // language.
      transports: (json.response.transports || []).join(",") };
  }

  // The passkey this page presented last: a sign-in that answers it is unknown here
  // (deleted) tells the browser, which stops offering it (tellUnknown).
  let presented = null;

  // A passkey assertion as a flow step's inputs (a button's ceremony and autofill alike).
  function assertionInputs(credential, publicKey) {
    const json = credentialJSON(credential);
    presented = { rpId: publicKey.rpId || window.location.hostname, credentialId: json.id };
    const inputs = { credentialId: json.id, clientDataJSON: json.response.clientDataJSON,
      authenticatorData: json.response.authenticatorData, signature: json.response.signature };
    if (json.response.userHandle) inputs.userHandle = json.response.userHandle;
    return inputs;
  }

  async function submit(button) {
    showError("");
    for (const control of form.querySelectorAll("input")) fieldProblem(control, "");
    if (askForMissing(button, false)) return undefined;
    if (button.dataset.continue) return continueSignIn(button.dataset.continue);
    const action = button.value;
    const ceremony = button.dataset.ceremony;
    busy(true);
    let next = null;
    try {
      let inputs = button.dataset.idp ? { [FEDERATED_INPUT]: button.dataset.idp }
        : visibleInputs();
      if (ceremony) {
        const options = passkeyCeremony(current).options;
        inputs = { ...inputs, ...(await runCeremony(ceremony, options)) };
      }
      setStatus(t("Checking…"));
      const ability = signingUp ? "" : await upgradeAbility;
      if (ability) inputs[UPGRADE_INPUT] = ability;
      if (signingIn && "password" in inputs) {
        signedInWith = { username: inputs.username, method: "password" };
      }
      next = await post(page.flowUrl, { executionId, action, inputs });
      await advance(next);
    } catch (failure) {
      setStatus("");
      busy(false);
      // The service names the first missing field: say which, next to it.
      if (!(failure instanceof ServiceError && failure.code === "missing_field"
            && askForMissing(button, true))) {
        showError(messageFor(failure));
      }
      if (failure instanceof ServiceError && /^execution_/.test(failure.code)) offerRestart();
    } finally {
      busy(false);
      afterCeremony();
    }
    if (next) createRightAway(next);
    return undefined;
  }

  // Passkey-only sign-up in one step: when the account was just made and the flow's next
  // step only creates its passkey (no other way offered), the browser's prompt opens
  // straight away, within the click that made the account. Anything else waits for a press.
  function createRightAway(step) {
    const ceremony = passkeyCeremony(step);
    const actions = (step.data && step.data.actions) || [];
    if (!signingUp || !ceremony || ceremony.kind !== "create" || actions.length !== 1) return;
    const button = form.querySelector("button[type=submit][data-ceremony=create]");
    if (button) submit(button);
  }

  // --- the whole flow ----------------------------------------------------------------------

  let current = null;

  async function advance(step) {
    current = step;
    executionId = step.executionId || executionId;
    setStatus("");
    $("heading").textContent = pageHeading;  // a step's own heading lasts as long as it
    tellUnknown(step);
    if (step.flowStatus === "COMPLETE") return finish(step);
    if (step.failureReason === "passkey_upgrade") return upgrade(step);
    if (step.flowStatus === "ERROR") {
      form.replaceChildren();
      showError(step.failureReason ? textFor(step.failureReason)
        : t("This sign-in cannot continue."));
      return offerRestart();
    }
    if (newCredentials && passkeyCeremony(step)) {  // the account exists, or is recovered
      $("switch").hidden = true;
    }
    if (step.type === "REDIRECTION" && step.data && step.data.redirectURL) {
      sessionStorage.setItem(FEDERATED, JSON.stringify({ authId: page.authId, executionId,
        returnTo: window.location.href }));
      window.location.assign(step.data.redirectURL);
      return undefined;
    }
    render(step);
    return undefined;
  }

  // The service does not know the passkey the page presented (deleted here; a passkey that
  // never existed gets the same answer, and it says nothing of any account): the browser
  // forgets it (Signal API). Only after a sign-in that presented one.
  function tellUnknown(step) {
    if (!presented || step.failureReason !== "unknown_credential") return;
    signal("signalUnknownCredential", presented);
    presented = null;
  }

  // --- the automatic upgrade to a passkey (after a sign-in without one) --------------------
  // Where the browser has Conditional Create, its password manager is asked to make the
  // passkey without a dialog; it makes it at once or not at all, so the page waits only a
  // moment. Otherwise, or when it made none, the flow's offer decides: "offer" shows one
  // "Create a passkey" step with "Not now"; "conditional" goes straight on. Whatever
  // happens, the sign-in goes on.

  const CONDITIONAL_CREATE_WAIT_MS = 2000;
  const pageHeading = $("heading").textContent;

  async function upgrade(step) {
    const extra = step.data.additionalData || {};
    const actions = step.data.actions || [];
    const create = actions.find((action) => !isFallback(action));
    const notNow = actions.find(isFallback);
    const credential = (await upgradeAbility) === "conditional"
      ? await conditionalCreate(extra.passkeyCreationOptions) : null;
    if (credential && create) {
      return advance(await post(page.flowUrl, { executionId, action: create.ref,
        inputs: creationInputs(credential) }));
    }
    if ((extra.passkeyUpgrade === "offer" && passkeysSupported) || !notNow) {
      render({ ...step, failureReason: "" });
      $("heading").textContent = t("Sign in faster next time");
      return undefined;
    }
    return advance(await post(page.flowUrl, { executionId, action: notNow.ref, inputs: {} }));
  }

  async function conditionalCreate(optionsText) {
    await stopAutofill();  // the browser runs one WebAuthn request at a time
    const options = JSON.parse(optionsText);
    const aborting = new AbortController();
    const waited = setTimeout(() => aborting.abort(), CONDITIONAL_CREATE_WAIT_MS);
    try {
      return await navigator.credentials.create({ mediation: "conditional",
        publicKey: creationOptions(options.publicKey || options), signal: aborting.signal });
    } catch (declined) {
      return null;  // none made (no saved password, turned off, aborted): nothing to say
    } finally {
      clearTimeout(waited);
    }
  }

  async function finish(step) {
    if (!step.assertion) {
      showError(t("The flow finished without signing you in. Start again."));
      return offerRestart();
    }
    setStatus(t("Signed in."));
    if (signedInWith) rememberMethod(signedInWith.username, signedInWith.method);
    return handOff(await post(page.callbackUrl, { authId: page.authId,
      assertion: step.assertion }));
  }

  // --- after the sign-in: back to the client, a refusal, or a consent question -------------

  let consentToken = "";

  function handOff(answer) {
    if (answer.consent) return askConsent(answer.consent, answer.consentToken, answer.signedInAs);
    if (answer.refused) return refuse(answer.refused, answer.redirect_uri);
    setStatus(t("Returning to the application…"));
    window.location.assign(answer.redirect_uri);
    return undefined;
  }

  function paragraph(text) {
    const element = document.createElement("p");
    element.textContent = text;
    return element;
  }

  function askConsent(consent, token, username) {
    consentToken = token;
    offerLanguagesOn(null);
    setStatus("");
    $("switch").hidden = $("recover").hidden = true;  // signed in: no other ways in
    $("heading").textContent = t("Allow {client} to use your account?",
      { client: consent.client });
    form.replaceChildren();
    form.dataset.consent = "true";
    const about = consent.clientHost
      ? t("{client} is published at {host}.", { client: consent.client,
        host: consent.clientHost })
      : consent.registeredItself
        ? t("{client} registered itself with this service: it chose its own name.",
          { client: consent.client })
        : "";
    const asks = document.createElement("ul");
    asks.className = "scopes";
    for (const scope of consent.scopes) {
      const item = document.createElement("li");
      item.textContent = t(scope.description);
      asks.append(item);
    }
    const section = document.createElement("section");
    section.className = "consent";
    if (username) {  // which account answers, before anything is allowed
      const who = paragraph(t("Signed in as {username}", { username }));
      who.className = "signed-in-as";
      section.append(who);
    }
    if (about) section.append(paragraph(about));
    section.append(paragraph(t("It asks to:")), asks);
    if (consent.resources.length) {
      section.append(paragraph(t("Its access works at {resources}.",
        { resources: consent.resources.join(", ") })));
    }
    section.append(paragraph(t("You can take this back at any time.")));
    form.append(section);
    [["allow", t("Allow")], ["deny", t("Deny")]].forEach(([value, text], index) => {
      const button = document.createElement("button");
      button.type = "submit";
      button.value = value;
      button.textContent = text;
      if (index) button.className = "secondary";
      form.append(button);
    });
    $("heading").focus();
    return undefined;
  }

  async function decide(decision) {
    busy(true);
    showError("");
    try {
      const answer = await post(page.consentUrl, { authId: page.authId, consentToken, decision });
      delete form.dataset.consent;
      form.replaceChildren();
      setStatus(t("Returning to the application…"));
      window.location.assign(answer.redirect_uri);
    } catch (failure) {
      showError(messageFor(failure));
      offerRestart();
    } finally {
      busy(false);
    }
  }

  function refuse(text, redirectUri) {
    setStatus("");
    $("switch").hidden = $("recover").hidden = true;
    form.replaceChildren();
    $("heading").textContent = t("You cannot continue");
    showError(text);
    const back = document.createElement("a");
    back.href = redirectUri;
    back.className = "link-button";
    back.textContent = t("Return to the application");
    form.append(back);
    back.focus();
    return undefined;
  }

  function offerRestart() {
    form.replaceChildren();
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = t("Start again");
    button.addEventListener("click", () => start(false));
    form.append(button);
    button.focus();
  }

  // --- passkey autofill (WebAuthn conditional mediation) ----------------------------------
  // On the sign-in page the browser offers the person's passkeys in the username field's
  // suggestions: picking one signs in, no button. It runs the application's own flow in a
  // second execution (its usernameless passkey path), so the flow's rules still apply; the
  // visible form stays for the other ways in.

  let autofill = null;  // the conditional request running: {controller, done}
  let autofillStep = null;  // the first step it started from (to start it again)

  // Abort the conditional request and wait until the browser has let it go: a modal
  // request started before that would be refused as a second one.
  async function stopAutofill() {
    const running = autofill;
    autofill = null;
    if (!running) return;
    running.controller.abort();
    await running.done;
  }

  function startAutofill(firstStep) {
    autofillStep = firstStep;
    const running = { controller: new AbortController(), done: null };
    autofill = running;
    running.done = conditionalSignIn(firstStep, running.controller).finally(() => {
      if (autofill === running) autofill = null;
    });
  }

  // After a passkey prompt (used, cancelled or refused), the username field offers the
  // person's passkeys again, unless the sign-in is finishing.
  function afterCeremony() {
    if (autofill || !autofillStep || (current && current.flowStatus === "COMPLETE")) return;
    if (form.querySelector("input[autocomplete~=webauthn]")) startAutofill(autofillStep);
  }

  async function conditionalSignIn(firstStep, aborting) {
    if (!signingIn || !passkeysSupported || !PublicKeyCredential.isConditionalMediationAvailable
        || !(await PublicKeyCredential.isConditionalMediationAvailable())) return;
    const actions = (firstStep.data && firstStep.data.actions) || [];
    const passkeyAction = actions.find((action) => Array.isArray(action.inputs)
      && !action.inputs.includes("password"));
    if (!passkeyAction) return;
    let picked = false;  // a suggested passkey was chosen: this sign-in is under way
    try {
      const started = await post(page.flowUrl, { applicationId: page.applicationId,
        flowType: "AUTHENTICATION" });
      const challenged = await post(page.flowUrl, { executionId: started.executionId,
        action: passkeyAction.ref, inputs: { username: "" } });
      const ceremony = passkeyCeremony(challenged);
      const verify = ((challenged.data && challenged.data.actions) || []).find(
        (action) => !isFallback(action));
      if (!ceremony || ceremony.kind !== "get" || !verify || aborting.signal.aborted) return;
      const options = JSON.parse(ceremony.options);
      root.dataset.autofill = "ready";
      const credential = await navigator.credentials.get({ mediation: "conditional",
        publicKey: requestOptions(options.publicKey || options), signal: aborting.signal });
      if (!credential) return;
      picked = true;
      busy(true);
      setStatus(t("Checking…"));
      const done = await post(page.flowUrl, { executionId: challenged.executionId,
        action: verify.ref, inputs: assertionInputs(credential, options.publicKey || options) });
      if (done.flowStatus === "COMPLETE") await finish(done);
      else {
        tellUnknown(done);
        showError(textFor(done.failureReason));
      }
    } catch (failure) {
      // Aborted for another way in, or no passkey offered or picked: the form is there,
      // and nothing the person did went wrong. Only a picked passkey that fails says so.
      if (picked && failure && failure.name !== "AbortError") showError(messageFor(failure));
    } finally {
      if (picked) busy(false);
    }
  }

  async function start(resume) {
    await stopAutofill();  // a new sign-in: its own conditional request
    autofillStep = null;
    passwordPhase = false;
    busy(true);
    showError("");
    try {
      if (resume && page.resume === "session") {  // signed in already: only the consent
        await handOff(await post(page.callbackUrl, { authId: page.authId, resume: "session" }));
        return;
      }
      const returned = pendingFederation();
      if (returned && returned.authId === page.authId) {  // back from a provider (or not)
        sessionStorage.removeItem(FEDERATED);
        executionId = returned.executionId;
        await advance(await post(page.flowUrl, { executionId, action: "callback",
          inputs: returned.callback || { error: "cancelled" } }));
        if (current.flowStatus === "INCOMPLETE" && current.type !== "REDIRECTION") {
          startAutofill(current);
        }
        return;
      }
      const firstStep = resume && page.firstStep ? JSON.parse(page.firstStep) : null;
      const step = firstStep || await post(page.flowUrl, {
        applicationId: page.applicationId,
        flowType: signingUp ? "REGISTRATION" : recovering ? "RECOVERY" : "AUTHENTICATION" });
      await advance(step);
      if (step.flowStatus === "INCOMPLETE") startAutofill(step);
    } catch (failure) {
      showError(messageFor(failure));
      offerRestart();
    } finally {
      busy(false);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const button = event.submitter || form.querySelector("button[type=submit]");
    if (!button || !button.value) return;
    if (form.dataset.consent) decide(button.value);
    else submit(button);
  });

  function link(href, text) {
    const element = document.createElement("a");
    element.href = href;
    element.textContent = text;
    return element;
  }

  if (signingIn && page.recoverUrl) {
    $("recover").append(link(page.recoverUrl, t("Lost your passkey or password?")));
    $("recover").hidden = false;
  }
  if (recovering) {
    $("switch").append(t("Remembered it? "), link(page.signinUrl, t("Sign in")));
    $("switch").hidden = false;
  } else if (page.signupUrl || signingUp) {
    $("switch").append(signingUp ? t("Already have an account? ") : t("New here? "),
      link(signingUp ? page.signinUrl : page.signupUrl,
        signingUp ? t("Sign in instead") : t("Create an account")));
    $("switch").hidden = false;
  }

  start(true);
})();
